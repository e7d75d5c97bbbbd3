"""`--auth-*`: protect a served `Server` with OAuth access tokens (MCP authorization, the
resource server's side), for every command that serves one (`mcpkit serve`, `mcpkit example`):

    mcpkit serve --auth-issuer https://auth.example.com \\
                 --auth-audience https://mcp.example.com/mcp [--required-scope mcp …]

The issuer's RFC 8414 / OpenID metadata is read at start-up (bounded by
`--auth-startup-timeout`): JWT access tokens (RFC 9068) are checked against its JWKS, or, with
`--auth-introspection-client-id` and the secret in an environment variable, opaque tokens are
introspected (RFC 7662). Tokens must name `--auth-audience` (this server's canonical URL, also
the RFC 9728 `resource` its metadata publishes): no token for another resource is accepted.

Start-up is eager on purpose: an issuer that is unreachable, misspelt or answers something
else is one line on stderr and exit status 2 when the operator starts the server, not a 401
to every client later that looks like a bad token.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcpkit.errors import UsageError

if TYPE_CHECKING:
    from mcpkit.auth.resource import TokenVerifier
    from mcpkit.server.resource_auth import ResourceAuth

DEFAULT_STARTUP_TIMEOUT_S = 10.0
"""How long start-up may spend reading the issuer's metadata and keys."""


class AuthOptionsError(UsageError):
    """The `--auth-*` options are inconsistent, or the issuer could not be used at start-up
    (the command prints `message`, one line, and exits 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def add_authorization_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "authorization (OAuth; HTTP only)",
        "require access tokens from an OAuth authorization server (MCP authorization); "
        "excludes --token")
    group.add_argument("--auth-issuer", metavar="URL", default=None,
                       help="the authorization server whose access tokens are accepted (its "
                       "issuer URL; its metadata is read at start-up) (default: none)")
    group.add_argument("--auth-audience", metavar="URL", default=None,
                       help="this server's canonical URL, e.g. https://mcp.example.com/mcp: "
                       "tokens must name it (RFC 8707), and the protected-resource metadata "
                       "publishes it (default: none; required with --auth-issuer)")
    group.add_argument("--required-scope", action="append", default=[], metavar="SCOPE",
                       help="a scope every request's token needs (repeatable); without it, "
                       "403 insufficient_scope (default: none)")
    group.add_argument("--auth-introspection-client-id", metavar="ID", default=None,
                       help="check tokens by introspection (RFC 7662) at the issuer's "
                       "introspection endpoint as this client (default: JWTs against the "
                       "issuer's JWKS)")
    group.add_argument("--auth-introspection-secret-env", metavar="VAR", default=None,
                       help="the environment variable holding the introspection client's "
                       "secret (never on the command line) (default: none)")
    group.add_argument("--auth-dpop-nonce", action="store_true",
                       help="DPoP proofs must carry a nonce this server issued (RFC 9449 §9) "
                       "(default: not required)")
    group.add_argument("--auth-startup-timeout", type=float, metavar="SECONDS",
                       default=DEFAULT_STARTUP_TIMEOUT_S,
                       help="how long start-up may take to read the issuer's metadata and keys "
                       f"(default {DEFAULT_STARTUP_TIMEOUT_S:g})")


def wants_authorization(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) for name in (
        "auth_issuer", "auth_audience", "required_scope", "auth_introspection_client_id",
        "auth_introspection_secret_env", "auth_dpop_nonce"))


def check_authorization_arguments(args: argparse.Namespace, *, static_token: str | None,
                                  transport: str) -> None:
    """`AuthOptionsError` unless the `--auth-*` options make sense together (no IO)."""
    if not wants_authorization(args):
        return
    if static_token:
        raise AuthOptionsError("--auth-* and a static token (--token or its environment "
                               "variable) exclude each other: use one way to authorize")
    if transport != "http":
        raise AuthOptionsError("--auth-* protects HTTP; stdio has no tokens")
    if not args.auth_issuer or not args.auth_audience:
        raise AuthOptionsError("--auth-issuer and --auth-audience go together (the issuer "
                               "whose tokens are accepted, and this server's URL they name)")
    for name, url in (("--auth-issuer", args.auth_issuer),
                      ("--auth-audience", args.auth_audience)):
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
            raise AuthOptionsError(f"{name} must be an absolute http(s) URL, not {url!r}")
    introspection = (args.auth_introspection_client_id, args.auth_introspection_secret_env)
    if any(introspection) and not all(introspection):
        raise AuthOptionsError("--auth-introspection-client-id and "
                               "--auth-introspection-secret-env go together")
    if args.auth_introspection_secret_env and \
            not os.environ.get(args.auth_introspection_secret_env):
        raise AuthOptionsError(f"${args.auth_introspection_secret_env} (the introspection "
                               "client's secret) is not set")
    if not args.auth_startup_timeout > 0:
        raise AuthOptionsError("--auth-startup-timeout must be above 0")


def resource_auth(args: argparse.Namespace) -> ResourceAuth | None:
    """The `ResourceAuth` the options ask for (None without `--auth-*`), its verifier built
    from the issuer's metadata now (bounded by --auth-startup-timeout). Call
    `check_authorization_arguments` first. Raises `AuthOptionsError`."""
    if not wants_authorization(args):
        return None
    from mcpkit.auth.dpop_proof import DEFAULT_DPOP_ALGORITHMS
    from mcpkit.server.resource_auth import ResourceAuth

    verifier = asyncio.run(_discovered(args))
    limits = {name: getattr(args, option) for name, option in (
        ("failure_burst", "auth_failure_burst"), ("failures_per_minute", "auth_failure_rate"))
        if getattr(args, option, None) is not None}
    required = tuple(dict.fromkeys(args.required_scope))
    # scopes_supported: what a client that discovers this server asks for (RFC 9728); the
    # required scopes are what every caller needs, so they are what is published
    return ResourceAuth(verifier, resource=args.auth_audience,
                        authorization_servers=[args.auth_issuer],
                        required_scopes=required, scopes_supported=required or None,
                        dpop_algs=tuple(DEFAULT_DPOP_ALGORITHMS), **limits)


async def _discovered(args: argparse.Namespace) -> TokenVerifier:
    """The verifier the issuer's metadata calls for. Only the metadata is read here; the
    verifier fetches the JWKS (or introspects) when the first token comes, in the server's
    event loop (it holds no connection or loop-bound state until then)."""
    from mcpkit.auth.resource import VerifierUnavailable
    from mcpkit.server.authorization import DPoPGuard, DPoPNonces, discover_verifier

    secret_env = args.auth_introspection_secret_env
    introspection = ((args.auth_introspection_client_id, os.environ[secret_env])
                     if secret_env else None)
    options: dict[str, Any] = {}
    if args.auth_dpop_nonce:
        options["dpop"] = DPoPGuard(nonces=DPoPNonces())
    try:
        return await asyncio.wait_for(
            discover_verifier(args.auth_issuer, args.auth_audience,
                              introspection_client=introspection, **options),
            args.auth_startup_timeout)
    except TimeoutError:
        raise AuthOptionsError(
            f"the authorization server {args.auth_issuer} did not answer within "
            f"{args.auth_startup_timeout:g} s (--auth-startup-timeout)") from None
    except VerifierUnavailable as exc:
        raise AuthOptionsError(f"cannot use the authorization server: {exc.description}"
                               ) from None
