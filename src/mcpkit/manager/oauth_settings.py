"""The `oauth` table of a server entry, checked: how mcpkit logs in to that server.

    "docs": {"url": "https://example.com/mcp",
             "oauth": {"client_id": "mcpkit-docs", "client_secret_env": "DOCS_CLIENT_SECRET",
                       "scopes": ["read", "write"], "callback_port": 33418,
                       "store": "auto", "grant": "authorization_code"}}

Every key is optional; an entry without the table still logs in (`mcpkit mcp login NAME`)
with what the server's metadata offers (a Client ID Metadata Document or dynamic
registration). The keys, and what the other tools call them (the importers map them):

    client_id            a pre-registered client       Claude Code oauth.clientId,
                                                       Codex [mcp_servers.x.oauth] client_id
    client_secret_env    the NAME of the environment   (Claude Code keeps the secret in its
                         variable holding its secret   keychain; it is never in a file)
    scopes               the scopes to ask for         Claude Code oauth.scopes (one string),
                                                       Codex scopes
    callback_port        the loopback redirect's port  Claude Code oauth.callbackPort,
                                                       Codex oauth.callback_port
    store                auto | keyring | file         Codex mcp_oauth_credentials_store
    grant                authorization_code (a user    -
                         logs in) | client_credentials
                         (a machine, no browser)
    client_metadata_url  this client's Client ID       -
                         Metadata Document (https)

A secret is never a value of this table: `client_secret` is refused with the way to give it.
Each value is bounded and checked, and an error names the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcpkit.manager.config_errors import ConfigError, json_type

if TYPE_CHECKING:
    from mcpkit.auth.tokens import TokenStore
    from mcpkit.client.oauth import OAuth
    from mcpkit.client.oauth_machine import MachineAuth
    from mcpkit.client.oauth_redirect import Redirect

OAUTH_KEYS = frozenset({"client_id", "client_secret_env", "scopes", "callback_port", "store",
                        "grant", "client_metadata_url"})
STORES = ("auto", "keyring", "file")
"""Where tokens are kept: the OS keyring, a 0600 file, or the keyring when there is one."""
GRANTS = ("authorization_code", "client_credentials")
MAX_CLIENT_ID_CHARS = 512
MAX_URL_CHARS = 2048
MAX_SCOPES = 64
MAX_SCOPE_CHARS = 256
MAX_VARIABLE_NAME_CHARS = 128
MIN_CALLBACK_PORT = 1024
"""Ports below this need privileges to listen on: no loopback redirect can use them."""
MAX_CALLBACK_PORT = 65535
CALLBACK_PATH = "/callback"

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 6749 §3.3: a scope is printable ASCII without space, `"` and `\\`."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """A server's `oauth` table, checked (`from_table`); `build` makes the `OAuth`."""

    client_id: str | None = None
    client_secret_env: str | None = None
    scopes: tuple[str, ...] | None = None
    callback_port: int | None = None
    store: str = "auto"
    grant: str = "authorization_code"
    client_metadata_url: str | None = None

    # --- to and from the file --------------------------------------------------------------

    @classmethod
    def from_table(cls, table: object, prefix: str) -> OAuthSettings:
        """Check the table as written in the file (after interpolation); ConfigError says
        which key is wrong and why, `prefix` says where ("file: server 'docs'")."""
        where = f"{prefix}: \"oauth\""
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be an object, not {json_type(table)}")
        if "client_secret" in table:
            raise ConfigError(f"{where}: a client secret is never written in a config file; "
                              "put it in an environment variable and give that variable's "
                              "name as \"client_secret_env\"")
        unknown = sorted(set(table) - OAUTH_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: "
                              f"{', '.join(sorted(OAUTH_KEYS))}")
        settings = cls(
            client_id=_text(table, "client_id", where, MAX_CLIENT_ID_CHARS),
            client_secret_env=_variable(table, "client_secret_env", where),
            scopes=_scopes(table, where),
            callback_port=_port(table, where),
            store=_choice(table, "store", STORES, where),
            grant=_choice(table, "grant", GRANTS, where),
            client_metadata_url=_https_url(table, "client_metadata_url", where),
        )
        settings._check_together(where)
        return settings

    def _check_together(self, where: str) -> None:
        if self.client_secret_env is not None and self.client_id is None:
            raise ConfigError(f"{where}: \"client_secret_env\" needs the \"client_id\" the "
                              "secret belongs to")
        if self.grant == "client_credentials" and (self.client_id is None
                                                   or self.client_secret_env is None):
            raise ConfigError(f"{where}: the client_credentials grant needs a \"client_id\" "
                              "and the \"client_secret_env\" holding its secret")

    def to_table(self) -> dict[str, Any]:
        """The table as `mcp add` writes it, defaults left out."""
        table: dict[str, Any] = {}
        for key in ("client_id", "client_secret_env", "scopes", "callback_port",
                    "client_metadata_url"):
            value = getattr(self, key)
            if value is not None:
                table[key] = list(value) if key == "scopes" else value
        if self.store != "auto":
            table["store"] = self.store
        if self.grant != "authorization_code":
            table["grant"] = self.grant
        return table

    # --- what a client needs ---------------------------------------------------------------

    def client_secret(self, environ: Mapping[str, str]) -> str | None:
        """The secret named by `client_secret_env`; ConfigError when that variable is unset."""
        if self.client_secret_env is None:
            return None
        secret = environ.get(self.client_secret_env)
        if not secret:
            raise ConfigError(f"oauth.client_secret_env {self.client_secret_env} is not set")
        return secret

    def redirect_uri(self, port: int | None = None) -> str | None:
        """The loopback redirect URI for `port` (default: `callback_port`); None for none."""
        chosen = port if port is not None else self.callback_port
        return None if chosen is None else f"http://127.0.0.1:{chosen}{CALLBACK_PATH}"

    def build(self, *, environ: Mapping[str, str], redirect: Redirect | None = None,
              store: TokenStore | None = None, redirect_uri: str | None = None,
              scopes: tuple[str, ...] | list[str] | None = None, **more: Any) -> OAuth:
        """The `OAuth` of these settings: `redirect` shows the authorization URL to the user
        (None: no user, so a login that is needed fails instead), `store` keeps the tokens,
        `scopes` replaces the configured ones (`mcp login --scopes`). `more` goes to
        `OAuth` as it is (e.g. `registrations=`)."""
        from mcpkit.client.oauth import OAuth

        options: dict[str, Any] = dict(more)
        uri = redirect_uri or self.redirect_uri()
        if uri is not None:
            options["redirect_uri"] = uri
        chosen = scopes if scopes is not None else self.scopes
        return OAuth(redirect=redirect, client_id=self.client_id,
                     client_secret=self.client_secret(environ),
                     client_metadata_url=self.client_metadata_url,
                     scopes=list(chosen) if chosen is not None else None, store=store,
                     **options)


    def build_machine(self, *, environ: Mapping[str, str]) -> MachineAuth:
        """The `MachineAuth` of the client_credentials grant: the client gets its own tokens
        (client_secret_basic/post, as the server's metadata says), nobody logs in."""
        from mcpkit.client.oauth_machine import MachineAuth
        from mcpkit.client.oauth_machine_grants import ClientCredentialsGrant

        if self.grant != "client_credentials" or self.client_id is None:
            raise ConfigError("build_machine() is for the client_credentials grant, with a "
                              "client_id")
        grant = ClientCredentialsGrant(self.client_id,
                                       client_secret=self.client_secret(environ))
        return MachineAuth(grant, scopes=list(self.scopes) if self.scopes else None)


# --- the checks -----------------------------------------------------------------------------


def _text(table: dict[str, Any], key: str, where: str, limit: int) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: \"{key}\" must be a string, not {json_type(value)}")
    if not value or len(value) > limit:
        raise ConfigError(f"{where}: \"{key}\" must be 1-{limit} characters, not "
                          f"{len(value)}")
    if _CONTROL.search(value):
        raise ConfigError(f"{where}: \"{key}\" must not contain control characters")
    return value


def _variable(table: dict[str, Any], key: str, where: str) -> str | None:
    value = _text(table, key, where, MAX_VARIABLE_NAME_CHARS)
    if value is not None and not _VARIABLE.fullmatch(value):
        # Not the value itself in the message: it may be the secret, pasted by mistake.
        raise ConfigError(f"{where}: \"{key}\" is the NAME of an environment variable "
                          "(letters, digits and '_', e.g. DOCS_CLIENT_SECRET), not the "
                          "secret itself")
    return value


def _scopes(table: dict[str, Any], where: str) -> tuple[str, ...] | None:
    value = table.get("scopes")
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{where}: \"scopes\" must be a list of strings, not "
                          f"{json_type(value)}")
    if len(value) > MAX_SCOPES:
        raise ConfigError(f"{where}: \"scopes\" has {len(value)} scopes; at most "
                          f"{MAX_SCOPES}")
    for scope in value:
        if len(scope) > MAX_SCOPE_CHARS or not _SCOPE_TOKEN.fullmatch(scope):
            raise ConfigError(f"{where}: \"scopes\": {scope[:MAX_SCOPE_CHARS]!r} is not a "
                              f"scope (1-{MAX_SCOPE_CHARS} printable ASCII characters, no "
                              "space, '\"' or '\\'; give several as a list)")
    return tuple(dict.fromkeys(value))


def _port(table: dict[str, Any], where: str) -> int | None:
    value = table.get("callback_port")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: \"callback_port\" must be a port number, not "
                          f"{json_type(value)}")
    return check_callback_port(value, f"{where}: \"callback_port\"")


def check_callback_port(port: int, what: str) -> int:
    if not MIN_CALLBACK_PORT <= port <= MAX_CALLBACK_PORT:
        raise ConfigError(f"{what} must be between {MIN_CALLBACK_PORT} and "
                          f"{MAX_CALLBACK_PORT}, not {port}")
    return port


def _choice(table: dict[str, Any], key: str, choices: tuple[str, ...], where: str) -> str:
    value = table.get(key, choices[0])
    if value not in choices:
        shown = value if isinstance(value, str) else json_type(value)
        raise ConfigError(f"{where}: \"{key}\" must be one of {', '.join(choices)}, not "
                          f"{shown!r}")
    return str(value)


def _https_url(table: dict[str, Any], key: str, where: str) -> str | None:
    value = _text(table, key, where, MAX_URL_CHARS)
    if value is None:
        return None
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: \"{key}\" is not a valid URL: {exc}") from exc
    if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
        raise ConfigError(f"{where}: \"{key}\" must be an https:// URL with a path (the "
                          "client id a Client ID Metadata Document is published under)")
    return value
