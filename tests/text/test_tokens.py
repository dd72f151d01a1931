"""`TokenCounter` (cached, pluggable token counting), `make_counter` and their use by
`build_prompt`."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import pytest

from tavern_tui.assembly.sillytavern import PromptInputs, build_prompt
from tavern_tui.text import tokens
from tavern_tui.text.tokens import (
    CACHE_SIZE,
    DEFAULT_COUNTER,
    TokenCounter,
    estimate_tokens,
    make_counter,
)
from tests.assembly.test_st_prompt import CHAR, USER, chat, make_preset, relative


class Stub:
    """A count function that records its calls: one token per character."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


def test_same_text_is_counted_once() -> None:
    stub = Stub()
    counter = TokenCounter(stub, name="stub")
    assert counter("hello") == 5
    assert counter("hello") == 5
    assert stub.calls == ["hello"]
    assert (counter.hits, counter.misses, len(counter)) == (1, 1, 1)
    assert counter("") == 0 and stub.calls == ["hello"]  # "" is never counted


def test_cache_is_bounded_and_least_recently_used_goes_first() -> None:
    stub = Stub()
    counter = TokenCounter(stub, maxsize=2)
    counter("a")
    counter("b")
    counter("a")  # a is now the most recently used
    counter("c")  # evicts b
    assert len(counter) == 2
    counter("a")
    assert stub.calls == ["a", "b", "c"]
    counter("b")
    assert stub.calls == ["a", "b", "c", "b"]
    assert len(counter) == 2


def test_default_bound_and_bad_bound() -> None:
    assert TokenCounter().maxsize == CACHE_SIZE == 4096
    with pytest.raises(ValueError):
        TokenCounter(maxsize=0)


def test_clear_forgets_counts() -> None:
    stub = Stub()
    counter = TokenCounter(stub)
    counter("x")
    counter.clear()
    counter("x")
    assert stub.calls == ["x", "x"]
    assert (counter.hits, counter.misses) == (0, 1)


def test_default_counter_is_the_estimate() -> None:
    assert (DEFAULT_COUNTER.name, DEFAULT_COUNTER.exact) == ("estimate", False)
    assert DEFAULT_COUNTER("héllo wörld") == estimate_tokens("héllo wörld") == 4  # 13 UTF-8 bytes / 4, rounded up
    assert make_counter(None) is DEFAULT_COUNTER
    assert make_counter("") is DEFAULT_COUNTER


def test_missing_tokenizer_file_falls_back_to_the_estimate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tavern_tui.text.tokens"):
        counter = make_counter(str(tmp_path / "missing" / "tokenizer.json"))
    assert counter is DEFAULT_COUNTER
    assert (counter.name, counter.exact) == ("estimate", False)
    assert "not found" in caplog.text


def test_without_the_tokenizers_package_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails
    with caplog.at_level(logging.WARNING, logger="tavern_tui.text.tokens"):
        assert make_counter(str(path)) is DEFAULT_COUNTER
    assert "'tokenizers' package is not installed" in caplog.text


def fake_tokenizers(fail: bool = False) -> types.ModuleType:
    """A stand-in `tokenizers` module: one token per whitespace-separated word."""
    module = types.ModuleType("tokenizers")

    class Encoding:
        def __init__(self, ids: list[int]) -> None:
            self.ids = ids

    class Tokenizer:
        loaded: list[str] = []

        @staticmethod
        def from_file(path: str) -> Tokenizer:
            if fail:
                raise ValueError("bad json")
            Tokenizer.loaded.append(path)
            return Tokenizer()

        def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
            assert add_special_tokens is False
            return Encoding(list(range(len(text.split()))))

    module.Tokenizer = Tokenizer  # type: ignore[attr-defined]
    return module


def test_tokenizer_file_gives_an_exact_named_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    module = fake_tokenizers()
    monkeypatch.setitem(sys.modules, "tokenizers", module)
    counter = make_counter(str(path))
    assert (counter.name, counter.exact) == (f"tokenizers:{path}", True)
    assert counter("three little words") == 3
    assert make_counter(str(path)) is counter  # one counter (and cache) per file
    assert module.Tokenizer.loaded == [str(path)]


def test_unloadable_tokenizer_file_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("not json")
    monkeypatch.setitem(sys.modules, "tokenizers", fake_tokenizers(fail=True))
    with caplog.at_level(logging.WARNING, logger="tavern_tui.text.tokens"):
        assert make_counter(str(path)) is DEFAULT_COUNTER
    assert "could not be loaded" in caplog.text


def test_real_tokenizers_package(tmp_path: Path) -> None:
    import tokenizers as tk  # in the test extra: this path runs, it is not skipped
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = tk.Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    counter = make_counter(str(path))
    assert counter.exact and counter("hello world again") == 3


# --- build_prompt uses the counter -------------------------------------------------------------


def test_prompt_inputs_default_to_the_shared_counter() -> None:
    inputs = PromptInputs(preset=make_preset([relative("main", "Main.")]), card={}, char=CHAR, user=USER)
    assert inputs.count is DEFAULT_COUNTER
    assert tokens.DEFAULT_COUNTER is DEFAULT_COUNTER


def test_build_prompt_counts_with_the_given_counter_and_repeated_builds_hit_its_cache() -> None:
    stub = Stub()
    counter = TokenCounter(stub, name="stub")
    preset = make_preset([relative("main", "Main.")])
    history = chat(5)
    for _ in range(2):
        built = build_prompt(PromptInputs(preset=preset, card={}, char=CHAR, user=USER, history=history,
                                          count=counter))
    assert built.token_counter == "stub"
    for message in history:
        assert stub.calls.count(message.content) == 1
    assert built.tokens["history"] == sum(len(m.content) + 3 for m in history if not m.is_input)


def test_plain_function_counter_is_named_custom() -> None:
    built = build_prompt(PromptInputs(preset=make_preset([relative("main", "Main.")]), card={}, char=CHAR, user=USER,
                                      history=chat(1), count=len))
    assert built.token_counter == "custom"
    assert built.tokens["preset"] == len("Main.") + 3
