"""The conformance fixture client: what the official MCP conformance harness runs against its
client scenarios (mock servers).

    python -m mcpkit.testing.conformance_client [-v] URL

The harness starts it once per scenario with the mock server's URL as the last argument and

    MCP_CONFORMANCE_SCENARIO          the scenario name (e.g. "tools_call")
    MCP_CONFORMANCE_PROTOCOL_VERSION  the protocol version to speak (the client is pinned to it)
    MCP_CONFORMANCE_CONTEXT           JSON with scenario inputs (e.g. http-custom-headers'
                                      `toolCalls`), when the scenario has any

Built on the public `mcpkit.client.Client` API only. Each scenario does what its mock server
expects (shared/conformance/FIXTURE.md §4); an unknown scenario gets the generic behaviour:
connect, list the tools and call each one with arguments made up from its input schema.
`auth/*` scenarios of the authorization-code flow run with `OAuth` (run_authorized; the
`auth/dpop*` ones with `dpop=True`); those of the machine grants (client credentials,
enterprise-managed, WIF) with `MachineAuth` and the grant the context's credentials make
(run_machine).

The handlers it offers the server: sampling answers with a fixed assistant text, elicitation
accepts (schema defaults, else a plausible value per field), roots lists one file:// root.

Logs go to stderr. Exit 0 when the scenario's steps succeeded; otherwise 1 with one line
`conformance_client: <scenario>: <reason>` on stderr (2 on bad usage).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec

from mcpkit import __version__
from mcpkit.client import Behaviour, Client, RequestTimeout, Responders, Timeouts, form_defaults
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_machine import MachineAuth
from mcpkit.client.oauth_machine_grants import (
    ClientCredentialsGrant,
    EnterpriseGrant,
    MachineGrant,
    WorkloadIdentityGrant,
)
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.errors import PeerError
from mcpkit.protocol import types
from mcpkit.protocol.errors import McpError

log = logging.getLogger(__name__)

CLIENT_INFO = {"name": "mcpkit-conformance-client", "version": __version__}
SAMPLING_MODEL = "mcpkit-conformance"
ROOT_NAME = "conformance workspace"
REQUEST_TIMEOUT_S = 20.0
"""Per request: well under the harness's per-scenario limit (30 s alone, 60 s in a suite)."""

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The Client ID Metadata Document URL the auth mock expects (auth/basic-cimd)."""
DPOP_SCENARIOS = ("auth/dpop",)
"""auth/* scenarios whose authorization server and resource want DPoP-bound tokens."""

Context = dict[str, Any]
Scenario = Callable[[str, str | None, Context], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


class ScenarioFailed(PeerError):
    """The scenario could not do what it must (the message is the reason)."""


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        return fn

    return register


# --- what the client offers the server ------------------------------------------------------


async def answer_sampling(params: types.CreateMessageRequestParams) -> dict[str, Any]:
    prompt = _last_text(params)
    log.info("sampling/createMessage (%d message(s)); answering", len(params.messages))
    return {
        "role": "assistant",
        "content": {"type": "text", "text": f"mcpkit conformance reply to: {prompt}"[:500]},
        "model": SAMPLING_MODEL,
        "stopReason": "endTurn",
    }


def _last_text(params: types.CreateMessageRequestParams) -> str:
    for message in reversed(params.messages):
        content = _plain(message).get("content")
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                return str(block["text"])
    return "(no text)"


async def accept_with_defaults(params: types.ElicitRequestParams) -> dict[str, Any]:
    """SEP-1034: accept, filling in exactly the schema's defaults."""
    schema = params.requested_schema if isinstance(params.requested_schema, dict) else {}
    content = form_defaults(schema)
    log.info("elicitation/create %r: accepting with defaults %s", params.message, content)
    return {"action": "accept", "content": content}


async def accept_filled(params: types.ElicitRequestParams) -> dict[str, Any]:
    """Accept, with each field's default or else a plausible value of its type."""
    if not isinstance(params.requested_schema, dict):  # URL mode: nothing to fill in
        log.info("elicitation/create (url mode) %r: accepting", params.message)
        return {"action": "accept"}
    schema = params.requested_schema
    content = form_defaults(schema)
    props = schema.get("properties")
    for name, prop in (props.items() if isinstance(props, dict) else []):
        if name not in content and isinstance(prop, dict):
            content[name] = sample_value(prop, name)
    log.info("elicitation/create %r: accepting with %s", params.message, content)
    return {"action": "accept", "content": content}


def roots() -> list[dict[str, Any]]:
    return [{"uri": Path.cwd().as_uri(), "name": ROOT_NAME}]


def sample_value(prop: Mapping[str, Any], name: str = "value") -> Any:
    """A value that fits a (simple) JSON Schema property: its default, const or first enum
    member, else one of its type."""
    for key in ("default", "const"):
        if key in prop:
            return prop[key]
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and options and isinstance(options[0], dict):
            return sample_value(options[0], name)
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return "test@example.com" if "email" in name.lower() else f"conformance-{name}"
    if kind == "integer":
        return int(prop.get("minimum", 1))
    if kind == "number":
        return prop.get("minimum", 1.0)
    if kind == "boolean":
        return True
    if kind == "array":
        items = prop.get("items")
        return [sample_value(items, name)] if isinstance(items, dict) else []
    if kind == "object":
        return sample_arguments(prop)
    if kind == "null":
        return None
    return f"conformance-{name}"


def sample_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: a sample value for each required property."""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    out: dict[str, Any] = {}
    for name in required if isinstance(required, list) else []:
        prop = props.get(name)
        out[name] = sample_value(prop if isinstance(prop, dict) else {}, str(name))
    return out


def make_client(
    url: str,
    version: str | None,
    *,
    elicitation: Callable[[types.ElicitRequestParams], Awaitable[dict[str, Any]]] = accept_filled,
    **options: Any,
) -> Client:
    """A client pinned to the harness's protocol version, offering all three handlers."""
    return Client(
        url,
        era=version or "auto",
        behaviour=Behaviour(client_info=CLIENT_INFO),
        responders=Responders(sampling=answer_sampling, elicitation=elicitation, roots=roots()),
        timeouts=Timeouts(timeout=REQUEST_TIMEOUT_S, maximum=REQUEST_TIMEOUT_S * 2),
        **options,
    )


def connected(client: Client) -> None:
    log.info(
        "connected to %s: %s era, protocol %s, server %s",
        client.describe(), client.era.value if client.era else "?", client.protocol_version,
        client.server_info.name if client.server_info else "(anonymous)",
    )


# --- scenarios ------------------------------------------------------------------------------


@scenario("initialize")
async def run_initialize(url: str, version: str | None, context: Context) -> None:
    """Handshake (initialize + initialized at dated versions), then list the tools."""
    async with make_client(url, version) as client:
        connected(client)
        tools = await client.list_tools()
        log.info("%d tool(s)", len(tools))


@scenario("tools_call")
async def run_tools_call(url: str, version: str | None, context: Context) -> None:
    async with make_client(url, version) as client:
        connected(client)
        await client.list_tools()
        await call(client, "add_numbers", {"a": 5, "b": 3}, check=True)


@scenario("elicitation-sep1034-client-defaults")
async def run_elicitation_defaults(url: str, version: str | None, context: Context) -> None:
    """The server elicits five fields with defaults; accept with all of them applied."""
    async with make_client(url, version, elicitation=accept_with_defaults) as client:
        connected(client)
        await client.list_tools()
        await call(client, "test_client_elicitation_defaults", {}, check=True)


@scenario("sse-retry")
async def run_sse_retry(url: str, version: str | None, context: Context) -> None:
    """The tool's SSE stream closes before the result: the transport resumes it with GET +
    Last-Event-ID after the server's `retry` delay."""
    async with make_client(url, version) as client:
        connected(client)
        await client.list_tools()
        await call(client, "test_reconnection", {}, check=True)


@scenario("request-metadata")
async def run_request_metadata(url: str, version: str | None, context: Context) -> None:
    """The first request is refused with -32022: retry at a supported version; every request
    carries the version header and `_meta` (version, capabilities, client info)."""
    async with make_client(url, version) as client:
        connected(client)
        tools = await client.list_tools()
        names = [tool.name for tool in tools] or ["add_numbers"]
        for name in names:
            await call(client, name, {"a": 5, "b": 3})


@scenario("sep-2322-client-request-state")
async def run_request_state(url: str, version: str | None, context: Context) -> None:
    """Multi-round tool calls (MRTR): the client answers `inputRequests` and retries with a
    new id, echoing `requestState` exactly (and none when none was given)."""
    async with make_client(url, version) as client:
        connected(client)
        await client.list_tools()
        for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated",
                     "test_mrtr_no_result_type"):
            await call(client, name, {}, check=True)


@scenario("http-standard-headers")
async def run_standard_headers(url: str, version: str | None, context: Context) -> None:
    """Exercise every method that has a standard header: tools, resources, prompts."""
    async with make_client(url, version) as client:
        connected(client)
        await exercise_everything(client)


@scenario("http-custom-headers")
async def run_custom_headers(url: str, version: str | None, context: Context) -> None:
    """List the tools (their x-mcp-header annotations), then replay the context's calls."""
    calls = context.get("toolCalls")
    if not isinstance(calls, list) or not calls:
        raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT has no toolCalls to replay")
    async with make_client(url, version) as client:
        connected(client)
        listed = {tool.name for tool in await client.list_tools()}
        for entry in calls:
            name, arguments = entry.get("name"), entry.get("arguments")
            if not isinstance(name, str) or name not in listed:
                log.warning("skipping the context's call of %r: not a usable listed tool", name)
                continue
            await call(client, name, arguments if isinstance(arguments, dict) else {},
                       check=True)


@scenario("http-invalid-tool-headers")
async def run_invalid_tool_headers(url: str, version: str | None, context: Context) -> None:
    """Call every tool the client keeps: those with invalid x-mcp-header annotations are
    left out of `list_tools()` and must never be called."""
    async with make_client(url, version) as client:
        connected(client)
        await call_every_tool(client)


@scenario("json-schema-ref-no-deref")
async def run_ref_no_deref(url: str, version: str | None, context: Context) -> None:
    """List the tools; a network `$ref` in a schema must never be fetched."""
    async with make_client(url, version) as client:
        connected(client)
        tools = await client.list_tools()
        log.info("listed %s", [tool.name for tool in tools])


@scenario("json-schema-2020-12-preservation")
async def run_schema_preservation(url: str, version: str | None, context: Context) -> None:
    """Echo the focal tool's inputSchema, exactly as listed, through `json_schema_echo`."""
    async with make_client(url, version) as client:
        connected(client)
        tools = {tool.name: tool for tool in await client.list_tools()}
        focal = tools.get("json_schema_2020_12_tool")
        if focal is None:
            raise ScenarioFailed(f"no json_schema_2020_12_tool among {sorted(tools)}")
        await call(client, "json_schema_echo", {"schema": focal.input_schema}, check=True)


# --- skills (SEP-2640, extension) -----------------------------------------------------------

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"


class SkillRejected(PeerError):
    """A skill file failed verification against its `skills/list` entry."""


@scenario("sep-2640-client-no-prefetch")
async def run_skills_no_prefetch(url: str, version: str | None, context: Context) -> None:
    """List the skills; load none, so read no skill file (no prefetching)."""
    async with make_client(url, version) as client:
        connected(client)
        skills = await list_skills(client)
        log.info("%d skill(s) listed; none needed, so none read: %s",
                 len(skills), [s.get("uri") for s in skills])


@scenario("sep-2640-client-verify-digest")
@scenario("sep-2640-client-verify-size")
@scenario("sep-2640-client-verify-frontmatter")
async def run_skills_verify(url: str, version: str | None, context: Context) -> None:
    """Load each listed skill: read its SKILL.md and verify it (size, digest, frontmatter)
    before using it or reading any other of its files. A skill that fails is rejected."""
    async with make_client(url, version) as client:
        connected(client)
        for skill in await list_skills(client):
            try:
                await load_skill(client, skill)
            except SkillRejected as exc:
                log.warning("rejected skill %s: %s", skill.get("uri"), exc)


async def list_skills(client: Client) -> list[dict[str, Any]]:
    extensions = client.server_capabilities.get("extensions")
    if not (isinstance(extensions, dict) and SKILLS_EXTENSION in extensions):
        log.warning("the server does not declare the %s extension; listing anyway",
                    SKILLS_EXTENSION)
    result = await client.request("skills/list")
    skills = result.get("skills") if isinstance(result, dict) else None
    if not isinstance(skills, list):
        raise ScenarioFailed(f"skills/list returned no skills list: {result!r}"[:300])
    return [skill for skill in skills if isinstance(skill, dict)]


async def load_skill(client: Client, skill: dict[str, Any]) -> None:
    """Read and verify SKILL.md; only then read (and verify) the skill's other files."""
    uri = skill.get("uri")
    if not isinstance(uri, str):
        raise SkillRejected("the entry has no uri")
    files = {entry["uri"]: entry for entry in skill.get("resources") or []
             if isinstance(entry, dict) and isinstance(entry.get("uri"), str)}
    text = await read_verified(client, uri, files.get(uri))
    check_frontmatter(text, skill.get("frontmatter"))
    log.info("skill %s verified and loaded", uri)
    for other, entry in files.items():
        if other != uri:
            await read_verified(client, other, entry)
            log.info("skill file %s verified", other)


async def read_verified(client: Client, uri: str, entry: dict[str, Any] | None) -> str:
    result = await client.read_resource(uri)
    texts = [c.text for c in result.contents if isinstance(c.text, str)]
    if len(result.contents) != 1 or len(texts) != 1:
        raise SkillRejected(f"{uri}: expected one text content, got {len(result.contents)} "
                            f"content(s), {len(texts)} of them text")
    data = texts[0].encode()
    if entry is None:
        raise SkillRejected(f"{uri} is not in the skill's resources: nothing to verify it by")
    size = entry.get("size")
    if isinstance(size, int) and size != len(data):
        raise SkillRejected(f"{uri}: {len(data)} bytes, the entry says {size}")
    digest = entry.get("digest")
    if isinstance(digest, str):
        algorithm, _, expected = digest.partition(":")
        if algorithm.lower() != "sha256":
            raise SkillRejected(f"{uri}: unsupported digest algorithm {algorithm!r}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected.lower():
            raise SkillRejected(f"{uri}: sha256 {actual} does not match the entry's {expected}")
    return texts[0]


def check_frontmatter(text: str, expected: Any) -> None:
    found = parse_frontmatter(text)
    if found is None:
        raise SkillRejected("SKILL.md has no --- delimited frontmatter")
    if not isinstance(expected, dict):
        raise SkillRejected("the entry has no frontmatter object")
    for key in sorted(set(found) | set(expected)):
        if found.get(key) != expected.get(key):
            raise SkillRejected(f"frontmatter field {key!r}: file has {found.get(key)!r}, "
                                f"entry has {expected.get(key)!r}")


def parse_frontmatter(text: str) -> dict[str, Any] | None:
    """The leading `---` block's top-level `key: value` pairs (scalars, as strings; quoted
    values unquoted). Enough for SKILL.md's name/description; nested YAML is kept raw."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    out: dict[str, Any] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return out
        if not line.strip() or line.startswith((" ", "\t", "#")) or ":" not in line:
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return None


# --- authorization --------------------------------------------------------------------------


async def run_authorized(url: str, version: str | None, context: Context) -> None:
    """An auth/* scenario of the authorization-code flow: the mock's /authorize redirects at
    once, so the redirect handler reads `Location`. Pre-registered credentials come from the
    context (auth/pre-registration); the CIMD URL is used where the AS supports it."""
    secret = context.get("client_secret")
    name = context.get("name", "")
    auth = OAuth(redirect=follow_location, client_metadata_url=CLIENT_METADATA_URL,
                 client_id=context.get("client_id"),
                 client_secret=secret if isinstance(secret, str) else None,
                 client_name="mcpkit-conformance-client",
                 dpop=isinstance(name, str) and name.startswith(DPOP_SCENARIOS))
    async with make_client(url, version, auth=auth) as client:
        connected(client)
        await call_every_tool(client, check=True)


def machine_grant(name: str, context: Context) -> MachineGrant | None:
    """The grant of a machine-grant scenario, from the context's credentials (None: the
    scenario is not one)."""
    def text(key: str) -> str:
        value = context.get(key)
        if not isinstance(value, str):
            raise ScenarioFailed(f"MCP_CONFORMANCE_CONTEXT has no {key}")
        return value

    if name == "auth/client-credentials-basic":
        return ClientCredentialsGrant(text("client_id"), client_secret=text("client_secret"))
    if name == "auth/client-credentials-jwt":
        algorithm = text("signing_algorithm")
        if algorithm not in ("ES256", "RS256"):
            raise ScenarioFailed(f"unsupported signing_algorithm {algorithm!r}")
        return ClientCredentialsGrant(text("client_id"), private_key=text("private_key_pem"),
                                      signing_algorithm="ES256" if algorithm == "ES256"
                                      else "RS256")
    if name == "auth/enterprise-managed-authorization":
        return EnterpriseGrant(id_token=text("idp_id_token"),
                               idp_token_endpoint=text("idp_token_endpoint"),
                               idp_client_id=text("idp_client_id"),
                               client_id=text("client_id"),
                               client_secret=text("client_secret"))
    if name == "auth/wif-jwt-bearer":
        return WorkloadIdentityGrant(text("valid_jwt"), client_id=text("client_id"))
    return None


async def run_auth(url: str, version: str | None, context: Context) -> None:
    """An auth/* scenario: a machine grant's when the scenario is one, else the
    authorization-code flow's."""
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = {**context, "name": context.get("name") or name}
    grant = machine_grant(name, context)
    if grant is None:
        await run_authorized(url, version, context)
        return
    async with make_client(url, version, auth=MachineAuth(grant)) as client:
        connected(client)
        await call_every_tool(client, check=True)


# --- generic behaviour ----------------------------------------------------------------------


async def run_generic(url: str, version: str | None, context: Context) -> None:
    """An unknown scenario: connect, list the tools, call each with sample arguments."""
    async with make_client(url, version) as client:
        connected(client)
        await call_every_tool(client)


async def call_every_tool(client: Client, *, check: bool = False) -> None:
    """Call each listed tool once with sample arguments. A call the server refuses (or that
    times out) is logged and skipped: the arguments are guesses (`check`: it fails)."""
    tools = await client.list_tools()
    log.info("tools kept: %s", [tool.name for tool in tools])
    refused = 0
    for tool in tools:
        try:
            await call(client, tool.name, sample_arguments(tool.input_schema))
        except (McpError, RequestTimeout) as exc:
            refused += 1
            log.warning("tool %s: %s", tool.name, exc)
            if check:
                raise
    log.info("called %d tool(s); %d refused", len(tools), refused)


async def exercise_everything(client: Client) -> None:
    """Every tool called, every resource read, every prompt fetched (what is offered)."""
    caps = client.server_capabilities
    if "tools" in caps:
        await call_every_tool(client)
    if "resources" in caps:
        for resource in await client.list_resources():
            await client.read_resource(resource.uri)
            log.info("read %s", resource.uri)
    if "prompts" in caps:
        for prompt in await client.list_prompts():
            arguments = {arg.name: f"conformance-{arg.name}" for arg in prompt.arguments or []
                         if arg.required}
            await client.get_prompt(prompt.name, arguments)
            log.info("got prompt %s", prompt.name)


async def call(client: Client, name: str, arguments: dict[str, Any], *,
               check: bool = False) -> types.CallToolResult:
    """Call a tool and log the outcome. With `check`, a tool error fails the scenario."""
    result = await client.call_tool(name, arguments)
    summary = " ".join(
        c.text for c in result.content if isinstance(c, types.TextContent))[:200]
    if result.is_error is True:
        log.warning("tool %s returned an error: %s", name, summary)
        if check:
            raise ScenarioFailed(f"tool {name} returned an error: {summary}")
    else:
        log.info("tool %s: %s", name, summary or "(no text)")
    return result


# --- entry point ----------------------------------------------------------------------------


def _plain(value: Any) -> dict[str, Any]:
    out = msgspec.to_builtins(value)
    return out if isinstance(out, dict) else {}


def load_context() -> Context:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ScenarioFailed(f"MCP_CONFORMANCE_CONTEXT is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT is not a JSON object")
    return value


def describe_failure(exc: BaseException) -> str:
    """One line for the exception (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, ScenarioFailed):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpkit.testing.conformance_client",
        description="mcpkit's client for the MCP conformance harness's client scenarios "
        "(the scenario comes from MCP_CONFORMANCE_SCENARIO).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("url", help="the scenario's server URL (the harness appends it)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or None
    label = name or "(no scenario)"
    run = run_auth if name.startswith("auth/") else SCENARIOS.get(name)
    if run is None:
        log.info("scenario %s has no dedicated steps: generic behaviour", label)
        run = run_generic
    log.info("scenario %s at protocol %s against %s", label, version or "(auto)", args.url)
    try:
        context = load_context()
        anyio.run(run, args.url, version, context)
    except KeyboardInterrupt:
        print(f"conformance_client: {label}: interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:  # one clear line; the traceback goes to the debug log
        log.debug("scenario %s failed", label, exc_info=True)
        print(f"conformance_client: {label}: {describe_failure(exc)}", file=sys.stderr)
        return 1
    log.info("scenario %s: done", label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
