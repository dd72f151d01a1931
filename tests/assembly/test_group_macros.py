"""The group macros (SillyTavern `getGroupValue`, script.js): in a group chat `{{group}}` and
`{{charIfNotGroup}}` are every member's name joined by ", ", `{{groupNotMuted}}` leaves the muted
out, `{{notChar}}` is everyone but the speaker; outside one they are `{{char}}` (and `{{user}}`)."""

from __future__ import annotations

from tavern_tui.assembly.group_order import GroupCast
from tavern_tui.assembly.macros import MacroContext, substitute

TEXT = "{{group}} | {{charIfNotGroup}} | {{groupNotMuted}} | {{notChar}}"


def test_in_a_group_chat() -> None:
    cast = GroupCast(("Seraphina", "Shodan", "Skynet"), frozenset({"Skynet"}))
    ctx = MacroContext(char="Shodan", user="Ann", group=cast.group(), group_not_muted=cast.not_muted(),
                       not_char=cast.not_char("Shodan", "Ann"))
    assert substitute(TEXT, ctx) == ("Seraphina, Shodan, Skynet | Seraphina, Shodan, Skynet | Seraphina, Shodan"
                                     " | Seraphina, Skynet, Ann")


def test_outside_a_group_chat() -> None:
    assert substitute(TEXT, MacroContext(char="Seraphina", user="Ann")) == "Seraphina | Seraphina | Seraphina | Ann"
