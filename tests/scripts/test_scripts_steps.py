"""Regex scripts and templates end to end with the shared MVU card, against the loopback server:
the allowance, the update block hidden from the next request and from the transcript (raw text in
the log), the status bar as readable text, the trace naming each script, global scripts imported
from a SillyTavern regex file, and the templates switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.config import ProviderSettings, Settings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

REPLY = ("她笑了。\n<UpdateVariable>\n_.set('理.好感度[0]', 0, 10);//开心\n</UpdateVariable>\n"
         "<StatusPlaceHolderImpl/>")



def make(server: LoopbackServer, db_url: str, **settings: object) -> Tavern:
    return Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1",
                                                                    timeout=10), **settings))


@pytest.fixture
def service(server: LoopbackServer, db_url: str):  # type: ignore[no-untyped-def]
    tavern = make(server, db_url)
    yield tavern
    tavern.close()


def mvu_card(tavern: Tavern, corpus_dir: Path) -> int:
    result = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])[0]
    assert result.ok and result.id is not None, result.error
    return result.id


async def exchange(tavern: Tavern, server: LoopbackServer, pid: int, text: str, reply: str) -> list[dict]:
    server.enqueue_sse(sse_chunks_for(reply))
    async for _ in tavern.steps.send(pid, text):
        pass
    return server.requests[-1].json["messages"]


async def test_card_scripts_wait_for_the_allowance_then_hide_the_update_block(service: Tavern, server: LoopbackServer,
                                                                              corpus_dir: Path) -> None:
    cid = mvu_card(service, corpus_dir)
    assert service.scripts.needs_allowance(cid) == ["去除变量更新", "去除10楼内摘要", "去除10层以上除摘要以外部分",
                                                    "对ai隐藏状态栏", "状态栏", "状态栏-纯文本"]
    pid = service.playthroughs.new_playthrough(cid, user_name="Ann").id
    await exchange(service, server, pid, "你好", REPLY)
    sent = await exchange(service, server, pid, "再见", "嗯。")
    # Not allowed yet: the block goes to the model as written, and the transcript shows it raw.
    assert any("<UpdateVariable>" in str(m["content"]) for m in sent)
    assert service.playthroughs.messages(pid)[-3].display is None

    service.scripts.set_allowed(cid)
    assert service.scripts.needs_allowance(cid) == []
    sent = await exchange(service, server, pid, "还在吗", "在。")
    replies = [m["content"] for m in sent if m["role"] == "assistant"]
    # depth 3 from the input: 去除变量更新 and 对ai隐藏状态栏 (promptOnly, no depth limits) apply.
    assert "她笑了。\n\n" in replies
    assert not any("UpdateVariable" in str(m["content"]) or "StatusPlaceHolderImpl" in str(m["content"])
                   for m in sent)
    # The log keeps the raw reply; the transcript shows the display pass.
    views = service.playthroughs.messages(pid)
    stored = next(v for v in views if v.content == REPLY)
    assert stored.display is not None and "UpdateVariable" not in stored.display
    # Display depth of that reply is 5 now (past the status bar's maxDepth 2): no script draws the placeholder,
    # and an unknown tag shows as nothing (SillyTavern's sanitiser drops it).
    assert stored.display == "她笑了。"
    # The trace names the scripts applied to that message, and still verifies byte for byte.
    trace_id = service.traces.traces(pid)[-1].id
    trace = service.traces.trace(trace_id)
    applied = {tuple(a["ref"]): a["scripts"] for a in trace["regex_scripts"]["applied"]}
    assert applied[stored.ref] == ["去除变量更新", "对ai隐藏状态栏"]
    assert service.traces.verify_trace(trace_id).ok
    # ... as `tavern trace show` and the trace pane write it (the README's promise).
    from tavern_tui.views.traces import regex_script_lines

    where = f"{stored.ref[0]}:{stored.ref[1]}"
    lines = regex_script_lines(trace["regex_scripts"])
    assert any(line.startswith(f"regex scripts on message {where} (depth ")
               and line.endswith(": 去除变量更新, 对ai隐藏状态栏") for line in lines)


async def test_the_status_bar_is_readable_text_at_display_depth(service: Tavern, server: LoopbackServer,
                                                               corpus_dir: Path) -> None:
    cid = mvu_card(service, corpus_dir)
    service.scripts.set_allowed(cid)
    pid = service.playthroughs.new_playthrough(cid, user_name="Ann").id
    await exchange(service, server, pid, "你好", REPLY)
    last = service.playthroughs.messages(pid)[-1]
    assert last.content == REPLY
    shown = last.shown
    assert shown.startswith("她笑了。") and "角色状态" in shown and "好感度" in shown
    assert "<" not in shown and "--bg-primary" not in shown and "UpdateVariable" not in shown
    # The status bar's numbers come from its page script, which is not run: the transcript says so.
    assert "(a page script fills in this panel and a terminal does not run it" in shown


async def test_allowance_survives_a_restart(server: LoopbackServer, db_url: str, corpus_dir: Path) -> None:
    first = make(server, db_url)
    cid = mvu_card(first, corpus_dir)
    first.scripts.set_allowed(cid)
    first.close()
    second = make(server, db_url)
    try:
        assert second.scripts.allowed(cid) and second.scripts.needs_allowance(cid) == []
    finally:
        second.close()


async def test_global_scripts_import_from_a_regex_file_and_run_first(service: Tavern, server: LoopbackServer,
                                                                      corpus_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "regex-hide-thinking.json"
    path.write_text(json.dumps({"id": "g1", "scriptName": "hide thinking",
                                "findRegex": "/<think>[\\s\\S]*?<\\/think>/g",
                                "replaceString": "", "trimStrings": [], "placement": [2], "disabled": False,
                                "markdownOnly": False, "promptOnly": True, "runOnEdit": True,
                                "substituteRegex": 0, "minDepth": None, "maxDepth": None}))
    result = service.imports.import_paths([path])[0]
    assert result.ok and result.kind == "regex_scripts" and result.name == "hide thinking"
    assert service.imports.import_paths([path])[0].duplicate
    cid = mvu_card(service, corpus_dir)
    pid = service.playthroughs.new_playthrough(cid, user_name="Ann").id
    await exchange(service, server, pid, "你好", "<think>plan</think>好的。")
    sent = await exchange(service, server, pid, "然后呢", "嗯。")
    # MVU appended its status placeholder to the reply it read; the card's script that hides it from the model is
    # not allowed here, so it goes out as SillyTavern would send it.
    assert "好的。\n\n<StatusPlaceHolderImpl/>" in [m["content"] for m in sent if m["role"] == "assistant"]
    bad = tmp_path / "bad-regex.json"
    bad.write_text(json.dumps({"scriptName": "x", "findRegex": "/a/", "placement": "2"}))
    failed = service.imports.import_paths([bad])[0]
    assert not failed.ok and "field 'placement'" in (failed.error or "")
    assert len(service.scripts.global_scripts()) == 1


async def test_templates_run_in_world_info_and_the_switch_turns_them_off(server: LoopbackServer, db_url: str,
                                                                        corpus_dir: Path) -> None:
    # A context large enough for the card's world info (the default 4095-token one fits none of it).
    on = make(server, db_url, max_context=64000)
    try:
        cid = mvu_card(on, corpus_dir)
        pid = on.playthroughs.new_playthrough(cid, user_name="Ann").id
        system = "\n".join(str(m["content"]) for m in await exchange(on, server, pid, "你好", "嗯。")
                           if m["role"] == "system")
        # MVU binds the card's [InitVar] state (理.好感度 below 20 at the first greeting), so the
        # `relation_level` template takes its formal stage ("恪守礼仪"), not the one from 20 on.
        assert "<relationship_ri_with_user>" in system, system[-3000:]
        assert "<%" not in system and "daily_performance" in system
        assert "恪守礼仪" in system and "渐渐变得稍微轻松了一些" not in system
    finally:
        on.close()
    off = make(server, db_url, templates=False, max_context=64000)
    try:
        pid = off.playthroughs.new_playthrough(cid, user_name="Ann").id
        system = "\n".join(str(m["content"]) for m in await exchange(off, server, pid, "你好", "嗯。")
                           if m["role"] == "system")
        assert '<% if (_.has(getvar("stat_data"), \'理.好感度.[0]\')) {%>' in system
    finally:
        off.close()


LOOPING_CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Loop", "first_mes": "Hello.", "description": "A test.",
    "character_book": {"name": "loop-book", "entries": [
        {"keys": [], "comment": "forever", "content": "before <% while (true) {} %> after", "constant": True,
         "enabled": True, "insertion_order": 1, "id": 0, "extensions": {}}]}}}


async def test_a_template_that_never_ends_is_a_marker_named_in_the_trace(service: Tavern, server: LoopbackServer,
                                                                        tmp_path: Path) -> None:
    card = tmp_path / "loop.json"
    card.write_text(json.dumps(LOOPING_CARD), encoding="utf-8")
    [result] = service.imports.import_paths([card])
    pid = service.playthroughs.new_playthrough(result.id, user_name="Ann").id
    sent = await exchange(service, server, pid, "你好", "嗯。")  # the step is not stopped by it
    system = "\n".join(str(m["content"]) for m in sent if m["role"] == "system")
    assert "⟨template error: timed out⟩" in system and "while (true)" not in system  # the entry became the marker
    assert service.playthroughs.messages(pid)[-1].content == "嗯。"
    trace = service.traces.trace(service.traces.traces(pid)[-1].id)
    failures = trace["templates"]["failures"]
    assert failures and failures[0]["where"].startswith("world info: loop-book/0")
    assert "timed out" in failures[0]["error"]


def test_the_world_book_pane_names_a_failed_template(service: Tavern, tmp_path: Path) -> None:
    from tavern_tui.tui.lore_labels import totals_line

    card = tmp_path / "loop.json"
    card.write_text(json.dumps(LOOPING_CARD), encoding="utf-8")
    [result] = service.imports.import_paths([card])
    pid = service.playthroughs.new_playthrough(result.id, user_name="Ann").id
    preview = service.steps.world_info_preview(pid, "你好")  # the pane's tester on this chat
    [(where, error)] = preview.template_failures
    assert where == "world info: loop-book/0 (forever)" and "timed out" in error
    assert f"· template failed in loop-book/0 (forever): {error}" in totals_line(preview)


async def test_a_preview_with_another_preset_applies_the_cards_scripts(service: Tavern, server: LoopbackServer,
                                                                      corpus_dir: Path) -> None:
    # A trial: `tavern preview P --preset NAME` showed the update blocks a real send strips.
    cid = mvu_card(service, corpus_dir)
    service.scripts.set_allowed(cid)
    pid = service.playthroughs.new_playthrough(cid, user_name="Ann").id
    await exchange(service, server, pid, "你好", REPLY)
    [preset] = [r for r in service.imports.import_paths([corpus_dir / "presets" / "st_openai_default_staging.json"])]
    assert preset.ok and preset.id is not None, preset.error

    def blocks(shown: dict) -> int:
        return sum("UpdateVariable" in str(m["content"]) or "StatusPlaceHolderImpl" in str(m["content"])
                   for m in shown["messages"])

    assert blocks(service.steps.preview(pid, "再见")) == 0
    assert blocks(service.steps.preview_selection(pid, "再见", preset=preset.id)) == 0
    assert blocks(service.steps.preview_selection(pid, "再见", preset=None)) == 0  # the built-in default
