"""`LoopbackRedirect`: the interactive redirect of `mcpkit mcp login` (RFC 8252 native apps).

    OAuth(redirect=LoopbackRedirect())                  browser + loopback listener
    OAuth(redirect=LoopbackRedirect(paste=True, open_browser=False))     --no-browser

Listener (the default): bound on 127.0.0.1, on the first free port of `CALLBACK_PORTS` (or
`port=`, i.e. `--callback-port`), BEFORE the authorization URL is built, so the URL names the
exact redirect URI. The URL is always printed (stderr by default) and the browser opened
(failing to open it is not fatal). The listener serves exactly one callback: a GET of
/callback whose `state` is the request's. The browser gets a small page saying how it went;
other paths and methods get 404, a wrong `state` an error page, and neither ends the wait.

Paste (`paste=True`, `--no-browser`, for headless machines): no listener. The user opens the
printed URL on any machine; the browser ends on a 127.0.0.1 page that does not load; the user
copies that page's URL from the address bar and pastes it on the input stream (stdin by
default). It must be the redirect URI (scheme, host, port, path) with the request's state.

Bounds, all settable: the callback request's size (`max_request_bytes`), the stray requests
before giving up (`max_stray_requests`), the whole wait (`timeout_s`), a pasted line
(`max_paste_chars`) and paste attempts (`max_paste_attempts`). The code and the state are
never logged (the printed authorization URL holds the state and the PKCE challenge, never
the verifier).
"""

from __future__ import annotations

import errno
import hmac
import html
import logging
import sys
import threading
import urllib.parse
import webbrowser
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from mcpkit.auth.errors import AuthorizationError
from mcpkit.client.oauth_redirect import (
    CALLBACK_PATH,
    CALLBACK_PORTS,
    LOOPBACK_HOST,
    loopback_uri,
)
from mcpkit.errors import InvalidArgument, Timeout, UsageError

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

T = TypeVar("T")

CALLBACK_TIMEOUT_S = 300.0
"""Default: how long to wait for the browser's callback (or the pasted URL)."""

MAX_REQUEST_BYTES = 8190
"""Default bound on the callback request's line and each header field (aiohttp's parser
answers 400 to anything larger)."""

MAX_HEADERS = 64
"""Default bound on the number of header fields of a callback request."""

MAX_STRAY_REQUESTS = 32
"""Default: requests that are not the callback (other paths, methods, a wrong state) the
listener answers before it gives up (a browser asks for /favicon.ico, little else)."""

MAX_PASTE_CHARS = 8192
"""Default bound on one pasted line."""

MAX_PASTE_ATTEMPTS = 3
"""Default: pasted lines that are refused (and the user asked again) before giving up."""

SHUTDOWN_TIMEOUT_S = 2.0
"""How long the listener waits for its last page to be written when it stops."""

Opener = Callable[[str], object]
"""Opens a URL in a browser (`webbrowser.open`); a falsy result or an exception is a
failure to open, reported and not fatal."""

__all__ = [
    "CALLBACK_PORTS", "CallbackPortsBusy", "CallbackRefused", "CallbackTimeout",
    "LoopbackRedirect", "PastedRedirectRefused",
]


class CallbackPortsBusy(UsageError):
    """No port of the callback range could be bound (pick one with `--callback-port`)."""


class CallbackTimeout(Timeout):
    """The browser's callback (or the pasted URL) did not come in time."""


class CallbackRefused(AuthorizationError):
    """The listener gave up: too many requests that were not the callback."""


class PastedRedirectRefused(UsageError):
    """What was pasted is not the redirect this login waits for."""


class LoopbackRedirect:
    """The loopback (or paste) redirect: a `ListeningRedirect` (see the module docstring)."""

    def __init__(
        self,
        *,
        port: int | None = None,
        ports: Sequence[int] = CALLBACK_PORTS,
        open_browser: bool = True,
        paste: bool = False,
        opener: Opener = webbrowser.open,
        output: TextIO | None = None,
        input: TextIO | None = None,
        timeout_s: float = CALLBACK_TIMEOUT_S,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_stray_requests: int = MAX_STRAY_REQUESTS,
        max_paste_chars: int = MAX_PASTE_CHARS,
        max_paste_attempts: int = MAX_PASTE_ATTEMPTS,
    ) -> None:
        """`port`: listen there only (a port outside `ports` is a custom redirect URI:
        registered alone, and no Client ID Metadata Document applies). `ports`: the range
        tried in order and registered whole (another range than `CALLBACK_PORTS` is custom
        too). `opener`: opens the browser. `output`/`input`: where the URL is printed
        (stderr) and the pasted URL read (stdin)."""
        for candidate in (port, *ports) if port is not None else ports:
            if not 0 < candidate < 65536:
                raise InvalidArgument(f"a callback port must be 1..65535, not {candidate}")
        if not ports:
            raise InvalidArgument("ports= must name at least one callback port")
        for name, value in (("timeout_s", timeout_s), ("max_request_bytes", max_request_bytes),
                            ("max_stray_requests", max_stray_requests),
                            ("max_paste_chars", max_paste_chars),
                            ("max_paste_attempts", max_paste_attempts)):
            if value <= 0:
                raise InvalidArgument(f"{name} must be positive, not {value}")
        self.port = port
        self.port_range = tuple(ports)
        self.open_browser = open_browser
        self.paste = paste
        self.opener = opener
        self.output = output
        self.input = input
        self.timeout_s = timeout_s
        self.max_request_bytes = max_request_bytes
        self.max_stray_requests = max_stray_requests
        self.max_paste_chars = max_paste_chars
        self.max_paste_attempts = max_paste_attempts
        self.redirect_uris: list[str] = (
            [loopback_uri(port)] if port is not None and port not in self.port_range
            else [loopback_uri(p) for p in self.port_range])
        """What is registered: the whole range (any free port of it works), or the one
        custom port."""

    def __repr__(self) -> str:
        return (f"LoopbackRedirect(port={self.port!r}, open_browser={self.open_browser!r}, "
                f"paste={self.paste!r})")

    def ports(self) -> list[int]:
        """The ports to try, in order."""
        return [self.port] if self.port is not None else list(self.port_range)

    @asynccontextmanager
    async def listen(self) -> AsyncIterator[_Listener | _Pasted]:
        """Bind the listener (nothing to bind when pasting); yields the bound redirect,
        whose `redirect_uri` goes in the authorization URL."""
        if self.paste:
            yield _Pasted(self, loopback_uri(self.ports()[0]))
            return
        async with _listening(self, self.ports()) as listener:
            yield listener

    async def __call__(self, authorization_url: str) -> str:
        """The whole redirect for an authorization URL built without `listen()`: listens on
        the port its `redirect_uri` names (which must be one of `redirect_uris`)."""
        port = _port_of(_query_value(authorization_url, "redirect_uri") or "", self)
        if self.paste:
            return await _Pasted(self, loopback_uri(port))(authorization_url)
        async with _listening(self, [port]) as listener:
            return await listener(authorization_url)

    # --- what the user sees --------------------------------------------------------------

    def say(self, text: str) -> None:
        stream = self.output if self.output is not None else sys.stderr
        stream.write(text + "\n")
        stream.flush()

    async def show(self, authorization_url: str) -> None:
        """Print the URL, always; open the browser when asked (a failure only reported)."""
        self.say(f"Open this URL in a browser to authorize:\n\n    {authorization_url}\n")
        if not self.open_browser:
            return
        try:
            opened = await _in_daemon_thread(lambda: self.opener(authorization_url))
        except Exception as exc:  # webbrowser.Error, OSError, …: the printed URL remains
            log.debug("opening a browser failed: %s", type(exc).__name__)
            opened = False
        if not opened:
            self.say("(No browser could be opened: open the URL above yourself.)")


class _Listener:
    """The bound listener of one login: serves /callback until the callback comes."""

    def __init__(self, owner: LoopbackRedirect, redirect_uri: str) -> None:
        self.owner = owner
        self.redirect_uri = redirect_uri
        self._state: str | None = None
        self._strays = 0
        self._result: str | BaseException | None = None
        self._done = anyio.Event()

    async def __call__(self, authorization_url: str) -> str:
        if _query_value(authorization_url, "redirect_uri") != self.redirect_uri:
            raise InvalidArgument("the authorization URL's redirect_uri is not the one this "
                                  f"listener is bound to ({self.redirect_uri})")
        self._state = _query_value(authorization_url, "state")
        if not self._state:
            raise InvalidArgument("the authorization URL has no state parameter")
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.owner.show, authorization_url)
            with anyio.move_on_after(self.owner.timeout_s):
                await self._done.wait()
            tg.cancel_scope.cancel()  # a browser opener still running is abandoned
        if not self._done.is_set():
            raise CallbackTimeout(
                f"no authorization callback reached {self.redirect_uri} within "
                f"{self.owner.timeout_s:g} s (the login was not completed in the browser; "
                "on a machine without a browser use --no-browser)")
        if isinstance(self._result, BaseException):
            raise self._result
        assert self._result is not None
        return self._result

    async def handle(self, request: web.Request) -> web.Response:
        if self._done.is_set():
            return _page(503, "This login is already over", "You can close this window.")
        if request.method != "GET" or request.path != CALLBACK_PATH:
            return self._stray(_page(404, "Not found", "This is mcpkit's login listener."))
        states = request.query.getall("state", [])
        expected = self._state
        if expected is None or len(states) != 1 or not hmac.compare_digest(
                states[0].encode(), expected.encode()):
            return self._stray(_page(
                400, "Not this login",
                "This authorization response does not belong to the login in progress "
                "(a stale or forged redirect): it was ignored."))
        self._finish(f"{self.redirect_uri}?{request.query_string}")
        log.info("the authorization callback reached the loopback listener")
        error = request.query.get("error")
        if error is not None:
            return _page(200, "Authorization refused",
                         f"The authorization server answered: {error[:200]}. "
                         "You can close this window.")
        return _page(200, "Authorized", "mcpkit is authorized. You can close this window.")

    def _stray(self, response: web.Response) -> web.Response:
        self._strays += 1
        if self._strays >= self.owner.max_stray_requests:
            self._finish(CallbackRefused(
                f"the loopback listener at {self.redirect_uri} got "
                f"{self._strays} requests that were not the authorization callback: giving up "
                f"(limit {self.owner.max_stray_requests})"))
        return response

    def _finish(self, result: str | BaseException) -> None:
        if not self._done.is_set():
            self._result = result
            self._done.set()


class _Pasted:
    """The paste redirect: the URL is printed, the final redirect URL read from input."""

    def __init__(self, owner: LoopbackRedirect, redirect_uri: str) -> None:
        self.owner = owner
        self.redirect_uri = redirect_uri

    async def __call__(self, authorization_url: str) -> str:
        owner = self.owner
        state = _query_value(authorization_url, "state")
        if not state:
            raise InvalidArgument("the authorization URL has no state parameter")
        await owner.show(authorization_url)
        try:
            with anyio.fail_after(owner.timeout_s):
                return await self._read(state)
        except TimeoutError:
            raise CallbackTimeout(
                f"no redirect URL was pasted within {owner.timeout_s:g} s") from None

    async def _read(self, state: str) -> str:
        owner = self.owner
        stream = owner.input if owner.input is not None else sys.stdin
        reason = ""
        for _ in range(owner.max_paste_attempts):
            owner.say(f"{reason}After authorizing, the browser goes to {self.redirect_uri}?… "
                       "(a page that does not load). Paste that page's whole URL here:")
            line = await _in_daemon_thread(lambda: stream.readline(owner.max_paste_chars + 1))
            if not line:
                raise PastedRedirectRefused("no redirect URL was pasted (the input ended)")
            if len(line.rstrip("\r\n")) > owner.max_paste_chars:
                raise PastedRedirectRefused(
                    f"the pasted line is over the {owner.max_paste_chars}-character limit")
            try:
                return _check_pasted(line.strip(), self.redirect_uri, state)
            except PastedRedirectRefused as exc:
                reason = f"That is not it: {exc}.\n"
        raise PastedRedirectRefused(
            f"no usable redirect URL after {owner.max_paste_attempts} attempts ({reason.strip()})")


def _check_pasted(pasted: str, redirect_uri: str, state: str) -> str:
    """The pasted URL, when it is `redirect_uri` (scheme, host, port, path) with `state`."""
    got, want = urllib.parse.urlsplit(pasted), urllib.parse.urlsplit(redirect_uri)
    try:
        same = (got.scheme.lower(), got.hostname, got.port, got.path) == (
            want.scheme, want.hostname, want.port, want.path)
    except ValueError:  # a port that is not a number
        same = False
    if not same:
        raise PastedRedirectRefused(f"the URL must start with {redirect_uri}?")
    states = urllib.parse.parse_qs(got.query, keep_blank_values=True).get("state", [])
    if len(states) != 1 or not hmac.compare_digest(states[0].encode(), state.encode()):
        raise PastedRedirectRefused("its state is not this login's (an older login's URL?)")
    return pasted


@asynccontextmanager
async def _listening(owner: LoopbackRedirect, ports: Sequence[int]) -> AsyncIterator[_Listener]:
    """A listener bound on the first free port of `ports`; stopped on exit."""
    from aiohttp import web  # the server half of aiohttp: loaded only for a login

    listener: _Listener | None = None

    async def handle(request: web.Request) -> web.StreamResponse:
        assert listener is not None
        return await listener.handle(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        max_line_size=owner.max_request_bytes, max_field_size=owner.max_request_bytes,
        max_headers=MAX_HEADERS)
    await runner.setup()
    try:
        port = await _bind(runner, ports, owner.port is not None)
        listener = _Listener(owner, loopback_uri(port))
        log.debug("the loopback listener is bound to port %d", port)
        yield listener
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


async def _bind(runner: web.AppRunner, ports: Sequence[int], chosen: bool) -> int:
    from aiohttp import web

    for port in ports:
        site = web.TCPSite(runner, LOOPBACK_HOST, port, reuse_port=False)
        try:
            await site.start()
            return port
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            log.debug("callback port %d is busy", port)
    listed = ", ".join(map(str, ports))
    hint = ("another free one" if chosen else
            "a free one (it is then registered on its own, and no Client ID Metadata "
            "Document applies)")
    raise CallbackPortsBusy(
        f"the callback port{'s' if len(ports) > 1 else ''} {listed} on {LOOPBACK_HOST} "
        f"{'are' if len(ports) > 1 else 'is'} in use: choose {hint} with --callback-port "
        "(OAuth: LoopbackRedirect(port=…))")


async def _in_daemon_thread(func: Callable[[], T]) -> T:
    """`func()` in a daemon thread. A read of stdin or a browser opener that never returns is
    abandoned when the wait ends (timeout, cancel) and must not keep the process alive at
    exit, as an anyio worker thread (not a daemon) would."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, func()))
        except BaseException as exc:  # builtin: handed to the waiting task, raised there
            outcome.append((False, exc))
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except RuntimeError:  # the event loop is gone: nobody waits any more
            pass

    threading.Thread(target=run, daemon=True, name="mcpkit-login-io").start()
    await done.wait()
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value  # type: ignore[no-any-return]


def _page(status: int, title: str, text: str) -> web.Response:
    from aiohttp import web

    body = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title></head><body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
            "</body></html>")
    return web.Response(status=status, text=body, content_type="text/html",
                        headers={"Cache-Control": "no-store", "Connection": "close",
                                 "Referrer-Policy": "no-referrer"})


def _query_value(url: str, name: str) -> str | None:
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get(name)
    return values[0] if values and len(values) == 1 else None


def _port_of(redirect_uri: str, owner: LoopbackRedirect) -> int:
    if redirect_uri not in owner.redirect_uris:
        raise InvalidArgument(
            f"the authorization URL's redirect_uri {redirect_uri!r} is not one of this "
            f"redirect's ({', '.join(owner.redirect_uris)})")
    port = urllib.parse.urlsplit(redirect_uri).port
    assert port is not None
    return port
