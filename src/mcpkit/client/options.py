"""The grouped settings of a `Client`, and the flat keyword arguments they replace.

    Client(url)                                   # everything by default
    Client(url, bearer_token="…")                 # shortcut for connect=ConnectOptions(…)
    Client(["python", "server.py"], era="legacy",
           connect=ConnectOptions(env={"DEBUG": "1"}),
           timeouts=Timeouts(timeout=10),
           responders=Responders(sampling=ask_model),
           notifications=Notifications(on_log=print),
           limits=Limits(input_rounds=3),
           behaviour=Behaviour(tasks=True))

Each group is a value object (`ConnectOptions` in targets.py, `Timeouts` in session.py,
`Responders` in responders.py, `Notifications` in notifications.py, `Limits` and
`Behaviour` here). The flat keyword arguments of earlier releases (`timeout=`, `sampling=`,
`env=`, …) still work for one release: `settle` folds each into its group and
warns with a `DeprecationWarning` that names the new form.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpkit import __version__
from mcpkit.auth.provider import HttpAuth
from mcpkit.client import legacy_tasks
from mcpkit.client.listing import ListLimits
from mcpkit.client.notifications import Notifications
from mcpkit.client.responders import Responders
from mcpkit.client.session import InboundLimits, Timeouts
from mcpkit.client.targets import ConnectOptions
from mcpkit.client.tasks import EXTENSION as TASKS_EXTENSION
from mcpkit.errors import InvalidArgument, InvalidArgumentType

MAX_INPUT_ROUNDS = 10
"""`input_required` rounds of one modern request before the client gives up."""


def _mcpkit_identity() -> dict[str, Any]:
    return {"name": "mcpkit", "version": __version__}


@dataclass(frozen=True, slots=True)
class Limits:
    """How much the client lets a server make it do (past each: a precise error)."""

    input_rounds: int = MAX_INPUT_ROUNDS
    """`input_required` rounds of one modern request (TooManyInputRounds past it)."""
    task_polls: int = legacy_tasks.DEFAULT_MAX_POLLS
    """`tasks/get` polls while `call_tool` follows one task (TaskPollLimit past it)."""
    inbound: InboundLimits = field(default_factory=InboundLimits)
    """What the server makes the client do on its own at once (server requests answered,
    notification handlers running)."""
    lists: ListLimits = field(default_factory=ListLimits)
    """What `list_tools()` and friends fetch page by page (ListTooLarge past it)."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What the client says about itself and does on its own initiative."""

    client_info: Mapping[str, Any] = field(default_factory=_mcpkit_identity)
    """The `clientInfo` sent to servers (name, version, …)."""
    log_level: str | None = None
    """The server log level to ask for once connected (None: the server's default)."""
    validate_output: bool = True
    """Check a tool's `structuredContent` against its `outputSchema` (InvalidToolOutput)."""
    tasks: bool = False
    """Run tools whose task support is "optional" as tasks too (and declare the modern
    Tasks extension on every request); "required" ones always run as tasks."""


GROUPS: dict[str, type[Any]] = {
    "connect": ConnectOptions, "timeouts": Timeouts, "responders": Responders,
    "notifications": Notifications, "limits": Limits, "behaviour": Behaviour,
}
"""The `Client` parameter of each group, and its value object."""

OLD_KEYWORDS: dict[str, tuple[str, str]] = {
    "transport": ("connect", "kind"),
    "headers": ("connect", "headers"),
    "env": ("connect", "env"),
    "inherit_env": ("connect", "inherit_env"),
    "cwd": ("connect", "cwd"),
    "resolver": ("connect", "resolver"),
    "connect_timeout": ("connect", "connect_timeout"),
    "probe_timeout": ("connect", "probe_timeout"),
    "timeout": ("timeouts", "timeout"),
    "max_timeout": ("timeouts", "maximum"),
    "reset_timeout_on_progress": ("timeouts", "reset_on_progress"),
    "sampling": ("responders", "sampling"),
    "sampling_tools": ("responders", "sampling_tools"),
    "elicitation": ("responders", "elicitation"),
    "elicitation_modes": ("responders", "elicitation_modes"),
    "roots": ("responders", "roots"),
    "on_log": ("notifications", "on_log"),
    "on_list_changed": ("notifications", "on_list_changed"),
    "on_resource_updated": ("notifications", "on_resource_updated"),
    "on_notification": ("notifications", "on_notification"),
    "max_input_rounds": ("limits", "input_rounds"),
    "max_task_polls": ("limits", "task_polls"),
    "inbound_limits": ("limits", "inbound"),
    "list_limits": ("limits", "lists"),
    "client_info": ("behaviour", "client_info"),
    "log_level": ("behaviour", "log_level"),
    "validate_output": ("behaviour", "validate_output"),
    "tasks": ("behaviour", "tasks"),
}
"""Each keyword argument `Client` took before issue 22 → (its group, the group's field).
`version=` is the other old one: `era=` now takes a protocol version too."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Every group of a `Client`, settled: given, defaulted, or folded from old keywords."""

    connect: ConnectOptions
    timeouts: Timeouts
    responders: Responders
    notifications: Notifications
    limits: Limits
    behaviour: Behaviour


def settle(groups: dict[str, Any], bearer_token: str | None,
           old: Mapping[str, Any], auth: HttpAuth | None = None) -> Settings:
    """The `Client` groups (parameter name → value object or None) with the old flat
    keywords folded in (a `DeprecationWarning` each, pointing at the caller of `Client()`,
    who calls `Client.__init__`, which calls this), the `bearer_token` shortcut in
    `connect` (and `auth`, the authorization group: `mcpkit.client.oauth.OAuth` or any
    `HttpAuth`), and `Behaviour(tasks=True)`'s extension declared by the responders. An
    unknown keyword is a TypeError, as it always was."""
    changes: dict[str, dict[str, Any]] = {}
    for name, value in old.items():
        if name not in OLD_KEYWORDS:
            raise InvalidArgumentType(f"Client() got an unexpected keyword argument {name!r}")
        group, attribute = OLD_KEYWORDS[name]
        warnings.warn(
            f"Client({name}=…) is deprecated and will be removed in the next release: "
            f"use Client({group}={GROUPS[group].__name__}({attribute}=…))",
            DeprecationWarning, stacklevel=3)
        changes.setdefault(group, {})[attribute] = (
            tuple(value) if name == "elicitation_modes" else value)
    settled = {name: dataclasses.replace(groups[name] or kind(), **changes.get(name, {}))
               if name in changes else groups[name] or kind()
               for name, kind in GROUPS.items()}
    settled["connect"] = _with_token(settled["connect"], bearer_token, auth)
    settled["responders"] = _with_tasks(settled["responders"], settled["behaviour"].tasks)
    return Settings(**settled)


def warn_old_version() -> None:
    """`Client(version=…)`: deprecated in favour of `era=` (called from `Client.__init__`)."""
    warnings.warn(
        "Client(version=…) is deprecated and will be removed in the next release: use "
        "Client(era=\"2025-11-25\") (era takes a protocol version too)",
        DeprecationWarning, stacklevel=3)


def _with_token(connect: ConnectOptions, bearer_token: str | None,
                auth: HttpAuth | None) -> ConnectOptions:
    if auth is not None:
        if not isinstance(auth, HttpAuth):
            raise InvalidArgumentType("auth= takes an OAuth(…) (or another HttpAuth)")
        connect = dataclasses.replace(connect, auth=auth)
    if bearer_token is None:
        return connect
    if connect.bearer_token not in (None, bearer_token):
        raise InvalidArgument("two bearer tokens: give it once, as bearer_token= or in connect=")
    return dataclasses.replace(connect, bearer_token=bearer_token)


def _with_tasks(responders: Responders, tasks: bool) -> Responders:
    if not tasks or TASKS_EXTENSION in responders.extensions:
        return responders
    return dataclasses.replace(
        responders, extensions={**responders.extensions, TASKS_EXTENSION: {}})
