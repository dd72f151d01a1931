"""Time formatting for the time macros: moment.js `format()` (en locale) and `Duration#humanize`.

Rule source: SillyTavern 1.18 `macros/definitions/time-macros.js`, which formats with moment.js.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

__all__ = ["aware", "humanize_duration", "moment_format"]

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_LOCAL_FORMATS = {"LT": "h:mm A", "LTS": "h:mm:ss A", "L": "MM/DD/YYYY", "LL": "MMMM D, YYYY",
                  "LLL": "MMMM D, YYYY h:mm A", "LLLL": "dddd, MMMM D, YYYY h:mm A", "l": "M/D/YYYY",
                  "ll": "MMM D, YYYY", "lll": "MMM D, YYYY h:mm A", "llll": "ddd, MMM D, YYYY h:mm A"}
_MOMENT_TOKENS = re.compile(
    r"\[[^\[]*\]|\\.|LTS|LT|LLLL|LLL|LL|L|llll|lll|ll|l|YYYY|YY|Qo|Q|MMMM|MMM|MM|Mo|M|DDDD|DDDo|DDD|DD|Do|D"
    r"|dddd|ddd|dd|do|d|HH|H|hh|h|kk|k|mm|m|ss|s|SSS|SS|S|A|a|ZZ|Z|X|x", re.DOTALL)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _offset(dt: datetime, colon: bool) -> str:
    delta = dt.utcoffset() or timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{':' if colon else ''}{mins:02d}"


def moment_format(dt: datetime, fmt: str) -> str:
    """Format `dt` like moment.js `format(fmt)` in the English locale.

    Supported tokens: YYYY YY Q Qo MMMM MMM MM Mo M DDDD DDDo DDD DD Do D dddd ddd dd do d HH H hh h kk k mm m
    ss s SSS SS S A a ZZ Z X x, the localized LT LTS L LL LLL LLLL l ll lll llll, `[literal]` and `\\c` escapes.
    Any other character (including unsupported moment tokens such as w, E, N, gg) is printed as is.
    """
    def token(match: re.Match[str]) -> str:
        t = match.group(0)
        if t[0] == "[":
            return t[1:-1]
        if t[0] == "\\":
            return t[1:]
        if t in _LOCAL_FORMATS:
            return moment_format(dt, _LOCAL_FORMATS[t])
        found = _date_token(dt, t)
        return found if found is not None else _time_token(dt, t)

    return _MOMENT_TOKENS.sub(token, fmt)


def _date_token(dt: datetime, t: str) -> str | None:
    """A year, quarter, month or day token of `moment_format` (None: not one of them)."""
    weekday = (dt.weekday() + 1) % 7  # moment: Sunday = 0
    doy = dt.timetuple().tm_yday
    match t:
        case "YYYY": return f"{dt.year:04d}"
        case "YY": return f"{dt.year % 100:02d}"
        case "Q": return str((dt.month - 1) // 3 + 1)
        case "Qo": return _ordinal((dt.month - 1) // 3 + 1)
        case "MMMM": return _MONTHS[dt.month - 1]
        case "MMM": return _MONTHS[dt.month - 1][:3]
        case "MM": return f"{dt.month:02d}"
        case "Mo": return _ordinal(dt.month)
        case "M": return str(dt.month)
        case "DDDD": return f"{doy:03d}"
        case "DDDo": return _ordinal(doy)
        case "DDD": return str(doy)
        case "DD": return f"{dt.day:02d}"
        case "Do": return _ordinal(dt.day)
        case "D": return str(dt.day)
        case "dddd": return _DAYS[weekday]
        case "ddd": return _DAYS[weekday][:3]
        case "dd": return _DAYS[weekday][:2]
        case "do": return _ordinal(weekday)
        case "d": return str(weekday)
    return None


def _time_token(dt: datetime, t: str) -> str:
    """An hour, minute, second, meridiem, offset or epoch token of `moment_format`; any other
    text as is."""
    hour12 = dt.hour % 12 or 12
    match t:
        case "HH": return f"{dt.hour:02d}"
        case "H": return str(dt.hour)
        case "hh": return f"{hour12:02d}"
        case "h": return str(hour12)
        case "kk": return f"{dt.hour or 24:02d}"
        case "k": return str(dt.hour or 24)
        case "mm": return f"{dt.minute:02d}"
        case "m": return str(dt.minute)
        case "ss": return f"{dt.second:02d}"
        case "s": return str(dt.second)
        case "SSS": return f"{dt.microsecond // 1000:03d}"
        case "SS": return f"{dt.microsecond // 10000:02d}"
        case "S": return str(dt.microsecond // 100000)
        case "A": return "AM" if dt.hour < 12 else "PM"
        case "a": return "am" if dt.hour < 12 else "pm"
        case "ZZ": return _offset(dt, colon=False)
        case "Z": return _offset(dt, colon=True)
        case "X": return str(math.floor(aware(dt).timestamp()))
        case "x": return str(math.floor(aware(dt).timestamp() * 1000))
    return t


def aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.astimezone()


def _js_round(x: float) -> int:
    return math.floor(x + 0.5)


def humanize_duration(delta: timedelta) -> str:
    """moment.js `duration.humanize()` without suffix (en), sign ignored.

    Thresholds (moment defaults ss=44, s=45, m=45, h=22, d=26, M=11; units rounded half-up):
    ≤44 s "a few seconds"; ≤1 min "a minute"; <45 min "N minutes"; ≤1 h "an hour"; <22 h "N hours";
    ≤1 day "a day"; <26 days "N days"; ≤1 month "a month"; <11 months "N months"; ≤1 year "a year";
    else "N years" (months = days × 4800 / 146097, years = months / 12).
    """
    ms = abs(delta.total_seconds() * 1000)
    seconds, minutes, hours = _js_round(ms / 1000), _js_round(ms / 6e4), _js_round(ms / 36e5)
    days_f = ms / 864e5
    days, months, years = _js_round(days_f), _js_round(days_f * 4800 / 146097), _js_round(days_f * 400 / 146097)
    if seconds <= 44:
        return "a few seconds"
    if seconds < 45:
        return f"{seconds} seconds"
    if minutes <= 1:
        return "a minute"
    if minutes < 45:
        return f"{minutes} minutes"
    if hours <= 1:
        return "an hour"
    if hours < 22:
        return f"{hours} hours"
    if days <= 1:
        return "a day"
    if days < 26:
        return f"{days} days"
    if months <= 1:
        return "a month"
    if months < 11:
        return f"{months} months"
    if years <= 1:
        return "a year"
    return f"{years} years"
