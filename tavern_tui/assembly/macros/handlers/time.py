"""The time macros: `{{time}}`, `{{date}}`, `{{weekday}}`, `{{isotime}}`, `{{isodate}}`, `{{datetimeformat}}`,
`{{idleDuration}}` and `{{timeDiff}}`, formatted as moment.js does (`macros.moment`).

Rule source: SillyTavern 1.18 `macros/definitions/time-macros.js`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.moment import aware, humanize_duration, moment_format
from tavern_tui.assembly.macros.registry import macro, whole

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

_UTC_SPEC = re.compile(r"UTC([+-][0-9]+)")
_DATE_FORMATS = {"date": "LL", "weekday": "dddd", "isotime": "HH:mm", "isodate": "YYYY-MM-DD"}


def _now(ev: Evaluator) -> datetime:
    return aware(ev.ctx.now())


@macro("time", max=1)
def time(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    now = _now(ev)
    match = _UTC_SPEC.fullmatch(args[0]) if args else None
    if match:
        n = whole(match.group(1))
        minutes = n * 60 if -16 < n < 16 else n  # moment utcOffset(): |n| < 16 means hours
        if abs(minutes) < 24 * 60:
            now = now.astimezone(timezone(timedelta(minutes=minutes)))
    return moment_format(now, "LT")


@macro("date")
@macro("weekday")
@macro("isotime")
@macro("isodate")
def date(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return moment_format(_now(ev), _DATE_FORMATS[name])


@macro("datetimeformat", min=1, max=1)
def datetimeformat(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return moment_format(_now(ev), args[0])


@macro("idleDuration", "idle_duration")
def idle(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    last = ev.ctx.last_user_message_at
    if last is None:
        return "just now"
    return humanize_duration(_now(ev) - aware(last))


@macro("timeDiff", min=2, max=2)
def time_diff(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    """moment(a).diff(moment(b)) humanized with a suffix; ISO 8601 dates only (else moment's "Invalid date")."""
    try:
        left, right = (aware(datetime.fromisoformat(a.strip())) for a in args)
    except ValueError:
        return "Invalid date"
    delta = left - right
    words = humanize_duration(abs(delta))
    return f"in {words}" if delta >= timedelta(0) else f"{words} ago"
