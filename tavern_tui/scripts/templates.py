"""Restricted templates: ST-Prompt-Template's EJS syntax run in a sandboxed JavaScript engine.

Rule sources: ST-Prompt-Template (zonde306) README / docs/features.md (EJS in world info, preset
prompts, card fields and messages; `variables`, `getvar`, `setvar`, `print`, lodash `_`; known
issue: `<%= %>` outputs like `<%- %>`, unescaped) and EJS's documented syntax (mde/ejs
docs/syntax.md): `<% %>` scriptlet, `<%= %>` / `<%- %>` output (null and undefined print
nothing), `<%# %>` comment, `<%%` a literal `<%`, `<%_` strips the spaces and tabs before it,
`_%>` those after it, and `-%>` / `_%>` drop one newline that follows.

The engine is V8 through `mini-racer` (see `ENGINE_CHOICE`). Each evaluation: a time limit
(`TIME_LIMIT`), a V8 heap limit (`MEMORY_LIMIT`), and a step budget shared by every evaluation of
one build (`STEP_BUDGET`). The context has no `require`, `process`, `fetch`, filesystem, timers or
WebAssembly; jQuery, `execute` (slash commands) and `SillyTavern` are not offered. A template sees
only the variable snapshot it is given (`template_snapshot`); `setvar` writes are returned, for
the caller to stage as macro writes are. An error or timeout renders `marker(reason)` in place of
the whole text, is recorded, and never raises.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tavern_tui.lore.eval_budget import EXHAUSTED, EvalBudget

ENGINE_CHOICE = """mini-racer (V8) over quickjs: quickjs 1.19.4 (last release 2023-11) ships wheels only
for CPython 3.11/3.12 on x86_64 (no aarch64, no 3.13: a C build otherwise); mini-racer 0.14.1
(2026-02) ships py3-none wheels for manylinux x86_64 and aarch64, so every Python 3.11+. Both stop
an endless loop at the time limit and expose no host objects; mini-racer's `max_memory` raised
JSOOMException for array/object/string growth at 32 MB; its cost is size (~80 MB installed) and
~3.5 ms to create a context (one per build, reused by its evaluations)."""

TIME_LIMIT = 0.25
"""Seconds one template evaluation may run."""

MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes of V8 heap one evaluation may use."""

STEP_BUDGET = 1.5
"""Seconds all template evaluations of one build may take together; past it, the rest render a marker."""

MAX_TEMPLATE = 200_000
"""Characters of one template text; longer texts are not evaluated (marker)."""

MAX_OUTPUT = 200_000
"""Characters one evaluation may produce; more is an error (marker)."""

_OPEN = "<%"


def has_template(text: str) -> bool:
    """Whether `text` holds an EJS tag (cheap test before compiling)."""
    return _OPEN in text


def marker(reason: str) -> str:
    """The short text shown instead of a template that failed (`reason`: one short phrase)."""
    return f"⟨template error: {reason}⟩"


class TemplateSyntaxError(ValueError):
    """The EJS text cannot be compiled (an unclosed tag)."""


_TOKEN = re.compile(r"<%%|%%>|<%=|<%-|<%_|<%#|<%|-%>|_%>|%>")
_LEAD_SLURP = re.compile(r"[ \t]*<%_")
_TRAIL_SLURP = re.compile(r"_%>[ \t]*")
_NEWLINE = re.compile(r"\A(?:\r\n|\r|\n)")


def compile_ejs(text: str) -> str:
    """The JavaScript body of an EJS template: statements that call `__append` for output.

    Raises:
        TemplateSyntaxError: a tag is opened and never closed, or closed twice.
    """
    text = _TRAIL_SLURP.sub("_%>", _LEAD_SLURP.sub("<%_", text))
    out: list[str] = []
    mode: str | None = None
    code = ""
    truncate = False
    pos = 0
    for m in _TOKEN.finditer(text):
        chunk, token = text[pos:m.start()], m.group(0)
        pos = m.end()
        if mode is None:
            if truncate:
                chunk = _NEWLINE.sub("", chunk)
                truncate = False
            if chunk:
                out.append(f"__append({json.dumps(chunk)});")
            if token == "<%%":
                out.append('__append("<%");')
            elif token in ("%%>", "%>", "-%>", "_%>"):
                out.append(f"__append({json.dumps('%>' if token == '%%>' else token)});")  # text, as in EJS
            else:
                mode, code = token, ""
            continue
        if token in ("<%%", "%%>"):
            code += chunk + token[0] + token[2] if token == "<%%" else chunk + "%>"
            continue
        if token not in ("%>", "-%>", "_%>"):
            raise TemplateSyntaxError(f"{token!r} inside an open tag")
        out.append(_code(mode, code + chunk))
        truncate = token in ("-%>", "_%>")
        mode = None
    if mode is not None:
        raise TemplateSyntaxError(f"tag {mode!r} is never closed")
    rest = text[pos:]
    if truncate:
        rest = _NEWLINE.sub("", rest)
    if rest:
        out.append(f"__append({json.dumps(rest)});")
    return "\n".join(out)


def _code(mode: str, code: str) -> str:
    if mode == "<%#":
        return ""
    if mode in ("<%=", "<%-"):
        return f"__append({code.strip().rstrip(';')});"
    return code + "\n;"


# The sandbox's JavaScript: the prelude (run once per context), then, after the marker line, the
# evaluator function each template is passed to.
_PRELUDE, _EVAL = (Path(__file__).with_name("sandbox.js").read_text(encoding="utf-8").split("// @@EVAL@@\n"))


def template_snapshot(local_vars: Mapping[str, Any], global_vars: Mapping[str, Any],
                      message_vars: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The variables a template sees, by scope: `{"message", "local", "global"}` (ST-Prompt-Template's
    priority when reading: message, then local, then global). `message_vars` is where per-message
    state (MVU's `stat_data`) goes; today callers pass the macro variables only. Values that JSON
    cannot hold are turned into their text."""
    def plain(values: Mapping[str, Any] | None) -> dict[str, Any]:
        return json.loads(json.dumps(dict(values or {}), default=str))

    return {"message": plain(message_vars), "local": plain(local_vars), "global": plain(global_vars)}


@dataclass(frozen=True)
class Rendered:
    """One evaluation: the text, the `setvar` writes (`{"scope", "name", "value"}` each, in order,
    `value` the variable's whole new value) and the error phrase ("" when it ran)."""

    text: str
    writes: tuple[dict[str, Any], ...] = ()
    error: str = ""


@dataclass
class TemplateRunner:
    """Evaluates templates for one build, in one V8 context (created on first use, thrown away
    after an error that may leave it broken). Not thread-safe: one build, one runner.

    Attributes:
        time_limit / memory_limit / budget: see `TIME_LIMIT`, `MEMORY_LIMIT`, `STEP_BUDGET`.
        spent: seconds used so far; failures: `(where, reason)` of every failed evaluation.
    """

    time_limit: float = TIME_LIMIT
    memory_limit: int = MEMORY_LIMIT
    budget: float = STEP_BUDGET
    deadline: EvalBudget | None = None
    """The build's whole evaluation budget (`lore.eval_budget`): a template gets at most
    what is left of it, its run is charged to it, and none runs once it is used up."""
    spent: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    evaluations: int = 0
    _ctx: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _context(self) -> Any:
        if self._ctx is None:
            from py_mini_racer import MiniRacer  # loaded only when a text holds a template

            # Made on a thread with no running asyncio loop, so mini-racer starts a loop of its own:
            # built on a step's event-loop thread it would borrow that loop, and its blocking
            # `eval` refuses to run there.
            made: list[Any] = []
            maker = threading.Thread(target=lambda: made.append(MiniRacer()), name="template-v8", daemon=True)
            maker.start()
            maker.join()
            if not made:
                raise RuntimeError("the JavaScript engine did not start")
            ctx = made[0]
            ctx.eval(_PRELUDE)
            self._ctx = ctx
        return self._ctx

    def close(self) -> None:
        """Release the V8 context."""
        if self._ctx is not None:
            try:
                self._ctx.eval("0", timeout=1000)  # drains a terminated script's late callback first
            except Exception:  # noqa: BLE001, S110 - a broken context is closed all the same
                pass
            try:
                self._ctx.close()
            finally:
                self._ctx = None

    def render(self, text: str, snapshot: dict[str, dict[str, Any]], where: str = "") -> Rendered:
        """Evaluate the EJS `text` against `snapshot` (`template_snapshot`); `where` names it in
        `failures` (e.g. "world info: Book/12"). Never raises: a failure renders `marker`."""
        if not has_template(text):
            return Rendered(text)
        with self._lock:
            rendered = self._render(text, snapshot)
        if rendered.error:
            self.failures.append((where, rendered.error))
            deadline = self.deadline
            if rendered.error == EXHAUSTED and deadline is not None:
                with deadline.part(deadline.where or where):
                    deadline.refuse("template not run")
        return rendered

    def _render(self, text: str, snapshot: dict[str, dict[str, Any]]) -> Rendered:
        from py_mini_racer import JSEvalException, JSOOMException, JSTimeoutException

        if len(text) > MAX_TEMPLATE:
            return Rendered(marker("template too long"), error="template too long")
        left = self.budget - self.spent
        deadline = self.deadline
        if deadline is not None and deadline.exhausted():
            return Rendered(marker("evaluation budget used up"), error=EXHAUSTED)
        # Whole milliseconds: V8 reads a timeout of 0 as none at all, so less than 1 ms left is used up.
        timeout_ms = int(min(self.time_limit, left, deadline.left() if deadline is not None else left) * 1000)
        if timeout_ms < 1:
            return Rendered(marker("template time budget used up"), error="template time budget used up")
        try:
            body = compile_ejs(text)
        except TemplateSyntaxError as error:
            return Rendered(marker("syntax"), error=f"syntax: {error}")
        started = time.perf_counter()
        self.evaluations += 1
        try:
            ctx = self._context()
            call = f"{_EVAL}({json.dumps(json.dumps(snapshot))}, {json.dumps(body)})"
            raw = ctx.eval(call, timeout=timeout_ms, max_memory=self.memory_limit)
        except JSTimeoutException:  # V8 terminated the script; the context stays usable
            return Rendered(marker("timed out"), error=f"timed out after {self.time_limit * 1000:.0f} ms")
        except JSOOMException:
            self.close()
            limit = self.memory_limit >> 20
            return Rendered(marker("out of memory"), error=f"out of memory (over the {limit} MB limit)")
        except JSEvalException as error:
            first = str(error).strip().splitlines()
            reason = _short(first[0] if first else "error")
            return Rendered(marker(reason), error=reason)
        except Exception as error:  # noqa: BLE001 - an engine failure must not stop the step
            self.close()
            return Rendered(marker("engine error"), error=f"engine error: {type(error).__name__}")
        finally:
            took = time.perf_counter() - started
            self.spent += took
            if deadline is not None:  # V8 ran on its own thread: not in this thread's CPU time
                deadline.charge(took)
        try:
            result = json.loads(raw)
        except (TypeError, ValueError):
            return Rendered(marker("bad result"), error="bad result")
        out = str(result.get("out", ""))
        if len(out) > MAX_OUTPUT:
            return Rendered(marker("output too long"), error="output too long")
        return Rendered(out, tuple(w for w in result.get("writes", []) if isinstance(w, dict)))


def _short(message: str) -> str:
    # "<anonymous>:3: ReferenceError: require is not defined" → "ReferenceError: require is not defined"
    m = re.search(r"\b([A-Z][A-Za-z]*Error\b.*)", message)
    text = m.group(1) if m else message
    return text[:120]


def apply_writes(writes: tuple[dict[str, Any], ...], local_vars: dict[str, Any], global_vars: dict[str, Any]) -> None:
    """Stage `setvar` writes into the macro variables (they commit with the step's variables):
    "global" goes to `global_vars`, "local" and "message" to `local_vars` (per-message variables
    are MVU's; until they exist here a message write lands in the chat's)."""
    for write in writes:
        name = write.get("name")
        if not isinstance(name, str) or not name:
            continue
        target = global_vars if write.get("scope") == "global" else local_vars
        target[name] = write.get("value")
