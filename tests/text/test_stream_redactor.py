"""`StreamRedactor`: a secret cut anywhere across streamed pieces is redacted as if the text had
arrived whole; text without a secret passes unchanged; nothing is held without a secret."""

from __future__ import annotations

import base64

import pytest

from tavern_tui.text.secret_values import REDACTED, StreamRedactor, redact_secrets

KEY = "token-abc123456789"
TEXTS = [f"my key is {KEY} ok", "b64: " + base64.b64encode(f"Bearer {KEY}".encode()).decode() + " end",
         "spaced " + " ".join(KEY) + " end", "no secret here at all, just a long enough line of prose"]


def _holds_key(text: str) -> bool:
    core = KEY.replace("-", "")
    cores = [base64.b64encode(p.encode()).decode()[4:-4] for p in (KEY, "x" + KEY, "xy" + KEY)]
    return core in "".join(text.replace("-", "").split()) or any(c in text for c in cores)


@pytest.mark.parametrize("text", TEXTS)
def test_a_key_cut_anywhere_is_redacted_and_the_prose_around_it_kept(text: str) -> None:
    whole = redact_secrets(text, [KEY])
    head, _, tail = whole.partition(REDACTED)
    for cut in range(len(text) + 1):
        for step in (1, 3, 7):
            redactor = StreamRedactor([KEY])
            pieces = [text[:cut]] + [text[i:i + step] for i in range(cut, len(text), step)]
            out = "".join(redactor.feed(p) for p in pieces) + redactor.flush()
            assert not _holds_key(out), (cut, step, out)
            # A base64 word's last group (which mixes in the next bytes) may stay after the marker.
            assert out.startswith(head) and out.endswith(tail.split()[-1] if tail.split() else tail), (cut, step)
    assert _holds_key(text) == (text is not TEXTS[-1]) and not _holds_key(whole)


def test_without_a_secret_every_piece_passes_at_once() -> None:
    redactor = StreamRedactor([None, ""])
    assert redactor.feed("abc") == "abc" and redactor.flush() == ""


def test_ordinary_text_passes_in_its_pieces_and_only_a_possible_start_is_held() -> None:
    redactor = StreamRedactor([KEY])
    assert redactor.feed("The tavern is warm ") == "The tavern is warm "
    assert redactor.feed("and the to") == "and the "  # "to" may begin "token-…"
    assert redactor.feed("wn sleeps.") == "town sleeps."
    assert redactor.feed(" tok") == " " and redactor.feed("en-abc123456789!") == "[redacted]!"
    assert redactor.flush() == "" and redactor.hits == 1
