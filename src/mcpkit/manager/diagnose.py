"""Why a server did not start, in one line, with the one fix that applies.

    login        HTTP 401 with an OAuth         mcpkit mcp login NAME (`login.py`)
                 challenge, or no OAuth token
    auth         HTTP 401/403                   give a token (or check the one given)
    refused      connection refused             start the server / check the port
    dns          the host name does not resolve check the host
    tls          TLS handshake or certificate   http:// vs https://, the certificate
    timeout      no answer in time              --timeout, or is the host reachable
    not-found    HTTP 404 on the path           the URL's path is wrong
    redirect     HTTP 3xx (not followed)        use the URL it points to
    not-mcp      an answer that is not MCP      the URL is not an MCP endpoint
    http         any other HTTP status          the server's own log
    exited       a stdio command that ended     run the command yourself
    failed       anything else                  the error as it came

The messages show the server as its entry is written (`written`: `${TOKEN}` rather than the
token, the URL masked), also inside the error's own text, which names the interpolated
command line or URL.

The fixes are built for the kind of target: a configured server's are `mcpkit mcp` lines
(`mcp get`, an `mcp add --force` that replaces the entry); a server given directly on the
command line (`direct`: a URL or a command, which has no entry) is told what to change in
what was given instead, since an `mcp add` line would do something else.
"""

from __future__ import annotations

import re
import shlex
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpkit.manager.cli_render import REDACT, first_line, mask_url, one_line
from mcpkit.manager.config import ServerConfig
from mcpkit.manager.login import login_command, needs_login

SNIPPET_CHARS = 120
"""At most this much of a server's error body is quoted."""
_NOT_VARIABLE_CHARS = re.compile(r"[^A-Za-z0-9]+")
_CONTENT_TYPE = re.compile(r"unexpected content type '([^']*)'")


@dataclass(frozen=True)
class Diagnosis:
    kind: str
    message: str
    hint: str


def diagnose(started: ServerConfig, error: str | None, failure: BaseException | None,
             written: ServerConfig | None = None, *, direct: bool = False) -> Diagnosis:
    """The one-line explanation of a server that failed to start, and its fix. `started`
    is the config it was started with (variables expanded), `written` the entry as written
    (shown instead, when given); `direct`: a server given on the command line, not a
    configured entry (the fix then names no `mcpkit mcp` line). No variable's value is in
    either line (`REDACT`)."""
    found = _diagnose(started, error, failure, written or started, direct)
    return Diagnosis(found.kind, REDACT(found.message), REDACT(found.hint))


def _diagnose(started: ServerConfig, error: str | None, failure: BaseException | None,
              config: ServerConfig, direct: bool) -> Diagnosis:
    text = _scrubbed(one_line(error or "unknown error"), started, config)
    chain = _chain(failure)
    if error and "startup_timeout_sec" in error:
        return Diagnosis("timeout", f"{config.name} did not start within "
                                    f"{started.startup_timeout_sec:g} s",
                         "if it is just slow, give it longer: --timeout SECONDS" if direct
                         else "if it is just slow, give it longer: --timeout SECONDS, or "
                         f"\"startup_timeout_sec\" in the entry of {config.name}")
    if config.type == "stdio":
        return Diagnosis("exited", f"{config.name} (stdio) failed: {text}",
                         "run the command yourself to see what it says: "
                         f"{shlex.join(config.target())}")
    url = mask_url(config.url or "")
    if needs_login(started, failure):
        return _login_problem(config, url, chain, direct)
    status = _http_status(chain)
    if status is not None:
        return _http_problem(config, url, status, chain, direct)
    address = _address(config.url or "")
    if _has(chain, ConnectionRefusedError):
        return Diagnosis("refused", f"{config.name}: nothing is listening at {address} "
                                    "(connection refused)",
                         "start the server, or check the host and port of the URL" if direct
                         else f"start the server, or check the host and port of {url} "
                              f"(`mcpkit mcp get {config.name}`)")
    if _has(chain, socket.gaierror) or "ClientConnectorDNSError" in _names(chain):
        host = urlsplit(config.url or "").hostname or address
        return Diagnosis("dns", f"{config.name}: cannot resolve the host {host!r}",
                         f"check the host name in {url}")
    tls = _first(chain[::-1], ssl.SSLError)  # the innermost: the ssl module's own reason
    if tls is not None:
        return _tls_problem(config, url, address, tls, direct)
    if _has(chain, TimeoutError):
        return Diagnosis("timeout", f"{config.name}: no answer from {address} in time",
                         "is the host reachable from here (a firewall, a VPN)? if it is "
                         "just slow: --timeout SECONDS")
    content_type = _CONTENT_TYPE.search(text)
    if content_type or "not JSON" in text or "invalid JSON" in text:
        said = f"it answered {content_type.group(1)}" if content_type else text
        return Diagnosis("not-mcp", f"{config.name}: {url} does not answer as an MCP "
                                    f"server ({said})",
                         "check that the URL is the server's MCP endpoint (often …/mcp, "
                         "or …/sse with --transport sse)")
    return Diagnosis("failed", f"{config.name} ({config.type}) failed: {text}",
                     f"check the URL and that the server runs: {url}")


def _http_problem(config: ServerConfig, url: str, status: int,
                  chain: list[BaseException], direct: bool) -> Diagnosis:
    said = _snippet(chain)
    where = f"HTTP {status} from {url}" + (f": {said}" if said else "")
    status_said = f"HTTP {status}" + (f": {said}" if said else "")
    if status in (401, 403):
        return _auth_problem(config, url, status, where)
    if status == 404:
        fix = "the URL's path is wrong: check where the server serves MCP (often /mcp)"
        return Diagnosis("not-found", f"{config.name}: nothing at {url} ({status_said})",
                         fix if direct else f"{fix}, then `{_readd(config, url='URL')}`")
    if 300 <= status < 400:
        location = _location(chain)
        target = mask_url(location) if location else "the URL it names"
        return Diagnosis("redirect", f"{config.name}: {url} redirects to {target} "
                                     f"(HTTP {status}); redirects are not followed, so that "
                                     "headers and tokens go only where you said",
                         "redirects are not followed: if you trust where it points, give "
                         "that URL" if direct else f"if you trust it, use that URL: "
                         f"`{_readd(config, url=mask_url(location) if location else 'URL')}`")
    if status in (405, 406, 415):
        return Diagnosis("not-mcp", f"{config.name}: {url} does not answer as an MCP "
                                    f"server ({status_said})",
                         "check that the URL is the server's MCP endpoint (often …/mcp, or "
                         "…/sse with --transport sse)")
    return Diagnosis("http", f"{config.name}: the server failed ({where})",
                     "the server's own log says why" if status >= 500 else
                     "check the URL and that the server runs" if direct else
                     f"check the URL and the entry: `mcpkit mcp get {config.name}`")


def _auth_problem(config: ServerConfig, url: str, status: int, where: str) -> Diagnosis:
    given = config.bearer_token_env_var or next(
        (k for k in config.headers if k.lower() == "authorization"), None)
    if given is not None:
        source = (f"${given} (bearer_token_env_var)" if config.bearer_token_env_var
                  else "its Authorization header")
        refused = "refused the token" if status == 401 else "does not allow the token"
        return Diagnosis("auth", f"{config.name} {refused} it was given ({where})",
                         f"check the token in {source}: `mcpkit mcp get {config.name}` "
                         f"shows the entry")
    variable = _NOT_VARIABLE_CHARS.sub("_", config.name).strip("_").upper() + "_TOKEN"
    command = _readd(config, url=url,
                     extra=["--header", f"Authorization: Bearer ${{{variable}}}"])
    return Diagnosis("auth", f"{config.name} requires authentication ({where})",
                     f"give it a token: `{command}` and set {variable} in the "
                     "environment")


def _login_problem(config: ServerConfig, url: str, chain: list[BaseException],
                   direct: bool) -> Diagnosis:
    status = _http_status(chain)
    said = f" (HTTP {status} from {url})" if status is not None else ""
    if direct:
        return Diagnosis("login", f"{url} requires login (OAuth){said}",
                         "configure it and log in: `mcpkit mcp add NAME URL`, then "
                         "`mcpkit mcp login NAME`")
    return Diagnosis("login", f"{config.name} requires login (OAuth){said}",
                     f"log in: `{login_command(config.name)}`")


def _tls_problem(config: ServerConfig, url: str, address: str,
                 tls: BaseException, direct: bool) -> Diagnosis:
    reason = getattr(tls, "reason", None) or one_line(str(tls))
    message = f"{config.name}: TLS with {address} failed ({reason})"
    if isinstance(tls, ssl.SSLCertVerificationError):
        return Diagnosis("tls", message, "the server's certificate is not trusted here "
                                         "(self-signed or expired?); fix the certificate, "
                                         "or use a URL whose certificate is valid")
    if reason in ("WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE"):
        if direct:
            return Diagnosis("tls", message, "the server speaks plain HTTP, not TLS: give "
                                             "the http:// (or ws://) URL")
        plain = url.replace("https://", "http://", 1).replace("wss://", "ws://", 1)
        return Diagnosis("tls", message, f"the server speaks plain HTTP, not TLS: "
                                         f"`{_readd(config, url=plain)}`")
    return Diagnosis("tls", message, f"check that {url} serves TLS (https://)")


def _scrubbed(text: str, started: ServerConfig, written: ServerConfig) -> str:
    """`text` with the started command line or URL replaced by the written one (masked)."""
    if started.type == "stdio":
        ran, shown = " ".join(started.target()), " ".join(written.target())
    else:
        ran, shown = started.url or "", mask_url(written.url or "")
    return text.replace(ran, shown) if ran else text


def _readd(config: ServerConfig, *, url: str, extra: list[str] | None = None) -> str:
    """The `mcp add` line that replaces this server's entry (in its scope) with `url` and
    `extra`; the entry's other settings are not repeated (they may hold secrets)."""
    parts = ["mcpkit", "mcp", "add", "--force"]
    if config.scope and config.scope != "user":
        parts += ["--scope", config.scope]
    parts += ["--transport", config.type, config.name, url]
    return shlex.join([*parts, *(extra or [])])


def _chain(failure: BaseException | None) -> list[BaseException]:
    """The exception and its causes, outermost first (bounded: a cycle cannot loop)."""
    chain: list[BaseException] = []
    while failure is not None and len(chain) < 20 and failure not in chain:
        chain.append(failure)
        failure = failure.__cause__ or failure.__context__
    return chain


def _has(chain: list[BaseException], kind: type[BaseException]) -> bool:
    return _first(chain, kind) is not None


def _first(chain: list[BaseException], kind: type[BaseException]) -> BaseException | None:
    return next((e for e in chain if isinstance(e, kind)), None)


def _names(chain: list[BaseException]) -> set[str]:
    return {type(e).__name__ for e in chain}


def _http_status(chain: list[BaseException]) -> int | None:
    from mcpkit.transports.client.base import HttpStatusError

    error = _first(chain, HttpStatusError)
    return error.status if isinstance(error, HttpStatusError) else None


def _location(chain: list[BaseException]) -> str:
    """Where a redirect points (its Location header), or ""."""
    from mcpkit.transports.client.base import HttpStatusError

    error = _first(chain, HttpStatusError)
    if not isinstance(error, HttpStatusError):
        return ""
    found = {k.lower(): v for k, v in error.headers.items()}.get("location", "")
    return str(getattr(error, "location", "") or found)


def _snippet(chain: list[BaseException]) -> str:
    from mcpkit.transports.client.base import HttpStatusError

    error = _first(chain, HttpStatusError)
    if not isinstance(error, HttpStatusError) or not error.body:
        return ""
    text = first_line(error.body[:SNIPPET_CHARS * 4].decode("utf-8", "replace"))
    if text.startswith("<"):
        return ""  # an HTML page says nothing in one line
    return text[:SNIPPET_CHARS]


def _address(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    host = parts.hostname or "?"
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(parts.scheme, 0)
    return f"{host}:{port or default}"
