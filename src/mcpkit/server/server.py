"""`Server`: registries of tools, resources, prompts and completions, and how to run them.

    server = Server("demo", "1.0.0")

    @server.tool()
    async def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    server.run_stdio()            # or server.run_http(port=8000), or mount server.asgi_app()

The `add_*` methods are the API; the decorators are sugar over them. One server object
serves both eras at once, over any number of transports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import capabilities, errors, versions
from mcpkit.protocol.request_state import RequestStateCodec
from mcpkit.server import admission, inputs
from mcpkit.server.call import Call
from mcpkit.server.connection import (
    DEFAULT_MAX_SUBSCRIPTION_URI_CHARS,
    DEFAULT_MAX_SUBSCRIPTIONS,
    Connection,
)
from mcpkit.server.context import Context
from mcpkit.server.notifier import Notifier
from mcpkit.server.prompts import PromptDef, build_prompt
from mcpkit.server.resource_auth import check_scope_names
from mcpkit.server.resources import (
    ResourceDef,
    TemplateDef,
    build_resource,
    build_template,
    is_template,
)
from mcpkit.server.tasks import TaskStore
from mcpkit.server.tools import ToolDef, build_tool

if TYPE_CHECKING:
    from mcpkit.server.engine import Engine

F = TypeVar("F", bound=Callable[..., Any])

# What each capability declares when offered (every list can change at run time).
_CAPABILITY_SETTINGS: dict[str, dict[str, Any]] = {
    "logging": {},
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "completions": {},
}
CompletionKey = tuple[str, str]


class Server:
    """An MCP server. See the module docstring for an example."""

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        icons: list[Any] | None = None,
        website_url: str | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.icons = icons
        self.website_url = website_url
        self.tools: dict[str, ToolDef] = {}
        self.resources: dict[str, ResourceDef] = {}
        self.templates: list[TemplateDef] = []
        self.prompts: dict[str, PromptDef] = {}
        self.completions: dict[CompletionKey, Callable[..., Any]] = {}
        self.extensions: dict[str, dict[str, Any]] = {}
        self.modern_versions: tuple[str, ...] = versions.MODERN_VERSIONS
        self.legacy_versions: tuple[str, ...] = versions.LEGACY_VERSIONS
        self.page_size: int | None = None
        self.max_subscriptions = DEFAULT_MAX_SUBSCRIPTIONS
        """Resources one legacy session may subscribe to; past it -32602."""
        self.max_subscription_uri_chars = DEFAULT_MAX_SUBSCRIPTION_URI_CHARS
        """The longest URI `resources/subscribe` accepts; past it -32602."""
        self.admission = admission.Admission()
        """Limits on concurrent requests per connection and per caller, and on batch members
        (admission.py); set its attributes to change them."""
        self.cache_ttl_ms = 0
        self.notifier = Notifier()
        self.tasks = TaskStore()  # the tasks extension: advertise it in `extensions` to use it
        self.state_codec = RequestStateCodec()
        self.roots_changed_callbacks: list[Callable[[Connection], Any]] = []
        self._engine: Engine | None = None

    # --- registration -----------------------------------------------------------------------

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        required_capabilities: dict[str, Any] | None = None,
        task_support: str | None = None,
        scopes: Iterable[str] = (),
    ) -> ToolDef:
        """Register `fn` as a tool. Schemas come from its type hints unless given (then they
        are kept verbatim); the docstring is the description unless one is given. `scopes`:
        the OAuth scopes a caller needs to see and call it (on a server with `ResourceAuth`)."""
        tool = build_tool(
            fn,
            name=name,
            context_type=Context,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            title=title,
            annotations=annotations,
            icons=icons,
            meta=meta,
            required_capabilities=required_capabilities,
            task_support=task_support,
            scopes=check_scope_names(scopes),
        )
        self.tools[tool.name] = tool
        return tool

    def tool(self, name: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator form of `add_tool`."""

        def register(fn: F) -> F:
            self.add_tool(fn, name=name, **options)
            return fn

        return register

    def remove_tool(self, name: str) -> None:
        self.tools.pop(name, None)

    def add_resource(
        self, fn_or_value: Any, uri: str, *, name: str | None = None, **options: Any
    ) -> ResourceDef:
        """Register a static resource: a reader function, or the content itself."""
        _scopes_option(options)
        resource = build_resource(fn_or_value, uri, name=name, context_type=Context, **options)
        self.resources[uri] = resource
        return resource

    def add_resource_template(
        self,
        fn: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        **options: Any,
    ) -> TemplateDef:
        """Register a reader for every URI matching `uri_template` (`{var}` → parameter)."""
        _scopes_option(options)
        template = build_template(fn, uri_template, name=name, context_type=Context, **options)
        self.templates.append(template)
        return template

    def resource(self, uri: str, *, name: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorator: a static resource, or a template when `uri` has `{variables}`."""

        def register(fn: F) -> F:
            if is_template(uri):
                self.add_resource_template(fn, uri, name=name, **options)
            else:
                self.add_resource(fn, uri, name=name, **options)
            return fn

        return register

    def add_prompt(
        self, fn: Callable[..., Any], *, name: str | None = None, **options: Any
    ) -> PromptDef:
        _scopes_option(options)
        prompt = build_prompt(fn, name=name, context_type=Context, **options)
        self.prompts[prompt.name] = prompt
        return prompt

    def prompt(self, name: str | None = None, **options: Any) -> Callable[[F], F]:
        def register(fn: F) -> F:
            self.add_prompt(fn, name=name, **options)
            return fn

        return register

    def remove_prompt(self, name: str) -> None:
        self.prompts.pop(name, None)

    def add_completion(
        self,
        fn: Callable[..., Any],
        *,
        prompt: str | None = None,
        resource_template: str | None = None,
    ) -> None:
        """Register `fn(argument, value, context) -> list[str]` for a prompt's or template's
        arguments (or for every ref when neither is named)."""
        if prompt is not None:
            self.completions[("ref/prompt", prompt)] = fn
        elif resource_template is not None:
            self.completions[("ref/resource", resource_template)] = fn
        else:
            self.completions[("*", "*")] = fn

    def completion(self, **options: Any) -> Callable[[F], F]:
        def register(fn: F) -> F:
            self.add_completion(fn, **options)
            return fn

        return register

    # --- what the server says about itself --------------------------------------------------

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        if self.icons is not None:
            info["icons"] = self.icons
        if self.website_url is not None:
            info["websiteUrl"] = self.website_url
        return info

    def has_capability(self, name: str) -> bool:
        """Whether the server offers `name` right now: its registry is not empty (logging is
        always offered). Cheap: the engine asks on every request."""
        if name == "logging":
            return True
        if name == "tools":
            return bool(self.tools)
        if name == "resources":
            return bool(self.resources or self.templates)
        if name == "prompts":
            return bool(self.prompts)
        if name == "completions":
            return bool(self.completions)
        return False

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {
            name: dict(settings)
            for name, settings in _CAPABILITY_SETTINGS.items()
            if self.has_capability(name)
        }
        if self.extensions:
            caps["extensions"] = dict(self.extensions)
        return caps

    def cache_hint(self, method: str) -> tuple[int, str]:
        """(ttlMs, cacheScope) for a cacheable modern result."""
        return self.cache_ttl_ms, "private" if method == "resources/read" else "public"

    def tool_list(self, auth: AuthInfo | None = None) -> list[ToolDef]:
        """The tools, or those a caller with `auth` may see (its scopes allow them)."""
        if auth is None:
            return list(self.tools.values())
        return [t for t in self.tools.values() if t.scopes <= auth.scopes]

    def scopes_needed(self, method: str, params: dict[str, Any]) -> frozenset[str]:
        """The scopes a `tools/call`, `resources/read`, `prompts/get` or
        `completion/complete` needs: those of the item it names (none for other methods,
        and for names that are not registered: the handler answers those as unknown)."""
        if method == "completion/complete":
            return self._completion_scopes(params.get("ref"))
        name = params.get("name")
        if method == "tools/call" and isinstance(name, str):
            tool = self.tools.get(name)
            return tool.scopes if tool is not None else frozenset()
        if method == "prompts/get" and isinstance(name, str):
            prompt = self.prompts.get(name)
            return prompt.scopes if prompt is not None else frozenset()
        uri = params.get("uri")
        if method == "resources/read" and isinstance(uri, str):
            resource = self.resources.get(uri)
            if resource is not None:
                return resource.scopes
            for template in self.templates:  # the first that matches reads it (handlers.py)
                if template.match(uri) is not None:
                    return template.scopes
        return frozenset()

    def honoured_filter(self, wanted: dict[str, Any]) -> dict[str, Any]:
        """The part of a `subscriptions/listen` filter this server can honour."""
        caps = self.capabilities()
        honoured: dict[str, Any] = {}
        for key, cap in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(key) is True and cap in caps:
                honoured[key] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list) and "resources" in caps:
            honoured["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
        return honoured

    def completion_key(self, ref: dict[str, Any]) -> CompletionKey:
        kind = ref.get("type")
        if kind == "ref/prompt":
            name = ref.get("name")
            if not isinstance(name, str) or name not in self.prompts:
                raise errors.invalid_params(f"Unknown prompt: {name}")
            return (kind, name)
        if kind == "ref/resource":
            uri = ref.get("uri")
            known = {t.uri_template for t in self.templates} | set(self.resources)
            if not isinstance(uri, str) or uri not in known:
                raise errors.invalid_params(f"Unknown resource or template: {uri}")
            return (kind, uri)
        raise errors.invalid_params(f"unknown ref type {kind!r}")

    # --- request plumbing (used by the engine and handlers) --------------------------------

    @property
    def engine(self) -> Engine:
        """The engine that answers requests (made on first use: it imports the handlers)."""
        if self._engine is None:
            from mcpkit.server.engine import Engine

            self._engine = Engine(self)
        return self._engine

    def _completion_scopes(self, ref: Any) -> frozenset[str]:
        """A completion asks about a prompt or a resource (template): it needs their scopes."""
        if not isinstance(ref, dict):
            return frozenset()
        name, uri = ref.get("name"), ref.get("uri")
        if ref.get("type") == "ref/prompt" and isinstance(name, str):
            prompt = self.prompts.get(name)
            return prompt.scopes if prompt is not None else frozenset()
        if ref.get("type") == "ref/resource" and isinstance(uri, str):
            resource = self.resources.get(uri)
            if resource is not None:
                return resource.scopes
            template = next((t for t in self.templates if t.uri_template == uri), None)
            return template.scopes if template is not None else frozenset()
        return frozenset()

    def require_client_capabilities(self, required: dict[str, Any], call: Call) -> None:
        missing = capabilities.missing_capabilities(required, call.client_capabilities)
        if missing:
            raise errors.missing_client_capability(missing)

    def make_context(self, call: Call) -> Context:
        """The context of a handler run; in a modern retry, with the verified answers."""
        answers: dict[str, Any] = {}
        state: Any = None
        if call.modern:
            token = call.params.get("requestState")
            if token is not None:
                opened = self.state_codec.open(
                    token, call.method, call.params, principal=call.principal
                )
                answers, state = opened.answers, opened.state
            answers = inputs.candidate_answers(call.params.get("inputResponses"), answers)
        return Context(self, call, answers=answers, state=state)

    def input_required_result(
        self, call: Call, ctx: Context, need: inputs._InputRequired
    ) -> dict[str, Any]:
        token = self.state_codec.seal(
            call.method,
            call.params,
            state=ctx.state,
            answers=ctx.accepted,
            principal=call.principal,
        )
        return {
            "resultType": "input_required",
            "inputRequests": need.requests,
            "requestState": token,
        }

    async def on_roots_changed(self, connection: Connection) -> None:
        for callback in self.roots_changed_callbacks:
            outcome = callback(connection)
            if hasattr(outcome, "__await__"):
                await outcome

    # --- notifications ----------------------------------------------------------------------

    async def notify_list_changed(self, kind: str, *, principal: str | None = None) -> None:
        """Tell listening clients (or only `principal`'s) that the list of `kind` ("tools",
        "prompts", "resources") changed."""
        await self.notifier.list_changed(kind, principal=principal)

    async def notify_resource_updated(self, uri: str) -> None:
        await self.notifier.resource_updated(uri)

    # --- running ---------------------------------------------------------------------------

    def run_stdio(self, **options: Any) -> None:
        """Serve on stdin/stdout until stdin closes (`options`: those of `serve_stdio`, e.g.
        `max_write_buffer_bytes`)."""
        from mcpkit.transports.server.stdio import run_stdio_server

        run_stdio_server(self, **options)

    def asgi_app(self, **options: Any) -> Any:
        """The Streamable HTTP (and HTTP+SSE, WebSocket) endpoints as an ASGI app;
        `authorization=ResourceAuth(...)` protects them (OAuth resource server)."""
        from mcpkit.transports.server.http.app import McpAsgiApp

        return McpAsgiApp(self, **options)

    def run_http(self, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
        """Serve Streamable HTTP at http://host:port/mcp with uvicorn (`options`: those of
        `asgi_app`, such as `authorization=ResourceAuth(...)`, and of `serve`)."""
        from mcpkit.transports.server.http.serve import run_http

        run_http(self, host=host, port=port, **options)


def _scopes_option(options: dict[str, Any]) -> None:
    if "scopes" in options:
        options["scopes"] = check_scope_names(options["scopes"])
