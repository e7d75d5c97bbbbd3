"""How the client answers what a server asks of it: sampling, elicitation and roots.

One implementation serves both eras: in a legacy session these are server→client requests;
in the modern era they arrive as `inputRequests` of an `input_required` result (MRTR) and
the answers travel back as `inputResponses`. Either way `Responders.answer(method, params)`
produces the result. The capabilities the client declares follow from what is configured
here, so a server is never told the client can do something it cannot.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec

from mcpkit.client.tasks import EXTENSION as TASKS_EXTENSION
from mcpkit.protocol import errors, types
from mcpkit.protocol.versions import Era, era_of

SamplingHandler: TypeAlias = Callable[
    [types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | dict[str, Any]]
]
"""Asks the client's model: gets the request's params, returns a CreateMessageResult."""
ElicitationHandler: TypeAlias = Callable[
    [types.ElicitRequestParams], Awaitable[types.ElicitResult | dict[str, Any]]
]
"""Asks the user: form mode (`params.requested_schema`) or URL mode (`params.url`)."""
RootLike: TypeAlias = types.Root | dict[str, Any] | str
RootsSource: TypeAlias = Sequence[RootLike] | Callable[[], Awaitable[Sequence[RootLike]]]
"""The roots to offer: a list (URIs or Root objects), or an async function returning one."""

_LEGACY_WITHOUT_ELICITATION = ("2024-11-05", "2025-03-26")
_WITH_MODES_AND_SAMPLING_TOOLS = ("2025-11-25", "2026-07-28")


@dataclass(slots=True)
class Responders:
    sampling: SamplingHandler | None = None
    sampling_tools: bool = False
    """Whether the sampling handler accepts `tools`/`toolChoice` (declares sampling.tools)."""
    elicitation: ElicitationHandler | None = None
    elicitation_modes: tuple[str, ...] = ("form",)
    """Which elicitation modes the handler supports: "form", "url" or both."""
    roots: RootsSource | None = None
    extensions: dict[str, Any] = field(default_factory=dict)
    """Extensions to declare (modern era: `capabilities.extensions`)."""

    def capabilities(self, version: str) -> dict[str, Any]:
        """The client capabilities to declare at `version`."""
        caps: dict[str, Any] = {}
        if self.sampling is not None:
            caps["sampling"] = {}
            if self.sampling_tools and version in _WITH_MODES_AND_SAMPLING_TOOLS:
                caps["sampling"]["tools"] = {}
        if self.elicitation is not None and version not in _LEGACY_WITHOUT_ELICITATION:
            caps["elicitation"] = (
                {mode: {} for mode in self.elicitation_modes}
                if version in _WITH_MODES_AND_SAMPLING_TOOLS else {}
            )
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.extensions and era_of(version) is Era.MODERN:
            caps["extensions"] = dict(self.extensions)
        return caps

    async def answer(self, method: str, params: dict[str, Any]) -> Any:
        """The result for one server request; raises `McpError` to refuse it."""
        if method == "ping":
            return {}
        if method == "sampling/createMessage":
            return await self._sample(params)
        if method == "elicitation/create":
            return await self._elicit(params)
        if method == "roots/list":
            return {"roots": await self.list_roots()}
        raise errors.method_not_found(method)

    async def _sample(self, params: dict[str, Any]) -> Any:
        if self.sampling is None:
            raise errors.ProtocolError(errors.METHOD_NOT_FOUND,
                                       "this client does not offer sampling")
        request = _convert(params, types.CreateMessageRequestParams, "sampling/createMessage")
        if request.tools is not msgspec.UNSET and not self.sampling_tools:
            raise errors.invalid_params("this client's sampling does not support tools")
        return _plain(await self.sampling(request))

    async def _elicit(self, params: dict[str, Any]) -> Any:
        if self.elicitation is None:
            raise errors.ProtocolError(errors.METHOD_NOT_FOUND,
                                       "this client does not offer elicitation")
        request = _convert(params, types.ElicitRequestParams, "elicitation/create")
        mode = request.mode if request.mode is not msgspec.UNSET else "form"
        if mode not in self.elicitation_modes:
            raise errors.invalid_params(f"this client does not support {mode} elicitation")
        return _plain(await self.elicitation(request))

    async def list_roots(self) -> list[dict[str, Any]]:
        source = self.roots
        if source is None:
            raise errors.ProtocolError(errors.METHOD_NOT_FOUND, "this client offers no roots")
        listed: Any = source
        if callable(source):
            listed = source()
            if inspect.isawaitable(listed):
                listed = await listed
        return [_root(item) for item in listed]


class DeclaredCapabilities:
    """The capabilities a client declares at each version, computed once per version
    (they follow from its `Responders`, fixed once the client is built): as they are,
    and with the modern Tasks extension added (declared on the requests of a call to a
    tool that requires task execution)."""

    def __init__(self, responders: Responders) -> None:
        self._responders = responders
        self._plain: dict[str, dict[str, Any]] = {}
        self._with_tasks: dict[str, dict[str, Any]] = {}

    def at(self, version: str) -> dict[str, Any]:
        caps = self._plain.get(version)
        if caps is None:
            caps = self._plain[version] = self._responders.capabilities(version)
        return caps

    def with_tasks(self, version: str) -> dict[str, Any]:
        caps = self._with_tasks.get(version)
        if caps is None:
            base = self.at(version)
            extensions = base.get("extensions")
            caps = self._with_tasks[version] = {
                **base, "extensions": {**(extensions if isinstance(extensions, dict) else {}),
                                       TASKS_EXTENSION: {}}}
        return caps


def _convert(params: dict[str, Any], type_: Any, method: str) -> Any:
    try:
        return msgspec.convert(params, type_)
    except msgspec.ValidationError as exc:
        raise errors.invalid_params(f"{method}: {exc}") from None


def _plain(result: Any) -> Any:
    """A handler's result as JSON-ready values (structs are converted)."""
    return msgspec.to_builtins(result)


def _root(item: RootLike) -> dict[str, Any]:
    if isinstance(item, str):
        return {"uri": item}
    if isinstance(item, dict):
        return item
    return msgspec.to_builtins(item)  # type: ignore[no-any-return]


def form_defaults(requested_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The `default` of every property of a form elicitation schema (for auto-accepting)."""
    props = (requested_schema or {}).get("properties")
    if not isinstance(props, dict):
        return {}
    return {
        name: prop["default"]
        for name, prop in props.items()
        if isinstance(prop, dict) and "default" in prop
    }
