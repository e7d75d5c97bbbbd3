"""The one exception tree of mcpkit: every exception mcpkit lets reach a caller derives from
`McpkitError`, and its first branch says whose fault it is.

    McpkitError                  the root: `except mcpkit.McpkitError` catches all of mcpkit
    ├── UsageError               this program used mcpkit wrongly: a bad argument, setting,
    │   │                        config file or call order. Fix the calling code or config.
    │   ├── InvalidArgument      a bad value for an mcpkit API: a constructor argument, a
    │   │                        limit, a target URL (also ValueError)
    │   ├── InvalidArgumentType  an argument of the wrong kind: a target that is neither URL
    │   │                        nor command, an unknown keyword, a function a decorator
    │   │                        cannot describe (also TypeError)
    │   ├── InvalidState         a call made in the wrong state: before `async with`, after
    │   │                        close, during shutdown (also RuntimeError)
    │   ├── LocalError           a bad argument to an mcpkit API, with a JSON-RPC code
    │   │   └── LimitError, HeadLimitError, WebSocketLimitError, ListenError (server limits
    │   │       and listening address)
    │   ├── ClientMisuse         the Client called wrongly (also a ClientError, below)
    │   ├── UnsupportedPattern   a schema pattern RE2 cannot run (also ValueError)
    │   ├── ManagerError         the manager cannot make the call as asked
    │   │   └── UnknownTool (also LookupError), ToolNotAllowed, PermissionDenied,
    │   │       ServerUnavailable and RequiredServerFailed (these two also PeerError)
    │   ├── ConfigError, CliError                      manager config and command line
    │   ├── SettingsError, CredentialError             hub settings and keys
    │   ├── StoreError           the hub's store refused: NotFound, Conflict, Invalid,
    │   │                        StoreUnavailable (also TransportError)
    │   ├── ServiceUnavailable   testing: a service's binaries are not installed
    │   ├── AuthorizationNotConfigured   OAuth: nothing to identify the client with
    │   └── CallbackPortsBusy, PastedRedirectRefused   OAuth login: no free callback port,
    │                        a pasted URL that is not the redirect
    ├── PeerError                the remote peer failed or refused: an error answer, a message
    │   │                        the protocol does not allow, a server the client cannot work
    │   │                        with. Nothing local to fix; report it or try another peer.
    │   ├── McpError             a JSON-RPC error (code, message, data): the peer's answer,
    │   │   │                    or, raised by a handler, the answer it sends its peer
    │   │   ├── ProtocolError    the peer broke the protocol
    │   │   ├── ServerError      the server answered the Client's request with an error
    │   │   ├── ClientError      the Client cannot work with what the server did:
    │   │   │   └── IncompatibleServer, TooManyInputRounds, InvalidToolOutput,
    │   │   │       ListTooLarge, TaskFailed, TaskPollLimit
    │   │   ├── SessionLimitReached   a server refusing a session (SessionPoolFull, …)
    │   │   └── HubRequestError  the hub's REST API refused (its command-line client)
    │   ├── DecodeFailure        a message that does not decode (what to answer is in it)
    │   ├── EventTooLarge        an SSE event over the parser's limit (also ValueError)
    │   ├── UpstreamUnavailable, UpstreamDown, CatalogTooLarge    a hub's upstream server
    │   │   └── UpstreamNeedsAuth   it wants a login or credentials the hub lacks (401)
    │   ├── AuthorizationError   OAuth: the resource or authorization server refused or
    │   │                        sent something unusable (metadata, issuer, iss, tokens);
    │   │                        CallbackRefused: strays flooded the loopback listener;
    │   │                        InvalidToken, DPoPNonceRequired: a resource server refusing
    │   ├── ApiError             a hub REST API error answer (also Starlette's HTTPException)
    │   ├── AdapterError         a model's tool call that is not a valid call (also ValueError)
    │   └── ScenarioFailed, SkillRejected, ServiceError, RedisError    testing
    ├── TransportError           the connection failed or ended: refused, reset, closed, a
    │   │ (also ConnectionError) child process that exited, a message over the size limit.
    │   ├── ConnectionClosed     the connection ended (a stdio child: exit code, stderr tail)
    │   ├── MessageTooLarge      a message over the transport's size limit
    │   ├── HttpStatusError      an HTTP status with no usable answer: RedirectRefused,
    │   │                        SessionExpired
    │   ├── H1Error, StdioProcessError   the lean HTTP/1 client's, the stdio child's
    │   ├── BlockedAddress       an address the SSRF guard may not reach
    │   ├── AuthorizationFailed  a request needed OAuth authorization that failed (`reason`)
    │   └── SharedStateUnavailable   the hub's Redis cannot be reached
    └── Timeout                  an operation ran past its deadline.
        │ (also TimeoutError)
        ├── RequestTimeout       a request got no answer in time
        └── CallbackTimeout      OAuth login: no browser callback (or paste) in time

A family sits on the branch of most of its members; a member of another fault names that
branch too (`ServerUnavailable` is a `ManagerError` and a `PeerError`). A Client user
catches `McpkitError`, or, to tell the faults apart, `McpError` (the server's error
answer; `ServerError` for a request), `TransportError` and `Timeout`; all are exported from
`mcpkit`.

mcpkit raises no bare builtin exception: a bad argument is an `InvalidArgument` (so
`except ValueError` still catches it), a foreign one is mapped where it enters. The few
builtin raises left carry a `# builtin: <reason>` comment (a library's contract requires the
builtin, or it is caught at once in the same module); tests/test_exception_tree.py keeps it so.

Exceptions used only for control flow inside mcpkit, which never reach a caller, are private
(their names start with an underscore) and need not derive from this tree. Foreign exceptions
(OSError, aiohttp's, SQLAlchemy's, …) are mapped once, where mcpkit meets the library, with
`raise … from exc`, so the original stays in `__cause__`.

This module imports nothing: the protocol layer, which does no IO, builds on it.
"""

from __future__ import annotations

__all__ = ["InvalidArgument", "InvalidArgumentType", "InvalidState", "McpkitError", "PeerError",
           "Timeout", "TransportError", "UsageError"]


class McpkitError(Exception):
    """The root of every exception mcpkit raises."""


class UsageError(McpkitError):
    """This program used mcpkit wrongly: a bad argument, setting, config or call order."""


class InvalidArgument(UsageError, ValueError):
    """A bad value given to an mcpkit API (a constructor argument, a limit, a setting, a
    target); also a ValueError, which is what callers caught before the tree."""


class InvalidArgumentType(UsageError, TypeError):
    """An argument of a kind the mcpkit API does not take; also a TypeError."""


class InvalidState(UsageError, RuntimeError):
    """An mcpkit object used in a state that does not allow the call (not started, already
    running, shutting down); also a RuntimeError."""


class PeerError(McpkitError):
    """The remote peer (server or client on the other end) failed, refused or broke the
    protocol."""


class TransportError(McpkitError, ConnectionError):
    """The connection to the peer failed or ended; the message says what and where."""


class Timeout(McpkitError, TimeoutError):
    """An operation ran past its deadline."""
