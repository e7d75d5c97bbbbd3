"""The `fetch` tool: GET a URL over http(s) and return its body as text, Markdown, raw HTML,
pretty-printed JSON or base64.

Limits: the body is cut at `MAX_BODY_BYTES` (after decompression, said in the result), the
whole fetch (redirects included) has a time limit, and at most `MAX_REDIRECTS` redirects are
followed, each one checked again like the first URL.

Server-side request forgery: unless `env.allow_private_fetch` (`--allow-private-fetch`),
fetch reaches only public addresses. Loopback, private (RFC 1918, ULA), link-local,
multicast, unspecified, reserved, CGNAT and cloud metadata addresses are refused, and so
are addresses embedding one of them (IPv4-mapped, 6to4, Teredo, NAT64). The check runs
where the connection is made: the aiohttp connector resolves host names through
`netguard.GuardedResolver` (the policy lives in `mcpkit.netguard`), which refuses the whole
name if any of its addresses is not public, so a name that changes its answer between a
check and the connect (DNS rebinding) cannot slip through. IP-literal hosts (which aiohttp
does not resolve) and well-known internal names are checked before each request by
`check_url`. No proxy from the environment is used.

Failures are `isError` results with one line for the model; an HTTP error status is not a
failure: the body comes back with the status in `structuredContent`.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import aiohttp
import anyio
import anyio.to_thread
from yarl import URL

from mcpkit import __version__, netguard
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.html_text import html_to_text
from mcpkit.errors import McpkitError, Timeout, TransportError, UsageError
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

MAX_BODY_BYTES = 5 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 120.0
MAX_REDIRECTS = 5
MAX_URL_CHARS = 8192
"""A longer URL is refused before anything is parsed or resolved."""
CHUNK = 64 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = f"mcpkit-fetch/{__version__}"

Format = Literal["text", "markdown", "html", "json", "base64"]

ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": True,
}

FETCH_OUTPUT = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "the final URL, after redirects"},
        "status": {"type": "integer", "description": "the HTTP status of the final response"},
        "content_type": {"type": "string",
                         "description": "the Content-Type header (empty when absent)"},
        "bytes": {"type": "integer", "description": "body bytes received (after "
                                                    "decompression; at most the cap)"},
        "truncated": {"type": "boolean",
                      "description": f"the body was cut at {MAX_BODY_BYTES} bytes"},
        "body": {"type": "string",
                 "description": "the body in the format asked for (as in the text content)"},
    },
    "required": ["url", "status", "content_type", "bytes", "truncated", "body"],
}


class _FetchError(McpkitError):
    """A fetch the tool refuses or cannot complete (the message is meant for the model;
    the tool catches this family, so it never reaches a caller); its three kinds say whose
    fault it was."""


class _FetchRefused(_FetchError, UsageError):
    """A fetch refused before or instead of reading a body: the URL, its address, the
    number of redirects, a body that cannot be given in the asked format."""


class _FetchFailed(_FetchError, TransportError):
    """The connection to the web server failed, or its answer was not valid HTTP."""


class _FetchTimedOut(_FetchError, Timeout):
    """The whole fetch ran past its `timeout`."""


# --- the address policy (mcpkit.netguard) --------------------------------------------------


def blocked_message(host: str, address: str, problem: str) -> str:
    where = host if host == address else f"{host} ({address})"
    return (f"refused to fetch from {where}: {problem}; fetch only reaches public addresses "
            f"(the server's --allow-private-fetch lifts this)")


def check_url(url: URL, allow_private: bool) -> None:
    """Refuse a URL before any connection: its scheme, a missing host, blocked names and
    blocked IP literals. Host names are checked again when they are resolved."""
    if url.scheme not in ("http", "https"):
        shown = f"{url.scheme}:" if url.scheme else "a URL without a scheme"
        raise _FetchRefused(f"only http and https URLs can be fetched, not {shown} ({url})")
    host = url.raw_host
    if not host:
        raise _FetchRefused(f"the URL has no host: {url}")
    if allow_private:
        return
    problem = netguard.name_problem(host)
    if problem is not None:
        raise _FetchRefused(blocked_message(host, host, problem))
    ip = netguard.parse_ip(host)
    if ip is not None:
        problem = netguard.address_problem(ip)
        if problem is not None:
            raise _FetchRefused(blocked_message(host, str(ip), problem))


# --- fetching --------------------------------------------------------------------------------


@dataclass(slots=True)
class Fetched:
    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)

    @property
    def mime(self) -> str:
        return self.content_type.split(";", 1)[0].strip().lower()


def redirect_target(current: URL, location: str) -> URL:
    try:
        target = current.join(URL(location))
    except ValueError as exc:
        raise _FetchRefused(f"redirect to an invalid URL {location!r}: {exc}") from None
    return target


def accept_header(fmt: str) -> str:
    if fmt == "json":
        return "application/json, */*;q=0.5"
    if fmt == "base64":
        return "*/*"
    return "text/html, application/xhtml+xml, text/plain;q=0.9, */*;q=0.8"


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


async def fetch_url(url: str, *, fmt: str, limit_s: float, allow_private: bool,
                    cap: int = MAX_BODY_BYTES) -> Fetched:
    """GET `url`, following redirects by hand (each target checked like the first)."""
    try:
        current = URL(url.strip())
    except (ValueError, TypeError) as exc:
        raise _FetchRefused(f"invalid URL {url!r}: {exc}") from None
    check_url(current, allow_private)
    resolver = netguard.GuardedResolver(allow_private, blocked_message)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    headers = {"User-Agent": USER_AGENT, "Accept": accept_header(fmt)}
    redirects: list[str] = []
    with anyio.move_on_after(limit_s) as scope:
        async with aiohttp.ClientSession(connector=connector, trust_env=False,
                                         headers=headers) as session:
            while True:
                try:
                    async with session.get(current, allow_redirects=False) as response:
                        location = response.headers.get("Location")
                        if response.status in REDIRECT_STATUSES and location:
                            if len(redirects) >= MAX_REDIRECTS:
                                raise _FetchRefused(
                                    f"too many redirects (more than {MAX_REDIRECTS}); the "
                                    f"last one was to {location}")
                            target = redirect_target(current, location)
                            check_url(target, allow_private)
                            redirects.append(str(target))
                            current = target
                            continue
                        body, truncated = await read_capped(response, cap)
                        return Fetched(
                            url=str(response.url), status=response.status,
                            reason=response.reason or "",
                            content_type=response.headers.get("Content-Type", ""),
                            charset=response.charset, body=body, truncated=truncated,
                            redirects=redirects)
                except aiohttp.ClientConnectorError as exc:
                    if isinstance(exc.os_error, netguard.BlockedAddress):
                        raise _FetchRefused(str(exc.os_error)) from None
                    if isinstance(exc, aiohttp.ClientConnectorDNSError):
                        raise _FetchFailed(f"could not resolve {current.host}: "
                                         f"{exc.os_error.strerror or exc.os_error}") from None
                    raise _FetchFailed(f"could not connect to {current.host}:{current.port}: "
                                     f"{exc.os_error.strerror or exc.os_error}") from None
                except aiohttp.InvalidURL as exc:
                    why = f": {exc.description}" if exc.description else ""
                    raise _FetchRefused(f"invalid URL {current}{why}") from None
                except aiohttp.ClientResponseError as exc:
                    raise _FetchFailed(f"bad HTTP response from {current.host}: "
                                     f"{exc.message}") from None
                except (aiohttp.ClientError, OSError) as exc:
                    raise _FetchFailed(f"fetching {current} failed: "
                                     f"{exc.__class__.__name__}: {exc}") from None
    assert scope.cancelled_caught
    raise _FetchTimedOut(f"timed out after {limit_s:g} s fetching {current}")


# --- formats ---------------------------------------------------------------------------------

TEXT_MIMES = frozenset({
    "application/json", "application/xml", "application/javascript",
    "application/ecmascript", "application/x-javascript", "application/xhtml+xml",
    "application/x-www-form-urlencoded", "application/x-sh", "application/x-yaml",
    "application/yaml", "application/toml", "application/sql", "application/graphql",
    "application/ld+json", "application/x-ndjson", "image/svg+xml",
})
BINARY_MAJORS = ("image/", "audio/", "video/", "font/")
HTML_MIMES = frozenset({"text/html", "application/xhtml+xml"})


def is_textual_mime(mime: str) -> bool:
    return mime.startswith("text/") or mime in TEXT_MIMES or mime.endswith(("+json", "+xml"))


def is_binary(fetched: Fetched) -> bool:
    mime = fetched.mime
    if is_textual_mime(mime):
        return False
    if mime.startswith(BINARY_MAJORS):
        return True
    head = fetched.body[:8192]
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is not a sign of binary.
        return exc.start < len(head) - 4
    return False


META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def decode(fetched: Fetched) -> str:
    charset = fetched.charset
    if charset is None and fetched.mime in HTML_MIMES:
        found = META_CHARSET.search(fetched.body[:4096])
        if found:
            charset = found.group(1).decode("ascii")
    if charset is None and fetched.body.startswith(b"\xef\xbb\xbf"):
        charset = "utf-8-sig"
    try:
        return fetched.body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return fetched.body.decode("utf-8", errors="replace")


def looks_like_html(fetched: Fetched, text: str) -> bool:
    if fetched.mime in HTML_MIMES:
        return True
    if fetched.mime and fetched.mime != "text/plain" and is_textual_mime(fetched.mime):
        return False
    start = text.lstrip()[:256].lower()
    return start.startswith(("<!doctype html", "<html"))


def render(fetched: Fetched, fmt: str) -> str:
    """The body in `fmt` (raises _FetchRefused for binary bodies and invalid JSON)."""
    if fmt == "base64":
        return base64.b64encode(fetched.body).decode("ascii")
    if is_binary(fetched):
        kind = fetched.mime or "an unknown type"
        raise _FetchRefused(f"the body is binary ({kind}, {len(fetched.body)} bytes); use "
                         f"format=base64 to get its bytes")
    text = decode(fetched)
    if fmt == "html":
        return text
    if fmt == "json":
        try:
            value = json.loads(text)
        except ValueError as exc:
            cut = (f" (the body was cut at {MAX_BODY_BYTES} bytes)" if fetched.truncated
                   else "")
            raise _FetchRefused(f"the body is not valid JSON{cut}: {exc}") from None
        return json.dumps(value, indent=2, ensure_ascii=False)
    if looks_like_html(fetched, text):
        return html_to_text(text, markdown=fmt == "markdown", base_url=fetched.url)
    return text


def notes(fetched: Fetched) -> list[str]:
    lines = []
    if not 200 <= fetched.status < 300:
        lines.append(f"HTTP {fetched.status} {fetched.reason}".rstrip())
    if fetched.redirects:
        lines.append(f"redirected to {fetched.url}")
    if fetched.truncated:
        lines.append(f"the body was cut at {MAX_BODY_BYTES} bytes "
                     f"({MAX_BODY_BYTES // (1024 * 1024)} MiB); the rest was not read")
    return lines


# --- registration ----------------------------------------------------------------------------

DESCRIPTION = (
    "Fetch a URL (http or https, GET) and return its body. `format`: `text` (default; HTML "
    "turned into readable text, other text as is), `markdown` (HTML as Markdown), `html` "
    "(the raw body), `json` (parsed and pretty-printed) or `base64` (the bytes, for binary "
    f"content). Redirects are followed (at most {MAX_REDIRECTS}); the body is cut at "
    f"{MAX_BODY_BYTES // (1024 * 1024)} MiB; `timeout` is in seconds (default "
    f"{DEFAULT_TIMEOUT_S:g}, max {MAX_TIMEOUT_S:g}). HTTP error statuses come back as results "
    "with the status. Only public addresses can be reached: loopback, private, link-local "
    "and cloud metadata addresses are refused.")


TIMEOUT_HELP = (f"Seconds for the whole fetch, redirects included (default "
                f"{DEFAULT_TIMEOUT_S:g}, max {MAX_TIMEOUT_S:g})")


def error(message: str) -> ToolResult:
    return ToolResult(content=[text_block(message)], is_error=True)


def register(server: Server, env: CodingEnv) -> None:
    async def fetch(
        url: Annotated[str, "The http:// or https:// URL to GET"],
        format: Annotated[Format, "How to return the body: text (default), markdown, html, "
                                  "json or base64"] = "text",
        timeout: Annotated[float, TIMEOUT_HELP] = DEFAULT_TIMEOUT_S,  # noqa: ASYNC109
    ) -> Any:  # not `ToolResult`: that dataclass would be taken for structured output
        if format not in ("text", "markdown", "html", "json", "base64"):
            return error(f"unknown format {format!r}: use text, markdown, html, json or "
                         f"base64")
        if timeout > MAX_TIMEOUT_S:
            return error(f"timeout {timeout:g} s is over the maximum of {MAX_TIMEOUT_S:g} s")
        if timeout <= 0:
            return error("timeout must be a positive number of seconds")
        if len(url) > MAX_URL_CHARS:
            return error(f"the URL is {len(url)} characters, over the maximum of "
                         f"{MAX_URL_CHARS}")
        try:
            fetched = await fetch_url(url, fmt=format, limit_s=timeout,
                                      allow_private=env.allow_private_fetch)
            text: str = await anyio.to_thread.run_sync(lambda: render(fetched, format))
        except _FetchError as exc:
            return error(str(exc))
        content = [text_block(text)]
        extra = notes(fetched)
        if extra:
            content.append(text_block("(" + "; ".join(extra) + ")"))
        return ToolResult(content=content, structured_content={
            "url": fetched.url, "status": fetched.status,
            "content_type": fetched.content_type, "bytes": len(fetched.body),
            "truncated": fetched.truncated, "body": text,
        })

    server.add_tool(fetch, name="fetch", title="Fetch a URL", description=DESCRIPTION,
                    output_schema=FETCH_OUTPUT, annotations=ANNOTATIONS)
