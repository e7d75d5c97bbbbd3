"""Client ID Metadata Documents at the hub (draft-ietf-oauth-client-id-metadata-document; the
MCP 2025-11-25 and 2026-07-28 "Client Registration" sections): a `client_id` that is an https
URL names a JSON document, published by the client, that the hub fetches and then treats as
a registered public client.

    documents = ClientDocuments(store, settings)
    record = await documents.client(url)    # ClientRecord, or ClientDocumentRefused (why)
    await documents.remember(record)        # stored: when a signed-in user consents

The fetch (the hub reaching out to a URL any caller names, so an SSRF surface):
- https only, no redirects followed, `oauth_client_document_timeout_s` (5 s) for all of it,
  at most `oauth_client_document_max_bytes` (5 KiB, the draft's suggestion) read;
- public addresses only (`mcpkit.netguard`: an IP-literal host is checked here, a name at
  connect time by `GuardedResolver`, so DNS rebinding is caught), unless the operator sets
  `oauth_client_document_allow_private` (a LAN's own clients; tests);
- `oauth_client_document_ca_file`: a CA bundle trusted besides the system's (a private PKI;
  tests serve documents with a throwaway CA);
- at most MAX_CONCURRENT_FETCHES at once; a good document is kept
  `oauth_client_document_ttl_s` (300 s), at most MAX_CACHED_DOCUMENTS of them, so a login's
  authorization, token and refresh requests fetch it once.

The checks (each refusal says which): the URL can be a client id (https, a host, a path, no
fragment, user info or dot segments, at most MAX_CLIENT_ID_CHARS); the answer is 200 and a
JSON object; its `client_id` is the URL exactly; it names a `client_name`, holds no
`client_secret`, and passes the DCR checks (registration.py): `redirect_uris` https or
loopback http, `token_endpoint_auth_method` none (the hub has public clients only),
`grant_types`, `response_types`.

A document client is stored like a DCR one (consents, codes and refresh tokens refer to it)
under `document_key(url)` - `cimd:` and the SHA-256 of the URL - because the client-id column
holds 64 characters and a URL may hold more; it is named by its URL everywhere else (token
claims, pages). It is stored (or its row updated) only when a signed-in user consents to it,
so visitors naming URLs cause fetches - bounded as above - but no rows; stored clients count
toward `oauth_max_clients` as DCR ones do. Its checks always use the fetched document (a
changed document takes effect within the cache's lifetime), never the stored row.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import ssl
import sys
import time
import urllib.parse
from typing import TYPE_CHECKING

import anyio

from mcpkit.client.oauth_client_metadata import check_client_metadata_url
from mcpkit.errors import InvalidArgument, PeerError
from mcpkit.hub.oauth.registration import RegistrationRefused, client_from_metadata
from mcpkit.hub.store.oauth import ClientRecord
from mcpkit.netguard import BlockedAddress, GuardedResolver, host_problem

if TYPE_CHECKING:
    from mcpkit.hub.settings import HubSettings
    from mcpkit.hub.store import Store

log = logging.getLogger(__name__)

MAX_CLIENT_ID_CHARS = 2000
"""The longest client id URL the hub fetches."""
MAX_CACHED_DOCUMENTS = 1000
"""Good documents kept at once; full, the cache starts over."""
MAX_CONCURRENT_FETCHES = 8
"""Document fetches in flight at once; more wait (each is bounded by the fetch timeout)."""
KEY_PREFIX = "cimd:"
# CPython before 3.12.8 (and 3.13.0) leaks a TLS transport closed mid-read - a fetch cut at
# its timeout - until the loop ends; aiohttp then aborts such transports itself
# (python/cpython#118960; on later versions aiohttp warns if asked to).
ABORT_CLOSED_TLS = sys.version_info < (3, 12, 8) or (3, 13, 0) <= sys.version_info < (3, 13, 1)


class ClientDocumentRefused(PeerError):
    """The client id's metadata document could not be had or is not acceptable; `str()` says
    why (the URL and the check, nothing of the document)."""


def is_document_client_id(client_id: str) -> bool:
    """Whether `client_id` names a metadata document (an https URL) rather than a DCR id."""
    return client_id.startswith("https://")


def document_key(url: str) -> str:
    """The stored client id of the document at `url` (48 characters)."""
    digest = hashlib.sha256(url.encode("utf-8")).digest()
    return KEY_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class ClientDocuments:
    def __init__(self, store: Store, settings: HubSettings) -> None:
        self._store = store
        self._settings = settings
        self._cache: dict[str, tuple[float, ClientRecord]] = {}  # url -> (fetched at, record)
        self._fetches = anyio.CapacityLimiter(MAX_CONCURRENT_FETCHES)
        self._tls: ssl.SSLContext | None = None

    async def client(self, url: str) -> ClientRecord:
        """The client the document at `url` describes (fetched, or cached), or
        ClientDocumentRefused."""
        now = time.monotonic()
        cached = self._cache.get(url)
        if cached is not None and now - cached[0] < self._settings.oauth_client_document_ttl_s:
            return cached[1]
        check_client_id(url)
        async with self._fetches:
            body = await self._fetch(url)
        record = client_from_document(body, url)
        if len(self._cache) >= MAX_CACHED_DOCUMENTS:
            self._cache.clear()
        self._cache[url] = (time.monotonic(), record)
        log.info("client metadata document fetched: %s", url)
        return record

    async def remember(self, record: ClientRecord) -> None:
        """Store a document's client (or update its row): ClientDocumentRefused when it is new
        and the hub holds its maximum of clients."""
        oauth = self._store.oauth
        if await oauth.get_client(record.client_id) is None and \
                await oauth.count_clients() >= self._settings.oauth_max_clients:
            raise ClientDocumentRefused(f"the hub holds its maximum of "
                                        f"{self._settings.oauth_max_clients} clients")
        await oauth.put_client(record)

    async def _fetch(self, url: str) -> bytes:
        import aiohttp  # the hub's HTTP client, loaded when a document is first fetched

        from mcpkit.transports.client._aiohttp import read_body
        from mcpkit.transports.client.base import MessageTooLarge

        settings = self._settings
        allow_private = settings.oauth_client_document_allow_private
        host = urllib.parse.urlsplit(url).hostname or ""
        problem = None if allow_private else host_problem(host)
        if problem is not None:
            raise ClientDocumentRefused(f"the client id {url} is on {problem}")
        limit = settings.oauth_client_document_max_bytes
        timeout_s = settings.oauth_client_document_timeout_s
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(allow_private=allow_private),
                                         ssl=self._tls_context(), limit=1,
                                         enable_cleanup_closed=ABORT_CLOSED_TLS)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http, \
                    http.get(url, allow_redirects=False,
                             headers={"Accept": "application/json"}) as reply:
                if reply.status != 200:
                    raise ClientDocumentRefused(f"the client metadata document at {url} "
                                                f"answered HTTP {reply.status}, not 200")
                return await read_body(reply, limit)
        except MessageTooLarge:  # (a TransportError, so an OSError: caught first)
            raise ClientDocumentRefused(f"the client metadata document at {url} is over "
                                        f"{limit} bytes") from None
        except TimeoutError:
            raise ClientDocumentRefused(f"the client metadata document at {url} did not "
                                        f"arrive within {timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as error:
            blocked = error.os_error if isinstance(error.os_error, BlockedAddress) else None
            raise ClientDocumentRefused(f"the client metadata document at {url} cannot be "
                                        "fetched: " + (str(blocked) if blocked else
                                                       type(error).__name__)) from None
        except (aiohttp.ClientError, OSError) as error:
            raise ClientDocumentRefused(f"the client metadata document at {url} cannot be "
                                        f"fetched: {type(error).__name__}") from None

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            context = ssl.create_default_context()
            ca_file = self._settings.oauth_client_document_ca_file
            if ca_file:
                context.load_verify_locations(cafile=ca_file)
            self._tls = context
        return self._tls


def check_client_id(url: str) -> None:
    """ClientDocumentRefused unless `url` can be a client id (the draft's §3 rules)."""
    if len(url) > MAX_CLIENT_ID_CHARS:
        raise ClientDocumentRefused(f"a client id URL is at most {MAX_CLIENT_ID_CHARS} "
                                    "characters")
    try:
        check_client_metadata_url(url)
    except InvalidArgument as refused:
        raise ClientDocumentRefused(str(refused)) from None


def client_from_document(body: bytes, url: str) -> ClientRecord:
    """The public client the document `body`, fetched from `url`, describes."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ClientDocumentRefused(f"the client metadata document at {url} is not "
                                    "JSON") from None
    if not isinstance(document, dict):
        raise ClientDocumentRefused(f"the client metadata document at {url} is not a JSON "
                                    "object")
    if document.get("client_id") != url:
        raise ClientDocumentRefused(f"the client metadata document at {url} names another "
                                    "client_id than its own URL")
    if not isinstance(document.get("client_name"), str) or not document["client_name"]:
        raise ClientDocumentRefused(f"the client metadata document at {url} has no "
                                    "client_name")
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise ClientDocumentRefused(f"the client metadata document at {url} holds a "
                                    "client_secret (a published document cannot)")
    try:
        record = client_from_metadata(document, document_key(url))
    except RegistrationRefused as refused:
        raise ClientDocumentRefused(f"the client metadata document at {url}: "
                                    f"{refused.description}") from None
    return record
