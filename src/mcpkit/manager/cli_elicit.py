"""How `mcpkit call` answers what a server asks while its tool runs.

- Elicitation, form mode: on a terminal (stdin and stderr are TTYs) the user fills the form
  field by field on stderr, each answer checked against the requested schema, then accepts,
  declines or cancels. `--answer FIELD=VALUE` / `--answers JSON` fill fields beforehand
  (asked no more), `--decline` declines every request. Off a terminal with a required field
  unanswered, the call ends with one line saying what the server asked and which flags
  answer it.
- Elicitation, URL mode: the URL is printed and (http/https only, unless `--no-browser`)
  opened in the browser; the user presses Enter once done there. Off a terminal: the same
  kind of error (the URL is printed in it), or `--decline`.
- Sampling: `mcpkit call` has no model; it does not declare the capability, and a server
  that needs it gets a plain explanation of why the call failed (`explain`).

Everything the server wrote is shown through `elicit_form.clean`.
"""

from __future__ import annotations

import argparse
import json
import sys
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import anyio.to_thread
import msgspec

from mcpkit.client import Responders
from mcpkit.manager.cli_config import EXIT_FAILED, CliError
from mcpkit.manager.elicit_form import (
    Field,
    FormLimits,
    check,
    clean,
    parse_answer,
    parse_form,
)
from mcpkit.protocol import errors, types

DEFAULT_MAX_TRIES = 5
"""Times one field is asked again after an invalid answer before the form is cancelled."""
MAX_PRE_ANSWERS = 256
"""`--answer` flags (and `--answers` keys) one call takes."""
OPENABLE_SCHEMES = ("http", "https")
"""URL-mode links opened in the browser; any other is only printed."""

ANSWER_HINT = ("answer beforehand with --answer FIELD=VALUE (repeat it) or --answers JSON, "
               "decline with --decline, or run the command in a terminal to be asked")


class _Declined(Exception):
    """The user declined (`decline`) or dismissed (`cancel`) the request."""

    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


@dataclass
class PreAnswers:
    """What the command line answers beforehand."""

    values: dict[str, Any] = field(default_factory=dict)  # --answers (JSON values)
    texts: dict[str, str] = field(default_factory=dict)  # --answer (typed, like at a prompt)
    decline: bool = False

    @classmethod
    def from_args(cls, answers_json: str | None, pairs: list[str], decline: bool
                  ) -> PreAnswers:
        """From the flags; CliError (exit 2) for a malformed one."""
        if decline and (answers_json is not None or pairs):
            raise CliError("--decline cannot be combined with --answer/--answers",
                           hint="either answer the server's questions or decline them")
        values: dict[str, Any] = {}
        if answers_json is not None:
            try:
                values = json.loads(answers_json)
            except json.JSONDecodeError as exc:
                raise CliError(f"--answers is not valid JSON: {exc.msg} at column {exc.colno}",
                               hint="e.g. --answers '{\"name\": \"Ada\", \"age\": 36}'"
                               ) from exc
            if not isinstance(values, dict):
                raise CliError("--answers must be a JSON object of field names to values",
                               hint="e.g. --answers '{\"name\": \"Ada\"}'")
        texts: dict[str, str] = {}
        for pair in pairs:
            name, sep, value = pair.partition("=")
            if not sep or not name:
                raise CliError(f"--answer expects FIELD=VALUE, not {pair!r}",
                               hint="e.g. --answer name=Ada --answer age=36")
            texts[name] = value
        if len(values) + len(texts) > MAX_PRE_ANSWERS:
            raise CliError(f"at most {MAX_PRE_ANSWERS} answers may be given beforehand")
        return cls(values, texts, decline)

    def for_field(self, fld: Field, limits: FormLimits) -> tuple[bool, Any]:
        """(given, value) for `fld`; CliError for an answer the field does not take."""
        try:
            if fld.name in self.texts:
                return True, parse_answer(fld, self.texts[fld.name], limits)
            if fld.name in self.values:
                return True, check(fld, self.values[fld.name])
        except ValueError as exc:
            raise CliError(f"the answer given for {clean(fld.name, limits.max_text)!r} does not "
                           f"fit the server's form: {exc}",
                           hint=f"the field is {fld.summary(limits.max_text)}") from None
        return False, None


@dataclass
class Terminal:
    """Where the questions go and the answers come from (stderr and stdin)."""

    read: Callable[[], str]
    out: TextIO
    interactive: bool

    @classmethod
    def of_process(cls) -> Terminal:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
        return cls(sys.stdin.readline, sys.stderr, interactive)

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    async def ask(self, prompt: str) -> str:
        """One line from the user (the event loop keeps running meanwhile); EOF cancels."""
        self.out.write(prompt)
        self.out.flush()
        line = await anyio.to_thread.run_sync(self.read, abandon_on_cancel=True)
        if not line:
            self.say("")
            raise _Declined("cancel")
        return line.rstrip("\n")


class CliAnswers:
    """The elicitation handler of `mcpkit call`; `problem` says what it could not answer."""

    def __init__(self, pre: PreAnswers, terminal: Terminal, *, open_browser: bool = True,
                 limits: FormLimits | None = None, max_tries: int = DEFAULT_MAX_TRIES,
                 opener: Callable[[str], bool] = webbrowser.open) -> None:
        self.pre = pre
        self.terminal = terminal
        self.open_browser = open_browser
        self.limits = limits or FormLimits()
        self.max_tries = max_tries
        self.opener = opener
        self.problem: CliError | None = None
        self._one_at_a_time = anyio.Lock()  # a server may ask several things at once

    def client_options(self) -> dict[str, Any]:
        """The `Client` options that declare and answer elicitation (both modes)."""
        return {"responders": Responders(elicitation=self, elicitation_modes=("form", "url"))}

    async def __call__(self, request: types.ElicitRequestParams) -> dict[str, Any]:
        if self.pre.decline:
            return {"action": "decline"}
        async with self._one_at_a_time:
            try:
                if request.mode == "url":
                    return await self._url(request)
                return await self._form(request)
            except _Declined as outcome:
                self.terminal.say(f"(sent: {outcome.action})")
                return {"action": outcome.action}

    # --- form mode ---------------------------------------------------------------------------

    async def _form(self, request: types.ElicitRequestParams) -> dict[str, Any]:
        schema = request.requested_schema if request.requested_schema is not msgspec.UNSET \
            else {}
        fields = parse_form(schema, self.limits)
        content: dict[str, Any] = {}
        missing: list[Field] = []
        for fld in fields:
            given, value = self._pre_answer(fld)
            if given:
                content[fld.name] = value
            elif fld.required or self.terminal.interactive:
                missing.append(fld)
        if not missing:
            return {"action": "accept", "content": content}
        if not self.terminal.interactive:
            required = [f for f in missing if f.required]
            if not required:
                return {"action": "accept", "content": content}
            fields_text = "; ".join(f.summary(self.limits.max_text) for f in missing)
            known = {f.name for f in fields}
            strays = sorted(n for n in [*self.pre.texts, *self.pre.values] if n not in known)
            if strays:  # a misspelt --answer, most likely
                fields_text += "; answers given for fields it does not have: " + ", ".join(
                    clean(n, 40) for n in strays[:8])
            self._cannot_ask(f"the server asked for input: {self._message(request)} "
                             f"(fields: {fields_text})",
                             example=" ".join(f"--answer {clean(f.name, 40)}=VALUE"
                                              for f in required[:4]))
        self._show_message(request, "fill in the form")
        await self._confirm_start()
        for fld in missing:
            value = await self._ask_field(fld)
            if value is not None:
                content[fld.name] = value
        await self._confirm_send(content)
        return {"action": "accept", "content": content}

    def _pre_answer(self, fld: Field) -> tuple[bool, Any]:
        try:
            return self.pre.for_field(fld, self.limits)
        except CliError as exc:
            self.problem = exc
            raise errors.invalid_params(f"mcpkit call: {exc.message}") from None

    async def _confirm_start(self) -> None:
        choice = (await self.terminal.ask("answer it? [Y]es / [d]ecline / [c]ancel: ")).strip()
        if choice.lower() in ("d", "decline", "n", "no"):
            raise _Declined("decline")
        if choice.lower() in ("c", "cancel"):
            raise _Declined("cancel")

    async def _ask_field(self, fld: Field) -> Any:
        """The checked value for `fld`, or None to leave an optional field out."""
        text = self.limits.max_text
        label = clean(fld.title or fld.name, text)
        self.terminal.say(f"\n{label}" + (f" ({clean(fld.name, text)})" if fld.title else "")
                          + (" *required" if fld.required else ""))
        if fld.description:
            self.terminal.say(f"  {clean(fld.description, text)}")
        for number, (value, shown) in enumerate(fld.options, 1):
            self.terminal.say(f"  {number}) {clean(shown, text)}"
                              + (f" [{clean(value, text)}]" if shown != value else ""))
        prompt = f"  {_kind_hint(fld)}" + (
            f" [default: {clean(_shown(fld.default), text)}]" if fld.has_default else "") + ": "
        for _ in range(self.max_tries):
            typed = await self.terminal.ask(prompt)
            if not typed.strip():
                if fld.has_default:
                    return fld.default
                if not fld.required:
                    return None
                self.terminal.say("  this field is required")
                continue
            try:
                return parse_answer(fld, typed, self.limits)
            except ValueError as exc:
                self.terminal.say(f"  {exc}")
        self.terminal.say(f"  no valid answer after {self.max_tries} tries")
        raise _Declined("cancel")

    async def _confirm_send(self, content: dict[str, Any]) -> None:
        shown = clean(json.dumps(content, ensure_ascii=False), self.limits.max_message)
        choice = (await self.terminal.ask(
            f"\nsend {shown}? [Y]es / [d]ecline / [c]ancel: ")).strip().lower()
        if choice in ("d", "decline", "n", "no"):
            raise _Declined("decline")
        if choice in ("c", "cancel"):
            raise _Declined("cancel")

    # --- URL mode ----------------------------------------------------------------------------

    async def _url(self, request: types.ElicitRequestParams) -> dict[str, Any]:
        url = request.url if isinstance(request.url, str) else ""
        shown = clean(url, self.limits.max_message)
        if not self.terminal.interactive:
            self._cannot_ask(f"the server asks you to open a URL: {self._message(request)} "
                             f"({shown})", example=None)
        self._show_message(request, "open a link")
        self.terminal.say(f"  {shown}")
        openable = _scheme(url) in OPENABLE_SCHEMES and shown == url
        if self.open_browser and openable:
            await self.terminal.ask("press Enter to open it in your browser (Ctrl-D cancels) ")
            if not self.opener(url):
                self.terminal.say("  could not start a browser: open the link yourself")
        elif not openable:
            self.terminal.say("  (not opened: only plain http and https links are opened)")
        choice = (await self.terminal.ask(
            "when you are done there: [Y]es, done / [d]ecline / [c]ancel: ")).strip().lower()
        if choice in ("d", "decline", "n", "no"):
            raise _Declined("decline")
        if choice in ("c", "cancel"):
            raise _Declined("cancel")
        return {"action": "accept"}

    # --- shared ------------------------------------------------------------------------------

    def _message(self, request: types.ElicitRequestParams) -> str:
        return repr(clean(request.message, self.limits.max_message))

    def _show_message(self, request: types.ElicitRequestParams, what: str) -> None:
        self.terminal.out.write("\r\x1b[K")  # our own: wipe the progress line, if any
        self.terminal.say(f"the server asks you to {what}:")
        for line in clean(request.message, self.limits.max_message, lines=True).splitlines():
            self.terminal.say(f"  | {line}")

    def _cannot_ask(self, message: str, example: str | None) -> None:
        hint = (f"{ANSWER_HINT} (e.g. {example})" if example is not None else
                "this needs a person at a browser: run the command in a terminal, or "
                "decline with --decline")
        self.problem = CliError(f"{message}; it cannot be asked here (not a terminal)",
                                hint=hint)
        raise errors.invalid_params("mcpkit call cannot ask the user here (not a terminal)")


def _kind_hint(fld: Field) -> str:
    if fld.kind == "boolean":
        return "yes/no"
    if fld.kind == "choice":
        return "number or value"
    if fld.kind == "choices":
        return "numbers or values, comma-separated"
    bounds = ""
    if fld.minimum is not None or fld.maximum is not None:
        bounds = f" {_num(fld.minimum)}..{_num(fld.maximum)}"
    return (fld.format or ("text" if fld.kind == "string" else fld.kind)) + bounds


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower() if ":" in url else ""


# --- the hook of `mcpkit call` ----------------------------------------------------------------


def from_args(args: argparse.Namespace) -> CliAnswers:
    """The handler for `mcpkit call`'s flags (CliError for malformed ones)."""
    pre = PreAnswers.from_args(getattr(args, "answers", None), getattr(args, "answer", None)
                               or [], bool(getattr(args, "decline", False)))
    return CliAnswers(pre, Terminal.of_process(),
                      open_browser=not getattr(args, "no_browser", False))


def explain(answers: CliAnswers, exc: BaseException | None) -> None:
    """After the call: raise the clear error for what could not be answered, if anything
    (the failure it caused is only its consequence)."""
    if answers.problem is not None:
        raise answers.problem from None
    if exc is not None and _wants_sampling(exc):
        raise CliError("the tool asks the client's model for a completion (sampling), and "
                       "mcpkit call has no model to offer",
                       hint="call this tool from an MCP client backed by a model (an agent)",
                       code=EXIT_FAILED) from None


def _wants_sampling(exc: BaseException) -> bool:
    code = getattr(exc, "code", None)
    data = getattr(exc, "data", None)
    return code == errors.MISSING_REQUIRED_CLIENT_CAPABILITY and isinstance(data, dict) \
        and "sampling" in (data.get("requiredCapabilities") or {})
