"""What compaction says when a chat is too short to summarise: consistent with itself (how many
messages are kept, why nothing is left), and naming the CLI's flags only when they were used."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


async def test_a_short_chat_is_not_compacted_and_the_reason_adds_up(tavern: Tavern, model: ScriptedModel,
                                                                   corpus_dir: Path) -> None:
    [card] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    pid = tavern.playthroughs.new_playthrough(card.id).id  # type: ignore[arg-type]
    for n in range(5):  # the greeting and 5 exchanges: 11 visible messages
        model.enqueue(f"reply {n}")
        [_ async for _ in tavern.steps.send(pid, f"line {n}")]
    with pytest.raises(TavernError) as short:  # F10: the default keeps the newest 10
        await tavern.compaction.compact(pid)
    assert str(short.value) == (f"nothing to compact in playthrough {pid} yet: of its 11 visible messages the "
                                "newest 10 stay as they are, which leaves fewer than 2 to summarise")
    with pytest.raises(TavernError) as asked:  # `tavern compact --keep 10`
        await tavern.compaction.compact(pid, keep=10)
    assert str(asked.value).endswith("fewer than 2 to summarise; lower --keep or name a later --through")
