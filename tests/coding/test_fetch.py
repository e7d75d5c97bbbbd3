"""The `fetch` tool against a local aiohttp server on 127.0.0.1: every format, binary bodies,
the size cap, the time limit, redirects (followed, too many, to other schemes, to private
addresses), HTTP error statuses; and with `allow_private_fetch` off, loopback, private,
link-local and metadata targets refused before any connection (IP literals, names, names
resolving to private addresses, redirects). Unit tests of the address classifier and the
HTML converters."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohappyeyeballs
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from mcpkit import netguard
from mcpkit.client import Client
from mcpkit.coding import fetch, html_text
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

PAGE = """<!doctype html>
<html><head><title>Page title</title>
<style>body { color: red }</style><script>var secret = "script text";</script></head>
<body><h1>Main heading</h1>
<p>A paragraph with <a href="/plain">a link</a> and <strong>bold</strong> words.</p>
<ul><li>first item</li><li>second item</li></ul>
<pre><code>x = 1
y = 2</code></pre>
</body></html>"""
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
BIG = 6 * 1024 * 1024


@dataclass
class Site:
    base: str
    port: int
    hits: list[str] = field(default_factory=list)


def make_app(site: Site) -> web.Application:
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        site.hits.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application(middlewares=[web.middleware(record)])

    async def html(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="plain text body\n  keeps   spacing", content_type="text/plain")

    async def data(request: web.Request) -> web.Response:
        return web.json_response({"name": "mcpkit", "list": [1, 2], "nested": {"k": "v"}})

    async def bad_json(request: web.Request) -> web.Response:
        return web.Response(text="{not json", content_type="application/json")

    async def png(request: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        chunk = b"a" * (1024 * 1024)
        try:
            for _ in range(BIG // len(chunk)):
                await response.write(chunk)
        except ConnectionError:
            pass
        return response

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="too late")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such page", content_type="text/plain")

    async def redirect(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        target = "/plain" if n <= 0 else f"/redirect/{n - 1}"
        raise web.HTTPFound(target)

    async def redirect_to(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    app.router.add_get("/html", html)
    app.router.add_get("/plain", plain)
    app.router.add_get("/data", data)
    app.router.add_get("/bad-json", bad_json)
    app.router.add_get("/png", png)
    app.router.add_get("/big", big)
    app.router.add_get("/slow", slow)
    app.router.add_get("/missing", missing)
    app.router.add_get("/redirect/{n}", redirect)
    app.router.add_get("/to", redirect_to)
    return app


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    holder = Site("", 0)
    runner = web.AppRunner(make_app(holder), shutdown_timeout=0.5)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    holder.base, holder.port = f"http://127.0.0.1:{port}", port
    yield holder
    await runner.cleanup()


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    server = build_server(CodingEnv(Workspace.at(tmp_path), allow_private_fetch=True))
    async with Client(server) as c:
        yield c


@pytest.fixture
async def strict(tmp_path: Path) -> AsyncIterator[Client]:
    """A server with the default policy: only public addresses."""
    server = build_server(CodingEnv(Workspace.at(tmp_path)))
    async with Client(server) as c:
        yield c


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every TCP connection aiohttp starts (recorded, then made as usual)."""
    calls: list[Any] = []
    real = aiohappyeyeballs.start_connection

    async def spy(addr_infos: Any, *args: Any, **kwargs: Any) -> socket.socket:
        calls.append([info[4] for info in addr_infos])
        return await real(addr_infos, *args, **kwargs)

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", spy)
    return calls


ANSWER_SEQUENCES: dict[str, list[str]] = {}


class FakeResolver(AbstractResolver):
    """A DNS with fixed answers (the names in tests are not real)."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        answer = self.table[host]
        if host in ANSWER_SEQUENCES:  # a name whose answer changes on each lookup
            answer = [ANSWER_SEQUENCES[host].pop(0)]
        return [ResolveResult(hostname=host, host=a, port=port,
                              family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for a in answer]

    async def close(self) -> None:
        pass


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    monkeypatch.setattr(f"{__name__}.ANSWER_SEQUENCES", {})
    monkeypatch.setattr(fetch.aiohttp, "DefaultResolver", lambda: FakeResolver(table))
    return table


async def call(client: Client, **arguments: Any) -> tuple[str, Any, bool]:
    result = await client.call_tool("fetch", arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, result.structured_content, bool(result.is_error)


# --- formats ---------------------------------------------------------------------------------


async def test_tool_is_listed_with_annotations_and_schemas(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    tool = tools["fetch"]
    assert tool.annotations.read_only_hint is True
    assert tool.annotations.open_world_hint is True
    assert set(tool.input_schema["properties"]) == {"url", "format", "timeout"}
    assert tool.output_schema["required"] == ["url", "status", "content_type", "bytes",
                                              "truncated", "body"]


async def test_text_format_strips_markup_scripts_and_styles(client: Client, site: Site
                                                            ) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/html")
    assert not is_error, text
    assert "Main heading" in text
    assert "A paragraph with a link and bold words." in text
    assert "first item" in text and "x = 1\ny = 2" in text
    for absent in ("<", "script text", "color: red", "Page title"):
        assert absent not in text
    assert data == {"url": f"{site.base}/html", "status": 200,
                    "content_type": "text/html; charset=utf-8", "bytes": len(PAGE.encode()),
                    "truncated": False, "body": text}


async def test_structured_content_alone_carries_the_body(client: Client, site: Site) -> None:
    """A client that shows only `structuredContent` gets the body in every format."""
    for fmt, path in (("html", "html"), ("markdown", "html"), ("json", "data"),
                      ("base64", "png"), ("text", "missing")):
        result = await client.call_tool("fetch", {"url": f"{site.base}/{path}",
                                                  "format": fmt})
        assert not result.is_error
        body = result.structured_content["body"]
        assert body == result.content[0].text  # the text's first block, the same body
        if fmt == "html":
            assert body == PAGE
        elif fmt == "markdown":
            assert "# Main heading" in body
        elif fmt == "json":
            assert json.loads(body)["name"] == "mcpkit"
        elif fmt == "base64":
            assert base64.b64decode(body) == PNG
        else:
            assert "no such page" in body and result.structured_content["status"] == 404
    cut = (await client.call_tool("fetch", {"url": f"{site.base}/big", "format": "html"})
           ).structured_content
    assert cut["truncated"] is True and len(cut["body"]) == fetch.MAX_BODY_BYTES


async def test_markdown_format(client: Client, site: Site) -> None:
    text, _, is_error = await call(client, url=f"{site.base}/html", format="markdown")
    assert not is_error, text
    assert "# Main heading" in text
    assert f"[a link]({site.base}/plain)" in text  # relative links made absolute
    assert "**bold**" in text
    assert "- first item\n- second item" in text
    assert "```\nx = 1\ny = 2\n```" in text
    assert "script text" not in text


async def test_html_format_is_the_raw_body(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/html", format="html")
    assert not is_error
    assert text == PAGE
    assert data["bytes"] == len(PAGE.encode())


async def test_plain_text_is_returned_as_is(client: Client, site: Site) -> None:
    for fmt in ("text", "markdown", "html"):
        text, data, is_error = await call(client, url=f"{site.base}/plain", format=fmt)
        assert not is_error
        assert text == "plain text body\n  keeps   spacing"
        assert data["content_type"].startswith("text/plain")


async def test_json_format_pretty_prints(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/data", format="json")
    assert not is_error, text
    assert json.loads(text) == {"name": "mcpkit", "list": [1, 2], "nested": {"k": "v"}}
    assert '\n  "name": "mcpkit"' in text
    assert data["content_type"].startswith("application/json")


async def test_invalid_json_is_an_error(client: Client, site: Site) -> None:
    text, _, is_error = await call(client, url=f"{site.base}/bad-json", format="json")
    assert is_error and "not valid JSON" in text
    # The same body as text is fine.
    text, _, is_error = await call(client, url=f"{site.base}/bad-json")
    assert not is_error and text == "{not json"


async def test_base64_format_and_binary_bodies(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/png", format="base64")
    assert not is_error
    assert base64.b64decode(text) == PNG
    assert data["bytes"] == len(PNG) and data["content_type"] == "image/png"
    for fmt in ("text", "markdown", "html", "json"):
        text, _, is_error = await call(client, url=f"{site.base}/png", format=fmt)
        assert is_error and "binary" in text and "base64" in text, (fmt, text)


async def test_http_error_status_is_a_result(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/missing")
    assert not is_error
    assert "no such page" in text and "HTTP 404" in text
    assert data["status"] == 404


# --- limits ----------------------------------------------------------------------------------


async def test_body_is_cut_at_the_cap(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/big", format="html")
    assert not is_error
    assert data["truncated"] is True and data["bytes"] == fetch.MAX_BODY_BYTES
    assert "cut at" in text


async def test_timeout(client: Client, site: Site) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    text, _, is_error = await call(client, url=f"{site.base}/slow", timeout=0.5)
    assert is_error and "timed out after 0.5 s" in text
    assert loop.time() - started < 3


async def test_bad_arguments(client: Client) -> None:
    for url, expected in [("ftp://example.com/x", "only http and https"),
                          ("file:///etc/passwd", "only http and https"),
                          ("example.com", "only http and https"),
                          ("http://", "no host")]:
        text, _, is_error = await call(client, url=url)
        assert is_error and expected in text, (url, text)
    text, _, is_error = await call(client, url="http://127.0.0.1:1/", timeout=500)
    assert is_error and "maximum" in text
    text, _, is_error = await call(client, url="http://127.0.0.1:1/", timeout=0)
    assert is_error and "positive" in text
    long = "http://example.com/" + "a" * fetch.MAX_URL_CHARS
    text, _, is_error = await call(client, url=long)
    assert is_error and f"over the maximum of {fetch.MAX_URL_CHARS}" in text


async def test_connection_refused(client: Client) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text, _, is_error = await call(client, url=f"http://127.0.0.1:{port}/")
    assert is_error and "could not connect" in text


# --- redirects -------------------------------------------------------------------------------


async def test_redirects_are_followed(client: Client, site: Site) -> None:
    text, data, is_error = await call(client, url=f"{site.base}/redirect/3")
    assert not is_error, text
    assert "plain text body" in text and "redirected to" in text
    assert data["url"] == f"{site.base}/plain" and data["status"] == 200
    assert site.hits == ["/redirect/3", "/redirect/2", "/redirect/1", "/redirect/0", "/plain"]


async def test_too_many_redirects(client: Client, site: Site) -> None:
    text, _, is_error = await call(client, url=f"{site.base}/redirect/{fetch.MAX_REDIRECTS}")
    assert is_error and "too many redirects" in text
    assert len(site.hits) == fetch.MAX_REDIRECTS + 1


async def test_redirect_to_other_schemes_refused(client: Client, site: Site) -> None:
    for target in ("file:///etc/passwd", "ftp://127.0.0.1/", "javascript:alert(1)"):
        text, _, is_error = await call(client, url=f"{site.base}/to?to={target}")
        assert is_error and "only http and https" in text, (target, text)


# --- the address policy (allow_private_fetch off) --------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "10.0.0.1",
                                  "169.254.169.254", "[::ffff:127.0.0.1]", "0.0.0.0",
                                  "192.168.1.1", "100.64.0.1", "[fe80::1]", "[fd00:ec2::254]",
                                  "metadata.google.internal", "foo.localhost"])
async def test_private_targets_refused_without_connecting(
        strict: Client, connects: list[Any], host: str) -> None:
    text, _, is_error = await call(strict, url=f"http://{host}:8080/latest", timeout=5)
    assert is_error and text.startswith("refused to fetch"), text
    assert connects == []


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "017700000001"])
async def test_legacy_numeric_hosts_never_connect(
        strict: Client, connects: list[Any], host: str) -> None:
    """Forms like 127.1 that socket calls would read as 127.0.0.1: aiohttp refuses them as
    URLs, or the resolver maps them to 127.0.0.1 and the policy refuses that."""
    text, _, is_error = await call(strict, url=f"http://{host}:8080/", timeout=5)
    assert is_error and ("invalid URL" in text or "loopback" in text
                         or "could not resolve" in text), text
    assert connects == []


async def test_private_site_refused_then_allowed_with_the_flag(
        strict: Client, client: Client, site: Site, connects: list[Any]) -> None:
    text, _, is_error = await call(strict, url=f"{site.base}/plain")
    assert is_error and "loopback" in text and "--allow-private-fetch" in text
    assert site.hits == [] and connects == []
    _, _, is_error = await call(client, url=f"{site.base}/plain")
    assert not is_error and site.hits == ["/plain"] and len(connects) == 1


async def test_name_resolving_to_loopback_is_refused(
        strict: Client, site: Site, connects: list[Any], fake_dns: dict[str, list[str]]
) -> None:
    fake_dns["evil.test"] = ["127.0.0.1"]
    fake_dns["mixed.test"] = ["93.184.215.14", "10.1.2.3"]  # any private address refuses
    fake_dns["mapped.test"] = ["::ffff:169.254.169.254"]
    for name, why in [("evil.test", "loopback"), ("mixed.test", "private"),
                      ("mapped.test", "metadata")]:
        text, _, is_error = await call(strict, url=f"http://{name}:{site.port}/plain")
        assert is_error and "refused" in text and why in text, (name, text)
    assert site.hits == [] and connects == []


async def test_dns_failure(strict: Client, fake_dns: dict[str, list[str]]) -> None:
    text, _, is_error = await call(strict, url="http://nowhere.test/")
    assert is_error and "could not resolve nowhere.test" in text


async def test_redirect_from_public_to_private_refused(
        strict: Client, site: Site, connects: list[Any], fake_dns: dict[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`public.test` is the local site, taken for public by letting 127.0.0.1 through the
    policy; its redirects to private places are refused before connecting to them."""
    real = netguard.address_problem
    monkeypatch.setattr(netguard, "address_problem",
                        lambda ip: None if str(ip) == "127.0.0.1" else real(ip))
    fake_dns["public.test"] = ["127.0.0.1"]
    fake_dns["private.test"] = ["10.0.0.7"]
    public = f"http://public.test:{site.port}"
    text, data, is_error = await call(strict, url=f"{public}/redirect/1")
    assert not is_error and data["url"] == f"{public}/plain"  # allowed redirects work
    for target, why in [("http://169.254.169.254/latest/meta-data/", "metadata"),
                        ("http://private.test/", "private"),
                        ("http://[::1]/", "loopback"),
                        ("http://localhost/", "loopback")]:
        site.hits.clear()
        connects.clear()
        text, _, is_error = await call(strict, url=f"{public}/to?to={target}")
        assert is_error and "refused" in text and why in text, (target, text)
        assert site.hits == ["/to"] and len(connects) == 1  # only the first hop


async def test_rebinding_between_hops_is_caught_at_connect(
        strict: Client, site: Site, connects: list[Any], fake_dns: dict[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`flip.test` answers 127.0.0.1 (taken for public here) on the first lookup and
    10.0.0.7 on the next: the redirect back to it is refused when it is resolved again to
    connect, since nothing is cached between checks and connects."""
    real = netguard.address_problem
    monkeypatch.setattr(netguard, "address_problem",
                        lambda ip: None if str(ip) == "127.0.0.1" else real(ip))
    fake_dns["flip.test"] = []
    ANSWER_SEQUENCES["flip.test"] = ["127.0.0.1", "10.0.0.7"]
    text, _, is_error = await call(strict, url=f"http://flip.test:{site.port}/redirect/1")
    assert is_error and "flip.test (10.0.0.7)" in text and "private" in text, text
    assert site.hits == ["/redirect/1"] and len(connects) == 1


# --- units -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "problem"), [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.0.1", "private"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"),
    ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("100.64.0.1", "CGNAT"), ("100.127.255.254", "CGNAT"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("0.1.2.3", "private"), ("192.0.2.1", "private"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "metadata"), ("2002:7f00:1::", "loopback"),
    ("64:ff9b::a00:1", "private"),
])
def test_address_classifier_refuses(address: str, problem: str) -> None:
    found = netguard.address_problem(ipaddress.ip_address(address))
    assert found is not None and problem in found, (address, found)


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "1.1.1.1",
                                     "2606:4700:4700::1111", "::ffff:8.8.8.8",
                                     "100.128.0.1", "64:ff9b::808:808"])
def test_address_classifier_allows_public(address: str) -> None:
    assert netguard.address_problem(ipaddress.ip_address(address)) is None


def test_html_to_text_and_markdown() -> None:
    doc = ("<h2>Title</h2><p>one\n   two</p><ol><li>a</li><li>b<ul><li>c</li></ul></li></ol>"
           "<blockquote><p>quoted</p></blockquote><table><tr><th>A</th><th>B</th></tr>"
           "<tr><td>1</td><td>2</td></tr></table><p>x<br>y &amp; <code>z()</code></p>"
           "<noscript>hidden</noscript><img src='/i.png' alt='pic'>")
    assert html_text.html_to_text(doc) == (
        "Title\n\none two\n\n1. a\n2. b\n  • c\n\n  quoted\n\nA | B\n1 | 2\n\nx\ny & z()")
    assert html_text.html_to_text(doc, markdown=True, base_url="https://h.test/d/") == (
        "## Title\n\none two\n\n1. a\n2. b\n  - c\n\n> quoted\n\n| A | B |\n| --- | --- |\n"
        "| 1 | 2 |\n\nx\ny & `z()`\n\n![pic](https://h.test/i.png)")


def test_unclosed_tags_do_not_swallow_the_page() -> None:
    assert html_text.html_to_text("<html><head><title>t</title><body><p>text<p>more") == (
        "text\n\nmore")
