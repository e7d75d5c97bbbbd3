"""An HTTP server that is not an MCP server, for the CLI's failure messages:

    python tests/manager/plain_http.py PORT

- a path with `/missing` answers 404; one with `/moved` a 302 to `/elsewhere/mcp`; one with
  `/teapot` a 418 (a client error without a meaning of its own);
- anything else: 200 with an HTML page (a web site where the MCP endpoint was expected).
"""

from __future__ import annotations

import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        body = b"<html><body>a web page</body></html>"
        status = (404 if "/missing" in self.path else 302 if "/moved" in self.path
                  else 418 if "/teapot" in self.path else 200)
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/elsewhere/mcp")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
