"""A reply's first text can reach its box before the box has composed its body (a fast provider, a
loaded machine: a CI run crashed the app with `NoMatches: .message-body`). The text waits for the body
and is shown once it is there; nothing raises."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from tavern_tui.tui import theming
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import wait_until


class _Host(App[None]):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theming.app_variable_defaults(self.current_theme)  # the box's CSS uses the app's variables

    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="host")


async def test_text_before_the_body_is_composed_waits_for_it() -> None:
    app = _Host()
    async with app.run_test(size=(80, 20)) as pilot:
        box = MessageBox("Seraphina", mark="writing…", classes="-assistant -streaming")
        assert not box.query(".message-body")  # not mounted: no body yet
        await box.append_text("*She smiles.* ")  # the first delta, before the box is even mounted
        await app.query_one("#host").mount(box)
        await box.append_text("Rest now.")
        await wait_until(pilot, lambda: bool(box.query(".message-body"))
                         and box.text == "*She smiles.* Rest now." and box.pending_text == "")
        await box.stop_streams()
        assert box.pending_text == ""
