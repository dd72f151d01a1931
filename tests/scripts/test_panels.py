"""Scripted pages fold into panels; static pages and plain text convert as before."""

from __future__ import annotations

from tavern_tui.scripts.panels import PANEL_MARK, SCRIPTED_PAGE_NOTE, Part, display_text, split_panels

PAGE = ("<!DOCTYPE html><html><head><title>角色状态</title><style>p{}</style></head>"
        "<body><p>好感度</p><p>0</p><script>fill()</script></body></html>")


def test_a_fenced_scripted_page_becomes_one_panel_after_the_words() -> None:
    text = display_text(f"她笑了。\n\n```\n\n{PAGE}\n```\n\n尾声。")
    assert text == (f"她笑了。\n\n{PANEL_MARK}[status panel 角色状态: ctrl+g shows the live state]\n"
                    f"{SCRIPTED_PAGE_NOTE}\n好感度\n0\n{PANEL_MARK}\n\n尾声。")
    assert split_panels(text) == [Part("她笑了。"),
                                  Part(f"{SCRIPTED_PAGE_NOTE}\n好感度\n0",
                                       "[status panel 角色状态: ctrl+g shows the live state]"),
                                  Part("尾声。")]


def test_a_static_page_and_plain_text_are_not_folded() -> None:
    static = PAGE.replace("<script>fill()</script>", "")
    assert display_text(f"她笑了。\n{static}") == "她笑了。\n好感度\n0"
    assert split_panels("她笑了。") == [Part("她笑了。")]


def test_an_unclosed_page_folds_to_the_end() -> None:
    text = display_text("词。" + PAGE[:-len("</body></html>")])
    parts = split_panels(text)
    assert [p.is_panel for p in parts] == [False, True] and parts[0].text == "词。"
    assert parts[1].text.endswith("好感度\n0")
