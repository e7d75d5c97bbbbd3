"""`LoopbackRedirect` over real sockets on 127.0.0.1: an aiohttp client plays the browser
against the listener (callback, wrong state, stray paths, huge and flooding requests), ports
busy and taken, the timeout, and the paste flow's checks on what is pasted."""

from __future__ import annotations

import io
import logging
import socket
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import aiohttp
import anyio
import pytest
from tests.procs import free_port

from mcpkit.client.oauth_loopback import (
    CALLBACK_PORTS,
    CallbackPortsBusy,
    CallbackRefused,
    CallbackTimeout,
    LoopbackRedirect,
    PastedRedirectRefused,
)
from mcpkit.client.oauth_redirect import DEFAULT_REDIRECT_URIS, ListeningRedirect

pytestmark = pytest.mark.anyio

STATE = "s-7f3a9"


def auth_url(redirect_uri: str, state: str = STATE) -> str:
    query = urllib.parse.urlencode({"redirect_uri": redirect_uri, "state": state,
                                    "client_id": "c"})
    return f"http://127.0.0.1:9/authorize?{query}"


def ports(n: int = 3) -> list[int]:
    chosen: list[int] = []
    while len(chosen) < n:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return chosen


def quiet(**kwargs: object) -> LoopbackRedirect:
    """A redirect that prints to a buffer and 'opens' the browser by recording the URL."""
    opened: list[str] = []
    out = io.StringIO()
    redirect = LoopbackRedirect(opener=lambda url: opened.append(url) or True,
                                output=out, **kwargs)  # type: ignore[arg-type]
    redirect.opened = opened  # type: ignore[attr-defined]
    return redirect


@contextmanager
def occupied(port: int) -> Iterator[socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


async def browse(redirect: LoopbackRedirect, url_at: Callable[[str], str],
                 browser: Callable[[str], Awaitable[None]]) -> str:
    """Run the redirect for an authorization URL while `browser(redirect_uri)` plays the
    browser; the redirect's result."""
    async with redirect.listen() as bound:
        result: list[str | Exception] = []

        async def wait() -> None:
            try:
                result.append(await bound(url_at(bound.redirect_uri)))
            except Exception as exc:  # raised below, out of the task group
                result.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await browser(bound.redirect_uri)
    if isinstance(result[0], Exception):
        raise result[0]
    return result[0]


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url, allow_redirects=False) as r:
        return r.status, await r.text()


def test_the_default_range_is_what_is_registered() -> None:
    redirect = LoopbackRedirect()
    assert isinstance(redirect, ListeningRedirect)
    assert redirect.redirect_uris == list(DEFAULT_REDIRECT_URIS)
    assert redirect.redirect_uris == [f"http://127.0.0.1:{p}/callback" for p in CALLBACK_PORTS]
    # a port of the range keeps the range registered; another port is registered alone
    assert LoopbackRedirect(port=CALLBACK_PORTS[1]).redirect_uris == list(DEFAULT_REDIRECT_URIS)
    assert LoopbackRedirect(port=40001).redirect_uris == ["http://127.0.0.1:40001/callback"]


async def test_the_callback_returns_the_redirect_and_the_browser_gets_a_page(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    redirect = quiet(ports=ports())
    pages: list[tuple[int, str]] = []

    async def browser(uri: str) -> None:
        for _ in range(250):  # the browser "opens" first (bounded wait)
            if redirect.opened:  # type: ignore[attr-defined]
                break
            await anyio.sleep(0.02)
        pages.append(await get(f"{uri}?code=the-code&state={STATE}&iss=https%3A%2F%2Fas"))

    result = await browse(redirect, auth_url, browser)
    parsed = urllib.parse.parse_qs(urllib.parse.urlsplit(result).query)
    assert parsed == {"code": ["the-code"], "state": [STATE], "iss": ["https://as"]}
    assert result.startswith(redirect.redirect_uris[0] + "?")
    assert pages[0][0] == 200 and "authorized" in pages[0][1]
    assert redirect.opened == [auth_url(redirect.redirect_uris[0])]  # type: ignore[attr-defined]
    assert auth_url(redirect.redirect_uris[0]) in redirect.output.getvalue()  # type: ignore[union-attr]
    assert "the-code" not in caplog.text and STATE not in caplog.text  # printed, not logged


async def test_a_wrong_state_gets_an_error_page_and_the_wait_goes_on() -> None:
    redirect = quiet(ports=ports())
    seen: list[tuple[int, str]] = []

    async def browser(uri: str) -> None:
        seen.append(await get(f"{uri}?code=forged&state=other"))
        seen.append(await get(f"{uri}?code=forged"))
        seen.append(await get(f"{uri}?code=x&state={STATE}&state={STATE}"))
        seen.append(await get(f"{uri}?code=good&state={STATE}"))

    result = await browse(redirect, auth_url, browser)
    assert "code=good" in result
    assert [status for status, _ in seen] == [400, 400, 400, 200]
    assert "does not belong to the login in progress" in seen[0][1]


async def test_an_error_answer_ends_the_wait_with_an_escaped_page() -> None:
    redirect = quiet(ports=ports())
    seen: list[tuple[int, str]] = []

    async def browser(uri: str) -> None:
        error = urllib.parse.quote("<script>alert(1)</script>")
        seen.append(await get(f"{uri}?error={error}&state={STATE}"))

    result = await browse(redirect, auth_url, browser)
    assert "error=" in result
    status, page = seen[0]
    assert status == 200 and "<script>" not in page and "&lt;script&gt;" in page


async def test_stray_paths_and_methods_get_404_and_the_wait_goes_on() -> None:
    redirect = quiet(ports=ports())
    statuses: list[int] = []

    async def browser(uri: str) -> None:
        base = uri.removesuffix("/callback")
        async with aiohttp.ClientSession() as http:
            for method, url in (("GET", base + "/favicon.ico"), ("GET", base + "/"),
                                ("POST", f"{uri}?code=c&state={STATE}"),
                                ("GET", f"{uri}/more?code=c&state={STATE}")):
                async with http.request(method, url, allow_redirects=False) as r:
                    statuses.append(r.status)
        statuses.append((await get(f"{uri}?code=c&state={STATE}"))[0])

    assert "code=c" in await browse(redirect, auth_url, browser)
    assert statuses == [404, 404, 404, 404, 200]


async def test_a_flood_of_stray_requests_ends_the_wait_with_a_clear_error() -> None:
    redirect = quiet(ports=ports(), max_stray_requests=10)
    statuses: list[int] = []

    async def browser(uri: str) -> None:
        async with aiohttp.ClientSession() as http:
            for i in range(40):  # more than the limit
                try:
                    async with http.get(f"{uri}?state=guess{i}") as r:
                        statuses.append(r.status)
                except aiohttp.ClientError:
                    break

    with pytest.raises(CallbackRefused, match="10 requests that were not"):
        await browse(redirect, auth_url, browser)
    assert statuses[:10] == [400] * 10
    assert statuses[10:] and set(statuses[10:]) == {503}  # the login was over after 10


async def test_a_huge_callback_request_is_refused_and_the_wait_goes_on() -> None:
    redirect = quiet(ports=ports(), max_request_bytes=4096)
    seen: list[int] = []

    async def browser(uri: str) -> None:
        async with aiohttp.ClientSession() as http:
            huge = "a" * 200_000
            try:
                async with http.get(f"{uri}?code={huge}&state={STATE}") as r:
                    seen.append(r.status)
            except aiohttp.ClientError:
                seen.append(0)  # the connection dropped: refused too
            async with http.get(f"{uri}?x=1", headers={"X-Big": "b" * 100_000}) as r:
                seen.append(r.status)
        seen.append((await get(f"{uri}?code=small&state={STATE}"))[0])

    result = await browse(redirect, auth_url, browser)
    assert "code=small" in result
    assert seen[0] in (0, 400, 414) and seen[1] in (400, 431) and seen[2] == 200


async def test_no_callback_in_time_is_a_clear_timeout() -> None:
    redirect = quiet(ports=ports(), timeout_s=0.2)
    async with redirect.listen() as bound:
        with pytest.raises(CallbackTimeout, match="--no-browser"):
            await bound(auth_url(bound.redirect_uri))


async def test_a_busy_port_moves_to_the_next_of_the_range() -> None:
    first, second, third = ports()
    redirect = quiet(ports=[first, second, third])
    with occupied(first):
        async with redirect.listen() as bound:
            assert bound.redirect_uri == f"http://127.0.0.1:{second}/callback"
    assert redirect.redirect_uris == [f"http://127.0.0.1:{p}/callback"
                                      for p in (first, second, third)]


async def test_all_ports_busy_is_a_clear_error_naming_callback_port() -> None:
    taken = ports()
    redirect = quiet(ports=taken)
    with occupied(taken[0]), occupied(taken[1]), occupied(taken[2]):
        with pytest.raises(CallbackPortsBusy, match="--callback-port") as caught:
            async with redirect.listen():
                pass
    assert all(str(p) in str(caught.value) for p in taken)
    chosen = quiet(port=taken[0])
    with occupied(taken[0]), pytest.raises(CallbackPortsBusy, match=f"port {taken[0]} "):
        async with chosen.listen():
            pass


async def test_a_browser_that_cannot_open_is_not_fatal() -> None:
    out = io.StringIO()

    def broken(url: str) -> bool:
        raise OSError("no display")

    redirect = LoopbackRedirect(ports=ports(), opener=broken, output=out)

    async def browser(uri: str) -> None:
        for _ in range(250):  # the user reads the message, then opens the URL (bounded)
            if "No browser could be opened" in out.getvalue():
                break
            await anyio.sleep(0.02)
        await get(f"{uri}?code=c&state={STATE}")

    assert "code=c" in await browse(redirect, auth_url, browser)
    assert "No browser could be opened" in out.getvalue()
    assert "http://127.0.0.1:9/authorize?" in out.getvalue()  # the URL is printed anyway


async def test_calling_it_directly_listens_on_the_url_s_port() -> None:
    port = ports(1)[0]
    redirect = quiet(ports=[port])
    uri = redirect.redirect_uris[0]

    async def browser() -> None:
        for _ in range(100):  # until the listener is up (bounded)
            try:
                await get(f"{uri}?code=direct&state={STATE}")
                return
            except aiohttp.ClientError:
                await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(browser)
        assert "code=direct" in await redirect(auth_url(uri))
    with pytest.raises(ValueError, match="not one of"):
        await redirect(auth_url("http://127.0.0.1:1/callback"))


# --- paste -------------------------------------------------------------------------------


def pasting(*lines: str, **kwargs: object) -> tuple[LoopbackRedirect, io.StringIO]:
    out = io.StringIO()
    redirect = LoopbackRedirect(paste=True, open_browser=False, input=io.StringIO(
        "".join(line + "\n" for line in lines)), output=out, **kwargs)  # type: ignore[arg-type]
    return redirect, out


async def test_paste_accepts_the_redirect_uri_with_the_state() -> None:
    uri = DEFAULT_REDIRECT_URIS[0]
    redirect, out = pasting(f"  {uri}?code=pasted&state={STATE}  ")
    async with redirect.listen() as bound:
        assert bound.redirect_uri == uri
        result = await bound(auth_url(uri))
    assert result == f"{uri}?code=pasted&state={STATE}"
    assert auth_url(uri) in out.getvalue() and "Paste" in out.getvalue()


@pytest.mark.parametrize("wrong", [
    "http://127.0.0.2:33418/callback?code=c&state=" + STATE,   # another host
    "http://127.0.0.1:33419/callback?code=c&state=" + STATE,   # another port
    "http://127.0.0.1:33418/other?code=c&state=" + STATE,      # another path
    "https://127.0.0.1:33418/callback?code=c&state=" + STATE,  # another scheme
    "http://127.0.0.1:x/callback?code=c&state=" + STATE,       # not a port
    "http://127.0.0.1:33418/callback?code=c&state=old",        # another login's
    "code=c",
])
async def test_paste_refuses_another_redirect_then_asks_again(wrong: str) -> None:
    uri = DEFAULT_REDIRECT_URIS[0]
    redirect, out = pasting(wrong, f"{uri}?code=good&state={STATE}")
    async with redirect.listen() as bound:
        assert "code=good" in await bound(auth_url(uri))
    assert "That is not it" in out.getvalue()


async def test_paste_gives_up_after_the_attempts() -> None:
    uri = DEFAULT_REDIRECT_URIS[0]
    redirect, _ = pasting("nope", "nope", "nope", f"{uri}?code=late&state={STATE}",
                          max_paste_attempts=3)
    async with redirect.listen() as bound:
        with pytest.raises(PastedRedirectRefused, match="after 3 attempts"):
            await bound(auth_url(uri))


async def test_paste_bounds_the_line_and_the_end_of_input() -> None:
    uri = DEFAULT_REDIRECT_URIS[0]
    redirect, _ = pasting(f"{uri}?code={'c' * 500}&state={STATE}", max_paste_chars=100)
    async with redirect.listen() as bound:
        with pytest.raises(PastedRedirectRefused, match="100-character limit"):
            await bound(auth_url(uri))
    redirect, _ = pasting()
    async with redirect.listen() as bound:
        with pytest.raises(PastedRedirectRefused, match="input ended"):
            await bound(auth_url(uri))


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        LoopbackRedirect(timeout_s=0)
    with pytest.raises(ValueError, match=r"1\.\.65535"):
        LoopbackRedirect(port=70000)
    with pytest.raises(ValueError, match="at least one"):
        LoopbackRedirect(ports=[])
