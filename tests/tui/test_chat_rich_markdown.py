"""A stored message's body is Rich's Markdown with single line breaks kept, parsed by one shared
parser instead of a new one per message: it draws exactly what Rich's own `Markdown` draws with
the breaks made hard, and it carries the same attributes (a Rich release that adds one fails
here rather than drawing with a missing field)."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.markdown import Markdown as RichMarkdown

from tavern_tui.tui.widgets import chat_markdown
from tavern_tui.tui.widgets.chat_markdown import ChatRichMarkdown, break_lines

SAMPLES = [
    "*She smiles.*\n\"Welcome, traveller.\"",
    "# Heading\n\n- one\n- two\n  continued\n\n~~struck~~ and `code`",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "```python\nprint('hi')\nprint('there')\n```\nafter the fence\nnext line",
    "> quoted\n> again\n\n1. first\n2. second",
    "",
]


def _drawn(renderable: object) -> str:
    console = Console(width=60, record=True, color_system="truecolor", force_terminal=True)
    console.print(renderable)
    return console.export_text(styles=True)


@pytest.mark.parametrize("text", SAMPLES)
def test_it_draws_what_rich_draws_with_the_line_breaks_made_hard(text: str) -> None:
    reference = RichMarkdown(text, code_theme="monokai", hyperlinks=False)
    break_lines(reference.parsed)
    ours = ChatRichMarkdown(text, code_theme="monokai", hyperlinks=False)
    assert _drawn(ours) == _drawn(reference)
    assert "\n" in _drawn(ours).strip() or "\n" not in text  # a single break stays a break


def test_it_has_every_attribute_richs_markdown_sets() -> None:
    reference, ours = RichMarkdown("x", justify="left", inline_code_lexer="python"), ChatRichMarkdown(
        "x", justify="left", inline_code_lexer="python")
    assert vars(ours).keys() - {"_drawn"} == vars(reference).keys()
    assert {k: v for k, v in vars(ours).items() if k not in ("parsed", "_drawn")} == {
        k: v for k, v in vars(reference).items() if k != "parsed"}


def test_one_parser_serves_every_message(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    real = chat_markdown.MarkdownIt

    def counting(*args: object, **kwargs: object) -> object:
        parser = real(*args, **kwargs)  # type: ignore[arg-type]
        built.append(parser)
        return parser

    chat_markdown.rich_parser.cache_clear()
    monkeypatch.setattr(chat_markdown, "MarkdownIt", counting)
    for text in SAMPLES * 3:
        ChatRichMarkdown(text)
    assert len(built) == 1
    chat_markdown.rich_parser.cache_clear()


def test_a_drawing_is_kept_for_the_same_width_and_redrawn_for_another(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    real = RichMarkdown.__rich_console__

    def counting(self, console, options):  # noqa: ANN001, ANN202
        drawn.append(options.max_width)
        return real(self, console, options)

    monkeypatch.setattr(RichMarkdown, "__rich_console__", counting)
    ours = ChatRichMarkdown(SAMPLES[1])
    console = Console(width=60, color_system="truecolor", force_terminal=True)
    first = console.render_lines(ours, console.options.update_width(60))
    again = console.render_lines(ours, console.options.update_width(60))
    narrow = console.render_lines(ours, console.options.update_width(30))
    assert drawn == [60, 30] and first == again and narrow != first
    reference = RichMarkdown(SAMPLES[1])
    break_lines(reference.parsed)
    assert narrow == console.render_lines(reference, console.options.update_width(30))
