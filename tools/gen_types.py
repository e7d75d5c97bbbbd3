#!/usr/bin/env python3
"""Generate ``mcpkit.protocol.types`` from the MCP specification's JSON schemas.

Usage::

    .venv/bin/python tools/gen_types.py [--spec-dir DIR] [--out-dir DIR] [--report] [--no-ruff]

Reads ``<spec-dir>/<version>/schema.json`` for every protocol version in ``VERSIONS`` and writes
one module per domain into ``src/mcpkit/protocol/types/`` plus ``methods.py`` (method tables) and
``__init__.py`` (re-exports).  The output is deterministic; afterwards ``ruff format`` and
``ruff check --fix`` (import sorting, ``__all__`` sorting) are run on it when ruff is available.

Model (see also the module docstrings written into the output):

* one msgspec Struct per object definition, one type alias per union/primitive definition, named
  exactly like the definition; the union over all versions: a field is required only when every
  version that has the definition requires it, version-specific fields are optional (``UNSET``);
* field types come from the newest version that has the field, except inline objects, whose
  properties are merged across versions into a generated nested Struct (``<Owner><Field>``);
* request/notification ``params`` written inline in older schemas are merged into the named
  ``...Params`` definition of newer schemas (or a generated ``<Message>Params`` struct);
* unions whose members all carry a distinct ``const`` on ``type``/``method``/``mode`` become msgspec
  tagged unions; other struct unions cannot be decoded by msgspec and are typing-only aliases
  (fields that would use them are typed ``Any``), see ``UNDECODABLE_UNIONS`` in methods.py.

Only the standard library and msgspec are used.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC_DIR = Path(os.environ.get("MCPKIT_SPEC_DIR")
                        or ROOT.parent / "shared" / "spec" / "schema")
DEFAULT_OUT_DIR = ROOT / "src" / "mcpkit" / "protocol" / "types"

VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
LATEST = VERSIONS[-1]

# --------------------------------------------------------------------------------------------
# Hand-made decisions (everything else is derived from the schemas)
# --------------------------------------------------------------------------------------------

#: Definitions emitted as a plain alias instead of what the schema would give, with the reason.
ALIAS_OVERRIDES: dict[str, tuple[str, str]] = {
    "JSONValue": ("Any", "recursive JSON value; msgspec decodes any JSON into builtins"),
    "JSONObject": ("dict[str, Any]", "a JSON object"),
    "JSONArray": ("list[Any]", "a JSON array"),
    "ResourceReference": (
        "ResourceTemplateReference",
        "renamed to ResourceTemplateReference in 2025-06-18 (same wire shape, same tag)",
    ),
    "GetTaskPayloadResult": (
        "dict[str, Any]",
        "the payload is the underlying request's result; a Struct would drop its fields",
    ),
    "InputResponses": (
        "dict[str, Any]",
        "values are CreateMessageResult | ListRootsResult | ElicitResult (an untagged union "
        "msgspec cannot decode): convert each value with REQUEST_RESULTS[<method of the "
        "matching input request>]",
    ),
}

#: Union definitions over the protocol's messages; their members are merged across versions.
MESSAGE_UNIONS = (
    "ClientRequest",
    "ServerRequest",
    "ClientNotification",
    "ServerNotification",
    "ClientResult",
    "ServerResult",
)

#: Fields whose value is a JSON Schema: kept verbatim as ``dict[str, Any]``.
SCHEMA_FIELDS = {
    ("Tool", "inputSchema"),
    ("Tool", "outputSchema"),
    ("ElicitRequestFormParams", "requestedSchema"),
    ("ElicitRequestParams", "requestedSchema"),
}

#: Field type overrides: (owner, json field name) -> type expression.
FIELD_OVERRIDES: dict[tuple[str, str], str] = {
    # 2024-11-05 inlined the Annotations object; later versions reference the definition.
    ("Annotated", "annotations"): "Annotations",
    # Legacy JSONRPCError inlines the error object that later versions call Error.
    ("JSONRPCError", "error"): "Error",
}

#: Struct definitions emitted as subclasses of a decodable "either" struct that has the fields of
#: all of them (see the content.py and elicitation.py docstrings).
SUBCLASSES: dict[str, str] = {
    "TextResourceContents": "ResourceContents",
    "BlobResourceContents": "ResourceContents",
    "ElicitRequestFormParams": "ElicitRequestParams",
    "ElicitRequestURLParams": "ElicitRequestParams",
}

#: Union definitions emitted as such an "either" struct instead of a union alias: the form
#: variant may omit ``mode`` (the spec's own 2026-07-28 examples do), so a msgspec tagged union
#: on ``mode`` would reject valid messages.
EITHER_STRUCTS = {"ElicitRequestParams"}

#: Inline unions replaced by a single decodable struct: frozenset(members) -> struct name.
UNION_REPLACEMENTS: dict[frozenset[str], str] = {
    frozenset({"TextResourceContents", "BlobResourceContents"}): "ResourceContents",
}

#: Fields referencing these definitions hold the open object itself (kept verbatim).
OPEN_OBJECT_REFS = {"Result": "dict[str, Any]"}

#: Candidate discriminator properties for tagged unions, in order of preference.
TAG_CANDIDATES = ("type", "method", "mode")

#: Names that must not be used as Python field names (they would shadow names used in
#: annotations inside the class body, or are keywords).
RESERVED = {"list", "dict", "str", "int", "float", "bool", "bytes", "set", "tuple", "object"}
RESERVED |= {"Any", "Literal", "UnsetType", "UNSET", "field", "None", "True", "False"}

MODULES: dict[str, tuple[str, list[str]]] = {
    "base": (
        "Shared building blocks: metadata, annotations, ids, base request/result shapes.",
        """Annotated Annotations BaseMetadata CacheableResult Cursor EmptyResult Icon Icons
        Implementation InputResponses JSONArray JSONObject JSONValue LoggingLevel MetaObject
        Notification NotificationMetaObject NotificationParams PaginatedRequest
        PaginatedRequestParams PaginatedResult ProgressToken Request RequestId RequestParams
        Result ResultMetaObject ResultType Role""".split(),
    ),
    "jsonrpc": (
        "JSON-RPC envelopes and error objects.",
        """Error HeaderMismatchError InternalError InvalidParamsError InvalidRequestError
        JSONRPCBatchRequest JSONRPCBatchResponse JSONRPCError JSONRPCErrorResponse JSONRPCMessage
        JSONRPCNotification JSONRPCRequest JSONRPCResponse JSONRPCResultResponse
        MethodNotFoundError MissingRequiredClientCapabilityError ParseError
        URLElicitationRequiredError UnsupportedProtocolVersionError""".split(),
    ),
    "content": (
        "Content blocks (tagged on ``type``) and resource contents.",
        """AudioContent BlobResourceContents ContentBlock EmbeddedResource ImageContent
        ResourceContents ResourceLink SamplingMessageContentBlock TextContent TextResourceContents
        ToolResultContent ToolUseContent""".split(),
    ),
    "tasks": (
        "Tasks (2025-11-25).",
        """CancelTaskRequest CancelTaskResult CreateTaskResult GetTaskPayloadRequest
        GetTaskPayloadResult GetTaskRequest GetTaskResult ListTasksRequest ListTasksResult
        RelatedTaskMetadata Task TaskAugmentedRequestParams TaskMetadata TaskStatus
        TaskStatusNotification TaskStatusNotificationParams""".split(),
    ),
    "lifecycle": (
        "Lifecycle: initialize (legacy), server/discover (2026-07-28), capabilities, ping.",
        """ClientCapabilities DiscoverRequest DiscoverResult DiscoverResultResponse
        InitializeRequest InitializeRequestParams InitializeResult InitializedNotification
        PingRequest RequestMetaObject ServerCapabilities""".split(),
    ),
    "notifications": (
        "Cancellation, progress, logging and subscriptions (subscriptions/listen, 2026-07-28).",
        """CancelledNotification CancelledNotificationParams LoggingMessageNotification
        LoggingMessageNotificationParams ProgressNotification ProgressNotificationParams
        SetLevelRequest SetLevelRequestParams SubscriptionFilter
        SubscriptionsAcknowledgedNotification SubscriptionsAcknowledgedNotificationParams
        SubscriptionsListenRequest SubscriptionsListenRequestParams SubscriptionsListenResult
        SubscriptionsListenResultMetaObject SubscriptionsListenResultResponse""".split(),
    ),
    "completion": (
        "Argument completion (completion/complete) and its references (tagged on ``type``).",
        """CompleteRequest CompleteRequestParams CompleteResult CompleteResultResponse
        PromptReference ResourceReference ResourceTemplateReference""".split(),
    ),
    "roots": (
        "Roots (roots/list).",
        "ListRootsRequest ListRootsResult Root RootsListChangedNotification".split(),
    ),
    "tools": (
        "Tools (tools/list, tools/call).",
        """CallToolRequest CallToolRequestParams CallToolResult CallToolResultResponse
        ListToolsRequest ListToolsResult ListToolsResultResponse Tool ToolAnnotations ToolExecution
        ToolListChangedNotification""".split(),
    ),
    "resources": (
        "Resources (resources/list, resources/read, templates, subscriptions).",
        """ListResourceTemplatesRequest ListResourceTemplatesResult
        ListResourceTemplatesResultResponse ListResourcesRequest ListResourcesResult
        ListResourcesResultResponse ReadResourceRequest ReadResourceRequestParams
        ReadResourceResult ReadResourceResultResponse Resource ResourceListChangedNotification
        ResourceRequestParams ResourceTemplate ResourceUpdatedNotification
        ResourceUpdatedNotificationParams SubscribeRequest SubscribeRequestParams
        UnsubscribeRequest UnsubscribeRequestParams""".split(),
    ),
    "prompts": (
        "Prompts (prompts/list, prompts/get).",
        """GetPromptRequest GetPromptRequestParams GetPromptResult GetPromptResultResponse
        ListPromptsRequest ListPromptsResult ListPromptsResultResponse Prompt PromptArgument
        PromptListChangedNotification PromptMessage""".split(),
    ),
    "sampling": (
        "Sampling (sampling/createMessage).",
        """CreateMessageRequest CreateMessageRequestParams CreateMessageResult ModelHint
        ModelPreferences SamplingMessage ToolChoice""".split(),
    ),
    "elicitation": (
        "Elicitation (elicitation/create) and the restricted schemas of elicitation forms.",
        """BooleanSchema ElicitRequest ElicitRequestFormParams ElicitRequestParams
        ElicitRequestURLParams ElicitResult ElicitationCompleteNotification EnumSchema
        LegacyTitledEnumSchema MultiSelectEnumSchema NumberSchema PrimitiveSchemaDefinition
        SingleSelectEnumSchema StringSchema TitledMultiSelectEnumSchema
        TitledSingleSelectEnumSchema UntitledMultiSelectEnumSchema
        UntitledSingleSelectEnumSchema""".split(),
    ),
    "inputs": (
        "Multi round-trip input requests/responses (InputRequiredResult, 2026-07-28).",
        """InputRequest InputRequests InputRequiredResult InputResponse
        InputResponseRequestParams""".split(),
    ),
    "messages": (
        "Unions of every request, notification and result, per direction, over all versions.",
        list(MESSAGE_UNIONS),
    ),
}

MODULE_NOTES: dict[str, str] = {
    "base": """
Conventions used by every generated module:

* ``McpModel`` is the base of every struct: keyword-only, ``omit_defaults=True``, camelCase wire
  names; unknown fields are ignored when decoding.
* Optional fields default to ``msgspec.UNSET`` and are omitted when encoding.  A field is required
  only when every protocol version that has the definition requires it.  ``None`` appears only
  where the schema allows JSON null.
* ``_meta`` is always ``meta: dict[str, Any]`` (wire name ``_meta``) and always optional, also
  where 2026-07-28 requires it; ``RequestMetaObject``/``ResultMetaObject``/... are structs that
  can be obtained from it with ``msgspec.convert(meta, RequestMetaObject)``.
* A ``const`` field required in every version (``jsonrpc`` of the generic envelopes, error
  ``code``, schema ``type``...) defaults to the constant and its struct sets
  ``omit_defaults=False`` so it is always written.  Otherwise it is optional like any other field:
  e.g. ``CallToolRequest.jsonrpc`` is UNSET by default because the 2024-11-05..2025-06-18 message
  definitions and the 2026-07-28 input requests (``InputRequest``) have no ``jsonrpc``.
* Request/notification structs are tagged on ``method``: the method is not an attribute, read it
  with ``type(msg).__struct_config__.tag`` (or use the tables in methods.py).
* ``Result`` allows additional properties: fields of envelope type ``Result`` (e.g.
  ``JSONRPCResultResponse.result``) are ``dict[str, Any]`` so nothing is dropped.
""",
    "content": """
Resource contents: ``TextResourceContents | BlobResourceContents`` has no discriminator, so
msgspec cannot decode that union.  ``ResourceContents`` is therefore the decodable "either"
struct (uri, mimeType, _meta plus optional ``text`` and ``blob``); ``TextResourceContents``
and ``BlobResourceContents`` subclass it and make ``text`` / ``blob`` required.  Fields that
the schema types as the union (``EmbeddedResource.resource``,
``ReadResourceResult.contents``) are typed ``ResourceContents``: decoding yields a
``ResourceContents`` (check ``.text``/``.blob``), constructing accepts either subclass.

Content blocks are tagged unions on ``type``.
""",
    "elicitation": """
Elicitation params: the schema's ``ElicitRequestFormParams | ElicitRequestURLParams`` is
discriminated by ``mode``, but the form variant may omit ``mode`` (the 2026-07-28 examples do;
2025-06-18 has no ``mode`` at all), so a msgspec tagged union would reject valid messages.
``ElicitRequestParams`` is therefore a decodable "either" struct with the fields of both
(``mode`` is UNSET, "form" or "url"; UNSET means form), and ``ElicitRequestFormParams`` /
``ElicitRequestURLParams`` subclass it with their required fields.  ``ElicitRequest.params`` is
typed ``ElicitRequestParams``: decoding yields that struct (dispatch on ``params.mode``, or
re-convert with ``msgspec.convert(msgspec.to_builtins(p), ElicitRequestURLParams)``);
constructing accepts either subclass.  ``ElicitRequestURLParams`` always writes ``mode``;
the form struct writes it only when set.  The 2025-06-18 inline params are the form shape.

The elicitation form schemas (``StringSchema``, ``NumberSchema``, ``BooleanSchema``, the enum
schemas) are structs for building schemas, but the unions over them
(``PrimitiveSchemaDefinition``, ``EnumSchema``, ``SingleSelectEnumSchema``,
``MultiSelectEnumSchema``) share discriminator values, so they are typing-only aliases, and
``ElicitRequestFormParams.requested_schema`` is a verbatim ``dict[str, Any]`` (turn a schema
struct into a dict with ``msgspec.to_builtins``).  In 2025-06-18 ``EnumSchema`` was an object;
that shape is ``LegacyTitledEnumSchema``.
""",
    "jsonrpc": """
The envelope unions (``JSONRPCMessage``, ``JSONRPCResponse``, batches) have no discriminator
msgspec can use: they are typing-only aliases.  ``params``/``result`` of the generic envelopes
are verbatim dicts.  Error structs with a fixed ``code`` default it.  Until 2025-06-18
``JSONRPCResponse`` was the success envelope (now ``JSONRPCResultResponse``, which has that shape)
and ``JSONRPCError`` the error envelope; from 2025-11-25 ``JSONRPCResponse`` is the union.
""",
    "inputs": """
``InputRequest`` is a tagged union on ``method``; ``InputResponse`` (results) is untagged and
typing-only, hence ``InputResponses`` is ``dict[str, Any]`` (see base.py).
""",
    "messages": """
Requests and notifications are tagged unions on ``method`` (decode a whole message with e.g.
``msgspec.convert(obj, ClientRequest)``).  ``ClientResult``/``ServerResult`` are untagged and
typing-only: decode a result with ``REQUEST_RESULTS[method]`` from methods.py.
""",
}


# --------------------------------------------------------------------------------------------
# Schema model
# --------------------------------------------------------------------------------------------

Schema = dict[str, Any]


@dataclass
class Prop:
    json_name: str
    py_name: str = ""
    schemas: dict[str, Schema] = field(default_factory=dict)  # version -> property schema
    required_in: set[str] = field(default_factory=set)


@dataclass
class ObjDef:
    name: str
    module: str
    versions: list[str]  # versions whose schema has the definition (empty: synthetic)
    variant_versions: list[str]  # versions contributing a shape (incl. inline params)
    description: str
    props: dict[str, Prop]
    synthetic: str = ""  # explanation for generated (non-spec) structs
    tag: tuple[str, Any] | None = None
    base: str | None = None


@dataclass
class AliasDef:
    name: str
    module: str
    versions: list[str]
    description: str
    expr: str = ""
    members: list[Schema] = field(default_factory=list)  # for unions
    is_union: bool = False
    note: str = ""


class Generator:
    def __init__(self, spec_dir: Path) -> None:
        self.raw: dict[str, dict[str, Schema]] = {}
        for v in VERSIONS:
            doc = json.loads((spec_dir / v / "schema.json").read_text(encoding="utf-8"))
            defs = doc.get("$defs") or doc.get("definitions")
            self.raw[v] = {k: _normalize_refs(s) for k, s in defs.items()}
        self.def_names = sorted({n for v in VERSIONS for n in self.raw[v]})
        self.def_versions = {n: [v for v in VERSIONS if n in self.raw[v]] for n in self.def_names}
        self.module_of: dict[str, str] = {}
        for mod, (_, names) in MODULES.items():
            for n in names:
                if n in self.module_of:
                    raise SystemExit(f"{n} assigned to two modules")
                self.module_of[n] = mod
        missing = [n for n in self.def_names if n not in self.module_of]
        if missing:
            raise SystemExit(f"definitions without a module (edit MODULES): {missing}")
        unknown = [n for n in self.module_of if n not in self.def_names]
        if unknown:
            raise SystemExit(f"MODULES lists unknown definitions: {unknown}")
        self.notes: list[str] = []
        # version -> def name -> schema, after moving inline params out
        self.defs: dict[str, dict[str, Schema]] = {v: dict(self.raw[v]) for v in VERSIONS}
        self.extra_variants: dict[str, list[tuple[str, Schema]]] = {}
        self.synthetic_params: dict[str, str] = {}  # name -> owning message
        self._hoist_params()
        self.objects: dict[str, ObjDef] = {}
        self.aliases: dict[str, AliasDef] = {}
        self._classify()
        self._assign_tags()
        self.rendered: dict[str, list[tuple[Prop, str, str]]] = {}  # name -> (prop, type, default)
        self.any_notes: dict[tuple[str, str], str] = {}  # fields typed Any instead of a union
        self._owner = self._prop = ""
        # rendering a typing-only alias: keep undecodable unions instead of using ``Any``
        self.typing_only = self.saw_undecodable = False
        self.deps: dict[str, set[str]] = {}

    # ---------------------------------------------------------------- preprocessing
    def _hoist_params(self) -> None:
        """Move inline ``params`` objects of messages into named ``...Params`` definitions."""
        for name in self.def_names:
            ref_targets = [
                self.defs[v][name]["properties"]["params"]["$ref"]
                for v in reversed(VERSIONS)
                if name in self.defs[v]
                and "$ref" in self.defs[v][name].get("properties", {}).get("params", {})
            ]
            for v in VERSIONS:
                s = self.defs[v].get(name)
                if not s or "params" not in s.get("properties", {}):
                    continue
                params = s["properties"]["params"]
                if "$ref" in params:
                    continue
                concrete = "const" in s["properties"].get("method", {})
                if ref_targets:
                    target = ref_targets[0]
                elif concrete and params.get("properties"):
                    target = name + "Params"
                    self.synthetic_params[target] = name
                else:
                    continue
                new = dict(s)
                new["properties"] = dict(s["properties"])
                new["properties"]["params"] = {"$ref": target}
                self.defs[v][name] = new
                if any(_is_union(self.raw[w].get(target, {})) for w in VERSIONS):
                    self.notes.append(
                        f"{v} {name}.params: inline shape not merged into union {target}"
                    )
                    continue
                self.extra_variants.setdefault(target, []).append((v, params))

    def _variants(self, name: str) -> list[tuple[str, Schema]]:
        out = [(v, self.defs[v][name]) for v in VERSIONS if name in self.defs[v]]
        out += self.extra_variants.get(name, [])
        return sorted(out, key=lambda vs: VERSIONS.index(vs[0]))

    def _classify(self) -> None:
        names = list(self.def_names) + sorted(self.synthetic_params)
        for name in names:
            variants = self._variants(name)
            versions = self.def_versions.get(name, [])
            newest = variants[-1][1]
            desc = next(
                (x["description"] for _, x in reversed(variants) if x.get("description")), ""
            )
            if not desc:
                desc = f"The ``{name}`` definition of the schema."
            module = self.module_of.get(name) or self.module_of[self.synthetic_params[name]]
            if name in EITHER_STRUCTS:
                self.objects[name] = ObjDef(name, module, versions, [], desc, props={})
            elif name in ALIAS_OVERRIDES:
                expr, why = ALIAS_OVERRIDES[name]
                self.aliases[name] = AliasDef(name, module, versions, desc, expr=expr, note=why)
            elif name in MESSAGE_UNIONS or _is_union(newest):
                self.aliases[name] = AliasDef(
                    name, module, versions, desc, members=self._union_members(name), is_union=True
                )
                if name == "EnumSchema":
                    self.notes.append(
                        "EnumSchema: 2025-06-18 object shape = LegacyTitledEnumSchema"
                    )
            elif any(_is_object(s) for _, s in variants):
                obj_variants = [(v, s) for v, s in variants if _is_object(s)]
                props = self._merge_props(obj_variants)
                if name in self.synthetic_params:
                    desc = (
                        f"Parameters of ``{self.synthetic_params[name]}`` (inline in the schema)."
                    )
                self.objects[name] = ObjDef(
                    name=name,
                    module=module,
                    versions=versions,
                    variant_versions=sorted({v for v, _ in obj_variants}, key=VERSIONS.index),
                    description=desc,
                    props=props,
                    synthetic="inline params" if name in self.synthetic_params else "",
                    base=SUBCLASSES.get(name),
                )
            else:
                self.aliases[name] = AliasDef(name, module, versions, desc, members=[newest])
        for base in sorted(set(SUBCLASSES.values())):
            self._merge_either(base, [s for s, b in SUBCLASSES.items() if b == base])

    def _merge_either(self, base: str, subs: list[str]) -> None:
        """Give an "either" struct the fields of all its subclasses.

        A field is required only if every subclass requires it; a ``const`` that differs between
        subclasses becomes an ``enum`` of the values.
        """
        obj = self.objects[base]
        keys = _dedupe(k for s in subs for k in self.objects[s].props)
        for key in keys:
            if key in obj.props:
                continue
            props = [self.objects[s].props[key] for s in subs if key in self.objects[s].props]
            schemas: dict[str, Schema] = {}
            for p in props:
                schemas.update(p.schemas)
            consts = {p.schemas[max(p.schemas, key=VERSIONS.index)].get("const") for p in props}
            if len(consts - {None}) > 1:
                schemas = {v: {"enum": sorted(consts - {None})} for v in schemas}
            required: set[str] = set()
            if len(props) == len(subs):
                required = set.intersection(*(p.required_in for p in props))
            obj.props[key] = Prop(key, schemas=schemas, required_in=required)
        versions = set(obj.variant_versions)
        for s in subs:
            versions |= set(self.objects[s].variant_versions)
        obj.variant_versions = sorted(versions, key=VERSIONS.index)

    def _union_members(self, name: str) -> list[Schema]:
        """Members of a union definition over all versions (newest first, deduplicated)."""
        seen: list[Schema] = []
        keys: set[str] = set()
        for v in reversed(VERSIONS):
            s = self.defs[v].get(name)
            if s is None:
                continue
            members: list[Schema]
            if _is_union(s):
                members = s.get("anyOf") or s["oneOf"]
            elif "$ref" in s:
                members = [{"$ref": s["$ref"]}]
            elif name in MESSAGE_UNIONS and "const" in s.get("properties", {}).get("method", {}):
                method = s["properties"]["method"]["const"]
                same = [
                    n
                    for n, d in self.defs[v].items()
                    if n not in MESSAGE_UNIONS
                    and d.get("properties", {}).get("method", {}).get("const") == method
                ]
                if len(same) != 1:
                    raise SystemExit(f"{v} {name}: cannot resolve method {method}: {same}")
                members = [{"$ref": same[0]}]
            else:
                self.notes.append(f"{v} {name}: non-union shape ignored (union in other versions)")
                continue
            for m in members:
                key = json.dumps(m, sort_keys=True)
                if key not in keys:
                    keys.add(key)
                    seen.append(m)
        return seen

    def _flatten(self, v: str, s: Schema) -> tuple[dict[str, Schema], set[str]]:
        props: dict[str, Schema] = {}
        required: set[str] = set()
        for part in s.get("allOf", []):
            sub = self.defs[v][part["$ref"]] if "$ref" in part else part
            p, r = self._flatten(v, sub)
            props.update(p)
            required |= r
        props.update(s.get("properties", {}))
        required |= set(s.get("required", []))
        return props, required

    def _merge_props(self, variants: list[tuple[str, Schema]]) -> dict[str, Prop]:
        merged: dict[str, Prop] = {}
        order: list[str] = []
        per_version_required: dict[str, set[str] | None] = {}
        flat = [(v, *self._flatten(v, s)) for v, s in variants]
        for _v, props, _ in reversed(flat):  # newest first decides the order
            for k in props:
                if k not in order:
                    order.append(k)
        for v, props, required in flat:
            for k, ps in props.items():
                prop = merged.setdefault(k, Prop(k))
                prop.schemas[v] = ps  # later variant of the same version wins (identical here)
            # a field is required in v only if every variant of v requires it
            prev = per_version_required.get(v)
            per_version_required[v] = set(required) if prev is None else prev & required
        for v, req in per_version_required.items():
            for k in req or ():
                merged[k].required_in.add(v)
        return {k: merged[k] for k in order}

    def _assign_tags(self) -> None:
        """Find discriminators of unions of structs; tag the member structs."""
        groups: list[tuple[str, list[str]]] = []
        for alias in self.aliases.values():
            if alias.is_union:
                groups.append((alias.name, self._struct_refs(alias.members)))
        for obj in list(self.objects.values()):
            for prop in obj.props.values():
                for v, s in prop.schemas.items():
                    for u in _inline_unions(s):
                        groups.append((f"{obj.name}.{prop.json_name}@{v}", self._struct_refs(u)))
        self.undecodable: set[frozenset[str]] = set()
        assigned: dict[str, tuple[str, Any]] = {}
        for label, refs in groups:
            if len(refs) < 2 or frozenset(refs) in UNION_REPLACEMENTS:
                continue
            disc = self._discriminator(refs)
            if disc is None:
                self.undecodable.add(frozenset(refs))
                continue
            for r in refs:
                tag = (disc, self._const(r, disc))
                if assigned.setdefault(r, tag) != tag:
                    raise SystemExit(f"{label}: {r} tagged {tag} and {assigned[r]}")
        for r, tag in assigned.items():
            self.objects[r].tag = tag

    def _struct_refs(self, members: Iterable[Schema]) -> list[str]:
        refs = []
        for m in members:
            if "$ref" in m:
                r = ALIAS_OVERRIDES.get(m["$ref"], (m["$ref"],))[0]
                if r in self.objects:
                    refs.append(r)
        return refs

    def _const(self, name: str, prop: str) -> Any:
        p = self.objects[name].props.get(prop)
        if p is None:
            return None
        newest = p.schemas[max(p.schemas, key=VERSIONS.index)]
        return newest.get("const")

    def _discriminator(self, refs: list[str]) -> str | None:
        for cand in TAG_CANDIDATES:
            values = [self._const(r, cand) for r in refs]
            if all(isinstance(x, str) for x in values) and len(set(values)) == len(values):
                return cand
        return None

    # ---------------------------------------------------------------- type rendering
    def union_decodable(self, members: list[Schema]) -> bool:
        refs = self._struct_refs(members)
        if len(refs) < 2:
            return True
        tags = [self.objects[r].tag for r in refs]
        return all(tags) and len({tag[0] for tag in tags if tag}) == 1

    def type_of(self, s: Schema, owner: str, prop: str, variants: dict[str, Schema]) -> str:
        """Python type expression for a property schema (``variants``: same prop per version)."""
        if (owner, prop) in FIELD_OVERRIDES:
            return FIELD_OVERRIDES[(owner, prop)]
        if prop == "_meta":
            return "dict[str, Any]"
        if "$ref" in s:
            self._owner, self._prop = owner, prop
            return self.ref_type(s["$ref"])
        if "anyOf" in s or "oneOf" in s:
            return self.inline_union(s.get("anyOf") or s["oneOf"], owner, prop, variants)
        if "allOf" in s:
            refs = [p["$ref"] for p in s["allOf"] if "$ref" in p]
            if len(refs) == 1:
                return self.ref_type(refs[0])
            raise SystemExit(f"{owner}.{prop}: unsupported allOf")
        if "const" in s:
            return f"Literal[{s['const']!r}]"
        if "enum" in s:
            return "Literal[" + ", ".join(repr(x) for x in s["enum"]) + "]"
        t = s.get("type")
        if isinstance(t, list):
            return " | ".join(_PRIMITIVES[x] for x in t)
        if t == "array":
            items = s.get("items", {})
            item_variants = {
                v: x.get("items", {}) for v, x in variants.items() if x.get("type") == "array"
            }
            return f"list[{self.type_of(items, owner, prop + '[]', item_variants)}]"
        if t == "object" or "properties" in s or "additionalProperties" in s:
            return self.object_type(s, owner, prop, variants)
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        return "Any"

    def ref_type(self, name: str) -> str:
        if name in OPEN_OBJECT_REFS:
            return OPEN_OBJECT_REFS[name]
        if name in ALIAS_OVERRIDES:
            return name
        alias = self.aliases.get(name)
        if alias is not None and alias.is_union and not self.union_decodable(alias.members):
            if self.typing_only:
                self.saw_undecodable = True
                return name
            self.any_notes[(self._owner, self._prop)] = f"{name}: untagged, decoded as dict"
            return "Any"
        return name

    def inline_union(self, members: list[Schema], owner: str, prop: str, variants: Any) -> str:
        refs = frozenset(m["$ref"] for m in members if "$ref" in m)
        rest = [m for m in members if "$ref" not in m]
        if refs in UNION_REPLACEMENTS:
            parts = [UNION_REPLACEMENTS[refs]]
        else:
            named = [
                a.name
                for a in self.aliases.values()
                if a.is_union and refs and frozenset(self._struct_refs(a.members)) == refs
            ]
            if named:
                parts = [named[0]]
            elif self.typing_only and not self.union_decodable([{"$ref": r} for r in refs]):
                self.saw_undecodable = True
                parts = [self.ref_type(m["$ref"]) for m in members if "$ref" in m]
            elif not self.union_decodable([{"$ref": r} for r in refs]):
                members_text = " | ".join(m["$ref"] for m in members if "$ref" in m)
                self.any_notes[(owner, prop)] = f"{members_text}: untagged, decoded as dict"
                return "Any"
            else:
                parts = [self.ref_type(m["$ref"]) for m in members if "$ref" in m]
        for m in rest:
            parts.append(self.type_of(m, owner, prop, {}))
        return " | ".join(_dedupe(" | ".join(parts).split(" | ")))

    def object_type(self, s: Schema, owner: str, prop: str, variants: dict[str, Schema]) -> str:
        if (owner, prop) in SCHEMA_FIELDS:
            return "dict[str, Any]"
        obj_variants = {v: x for v, x in variants.items() if isinstance(x, dict)} or {LATEST: s}
        open_ = any(
            x.get("additionalProperties") not in (None, False) and x.get("properties")
            for x in obj_variants.values()
        )
        has_props = any(x.get("properties") for x in obj_variants.values())
        if has_props and not open_:
            name = owner + _pascal(prop)
            if name not in self.objects:
                versions = sorted(obj_variants, key=VERSIONS.index)
                props = self._merge_props([(v, obj_variants[v]) for v in versions])
                what = f"``{prop.removesuffix('[]')}``" + (" items" if prop.endswith("[]") else "")
                self.objects[name] = ObjDef(
                    name=name,
                    module=self.objects[owner].module,
                    versions=[],
                    variant_versions=versions,
                    description=s.get("description", "") or f"Inline object {what} of {owner}.",
                    props=props,
                    synthetic=f"{owner}.{prop}",
                )
                self.render_struct(self.objects[name])
            return name
        ap = s.get("additionalProperties")
        if isinstance(ap, dict) and ap and not s.get("properties"):
            return f"dict[str, {self.type_of(ap, owner, prop + '{}', {})}]"
        return "dict[str, Any]"

    # ---------------------------------------------------------------- struct rendering
    def render_struct(self, obj: ObjDef) -> None:
        if obj.name in self.rendered:
            return
        self.rendered[obj.name] = []
        rows = []
        base_props = self.objects[obj.base].props if obj.base else {}
        all_versions = obj.variant_versions
        for key, prop in obj.props.items():
            if obj.tag and key == obj.tag[0]:
                continue
            newest_v = max(prop.schemas, key=VERSIONS.index)
            t = self.type_of(prop.schemas[newest_v], obj.name, key, prop.schemas)
            required = key != "_meta" and set(all_versions) <= prop.required_in
            const = prop.schemas[newest_v].get("const")
            if const is not None and required:
                default = repr(const)
            elif required:
                default = ""
            else:
                default = "UNSET"
            if obj.base:
                bp = base_props.get(key)
                if bp is not None and self._prop_sig(obj.base, bp) == (t, default):
                    continue
            prop.py_name = _py_name(key)
            rows.append((prop, t, default))
        rows.sort(key=lambda r: r[2] not in ("",))  # required first, stable
        names = [p.py_name for p, _, _ in rows]
        if len(set(names)) != len(names):
            raise SystemExit(f"{obj.name}: duplicate python field names {names}")
        self.rendered[obj.name] = rows

    def _prop_sig(self, owner: str, prop: Prop) -> tuple[str, str]:
        for p, t, d in self.rendered[owner]:
            if p is prop:
                return t, d
        return "", ""

    def render_all(self) -> None:
        # bases first so subclasses can compare against them
        for name in sorted(self.objects, key=lambda n: (self.objects[n].base is not None, n)):
            self.render_struct(self.objects[name])
        for alias in self.aliases.values():
            if alias.is_union:
                parts: list[str] = []
                refs = self._struct_refs(alias.members)
                decodable = self.union_decodable(alias.members)
                listed = {m["$ref"] for m in alias.members if "$ref" in m}
                self.typing_only, self.saw_undecodable = True, False
                for m in alias.members:
                    if "$ref" in m:
                        r = m["$ref"]
                        sub = self.aliases.get(r)
                        if sub and sub.is_union and set(self._struct_refs(sub.members)) <= listed:
                            continue  # a union (of older versions) whose members are all listed
                        parts.append(r)
                    else:
                        parts.append(self.type_of(m, alias.name, "[]", {}))
                alias.expr = " | ".join(_dedupe(parts))
                if (not decodable and len(refs) > 1) or self.saw_undecodable:
                    alias.note = UNDECODABLE_NOTE
            elif not alias.expr and "$ref" in alias.members[0]:
                alias.expr = alias.members[0]["$ref"]  # a plain alias of another definition
            elif not alias.expr:
                self.typing_only, self.saw_undecodable = True, False
                alias.expr = self.type_of(alias.members[0], alias.name, "", {})
                if self.saw_undecodable:
                    alias.note = UNDECODABLE_NOTE
            self.typing_only = False

    # ---------------------------------------------------------------- output
    def undecodable_aliases(self) -> list[str]:
        return sorted(a.name for a in self.aliases.values() if a.note.startswith("typing-only"))

    def names_in(self, expr: str) -> set[str]:
        return {
            w
            for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
            if w in self.objects or w in self.aliases
        }

    def module_members(self, module: str) -> tuple[list[ObjDef], list[AliasDef]]:
        objs = sorted(
            (o for o in self.objects.values() if o.module == module), key=lambda o: o.name
        )
        # subclasses after their base
        objs.sort(key=lambda o: o.base is not None)
        aliases = [a for a in self.aliases.values() if a.module == module]
        # aliases in dependency order (they are evaluated at import time)
        ordered: list[AliasDef] = []
        pending = sorted(aliases, key=lambda a: a.name)
        local = {a.name for a in aliases}
        while pending:
            for a in pending:
                needs = (self.names_in(a.expr) & local) - {x.name for x in ordered} - {a.name}
                if not needs:
                    ordered.append(a)
                    pending.remove(a)
                    break
            else:
                raise SystemExit(f"alias cycle in {module}: {[a.name for a in pending]}")
        return objs, ordered

    def emit_module(self, module: str) -> str:
        topic, _ = MODULES[module]
        objs, aliases = self.module_members(module)
        body: list[str] = []
        used: set[str] = set()
        for obj in objs:
            body.append(self.emit_struct(obj))
            used |= {obj.base} if obj.base else set()
            for _, t, _ in self.rendered[obj.name]:
                used |= self.names_in(t)
        for alias in aliases:
            body.append(self.emit_alias(alias))
            used |= self.names_in(alias.expr)
        text = "\n\n".join(body)
        head = [
            _module_docstring(topic, MODULE_NOTES.get(module, "")),
            "",
            "from __future__ import annotations",
            "",
        ]
        typing_names = sorted(
            n for n in ("Any", "Literal", "TypeAlias") if re.search(rf"\b{n}\b", text)
        )
        if typing_names:
            head.append(f"from typing import {', '.join(typing_names)}")
            head.append("")
        msgspec_names = [n for n in ("UNSET", "UnsetType", "field") if re.search(rf"\b{n}\b", text)]
        if module == "base":
            head.append("import msgspec")
        if msgspec_names:
            head.append(f"from msgspec import {', '.join(msgspec_names)}")
        head.append("")
        imports: dict[str, set[str]] = {}
        for name in sorted(used):
            src = (self.objects.get(name) or self.aliases[name]).module
            if src != module:
                imports.setdefault(src, set()).add(name)
        if module != "base" and objs:
            imports.setdefault("base", set()).add("McpModel")
        self.deps[module] = set(imports)
        for src in sorted(imports):
            head.append(f"from .{src} import {', '.join(sorted(imports[src]))}")
        head.append("")
        out = "\n".join(head) + "\n\n"
        if module == "base":
            out += _MCPMODEL + "\n\n"
        out += text + "\n"
        return out

    def emit_struct(self, obj: ObjDef) -> str:
        kwargs = ["kw_only=True"]
        if obj.tag:
            kwargs += [f"tag_field={obj.tag[0]!r}", f"tag={obj.tag[1]!r}"]
        rows = self.rendered[obj.name]
        if any(d not in ("", "UNSET") for _, _, d in rows):
            kwargs.append("omit_defaults=False")
        base = obj.base or "McpModel"
        lines = [f"class {obj.name}({base}, {', '.join(kwargs)}):"]
        lines.append(_docstring(self.summary(obj.description), self.version_line(obj)))
        for prop, t, default in rows:
            wire = prop.json_name
            explicit = _camel(prop.py_name) != wire
            if default == "":
                ann, rhs = t, (f' = field(name="{wire}")' if explicit else "")
            elif default == "UNSET":
                ann = t if t == "Any" else f"{t} | UnsetType"
                rhs = f' = field(default=UNSET, name="{wire}")' if explicit else " = UNSET"
            else:
                ann = t
                rhs = f' = field(default={default}, name="{wire}")' if explicit else f" = {default}"
            comment = self.field_note(obj, prop)
            lines.append(f"    {prop.py_name}: {ann}{rhs}" + (f"  # {comment}" if comment else ""))
        return "\n".join(lines) + "\n"

    def emit_alias(self, alias: AliasDef) -> str:
        lines = []
        summary = self.summary(alias.description)
        if summary:
            lines += ["# " + x for x in textwrap.wrap(summary, 96)]
        versions = self._versions_text(alias.versions)
        lines.append(f"# Spec: {versions}." + (f" Note: {alias.note}." if alias.note else ""))
        lines = [x for raw in lines for x in _wrap_comment(raw)]
        lines.append(f"{alias.name}: TypeAlias = {alias.expr}")
        return "\n".join(lines) + "\n"

    def summary(self, desc: str) -> str:
        text = _LINK.sub(lambda m: self._link(m.group(1)), desc or "")
        para = text.strip().split("\n\n")[0]
        para = " ".join(line.strip() for line in para.splitlines())
        first = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", para)[0]
        return first.strip()

    def _link(self, target: str) -> str:
        target = target.strip()
        best = max((n for n in self.def_names if target.startswith(n)), key=len, default="")
        rest = target[len(best) :].strip()
        return rest or best or target

    def version_line(self, obj: ObjDef) -> str:
        if obj.synthetic and not obj.versions:
            where = "inline " + ("params" if obj.synthetic == "inline params" else obj.synthetic)
            return f"Generated: {where} in {self._versions_text(obj.variant_versions)}."
        line = f"Spec: {self._versions_text(obj.versions)}."
        inline_only = [v for v in obj.variant_versions if v not in obj.versions]
        if inline_only:
            line += f" Inline params in {self._versions_text(inline_only)}."
        return line

    def field_note(self, obj: ObjDef, prop: Prop) -> str:
        """Trailing comment: versions having the field, where it is required if not everywhere."""
        present = [v for v in obj.variant_versions if v in prop.schemas]
        req = [v for v in present if v in prop.required_in]
        note = ""
        any_note = self.any_notes.get((obj.name, prop.json_name))
        if any_note:
            return any_note
        if present != obj.variant_versions:
            note = self._range_note(present, obj.variant_versions)
        if prop.json_name == "_meta" or "const" in prop.schemas[present[-1]]:
            if req and prop.json_name == "_meta":
                note += ("; " if note else "") + "required in " + self._versions_text(req)
            return note
        if req and req != obj.variant_versions:
            if req == present:
                note += " (required)"
            else:
                note += ("; " if note else "") + "required in " + self._versions_text(req)
        return note

    @staticmethod
    def _range_note(present: list[str], all_: list[str]) -> str:
        if present == all_[-len(present) :]:
            return f"since {present[0]}"
        if present == all_[: len(present)]:
            return f"until {present[-1]}"
        return "only " + ", ".join(present)

    @staticmethod
    def _versions_text(vs: list[str]) -> str:
        if list(vs) == list(VERSIONS):
            return "all versions"
        idx = [VERSIONS.index(v) for v in vs]
        if len(vs) > 2 and idx == list(range(idx[0], idx[-1] + 1)):
            return f"{vs[0]} to {vs[-1]}"
        return ", ".join(vs)

    # ---------------------------------------------------------------- methods.py
    def direction_table(self, union: str) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for v in VERSIONS:
            s = self.defs[v].get(union)
            if s is None:
                continue
            if _is_union(s):
                members = [m["$ref"] for m in s.get("anyOf") or s["oneOf"]]
            elif "$ref" in s:
                members = [s["$ref"]]
            else:
                members = [None]  # the union itself is a message object (2026-07-28)
            for m in members:
                d = s if m is None else self.defs[v][m]
                method = d.get("properties", {}).get("method", {}).get("const")
                if method is None:
                    raise SystemExit(f"{v} {union}: member {m} has no method")
                table.setdefault(method, []).append(v)
        return table

    def message_for(self, method: str, suffix: str) -> str:
        found = sorted(
            n for n, o in self.objects.items() if n.endswith(suffix) and o.tag == ("method", method)
        )
        if len(found) != 1:
            raise SystemExit(f"no unique message struct for {method}: {found}")
        return found[0]

    def emit_methods(self) -> str:
        client_req = self.direction_table("ClientRequest")
        server_req = self.direction_table("ServerRequest")
        client_not = self.direction_table("ClientNotification")
        server_not = self.direction_table("ServerNotification")
        input_req = self.direction_table("InputRequest")
        results: dict[str, set[str]] = {}
        for union in ("ClientResult", "ServerResult"):
            for v in VERSIONS:
                s = self.defs[v].get(union)
                if s is None:
                    continue
                members = [m["$ref"] for m in s.get("anyOf", [])] or [s.get("$ref")]
                results.setdefault(union, set()).update(m for m in members if m)
        request_methods = sorted(set(client_req) | set(server_req) | set(input_req))
        notification_methods = sorted(set(client_not) | set(server_not))
        used: set[str] = set()
        req_types, req_params, req_results, not_types, not_params = {}, {}, {}, {}, {}
        for method in request_methods:
            msg = self.message_for(method, "Request")
            req_types[method] = msg
            req_params[method] = self.params_type(msg)
            result = msg.removesuffix("Request") + "Result"
            if result not in self.objects and result not in self.aliases:
                result = "EmptyResult"
            direction = "ServerResult" if method in client_req else "ClientResult"
            if result != "EmptyResult" and result not in results[direction]:
                raise SystemExit(f"{method}: {result} is not a member of {direction}")
            req_results[method] = result
        for method in notification_methods:
            msg = self.message_for(method, "Notification")
            not_types[method] = msg
            not_params[method] = self.params_type(msg)
        for table in (req_types, req_params, req_results, not_types, not_params):
            used |= {t for t in table.values() if t in self.objects or t in self.aliases}
        used |= set(MESSAGE_UNIONS)

        def vtable(name: str, table: dict[str, list[str]], doc: str) -> str:
            rows = [f"    {m!r}: {_frozenset(vs)}," for m, vs in sorted(table.items())]
            return f"#: {doc}\n{name}: dict[str, frozenset[str]] = {{\n" + "\n".join(rows) + "\n}\n"

        def ttable(name: str, table: dict[str, str], doc: str) -> str:
            rows = [f"    {m!r}: {t}," for m, t in sorted(table.items())]
            return f"#: {doc}\n{name}: dict[str, Any] = {{\n" + "\n".join(rows) + "\n}\n"

        defs_rows = [f"    {n!r}: {_frozenset(self.def_versions[n])}," for n in self.def_names]
        parts = [
            _module_docstring(
                "Method tables derived from the message unions of every version.",
                """
Type tables map a method to a msgspec-decodable type (a Struct class, a ``dict`` alias, or a
tagged-union alias), suitable for ``msgspec.convert(obj, TABLE[method])``.  Results are derived
from the naming convention ``XRequest -> XResult`` (``EmptyResult`` when there is none) and
checked against the result unions.  In 2026-07-28 a server may answer ``tools/call``,
``prompts/get`` and ``resources/read`` with an ``InputRequiredResult`` instead (check
``resultType``); task-augmented requests (2025-11-25) may return ``CreateTaskResult``.
""",
            ),
            "",
            "from __future__ import annotations",
            "",
            "from typing import Any",
            "",
        ]
        by_module: dict[str, set[str]] = {}
        for n in sorted(used):
            by_module.setdefault((self.objects.get(n) or self.aliases[n]).module, set()).add(n)
        for mod in sorted(by_module):
            parts.append(f"from .{mod} import {', '.join(sorted(by_module[mod]))}")
        parts.append("")
        parts.append(
            f"#: Every protocol version, oldest first.\nVERSIONS: tuple[str, ...] = {VERSIONS!r}\n"
        )
        parts.append(
            vtable(
                "CLIENT_REQUESTS", client_req, "Requests sent by the client: method -> versions."
            )
        )
        parts.append(
            vtable(
                "SERVER_REQUESTS", server_req, "Requests sent by the server: method -> versions."
            )
        )
        parts.append(
            vtable("CLIENT_NOTIFICATIONS", client_not, "Notifications sent by the client.")
        )
        parts.append(
            vtable("SERVER_NOTIFICATIONS", server_not, "Notifications sent by the server.")
        )
        parts.append(
            vtable(
                "INPUT_REQUESTS",
                input_req,
                "Requests a server may embed in an InputRequiredResult.",
            )
        )
        parts.append(ttable("REQUEST_TYPES", req_types, "Method -> full request message struct."))
        parts.append(ttable("REQUEST_PARAMS", req_params, "Method -> params type."))
        parts.append(ttable("REQUEST_RESULTS", req_results, "Method -> result type."))
        parts.append(ttable("NOTIFICATION_TYPES", not_types, "Method -> full notification struct."))
        parts.append(ttable("NOTIFICATION_PARAMS", not_params, "Method -> params type."))
        parts.append(
            "#: Definition name -> versions whose schema.json defines it.\n"
            "DEFINITION_VERSIONS: dict[str, frozenset[str]] = {\n" + "\n".join(defs_rows) + "\n}\n"
        )
        und = ", ".join(repr(n) for n in self.undecodable_aliases())
        parts.append(
            "#: Union aliases msgspec cannot decode (untagged unions of structs): typing only.\n"
            f"UNDECODABLE_UNIONS: frozenset[str] = frozenset({{{und}}})\n"
        )
        parts.append(
            "#: The message unions, by name.\nMESSAGE_UNIONS: dict[str, Any] = {\n"
            + "\n".join(f"    {n!r}: {n}," for n in MESSAGE_UNIONS)
            + "\n}\n"
        )
        return "\n".join(parts)

    def params_type(self, msg: str) -> str:
        for prop, t, _ in self.rendered[msg]:
            if prop.json_name == "params":
                return t
        raise SystemExit(f"{msg} has no params")

    def emit_init(self, names_by_module: dict[str, list[str]]) -> str:
        lines = [
            _module_docstring(
                "Typed msgspec structs for every definition of every MCP schema version.", ""
            ),
            "",
        ]
        everything: list[str] = []
        for mod in [*MODULES, "methods"]:
            names = sorted(names_by_module[mod])
            everything += names
            lines.append(f"from .{mod} import {', '.join(names)}")
        lines.append("")
        lines.append("__all__ = [" + ", ".join(repr(n) for n in sorted(everything)) + "]")
        return "\n".join(lines) + "\n"

    def generate(self, out_dir: Path) -> dict[str, str]:
        self.render_all()
        files: dict[str, str] = {}
        names_by_module: dict[str, list[str]] = {}
        for mod in MODULES:
            files[f"{mod}.py"] = self.emit_module(mod)
            objs, aliases = self.module_members(mod)
            names_by_module[mod] = [o.name for o in objs] + [a.name for a in aliases]
        names_by_module["base"].append("McpModel")
        files["methods.py"] = self.emit_methods()
        names_by_module["methods"] = [
            "VERSIONS",
            "CLIENT_REQUESTS",
            "SERVER_REQUESTS",
            "CLIENT_NOTIFICATIONS",
            "SERVER_NOTIFICATIONS",
            "INPUT_REQUESTS",
            "REQUEST_TYPES",
            "REQUEST_PARAMS",
            "REQUEST_RESULTS",
            "NOTIFICATION_TYPES",
            "NOTIFICATION_PARAMS",
            "DEFINITION_VERSIONS",
            "UNDECODABLE_UNIONS",
            "MESSAGE_UNIONS",
        ]
        files["__init__.py"] = self.emit_init(names_by_module)
        _check_acyclic(self.deps)
        return files

    def report(self) -> None:
        """Print fields whose rendered type differs between versions (for review)."""
        saved = dict(self.objects), dict(self.rendered)
        self._report()
        self.objects, self.rendered = saved

    def _report(self) -> None:
        for obj in sorted(self.objects.values(), key=lambda o: o.name):
            for key, prop in obj.props.items():
                types: dict[str, list[str]] = {}
                for v, s in prop.schemas.items():
                    types.setdefault(self.type_of(s, obj.name, key, {v: s}), []).append(v)
                if len(types) > 1:
                    print(f"{obj.name}.{key}:")
                    for t, vs in types.items():
                        print(f"    {t}  <- {', '.join(vs)}")
        for note in self.notes:
            print("note:", note)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

_PRIMITIVES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
_LINK = re.compile(r"\{@link\s*([^}]*)\}")

_MCPMODEL = '''class McpModel(
    msgspec.Struct, kw_only=True, omit_defaults=True, repr_omit_defaults=True, rename="camel"
):
    """Base of every MCP struct: keyword-only, camelCase on the wire, unset fields omitted (also
    from its repr: a printed message never shows the `UNSET` sentinel)."""
'''


UNDECODABLE_NOTE = "typing-only: untagged union of structs, msgspec cannot decode it"


def _normalize_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = v.rsplit("/", 1)[-1]
            else:
                out[k] = _normalize_refs(v)
        return out
    if isinstance(node, list):
        return [_normalize_refs(x) for x in node]
    return node


def _is_union(s: Schema) -> bool:
    return ("anyOf" in s or "oneOf" in s) and "properties" not in s


def _is_object(s: Schema) -> bool:
    return bool(s.get("properties")) or "allOf" in s


def _inline_unions(s: Any) -> Iterable[list[Schema]]:
    if isinstance(s, dict):
        for k in ("anyOf", "oneOf"):
            if isinstance(s.get(k), list):
                yield s[k]
        for k in ("items", "additionalProperties"):
            if isinstance(s.get(k), dict):
                yield from _inline_unions(s[k])
        for v in s.get("properties", {}).values():
            yield from _inline_unions(v)


def _pascal(prop: str) -> str:
    suffix = "Item" if prop.endswith("[]") else ""
    words = re.findall(r"[A-Za-z0-9]+", prop)
    return "".join(w[0].upper() + w[1:] for w in words) + suffix


def _py_name(json_name: str) -> str:
    if json_name == "_meta":
        return "meta"
    base = json_name.rsplit("/", 1)[-1].lstrip("$_")
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", base).lower()
    snake = re.sub(r"[^a-z0-9_]", "_", snake)
    if keyword.iskeyword(snake) or snake in RESERVED:
        snake += "_"
    return snake


_CAMEL_CACHE: dict[str, str] = {}


def _camel(py_name: str) -> str:
    """The wire name msgspec's ``rename="camel"`` gives a field (asked from msgspec itself)."""
    if py_name not in _CAMEL_CACHE:
        probe = msgspec.defstruct("Probe", [(py_name, int)], rename="camel")
        _CAMEL_CACHE[py_name] = probe.__struct_encode_fields__[0]
    return _CAMEL_CACHE[py_name]


def _dedupe(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def _docstring(summary: str, extra: str) -> str:
    summary = summary.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') or "(No description.)"
    if summary.endswith('"'):
        summary += " "
    lines = [*textwrap.wrap(summary, 92), "", *textwrap.wrap(extra, 92)]
    if len(lines) == 1:
        return f'    """{lines[0]}"""'
    body = "\n".join(("    " + x) if x else "" for x in lines)
    return f'    """{body.lstrip()}\n    """'


def _wrap_comment(line: str) -> list[str]:
    if len(line) <= 100:
        return [line]
    return ["# " + x for x in textwrap.wrap(line[2:], 96)]


def _module_docstring(topic: str, notes: str) -> str:
    versions = ", ".join(VERSIONS)
    text = (
        f'"""{topic}\n\nGenerated by tools/gen_types.py from the MCP schema.json of versions\n'
        f"{versions}.\nDo not edit by hand: change the generator and re-run it.\n"
    )
    if notes.strip():
        text += notes.rstrip() + "\n"
    return text + '"""'


def _frozenset(versions: list[str]) -> str:
    if tuple(versions) == VERSIONS:
        return "frozenset(VERSIONS)"
    return "frozenset({" + ", ".join(repr(v) for v in versions) + "})"


def _check_acyclic(deps: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 1:
            raise SystemExit(f"import cycle: {' -> '.join([*path, m])}")
        if state.get(m) == 2:
            return
        state[m] = 1
        for d in sorted(deps.get(m, ())):
            visit(d, [*path, m])
        state[m] = 2

    for m in sorted(deps):
        visit(m, [])


def _run_ruff(out_dir: Path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        print("warning: ruff not found; output left unformatted", file=sys.stderr)
        return
    files = sorted(str(p) for p in out_dir.glob("*.py"))
    subprocess.run(
        [ruff, "check", "--fix", "--quiet", "--select", "I,RUF022,UP,F401", *files], check=False
    )
    subprocess.run([ruff, "format", "--quiet", *files], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec-dir", type=Path, default=DEFAULT_SPEC_DIR)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--report", action="store_true", help="print cross-version type differences")
    ap.add_argument("--no-ruff", action="store_true", help="do not format the output with ruff")
    args = ap.parse_args(argv)
    gen = Generator(args.spec_dir)
    files = gen.generate(args.out_dir)
    n_structs, n_aliases = len(gen.objects), len(gen.aliases)
    if args.report:
        gen.report()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for old in args.out_dir.glob("*.py"):
        if old.name not in files:
            old.unlink()
    for name, text in files.items():
        (args.out_dir / name).write_text(text, encoding="utf-8")
    if not args.no_ruff:
        _run_ruff(args.out_dir)
    print(
        f"wrote {len(files)} modules to {args.out_dir}: {n_structs} structs, "
        f"{n_aliases} aliases ({len(gen.def_names)} spec definitions)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
