"""Property tests over every importer and the SSE decoder (issue 23 items 6 and 9): hostile
inputs of the classes the fault trial found (`tests/support/fuzzing.py`) never raise out of an import
(each file gets a result: stored, or an error naming the file), and a folder import goes on past
a bad file. The number of examples is bounded here; `python -m benchmarks fuzz` runs long."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavern_tui.cli import main
from tavern_tui.formats.chatlog import parse_send_date
from tavern_tui.formats.jsontypes import MAX_DEPTH
from tavern_tui.providers.sse import SSEDecoder
from tavern_tui.service import Tavern
from tests.support.fuzzing import PERSONA_BACKUP, chat_lines, deep, importer_inputs, sse_inputs

INPUTS = importer_inputs()
BOUNDED = settings(max_examples=25, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                          HealthCheck.data_too_large])


def _import_one(tavern: Tavern, folder: Path, name: str, data: bytes) -> None:
    path = folder / name
    path.write_bytes(data)
    results = tavern.imports.import_paths([path])
    assert len(results) == 1
    result = results[0]
    assert (result.error is None) != (result.id is None and not result.duplicate) or result.duplicate
    if result.error is not None:
        # Named, and not the catch-all that keeps a folder import going past a crash.
        assert str(path) in result.error and "please report this file" not in result.error, result.error


@pytest.mark.parametrize("importer", sorted(INPUTS))
def test_no_hostile_input_raises_out_of_an_import(importer: str, tavern: Tavern, tmp_path: Path,
                                                  corpus_dir: Path) -> None:
    name, inputs = INPUTS[importer]
    if importer == "chat":
        tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])

    @BOUNDED
    @given(data=inputs)
    def property_(data: bytes) -> None:
        _import_one(tavern, tmp_path, name, data)

    property_()


@BOUNDED
@given(chunks=sse_inputs())
def test_the_sse_decoder_takes_any_bytes_cut_anywhere(chunks: list[bytes]) -> None:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)] + decoder.flush()
    for event in events:
        assert isinstance(event.data, str) and "\r" not in event.event


@settings(max_examples=50, deadline=None, derandomize=True)
@given(text=st.text(max_size=300) | st.sampled_from(["9" * 4400, "June " * 20000, "a" * 100_000]))
def test_send_date_parsing_never_raises(text: str) -> None:
    parse_send_date(text)


# -- regression cases: the inputs the fault trial crashed on (issue 23 item 6) ------------------


def _card(**fields: object) -> dict:
    data = {"name": "Fuzz", "description": "d", "personality": "", "scenario": "", "first_mes": "Hi.",
            "mes_example": ""}
    data.update(fields)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


REGRESSIONS = {
    "deep_list_1000.json": json.dumps(_card()).replace('"d"', deep(1000, "list")),
    "deep_dict_5000.json": json.dumps(_card()).replace('"d"', deep(5000, "dict")),
    "surrogate_name.json": json.dumps(_card()).replace('"Fuzz"', '"Fu\\ud800zz"'),
    "int_400.json": json.dumps(_card()).replace('"d"', "9" * 400),
    "int_4301.json": json.dumps(_card()).replace('"d"', "-" + "9" * 4301),
    "book_order_400.json": json.dumps({"entries": {"0": {"uid": 0, "key": ["k"], "content": "c", "order": 1}}})
    .replace('"order": 1', '"order": ' + "9" * 400),
    "preset_temp_4301.json": json.dumps({"temperature": 1.0, "prompts": [], "prompt_order": []})
    .replace("1.0", "9" * 4301),
}
"""file name → content; each once raised RecursionError, UnicodeEncodeError, OverflowError or ValueError."""

EXPECTED = {
    "deep_list_1000.json": f"nested more than {MAX_DEPTH} levels deep (line 1)",
    "deep_dict_5000.json": f"nested more than {MAX_DEPTH} levels deep (line 1)",
    "surrogate_name.json": "data.name: holds a lone UTF-16 surrogate \\ud800 at character 2",
    "int_400.json": "a number of 400 characters (more than 40)",
    "int_4301.json": "a number of 4302 characters (more than 40)",
    "book_order_400.json": "a number of 400 characters (more than 40)",
    "preset_temp_4301.json": "a number of 4301 characters (more than 40)",
}


def test_a_folder_of_crashing_inputs_is_imported_past_each_with_a_sum(tmp_path: Path, corpus_dir: Path,
                                                                      isolated_profile: Path) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir()
    for name, text in REGRESSIONS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "zz_good.png").write_bytes((corpus_dir / "cards" / "shodan_v2_pure.png").read_bytes())
    lines = chat_lines()
    lines[1]["send_date"] = "June " + "9" * 100_000  # once 60 s in a quadratic regex
    (folder / "zz_long_date.jsonl").write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    seraphina = main(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], out=io.StringIO(),
                     err=io.StringIO())
    assert seraphina == 0
    code = main(["import", str(folder)], out=out, err=err)
    assert code == 1 and "Traceback" not in err.getvalue()
    errors = err.getvalue().splitlines()
    for name, reason in EXPECTED.items():
        assert any(str(folder / name) in line and reason in line for line in errors), (name, errors)
    assert "imported character 2: Shodan" in out.getvalue()
    assert "imported chat" in out.getvalue() and "zz_long_date.jsonl" in out.getvalue()
    assert out.getvalue().rstrip().endswith(
        "2 imported, 7 failed (in folders, only .png, .json, .charx and .jsonl files are read)")


FOUND_BY_THE_LONG_RUN = {  # `python -m benchmarks fuzz` found these (once ValueError / AssertionError)
    "persona_lorebook_digits.json": (json.dumps({**PERSONA_BACKUP, "persona_descriptions": {"ada.png": {
        **PERSONA_BACKUP["persona_descriptions"]["ada.png"], "lorebook": "9" * 10000}}}).encode(),
        "is not imported here; import the world book"),
    "only_line_separator.jsonl": ("\u2028\n\x1c\n".encode(), "not a SillyTavern chat: it holds no JSON lines"),
    "character_digits.jsonl": ("\n".join(json.dumps(line) for line in [
        {**chat_lines()[0], "character_name": "9" * 5000}, chat_lines()[2]]).encode(), "no character named"),
}


def test_a_world_book_uid_of_100k_digits_is_kept_as_a_text_id(tavern: Tavern, tmp_path: Path) -> None:
    # Found by the long run (once ValueError from int()): past 40 digits a uid is a text id.
    path = tmp_path / "book.json"
    path.write_text(json.dumps({"entries": {"0": {"uid": "9" * 100_000, "key": ["k"], "content": "c"}}}))
    [result] = tavern.imports.import_paths([path])
    assert result.error is None and result.kind == "world_book"
    book = tavern.lore.world_book(result.id)
    assert [e.uid for e in book.entries] == ["9" * 100_000]


@pytest.mark.parametrize("name", sorted(FOUND_BY_THE_LONG_RUN))
def test_inputs_the_long_fuzz_run_found_get_a_named_error(name: str, tavern: Tavern, tmp_path: Path) -> None:
    data, reason = FOUND_BY_THE_LONG_RUN[name]
    path = tmp_path / name
    path.write_bytes(data)
    [result] = tavern.imports.import_paths([path])
    said = " ".join([result.error or "", *result.warnings])  # the persona imports, warning of its lorebook
    assert reason in said and "please report this file" not in said, said
