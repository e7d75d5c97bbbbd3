"""`agent`: a read-only sub-agent that runs on the client's own model (sampling with tools).

The tool asks the client's model (`sampling/createMessage` with `tools`, 2025-11-25) to work
on `prompt` with the server's read-only tools (`view`, `glob`, `grep`, `ls`, described as
registered). Each answer is either a final text, which becomes the tool's result, or
`tool_use` blocks: the server runs those tools itself — through the server's own registry,
so arguments are validated and paths confined exactly as in a `tools/call` — and sends the
`tool_result`s back in the next sampling request. Any other tool name (`bash`, `write`, …)
gets an error `tool_result`; nothing else ever runs.

Budgets: at most `max_steps` sampling rounds (the last one with `toolChoice: none` and a
system prompt asking for the answer now) and `time_budget_s` seconds in all; when one runs
out the result says so and gives what the model said along the way.

Both eras run the same loop. In a legacy session each `ctx.sample` is a real request. In
the modern era each sampling round is an `input_required` round and the handler is re-run
from the top, so the loop never replays earlier rounds: the transcript (the messages after
the prompt), the round number and the start time live in `ctx.state`, sealed in the
`requestState`; round N asks under its own key `agent-N`, so a re-run finds exactly the one
answer it has not processed yet, processes it (runs its tools once), and asks for round
N+1. The consumed answer is dropped from `ctx.accepted` (the transcript already holds it),
so the sealed state does not grow by a copy of every answer. The transcript is bounded
(`MAX_TRANSCRIPT_BYTES`): tool output is cut per result, and older results are elided
when the whole grows too big.

What the sub-agent reads does not count as read by the task (`view` before `edit`): the
caller's model has not seen those files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
import msgspec

from mcpkit.coding.env import CodingEnv
from mcpkit.protocol import errors
from mcpkit.server.context import Context
from mcpkit.server.handlers import run_handler
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

READ_ONLY_TOOLS = ("view", "glob", "grep", "ls")
MAX_STEPS = 10
TIME_BUDGET_S = 300.0
MAX_TOKENS = 8192
MAX_CALLS_PER_STEP = 8
"""Tool uses answered per sampling round; further ones get an error result."""
MAX_RESULT_CHARS = 16_000
"""One tool result as the model sees it (the rest is cut with a note)."""
MAX_ARGUMENT_BYTES = 8_000
"""A tool use with bigger arguments is refused (it would only bloat the transcript)."""
MAX_TEXT_CHARS = 8_000
"""Text the model writes beside its tool uses, kept in the transcript."""
MAX_TRANSCRIPT_BYTES = 128 * 1024
"""The transcript carried between rounds (in the sealed modern `requestState`, 256 KiB)."""
STATE_VERSION = 1
ELIDED = "[output elided to keep the transcript small; run the tool again if you need it]"

SYSTEM_PROMPT = (
    "You are a sub-agent exploring a code workspace ({root}) to answer one task. You can "
    "only read: use the tools {tools} (paths relative to the workspace root). Search first "
    "(glob, grep), then view what matters. Work efficiently: you have at most {steps} steps. "
    "When you know the answer, reply with it as plain text, without tool calls: a concise, "
    "complete report with the relevant paths and line numbers."
)
LAST_STEP = (
    "\n\nThis is your last step: tools are disabled. Give your final answer now, from what "
    "you have found."
)

DESCRIPTION = (
    "Delegate a read-only investigation to a sub-agent that runs on your own model (through "
    "sampling with tools) and can use view, glob, grep and ls on the workspace. Use it for "
    "open-ended searches ('where is X handled?', 'how does Y work?') whose intermediate "
    "output you do not need to see; it returns the sub-agent's final report. It cannot "
    "change files or run commands. `prompt`: the complete task, with everything the "
    "sub-agent needs to know; `description`: a 3-5 word label. Needs a client that supports "
    "sampling with tools."
)
ANNOTATIONS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": False,
               "openWorldHint": False}


@dataclass
class Run:
    """One agent run: what the modern era carries in `ctx.state` between rounds."""

    started: float
    step: int = 0
    """Sampling rounds answered so far."""
    calls: int = 0
    """Tool uses answered so far (run or refused)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The transcript after the prompt: assistant turns and tool results."""

    def notes(self) -> list[str]:
        """Text the model wrote beside its tool uses (what is known if a budget runs out)."""
        return [b["text"] for m in self.messages if m.get("role") == "assistant"
                for b in m.get("content", []) if b.get("type") == "text"]

    def last_calls(self) -> list[str]:
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return [_describe_call(b.get("name"), b.get("input"))
                        for b in message.get("content", []) if b.get("type") == "tool_use"]
        return []

    @classmethod
    def load(cls, state: Any) -> Run:
        if isinstance(state, dict) and state.get("v") == STATE_VERSION:
            try:
                return cls(
                    started=float(state["started"]), step=int(state["step"]),
                    calls=int(state["calls"]), messages=list(state["messages"]),
                )
            except (KeyError, TypeError, ValueError):
                pass
        return cls(started=time.time())

    def dump(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "started": self.started, "step": self.step,
                "calls": self.calls, "messages": self.messages}

    def compact(self) -> bool:
        """Elide old tool output until the transcript fits; False if it still does not."""
        if _size(self.dump()) <= MAX_TRANSCRIPT_BYTES:
            return True
        # Oldest first, one result at a time: the newest output is the last to go.
        for message in self.messages:
            if message.get("role") != "user":
                continue
            for block in message.get("content", []):
                if block.get("type") == "tool_result" and block.get("content") != [
                        text_block(ELIDED)]:
                    block["content"] = [text_block(ELIDED)]
                    if _size(self.dump()) <= MAX_TRANSCRIPT_BYTES:
                        return True
        return False


def _size(value: Any) -> int:
    return len(msgspec.json.encode(value))


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[{what} cut: {len(text) - limit} more characters not shown]"


def _blocks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    content = answer.get("content")
    items = content if isinstance(content, list) else [content]
    return [b for b in items if isinstance(b, dict)]


def _describe_call(name: str, arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return f"{name}(?)"
    shown = ", ".join(f"{k}={json.dumps(v)[:60]}" for k, v in arguments.items())
    return f"{name}({shown})"


def _tool_result(use_id: str, content: list[dict[str, Any]], is_error: bool
                 ) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "toolUseId": use_id, "content": content}
    if is_error:
        block["isError"] = True
    return block


def _for_model(content: Any) -> list[dict[str, Any]]:
    """A tool's result content as the sub-agent sees it: text, cut; no binary payloads."""
    out: list[dict[str, Any]] = []
    budget = MAX_RESULT_CHARS
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = _cut(block["text"], max(budget, 0), "output")
            budget -= len(block["text"])
            out.append(text_block(text))
        elif kind in ("image", "audio"):
            out.append(text_block(f"[{kind} content ({block.get('mimeType', '?')}) is not "
                                  "passed to the sub-agent]"))
        else:
            out.append(text_block(f"[{kind} content not shown]"))
    return out or [text_block("(no output)")]


@contextmanager
def _reads_not_kept(env: CodingEnv) -> Iterator[None]:
    """The sub-agent's `view`s do not count as the task's reads (read-before-write): only
    the records a tool added or replaced are put back as they were."""
    reads = env.scopes.current().reads
    before = dict(reads)
    try:
        yield
    finally:
        for path, record in list(reads.items()):
            if before.get(path) is not record:
                if path in before:
                    reads[path] = before[path]
                else:
                    reads.pop(path, None)


class Agent:
    def __init__(self, server: Server, env: CodingEnv, max_steps: int, time_budget_s: float,
                 max_tokens: int) -> None:
        self.server = server
        self.env = env
        self.max_steps = max(1, max_steps)
        self.time_budget_s = time_budget_s
        self.max_tokens = max_tokens

    def tools(self) -> list[dict[str, Any]]:
        """The read-only tools as the model sees them (as registered on the server)."""
        found = []
        for name in READ_ONLY_TOOLS:
            tool = self.server.tools.get(name)
            if tool is not None and (tool.annotations or {}).get("readOnlyHint") is True:
                entry: dict[str, Any] = {"name": tool.name, "inputSchema": tool.input_schema}
                if tool.description:
                    entry["description"] = tool.description
                found.append(entry)
        return found

    async def run_tool(self, ctx: Context, use: dict[str, Any]) -> tuple[list[Any], bool]:
        """Run one tool use if it names a read-only tool: (content for the model, is_error)."""
        name, arguments = use.get("name"), use.get("input")
        allowed = {t["name"] for t in self.tools()}
        if name not in allowed:
            return [text_block(
                f"Tool {name!r} is not available to this sub-agent: it may only use "
                f"{', '.join(sorted(allowed))} (read-only).")], True
        if not isinstance(arguments, dict):
            return [text_block(f"The input of {name} must be an object")], True
        if _size(arguments) > MAX_ARGUMENT_BYTES:
            return [text_block(f"The arguments of {name} are too large")], True
        tool = self.server.tools[str(name)]
        kwargs, problems = tool.validate_arguments(arguments)
        if problems:
            return [text_block(f"Invalid arguments for tool {name}: " + "; ".join(problems))
                    ], True
        if tool.context_param is not None:
            kwargs[tool.context_param] = ctx
        try:
            with _reads_not_kept(self.env):
                result = await run_handler(tool.fn, kwargs, tool)
        except errors.McpError as exc:
            return [text_block(f"Error executing tool {name}: {exc.message}")], True
        return _for_model(result.get("content")), bool(result.get("isError"))

    async def answer_calls(self, ctx: Context, run: Run, uses: list[dict[str, Any]],
                           ids: list[str]) -> list[dict[str, Any]]:
        """The results of one step's tool calls, in order (past `MAX_CALLS_PER_STEP`: not
        run, said so); each call counts in `run.calls`."""
        results: list[dict[str, Any]] = []
        for index, use in enumerate(uses):
            if index >= MAX_CALLS_PER_STEP:
                content: list[Any] = [text_block(
                    f"Not run: at most {MAX_CALLS_PER_STEP} tool calls per step")]
                is_error = True
            else:
                content, is_error = await self.run_tool(ctx, use)
            results.append(_tool_result(ids[index], content, is_error))
            run.calls += 1
        return results

    async def __call__(self, prompt: str, description: str, ctx: Context) -> ToolResult:
        if not ctx.client_supports("sampling", "tools"):
            return _error(
                "The agent tool needs a client that supports sampling with tools (the "
                "`sampling.tools` capability, protocol 2025-11-25 or later); this client "
                "does not declare it. Do the investigation yourself with view, glob, grep "
                "and ls.")
        if not prompt.strip():
            return _error("prompt is empty")
        tools = self.tools()
        names = ", ".join(t["name"] for t in tools)
        system = SYSTEM_PROMPT.format(root=self.env.workspace.root, tools=names,
                                      steps=self.max_steps)
        first = {"role": "user", "content": {"type": "text", "text": prompt}}
        run = Run.load(ctx.state)
        label = description.strip() or "agent"
        while True:
            if run.step >= self.max_steps:
                return _stopped(run, f"the step budget ({self.max_steps} sampling rounds) is "
                                     "used up")
            left = self.time_budget_s - (time.time() - run.started)
            if left <= 0:
                return _stopped(run, f"the time budget ({self.time_budget_s:g} s) is used up")
            last = run.step == self.max_steps - 1
            key = f"agent-{run.step + 1}"
            ctx.state = run.dump()  # sealed with an input_required round (modern era)
            try:
                with anyio.move_on_after(left) as deadline:
                    answer = await ctx.sample(
                        [first, *run.messages], max_tokens=self.max_tokens,
                        system_prompt=system + (LAST_STEP if last else ""), tools=tools,
                        tool_choice={"mode": "none"} if last else None, key=key,
                        includeContext="none",
                    )
            except errors.McpError as exc:
                return _error(f"The agent's sampling request failed: {exc.message}")
            if deadline.cancelled_caught:
                return _stopped(run, f"the time budget ({self.time_budget_s:g} s) is used "
                                     "up (waiting for the model)")
            ctx.accepted.pop(key, None)  # the transcript keeps it; no second copy in state
            run.step += 1
            blocks = _blocks(answer)
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            text = "\n".join(b["text"] for b in blocks
                             if b.get("type") == "text" and isinstance(b.get("text"), str))
            if not uses:
                return _final(text, run)
            kept = _assistant_content(text, uses)
            run.messages.append({"role": "assistant", "content": kept})
            if last:  # it was told tools are disabled: stop rather than run them
                return _stopped(run, f"the step budget ({self.max_steps} sampling rounds) "
                                     "is used up")
            ids = [call["id"] for call in kept[-len(uses):]]
            results = await self.answer_calls(ctx, run, uses, ids)
            run.messages.append({"role": "user", "content": results})
            if not run.compact():
                return _stopped(run, "the transcript outgrew the agent's memory")
            await ctx.report_progress(run.step, self.max_steps,
                                      f"{label}: step {run.step}, {run.calls} tool calls")


def _assistant_content(text: str, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the transcript keeps of the model's turn: its text (cut at `MAX_TEXT_CHARS`) and
    its tool calls (an id made up where it has none; arguments past `MAX_ARGUMENT_BYTES`, or
    not an object, kept as `{}`)."""
    kept: list[dict[str, Any]] = []
    if text.strip():
        kept.append(text_block(_cut(text, MAX_TEXT_CHARS, "text")))
    for index, use in enumerate(uses):
        use_id = use.get("id")
        arguments = use.get("input")
        kept.append({
            "type": "tool_use", "name": str(use.get("name")),
            "id": use_id if isinstance(use_id, str) else f"call-{index}",
            "input": arguments if isinstance(arguments, dict)
            and _size(arguments) <= MAX_ARGUMENT_BYTES else {},
        })
    return kept


def _error(message: str) -> ToolResult:
    return ToolResult(content=[text_block(message)], is_error=True)


def _final(text: str, run: Run) -> ToolResult:
    if not text.strip():
        return _stopped(run, "the model's last answer had no text")
    return ToolResult(content=[text_block(text)],
                      meta={"agent": {"steps": run.step, "toolCalls": run.calls}})


def _stopped(run: Run, reason: str) -> ToolResult:
    parts = [f"[The agent stopped before a final answer: {reason}, after {run.step} sampling "
             f"rounds and {run.calls} tool calls.]"]
    notes, last_calls = run.notes(), run.last_calls()
    if notes:
        parts.append("What it said along the way:\n" + "\n\n".join(notes))
    else:
        parts.append("It wrote no findings along the way.")
    if last_calls:
        parts.append("Its last tool calls: " + "; ".join(last_calls))
    return ToolResult(content=[text_block("\n\n".join(parts))],
                      meta={"agent": {"steps": run.step, "toolCalls": run.calls,
                                      "stopped": reason}})


def register(server: Server, env: CodingEnv, *, max_steps: int = MAX_STEPS,
             time_budget_s: float = TIME_BUDGET_S, max_tokens: int = MAX_TOKENS) -> None:
    agent = Agent(server, env, max_steps, time_budget_s, max_tokens)

    async def run_agent(
        prompt: Annotated[str, "The task for the sub-agent, complete and self-contained"],
        description: Annotated[str, "A short (3-5 word) label of the task"],
        ctx: Context,
    ) -> ToolResult:
        return await agent(prompt, description, ctx)

    server.add_tool(run_agent, name="agent", title="Read-only sub-agent",
                    description=DESCRIPTION, annotations=ANNOTATIONS)
