"""`HubSettings`: everything an operator tunes about a running hub, from the command line and
the environment (`MCPKIT_HUB_*`), checked once at start so a typo fails there, not mid-request.

    settings = HubSettings.from_env()                 # defaults < environment
    settings = HubSettings.from_args(args)            # defaults < environment < command line
    settings = HubSettings(allow_private_upstreams=True, ...)   # tests: plain keyword arguments

Environment (each also a `mcpkit hub serve` option where it makes sense):

    MCPKIT_HUB_DATABASE_URL           --database-url        (default: hub.db in the data dir)
    MCPKIT_HUB_DATA                   the data directory    (SQLite file, generated key)
    MCPKIT_HUB_HOST / _PORT           --host / --port       (127.0.0.1:8765)
    MCPKIT_HUB_ALLOW_PRIVATE_UPSTREAMS=1   --allow-private-upstreams
    MCPKIT_HUB_ALLOW_STDIO=1          --allow-stdio
    MCPKIT_HUB_REDIS_URL              --redis-url           (replicas: rate limits, health-check
                                                            locks, the /mcp router's state)
    MCPKIT_HUB_ALLOWED_HOSTS          --allowed-host        (comma-separated in the environment;
    MCPKIT_HUB_ALLOWED_ORIGINS        --allowed-origin       the option repeats) what /mcp takes
                                                            besides loopback (DNS rebinding guard)
    MCPKIT_HUB_MAX_CONNECTIONS        --max-connections     (1000, fitted to the fd limit)
    MCPKIT_HUB_HEADER_TIMEOUT / _BODY_TIMEOUT   --header-timeout / --body-timeout (10 / 30 s)
    MCPKIT_HUB_MAX_SESSIONS / _MAX_SESSIONS_PER_USER   legacy /mcp sessions (1000 / 100)
    MCPKIT_HUB_AUTH_FAILURE_BURST / _AUTH_FAILURE_RATE  wrong tokens per address (20, 30/min)
    MCPKIT_HUB_MAX_REPLAY_BYTES       /mcp SSE replay buffers in all (256 MiB; per stream and
                                                            per session: 4 and 16 MiB)
    MCPKIT_HUB_MAX_BODIES_IN_FLIGHT_BYTES   /mcp request bodies being received at once (64 MiB)
    MCPKIT_HUB_PAGE_SIZE, _MAX_PAGE_SIZE, _MAX_BODY_BYTES, _HEALTH_INTERVAL,
    MCPKIT_HUB_RATE_LIMIT, _RATE_BURST, _DNS_TIMEOUT, _MAX_REFRESHES, _SHUTDOWN_GRACE
    MCPKIT_HUB_MAX_CATALOG_ITEMS, _MAX_CATALOG_BYTES, _MAX_CATALOG_ITEM_BYTES  (an upstream's
    MCPKIT_HUB_MAX_REFRESHES_PER_USER                        refreshes of one user at once (2)
    MCPKIT_HUB_MAX_UPSTREAMS_PER_USER                        upstreams one user may register (100)
    MCPKIT_HUB_MAX_TOKENS_PER_USER                           active API tokens a user may create
                                                            themselves (50)
    MCPKIT_HUB_CONSOLE_TRY_TIMEOUT_S                         a console "Try a tool" call (300 s)
    MCPKIT_HUB_MAX_USER_CATALOG_BYTES                        catalog, a user's: catalog_limits.py)
    MCPKIT_HUB_PUBLIC_URL             --public-url          (the OAuth issuer; default
                                                            http://HOST:PORT)
    MCPKIT_HUB_OAUTH_ACCESS_TOKEN_TTL_S, _OAUTH_REFRESH_TOKEN_TTL_S, _OAUTH_CODE_TTL_S,
    MCPKIT_HUB_OAUTH_SIGN_IN_TTL_S, _OAUTH_MAX_CLIENTS, _OAUTH_MAX_PASSWORD_CHECKS,
    MCPKIT_HUB_OAUTH_REVOCATION_CHECK_S, _OAUTH_SIGNING_KEY_CHECK_S, _OAUTH_DPOP_REPLAY_ENTRIES
                                      the authorization server (hub/oauth)
    MCPKIT_HUB_OIDC_ISSUER            --oidc-issuer         sign-in with an OpenID Connect
    MCPKIT_HUB_OIDC_CLIENT_ID         --oidc-client-id      provider (hub/oauth/oidc.py); the
    MCPKIT_HUB_OIDC_CLIENT_SECRET_ENV --oidc-client-secret-env  secret is read from the
                                                            variable this names, never a flag
    MCPKIT_HUB_OIDC_ALLOW_SIGNUP=1    --oidc-allow-signup   (a first login makes a hub user)
    MCPKIT_HUB_OIDC_SCOPES            --oidc-scopes         ("openid profile email")
    MCPKIT_HUB_OIDC_PROVIDER_NAME, _OIDC_TIMEOUT_S, _OIDC_MAX_DOCUMENT_BYTES
    MCPKIT_HUB_TOKEN_EXCHANGE_CACHE_BYTES   upstream tokens from token exchange kept in memory
    MCPKIT_HUB_OAUTH_CLIENT_DOCUMENT_TIMEOUT_S, _MAX_BYTES, _TTL_S, _ALLOW_PRIVATE, _CA_FILE
                                      fetching client metadata documents (CIMD)
    MCPKIT_HUB_UPSTREAM_CLIENT_METADATA_URL   --upstream-client-metadata-url   the Client ID
                                      Metadata Document the hub presents to upstreams'
                                      authorization servers (else DCR at each)

The secret key is not a setting: it is read by `mcpkit.hub.crypto.load_secret_box`
($MCPKIT_HUB_SECRET_KEY, else the key file in the data directory), so it never sits in an
object that might be logged or shown.

Importing this module loads nothing of the hub's dependencies (the `serve` command parses its
options with it before anything heavy is imported).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mcpkit.errors import UsageError
from mcpkit.hub.refresh_slots import DEFAULT_REFRESHES_PER_USER
from mcpkit.transports.server.http.asgi import DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES
from mcpkit.transports.server.http.replay import DEFAULT_MAX_TOTAL_REPLAY_BYTES

ENV_PREFIX = "MCPKIT_HUB_"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
DEFAULT_OIDC_SCOPES = "openid profile email"
MAX_OIDC_ISSUER_CHARS = 2048
DEFAULT_DPOP_REPLAY_ENTRIES = 100_000
"""DPoP proofs remembered per replay window (hub/oauth/dpop.py)."""

T = TypeVar("T")


class SettingsError(UsageError, ValueError):
    """A setting the hub cannot run with; the message names the option or variable."""


def _default_data_dir() -> Path:
    configured = os.environ.get(ENV_PREFIX + "DATA")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".local" / "share" / "mcpkit" / "hub"


@dataclass(frozen=True, slots=True)
class HubSettings:
    """A hub's configuration. Frozen: the app, its routes and later the router share one."""

    database_url: str | None = None
    """None: $MCPKIT_HUB_DATABASE_URL, else the SQLite file hub.db in `data_dir`."""
    data_dir: Path = field(default_factory=_default_data_dir)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_private_upstreams: bool = False
    """Let upstreams live on loopback/private/link-local addresses (tests, a trusted LAN).
    Off, registration refuses such hosts and every connection re-checks DNS."""
    allow_stdio: bool = False
    """Let users register stdio upstreams: commands the hub runs as its own user. An operator's
    decision, off by default."""
    page_size: int = 50
    """Items per page when a listing's `limit` is not given."""
    max_page_size: int = 200
    max_body_bytes: int = 1024 * 1024
    """The largest request body the REST API reads (413 past it)."""
    dns_timeout_s: float = 3.0
    """How long registration waits for an upstream's host name to resolve (the SSRF check)."""
    max_concurrent_refreshes: int = 8
    """Catalog refreshes in flight per process; more wait their turn."""
    max_refreshes_per_user: int = DEFAULT_REFRESHES_PER_USER
    """Of those, what one user's refreshes may hold at once (refresh_slots.py): a user whose
    upstreams never answer cannot make everyone else's refreshes wait."""
    max_upstreams_per_user: int = 100
    """Upstreams one user may register (409 past it): each is stored, health-checked and
    listed through /mcp, so one user's registrations must not grow without end."""
    max_tokens_per_user: int = 50
    """Active API tokens a user may hold when creating their own (409 past it: revoke one);
    an admin creating a token for a user is not held to it."""
    console_try_timeout_s: float = 300.0
    """The longest a tool call from the console's "Try a tool" may run (it also ends after
    60 s without progress)."""
    health_interval_s: float = 60.0
    """How often each enabled upstream is checked (health.py; each pass is jittered)."""
    rate_limit_per_minute: int = 600
    """Per-user request budget: the steady rate (ratelimit.py; REST API and /mcp alike)."""
    rate_limit_burst: int = 60
    """How many requests a user may make at once before the steady rate applies."""
    redis_url: str | None = None
    """Shared state of replicas (rate limits, health-check locks, the router's state);
    None: one process. `redis://`, `rediss://` (TLS) or `unix://`."""
    shutdown_grace_s: float = 30.0
    """How long a graceful shutdown waits for requests in flight."""
    max_connections: int = 1000
    """Open client connections at once (lowered to fit the file descriptor limit); past it
    the longest-waiting idle or slow one is closed, else 503
    (transports/server/http/connections.py)."""
    header_timeout_s: float = 10.0
    """How long a request's line and headers may take to arrive (408 and closed past it)."""
    body_timeout_s: float = 30.0
    """How long a request's body may take to arrive after its headers."""
    max_sessions: int = 1000
    """Legacy (pre-2026) /mcp sessions held by this process in all."""
    max_sessions_per_user: int = 100
    """Legacy /mcp sessions per user; at the cap the user's least recently used idle one is
    closed, and when all are busy `initialize` is 429."""
    auth_failure_burst: int = 20
    """Wrong API tokens a client address may send at once (REST API and /mcp alike) before
    429 (transports/server/http/auth_failures.py)."""
    auth_failures_per_minute: int = 30
    """The steady rate of wrong tokens an address may send after the burst."""
    max_replay_bytes: int = DEFAULT_MAX_TOTAL_REPLAY_BYTES
    """Bytes of SSE events /mcp keeps for `Last-Event-ID` replay over all legacy sessions
    (transports/server/http/replay.py; per stream and per session the library defaults apply)."""
    max_bodies_in_flight_bytes: int = DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES
    """Bytes of /mcp request bodies being received at once; past it 503 with Retry-After."""
    allowed_hosts: tuple[str, ...] = ()
    """`Host` values `/mcp` accepts besides loopback ones (`hub.example.com`, with or without
    a port): the names the hub is reached by behind a proxy. Anything else is 403, which
    stops DNS rebinding. `*` accepts any host (only behind a proxy that checks it)."""
    allowed_origins: tuple[str, ...] = ()
    """Browser `Origin`s `/mcp` accepts besides loopback and the allowed hosts' own
    (`https://app.example.com`); requests without an Origin are not browsers' and pass."""
    log_level: str = "info"
    public_url: str | None = None
    """The hub's URL as clients reach it (`https://hub.example.com`): its OAuth issuer, and
    `<public_url>/mcp` the resource its access tokens are for. None: `http://HOST:PORT` of
    the listen address (right for one machine; behind a proxy, set it)."""
    oauth_access_token_ttl_s: float = 300.0
    """How long an access token the hub issues is valid (short: refresh tokens renew it)."""
    oauth_refresh_token_ttl_s: float = 30 * 24 * 3600.0
    """How long a refresh token is valid (each use rotates it and starts this again)."""
    oauth_code_ttl_s: float = 60.0
    """How long an authorization code may wait for its token request."""
    oauth_sign_in_ttl_s: float = 8 * 3600.0
    """How long a sign-in to the hub's login page lasts (the session cookie)."""
    oauth_revocation_check_s: float = 10.0
    """How long /mcp trusts that a verified access token's login (its refresh family, the
    token's `sid`) is not revoked without reading the database: a revocation or a detected
    refresh-token reuse ends the login's live access tokens within this time, at every
    replica."""
    oauth_signing_key_check_s: float = 60.0
    """How often a replica re-reads the access-token signing keys: after `mcpkit hub oauth
    rotate-key` every replica signs with the new key within this time. A superseded key
    verifies for this + the access-token lifetime + 30 s more, then is retired."""
    oauth_key_max_age_s: float = 30 * 24 * 3600.0
    """How long the access-token signing key signs before a replica replaces it (the first
    replica to re-read the keys after that; one new key however many race). The old key
    keeps verifying as after `rotate-key`. At least the access-token lifetime + the re-read,
    so the JWKS holds a few keys, not a growing list."""
    oauth_max_clients: int = 10_000
    """Clients registered by DCR in all; past it registration is refused (429)."""
    oauth_max_password_checks: int = 4
    """Sign-in password checks running at once; more wait. Each argon2id check takes 64 MiB
    for about 50 ms, so this bounds what a crowd of sign-ins can cost (here 256 MiB)."""
    oidc_issuer: str | None = None
    """An OpenID Connect provider users sign in with (its issuer URL, discovered at
    `/.well-known/openid-configuration`); None: passwords only."""
    oidc_client_id: str | None = None
    """The hub's client id at that provider (a confidential client)."""
    oidc_client_secret_env: str | None = None
    """The NAME of the environment variable holding the client secret (the secret itself is
    never a setting or a flag: it would show in a process listing or a log)."""
    oidc_allow_signup: bool = False
    """A first login of an unknown subject creates a hub user; off, it is refused (an admin
    links the subject to a user first: `mcpkit hub user link-oidc`)."""
    oidc_scopes: str = DEFAULT_OIDC_SCOPES
    """The scopes asked of the provider (must include `openid`)."""
    oidc_provider_name: str | None = None
    """The name on the sign-in button ("Sign in with NAME"); None: the issuer's host."""
    oidc_timeout_s: float = 10.0
    """The bound on each exchange with the provider (metadata, keys, token request)."""
    oidc_max_document_bytes: int = 64 * 1024
    """The largest metadata document, JWKS or token response read from the provider (token
    exchanges included)."""
    oauth_dpop_replay_entries: int = DEFAULT_DPOP_REPLAY_ENTRIES
    """DPoP proofs (token endpoint and /mcp) remembered per replay window (about 70 s) for
    the replay check, in Redis with --redis-url (shared by replicas), else in memory; past
    it a proof is refused ("retry shortly"), never let through unchecked."""
    oauth_client_document_timeout_s: float = 5.0
    """How long fetching a client's metadata document (a client id that is an https URL) may
    take, connection and body together (hub/oauth/client_documents.py)."""
    oauth_client_document_max_bytes: int = 5 * 1024
    """The largest client metadata document the hub reads (the draft suggests 5 KB)."""
    oauth_client_document_ttl_s: float = 300.0
    """How long a fetched client metadata document is used before it is fetched again."""
    oauth_client_document_allow_private: bool = False
    """Fetch client metadata documents from loopback/private addresses too (a LAN's own
    clients, tests). Off: public addresses only, re-checked at each connect (SSRF)."""
    oauth_client_document_ca_file: str | None = None
    """A PEM bundle of CAs trusted, besides the system's, for client metadata documents (a
    private PKI; tests)."""
    token_exchange_cache_bytes: int = 4 * 1024 * 1024
    """The upstream tokens from token exchange one hub process keeps in memory (bytes; least
    recently used out first): `auth_mode` "token_exchange" upstreams."""
    upstream_client_metadata_url: str | None = None
    """The hub's Client ID Metadata Document URL (https, with a path): its client id at the
    authorization servers of OAuth upstreams that support CIMD, in users' upstream logins
    (hub/upstream_login.py); the others, and None, get a dynamic client registration. The
    document must list `<public URL>/oauth/upstream/callback`; the hub serves it at
    `<public URL>/oauth/upstream/client.json`, the URL to give when the hub's public URL is
    https."""
    max_catalog_items: int = 2000
    """Items of one list (tools, prompts, resources, templates) the hub takes from one
    upstream; past it the catalog fetch fails and says so (catalog_limits.py)."""
    max_catalog_bytes: int = 8 * 1024 * 1024
    """The largest catalog (all its lists, as JSON) the hub takes from one upstream."""
    max_catalog_item_bytes: int = 256 * 1024
    """The largest single tool, prompt, resource or template (as JSON) the hub takes."""
    max_user_catalog_bytes: int = 32 * 1024 * 1024
    """The catalogs of all of one user's upstreams together (as JSON): what one user's /mcp
    lists can hold. A refresh that would pass it fails and says so."""

    def __post_init__(self) -> None:
        _check_port(self.port, "port")
        for name in ("page_size", "max_page_size", "max_body_bytes", "max_concurrent_refreshes",
                     "rate_limit_per_minute", "rate_limit_burst", "max_connections",
                     "max_sessions", "max_sessions_per_user", "auth_failure_burst",
                     "auth_failures_per_minute", "max_replay_bytes",
                     "max_bodies_in_flight_bytes", "max_upstreams_per_user",
                     "max_tokens_per_user", "max_refreshes_per_user", "oauth_max_clients",
                     "oauth_max_password_checks", "oidc_max_document_bytes",
                     "oauth_dpop_replay_entries", "oauth_client_document_max_bytes",
                     "token_exchange_cache_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name}: must be a whole number above 0, not {value!r}")
        for name in ("max_catalog_items", "max_catalog_bytes", "max_catalog_item_bytes",
                     "max_user_catalog_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{name}: must be a whole number above 0, not {value!r}")
        if self.page_size > self.max_page_size:
            raise SettingsError("page_size: must not be above max_page_size")
        if self.max_page_size > 500:
            raise SettingsError("max_page_size: at most 500")
        for name in ("dns_timeout_s", "health_interval_s", "shutdown_grace_s",
                     "console_try_timeout_s",
                     "header_timeout_s", "body_timeout_s", "oauth_access_token_ttl_s",
                     "oauth_refresh_token_ttl_s", "oauth_code_ttl_s", "oauth_sign_in_ttl_s",
                     "oauth_revocation_check_s", "oauth_signing_key_check_s",
                     "oauth_key_max_age_s", "oidc_timeout_s",
                     "oauth_client_document_timeout_s", "oauth_client_document_ttl_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise SettingsError(f"{name}: must be a number of seconds above 0, not {value!r}")
        if self.oauth_access_token_ttl_s >= self.oauth_refresh_token_ttl_s:
            # a login's refresh rows (what revokes its access tokens) must outlive them
            raise SettingsError("oauth_access_token_ttl_s: must be below "
                                "oauth_refresh_token_ttl_s")
        if self.oauth_key_max_age_s < self.oauth_access_token_ttl_s + \
                self.oauth_signing_key_check_s:
            raise SettingsError("oauth_key_max_age_s: must be at least oauth_access_token_ttl_s "
                                "+ oauth_signing_key_check_s")
        if not self.host:
            raise SettingsError("host: must not be empty")
        if self.redis_url is not None and not self.redis_url.startswith(REDIS_SCHEMES):
            # the value is not echoed: it may carry a password
            raise SettingsError("redis_url: must start with redis://, rediss:// or unix://")
        for name in ("allowed_hosts", "allowed_origins"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(
                    isinstance(item, str) and item.strip() and not any(c.isspace() for c in item)
                    for item in value):
                raise SettingsError(f"{name}: must be names without spaces, not {value!r}")
        if self.public_url is not None and (
                not self.public_url.startswith(("https://", "http://"))
                or any(c in self.public_url for c in "?#") or " " in self.public_url):
            raise SettingsError("public_url: must be an http(s) URL without query or fragment")
        self._check_oidc()
        if self.oauth_client_document_ca_file is not None and \
                not Path(self.oauth_client_document_ca_file).is_file():
            raise SettingsError("oauth_client_document_ca_file: "
                                f"{self.oauth_client_document_ca_file!r} is not a file")
        if self.upstream_client_metadata_url is not None:
            from mcpkit.client.oauth_client_metadata import check_client_metadata_url
            from mcpkit.errors import InvalidArgument

            try:
                check_client_metadata_url(self.upstream_client_metadata_url)
            except InvalidArgument as error:
                raise SettingsError(f"upstream_client_metadata_url: {error}") from None
        if self.log_level not in ("critical", "error", "warning", "info", "debug"):
            raise SettingsError(f"log_level: {self.log_level!r} is not a log level")

    def _check_oidc(self) -> None:
        if self.oidc_issuer is None:
            return
        issuer = self.oidc_issuer
        if (not issuer.startswith(("https://", "http://")) or any(c in issuer for c in "?#")
                or any(c.isspace() for c in issuer) or len(issuer) > MAX_OIDC_ISSUER_CHARS):
            raise SettingsError("oidc_issuer: must be an http(s) URL without query or fragment "
                                f"(at most {MAX_OIDC_ISSUER_CHARS} characters)")
        if not self.oidc_client_id:
            raise SettingsError("oidc_client_id: required with oidc_issuer (--oidc-client-id)")
        if not self.oidc_client_secret_env:
            raise SettingsError("oidc_client_secret_env: required with oidc_issuer: the name "
                                "of the environment variable holding the client secret "
                                "(--oidc-client-secret-env)")
        if "openid" not in self.oidc_scopes.split():
            raise SettingsError("oidc_scopes: must include openid")

    def oidc_client_secret(self, environ: Mapping[str, str] | None = None) -> str:
        """The OIDC client secret, from the variable `oidc_client_secret_env` names
        (SettingsError naming the variable, never a value, when it is unset or empty)."""
        env = os.environ if environ is None else environ
        name = self.oidc_client_secret_env or ""
        secret = env.get(name, "") if name else ""
        if not secret:
            raise SettingsError(f"oidc_client_secret_env: the environment variable {name!r} "
                                "holding the OIDC client secret is not set")
        return secret

    @property
    def resolved_database_url(self) -> str:
        """`database_url`, else the SQLite file hub.db in `data_dir` (as the admin commands)."""
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'hub.db'}"

    @property
    def issuer(self) -> str:
        """The hub's OAuth issuer identifier: `public_url`, else the listen address's URL."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def mcp_url(self) -> str:
        """The resource the hub's access tokens are for (their `aud`, RFC 8707)."""
        return self.issuer + "/mcp"

    @property
    def api_url(self) -> str:
        """The REST API as a resource (RFC 8707): the audience of the access tokens the web
        console gets, which /mcp refuses (as /api/v1 refuses tokens for /mcp)."""
        return self.issuer + "/api/v1"

    # --- loading ---------------------------------------------------------------------------

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> HubSettings:
        """Defaults, then `MCPKIT_HUB_*` variables, then `overrides` (None values ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            variable = ENV_PREFIX + _ENV_NAMES.get(spec.name, spec.name.upper())
            text = env.get(variable)
            if text is None or (text == "" and spec.name not in _FLAGS):
                continue
            values[spec.name] = _parse(spec.name, text, variable)
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except TypeError as error:  # an unknown override: a programming error, said plainly
            raise SettingsError(str(error)) from error

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None
    ) -> HubSettings:
        """Settings for `mcpkit hub serve`: the options given win over the environment."""
        names = {spec.name for spec in dataclasses.fields(cls)}
        given = {name: tuple(value) if isinstance(value, list) else value
                 for name, value in vars(args).items() if name in names}
        for flag in _FLAGS:  # store_true options: False means "not given", not "off"
            if given.get(flag) is False:
                given.pop(flag)
        return cls.from_env(environ, **given)

    def describe(self) -> str:
        """One line for the start-up log (no secrets in settings, but not the database
        password either: a URL's userinfo is cut)."""
        url = self.resolved_database_url
        private = "allowed" if self.allow_private_upstreams else "refused"
        stdio = "allowed" if self.allow_stdio else "off"
        redis = without_userinfo(self.redis_url) if self.redis_url else "off (one process)"
        return (f"database {without_userinfo(url)}, redis {redis}, "
                f"private upstreams {private}, stdio upstreams {stdio}")


def without_userinfo(url: str) -> str:
    """A URL for the log: its user and password cut (`scheme://…@host/...`)."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://…@{rest.rsplit('@', 1)[1]}"
    return url


_FLAGS = frozenset({"allow_private_upstreams", "allow_stdio", "oidc_allow_signup",
                    "oauth_client_document_allow_private"})
_ENV_NAMES = {
    "data_dir": "DATA",
    "page_size": "PAGE_SIZE",
    "max_body_bytes": "MAX_BODY_BYTES",
    "dns_timeout_s": "DNS_TIMEOUT",
    "max_concurrent_refreshes": "MAX_REFRESHES",
    "health_interval_s": "HEALTH_INTERVAL",
    "rate_limit_per_minute": "RATE_LIMIT",
    "rate_limit_burst": "RATE_BURST",
    "shutdown_grace_s": "SHUTDOWN_GRACE",
    "header_timeout_s": "HEADER_TIMEOUT",
    "body_timeout_s": "BODY_TIMEOUT",
    "auth_failures_per_minute": "AUTH_FAILURE_RATE",
}


def _parse(name: str, text: str, variable: str) -> Any:
    parsers: dict[str, Callable[[str], Any]] = {
        "data_dir": lambda t: Path(t).expanduser(),
        "port": int,
        "page_size": int,
        "max_page_size": int,
        "max_body_bytes": int,
        "max_concurrent_refreshes": int,
        "max_upstreams_per_user": int,
        "max_tokens_per_user": int,
        "max_refreshes_per_user": int,
        "rate_limit_per_minute": int,
        "rate_limit_burst": int,
        "dns_timeout_s": float,
        "health_interval_s": float,
        "console_try_timeout_s": float,
        "shutdown_grace_s": float,
        "max_connections": int,
        "max_sessions": int,
        "max_sessions_per_user": int,
        "auth_failure_burst": int,
        "auth_failures_per_minute": int,
        "max_replay_bytes": int,
        "max_bodies_in_flight_bytes": int,
        "header_timeout_s": float,
        "body_timeout_s": float,
        "oauth_access_token_ttl_s": float,
        "oauth_refresh_token_ttl_s": float,
        "oauth_code_ttl_s": float,
        "oauth_sign_in_ttl_s": float,
        "oauth_revocation_check_s": float,
        "oauth_signing_key_check_s": float,
        "oauth_key_max_age_s": float,
        "oauth_max_clients": int,
        "oauth_max_password_checks": int,
        "oidc_allow_signup": _flag,
        "oidc_timeout_s": float,
        "oidc_max_document_bytes": int,
        "oauth_dpop_replay_entries": int,
        "oauth_client_document_timeout_s": float,
        "oauth_client_document_max_bytes": int,
        "oauth_client_document_ttl_s": float,
        "oauth_client_document_allow_private": _flag,
        "token_exchange_cache_bytes": int,
        "max_catalog_items": int,
        "max_catalog_bytes": int,
        "max_catalog_item_bytes": int,
        "max_user_catalog_bytes": int,
        "allow_private_upstreams": _flag,
        "allow_stdio": _flag,
        "log_level": str.lower,
        "allowed_hosts": _names,
        "allowed_origins": _names,
    }
    parser = parsers.get(name, str)
    try:
        return parser(text.strip())
    except ValueError as error:
        raise SettingsError(f"{variable}: {text!r} is not a valid {name}") from error


def _names(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _flag(text: str) -> bool:
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    # builtin: a parser's contract, like int()'s (the caller makes it a SettingsError)
    raise ValueError(text)


def _check_port(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise SettingsError(f"{name}: must be a TCP port from 0 to 65535, not {value!r}")
