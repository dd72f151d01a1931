"""Finding MVU update commands in a reply: `_.set(…);//reason` calls and `<JsonPatch>` blocks.

Rules: MagVarUpdate src/function/update_variables.ts (semantics file §2, §3, §6): `extractCommands` :281-400
(every command anywhere in the text, ordered by where it starts; a JSON-patch block's ops share its opening
tag's position), `findMatchingCloseParen` :414-450, `parseParameters` :454-515, `pathFix` :517-593,
`extractJsonPatch` :203-266 and `isJsonPatch` (src/util.ts:48-62). Arguments stay raw strings; values are
parsed only when a command runs (`mvu.update`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tavern_tui.mvu.jsutil import js_stringify, to_path
from tavern_tui.mvu.values import ParseError, parse_string, trim_quotes

__all__ = ["ALIASES", "Command", "extract_commands", "find_matching_close_paren", "json_patch_commands",
           "parse_parameters", "path_fix"]

ALIASES = {"remove": "delete", "unset": "delete", "assign": "insert"}
"""What `updateVariables` renames before running (:705-713)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command as `extractCommands` returns it.

    Attributes:
        type: the name as written (set, insert, assign, remove, unset, delete, add; move from JSON patch).
        args: the raw argument texts, trimmed.
        reason: the `// …` comment after the `;` ("" none), `json_patch` for a patch op.
        full_match: the command's text (a patch op: its JSON).
        start: where it starts in the text (a patch op: its block's opening tag).
    """

    type: str
    args: tuple[str, ...]
    reason: str
    full_match: str
    start: int

    def to_json(self) -> dict[str, Any]:
        """`{"type", "path", "args", "reason"}` (`path`: the first argument as the command will use it)."""
        return {"type": self.type, "path": path_fix(trim_quotes(self.args[0])) if self.args else "",
                "args": list(self.args), "reason": self.reason}


_COMMAND = re.compile(r"_\.(set|insert|assign|remove|unset|delete|add)\(")
_COMMENT = re.compile(r"\s*//([^\n\r\u2028\u2029]*)")
_PATCH = re.compile(r"<(json_?patch)>(?:\s*```[^\n\r\u2028\u2029]*)?((?:(?!<json_?patch>)[\s\S])*?)(?:```\s*)?</\1>",
                    re.IGNORECASE)
_MIN_ARGS = {"set": 2, "insert": 2, "assign": 2, "remove": 1, "unset": 1, "delete": 1}


def find_matching_close_paren(text: str, start: int) -> int:
    """Index of the `)` closing the `(` just before `start`, or -1. Parentheses inside ' " ` quotes are
    skipped; a quote after a backslash does not toggle quoting (MVU's `findMatchingCloseParen`)."""
    return _scan_close(text, start)[0]


_QUOTE_CODE = {"": 0, "'": 1, '"': 2, "`": 3}


class _FailedScan:
    """A `find_matching_close_paren` scan from `start` that reached the end unclosed, position by position.

    The scan is an automaton on the quote state whose moves (a quote character swaps "" with itself) are the
    same for every scan, so two scans in one state at one position move alike from there, their depths a
    constant apart. A later scan from `p` that starts in step with this one (its state "" here too) fails
    exactly when this one's depth never drops below its depth at `p`; at most four scans are ever out of
    step, so `extract_commands` stays linear however many unclosed `_.set(` a reply holds.
    """

    def __init__(self, text: str, start: int, quotes: bytearray, depths: list[int]) -> None:
        self.start = start
        self.quotes = quotes  # quote state (`_QUOTE_CODE`) before each index from `start`
        self.depths = depths  # depth before each index from `start`, and after the last
        self.suffix_min = depths[:]
        for j in range(len(depths) - 2, -1, -1):
            self.suffix_min[j] = min(depths[j], self.suffix_min[j + 1])

    def fails_from(self, p: int) -> bool | None:
        """Whether a scan from `p` is unclosed too; None when that scan is not in step with this one."""
        j = p - self.start
        if self.quotes[j] != 0:
            return None
        return self.suffix_min[j + 1] >= self.depths[j]


def _scan_close(text: str, start: int) -> tuple[int, _FailedScan | None]:
    """`find_matching_close_paren`, and the recorded scan when there is no close (-1)."""
    depth, quote = 1, ""
    quotes, depths = bytearray(), []
    for i in range(start, len(text)):
        quotes.append(_QUOTE_CODE[quote])
        depths.append(depth)
        ch = text[i]
        if ch in "\"'`" and (i == 0 or text[i - 1] != "\\"):
            if not quote:
                quote = ch
            elif ch == quote:
                quote = ""
        if not quote:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return i, None
    depths.append(depth)
    return -1, _FailedScan(text, start, quotes, depths)


def _close_paren(text: str, start: int, failed: list[_FailedScan]) -> int:
    """`find_matching_close_paren(text, start)`, answered from an earlier unclosed scan when one is in step."""
    if start >= len(text):
        return -1
    for scan in failed:
        verdict = scan.fails_from(start)
        if verdict is True:
            return -1
        if verdict is False:
            return find_matching_close_paren(text, start)  # it closes: the caller moves past the close
    close, scan = _scan_close(text, start)
    if scan is not None:
        failed.append(scan)
    return close


def parse_parameters(text: str) -> list[str]:
    """Split arguments at commas outside quotes, (), [] and {}; each trimmed; a trailing empty one dropped."""
    params: list[str] = []
    current: list[str] = []
    quote = ""
    paren = bracket = brace = 0
    for i, ch in enumerate(text):
        if ch in "\"'`" and (i == 0 or text[i - 1] != "\\"):
            if not quote:
                quote = ch
            elif ch == quote:
                quote = ""
        if not quote:
            paren += (ch == "(") - (ch == ")")
            bracket += (ch == "[") - (ch == "]")
            brace += (ch == "{") - (ch == "}")
        if ch == "," and not quote and paren == 0 and bracket == 0 and brace == 0:
            params.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    last = "".join(current).strip()
    if last:
        params.append(last)
    return params


_BRACKET = re.compile(r"\[([^\]]*)\]")
_QUOTED_DOT = re.compile(r"(^|\.)([\"'])([^\"']*)\2(?=\.|\[|$)")


def path_fix(path: str) -> str:
    """`pathFix`: bracket keys that are quoted digits or hold spaces become `["…"]`, bare digits stay indexes;
    a quoted dot segment loses its quotes (or becomes `["…"]` when it holds spaces, `.`, `[` or `]`)."""
    if not path:
        return path

    def bracket(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        if not inner:
            return "[]"
        quoted = len(inner) >= 2 and inner[0] in "\"'" and inner[0] == inner[-1]
        if quoted:
            inner = inner[1:-1]
        if re.fullmatch(r"\d+", inner):
            return f"[{inner}]" if not quoted else '["' + inner.replace('"', '\\"') + '"]'
        if re.search(r"\s", inner):
            return '["' + inner.replace('"', '\\"') + '"]'
        return f"[{inner}]"

    def dotted(m: re.Match[str]) -> str:
        prefix, name = m.group(1), m.group(3)
        if not re.search(r"\s", name) and not re.search(r"[.\[\]]", name):
            return prefix + name
        escaped = name.replace('"', '\\"')
        return f'["{escaped}"]' if prefix == "." else f'{prefix}["{escaped}"]'

    return _QUOTED_DOT.sub(dotted, _BRACKET.sub(bracket, path))


def _patch_path(path: object) -> str:
    if not isinstance(path, str) or not path:
        return ""
    return (path[1:] if path.startswith("/") else path).replace("/", ".")


def _is_json_patch(patch: Any) -> bool:
    if not isinstance(patch, list):
        return False
    return all(isinstance(op, dict) and isinstance(op.get("op"), str)
               and (isinstance(op.get("path"), str) or (op.get("op") == "move" and isinstance(op.get("to"), str)))
               for op in patch)


def _value_json(op: dict[str, Any]) -> str:
    return js_stringify(op["value"]) if "value" in op else "undefined"


def json_patch_commands(patch: list[dict[str, Any]], start: int = 0) -> list[Command]:
    """`extractJsonPatch`: replace → set, delta → add, add/insert → insert(container, key, value) (all-digit
    keys stay bare, others quoted, `-` quoted for append), remove → delete, move → move; other ops dropped."""
    out: list[Command] = []
    for op in patch:
        path = _patch_path(op.get("path") if op.get("path") is not None else op.get("to"))
        full = json.dumps(op, ensure_ascii=False, separators=(",", ":"))
        kind = op.get("op")
        if kind == "replace":
            out.append(Command("set", (path, _value_json(op)), "json_patch", full, start))
        elif kind == "delta":
            out.append(Command("add", (path, _value_json(op)), "json_patch", full, start))
        elif kind in ("insert", "add"):
            parts = to_path(path)
            last = parts[-1] if parts else ""
            container = ".".join(parts[:-1])
            key = last if re.fullmatch(r"\d+", last) else f"'{last}'"
            out.append(Command("insert", (container, key, _value_json(op)), "json_patch", full, start))
        elif kind == "remove":
            out.append(Command("delete", (path,), "json_patch", full, start))
        elif kind == "move":
            out.append(Command("move", (_patch_path(op.get("from")), path), "json_patch", full, start))
    return out


def extract_commands(text: str) -> list[Command]:
    """Every command in `text`, in the order they start (`extractCommands`); calls with the wrong number of
    arguments, no `;` right after the `)` or no closing `)` are left out, as are invalid JSON-patch blocks."""
    found: list[Command] = []
    for m in _PATCH.finditer(text):
        try:
            patch = parse_string(m.group(2).strip())
        except (ParseError, RecursionError):
            continue
        if _is_json_patch(patch):
            found.extend(json_patch_commands(patch, m.start()))
    i = 0
    failed: list[_FailedScan] = []  # unclosed scans so far: each later one is answered from them
    while i < len(text):
        m = _COMMAND.search(text, i)
        if m is None:
            break
        kind, start, open_paren = m.group(1), m.start(), m.end()
        close = _close_paren(text, open_paren, failed)
        if close == -1:
            i = open_paren
            continue
        end = close + 1
        if end >= len(text) or text[end] != ";":
            i = close + 1
            continue
        end += 1
        reason = ""
        comment = _COMMENT.match(text, end)
        if comment:
            reason = comment.group(1).strip()
            end = comment.end()
        params = parse_parameters(text[open_paren:close])
        valid = len(params) == 2 if kind == "add" else len(params) >= _MIN_ARGS[kind]
        if valid:
            found.append(Command(kind, tuple(params), reason, text[start:end], start))
        i = end
    found.sort(key=lambda c: c.start)  # stable: a patch block's ops keep their order
    return found
