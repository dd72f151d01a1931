"""HTML from regex scripts shown as readable text: tags gone, structure kept (html.parser)."""

import os
from pathlib import Path

from tavern_tui.formats.cards import parse_card
from tavern_tui.scripts.html_text import html_to_text, looks_like_html
from tavern_tui.scripts.regex_scripts import Placement, card_scripts, script_set

CORPUS = Path(os.environ.get("TAVERN_TEST_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))


def test_blocks_lists_tables_and_skipped_elements():
    html = ("<style>.x{color:red}</style><div><h2>Status</h2><ul><li>HP: <b>10</b></li><li>MP  \n 5</li></ul>"
            "<table><tr><th>k</th><td>v</td></tr></table><script>alert(1)</script><p>a<br>b</p></div>")
    assert html_to_text(html) == "Status\n\n• HP: 10\n• MP 5\nk | v\na\nb"


def test_plain_text_and_pseudo_tags_are_left_alone():
    text = "She smiles.\n\n<user> nods. <UpdateVariable>_.set('a', 1, 2);</UpdateVariable>"
    assert not looks_like_html(text)
    assert html_to_text(text) == text


def test_entities_and_markdown_around_html_keep_their_lines():
    assert html_to_text("line 1\nline 2\n<div>a &amp; b</div>\nend") == "line 1\nline 2\na & b\nend"


def test_mvu_status_bar_becomes_readable_lines():
    card = parse_card((CORPUS / "stateful" / "qingkong_li_mvu.png").read_bytes(), "card")
    scripts = script_set([], card_scripts(card.data)[0], allowed=True)
    shown = scripts.for_display("她笑了。\n<StatusPlaceHolderImpl/>", Placement.AI_OUTPUT, 0).text
    text = html_to_text(shown)
    # The card's status bar: its title and labels stay, the CSS, script and tags go.
    assert text.startswith("她笑了。\n")
    assert "角色状态" in text and "好感度" in text and "当前所想" in text
    assert "<" not in text and "{" not in text and "```" not in text and "--bg-primary" not in text
