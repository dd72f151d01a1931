"""The long fuzz run: every importer (CHARX archives included) and the SSE decoder on many generated
hostile inputs (`tests/support/fuzzing.py`, the classes the fault trial found), and a first step's
request built for cards carrying the trial's hostile contents (regex bombs, deep macros, endless
templates, unclosed MVU commands, a YAML alias bomb; each build within its evaluation budget,
`lore.eval_budget`, counted when it ran out), reporting inputs tried,
crashes (an exception out of the import), hangs (an input taking over `HANG_SECONDS`) and the
peak memory of the process. Crashing and hanging inputs are written to `fuzz-findings/` in the
work folder's parent (kept for turning into regression cases in tests/formats/test_fuzz.py).

    python -m benchmarks fuzz                    # TAVERN_FUZZ_EXAMPLES inputs per target (default 300)
    TAVERN_FUZZ_EXAMPLES=5000 python -m benchmarks fuzz
    TAVERN_FUZZ_TARGETS=hostile_card_step,charx python -m benchmarks fuzz   # only these targets
    TAVERN_FUZZ_CONTEXT=1000000 python -m benchmarks fuzz   # hostile requests fitted to a huge context

Target: 0 crashes and 0 hangs.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import sys
import time
from pathlib import Path

HANG_SECONDS = 10
INTERNAL = "please report this file"
"""What `ImportService.import_paths` says of a file whose import raised unexpectedly."""
FINDINGS = Path.cwd() / "fuzz-findings"


class _Hang(Exception):
    pass


def _alarm(_signum, _frame):  # type: ignore[no-untyped-def]
    raise _Hang()


def fuzz(workdir: Path) -> dict[str, object]:
    """Run every target for TAVERN_FUZZ_EXAMPLES generated inputs; counts per target and in all."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hypothesis import HealthCheck, given, settings

    from tavern_tui.config import Settings
    from tavern_tui.errors import TavernError
    from tavern_tui.providers.sse import SSEDecoder
    from tavern_tui.service import Tavern
    from tests.support.fuzzing import CORPUS, hostile_card, importer_inputs, sse_inputs

    examples = int(os.environ.get("TAVERN_FUZZ_EXAMPLES", "300"))
    # TAVERN_FUZZ_CONTEXT: the context the hostile cards' requests are fitted to (default 0: the app's
    # default, 4095); a large one (1000000) makes every build go to the end instead of stopping at the fit.
    context = int(os.environ.get("TAVERN_FUZZ_CONTEXT", "0"))
    tavern = Tavern(Settings(db_url=f"sqlite:///{workdir / 'fuzz.db'}", max_context=context))
    tavern.imports.import_paths([CORPUS / "cards" / "seraphina_chara_ccv3.png"])  # chats need their character
    totals = {"inputs": 0, "crashes": 0, "hangs": 0}
    per_target: dict[str, str] = {}
    slowest: dict[str, float] = {}
    signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()

    chosen = {t for t in os.environ.get("TAVERN_FUZZ_TARGETS", "").split(",") if t}

    def run(target: str, call, strategy) -> None:  # type: ignore[no-untyped-def]
        if chosen and target not in chosen:
            return
        counts = {"inputs": 0, "crashes": 0, "hangs": 0}

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(value=strategy)
        def one(value) -> None:  # type: ignore[no-untyped-def]
            counts["inputs"] += 1
            signal.alarm(HANG_SECONDS)
            began = time.perf_counter()
            try:
                call(value)
            except _Hang:
                counts["hangs"] += 1
                _keep(target, "hang", value)
            except Exception as exc:  # noqa: BLE001 - a crash is what we count
                counts["crashes"] += 1
                _keep(target, type(exc).__name__, value)
            finally:
                signal.alarm(0)
                slowest[target] = max(slowest.get(target, 0.0), time.perf_counter() - began)

        one()
        per_target[target] = f"{counts['inputs']}/{counts['crashes']}/{counts['hangs']}"
        for key in totals:
            totals[key] += counts[key]

    for target, (name, strategy) in importer_inputs().items():
        def call(data: bytes, name: str = name) -> None:
            path = workdir / name
            path.write_bytes(data)
            for result in tavern.imports.import_paths([path]):
                # The folder import's catch-all keeps a crash from stopping the rest: still a crash.
                if result.error is not None and INTERNAL in result.error:
                    raise AssertionError(result.error)
                assert result.error is None or str(path) in result.error

        run(target, call, strategy)

    budget_used_up = [0]  # hostile builds whose evaluation budget ran out (`lore.eval_budget`)

    def play(data: bytes) -> None:
        # A hostile card imported, then the request its first step would make built (macros, world
        # info keys, templates, MVU): every bound must hold here, never a crash or a hang.
        path = workdir / "hostile.json"
        path.write_bytes(data)
        [result] = tavern.imports.import_paths([path])
        if result.id is None:
            assert result.error is not None and str(path) in result.error
            return
        pid = tavern.playthroughs.new_playthrough(result.id).id
        try:
            request = tavern.steps.preview(pid, "hello there")
        except TavernError as exc:  # a clear refusal (e.g. the card cannot fit the context) is an answer
            assert str(exc) and "Traceback" not in str(exc)
            return
        # Built: with the over-budget parts refused (and named) when the evaluation budget ran out.
        stopped = [a for a in request["adjustments"] if a.startswith("evaluation stopped")]
        budget_used_up[0] += bool(stopped)
        assert all("evaluation budget of one request build" in a for a in stopped)

    run("hostile_card_step", play, hostile_card())

    def decode(chunks: list[bytes]) -> None:
        decoder = SSEDecoder()
        for chunk in chunks:
            decoder.feed(chunk)
        decoder.flush()

    run("sse", decode, sse_inputs())
    tavern.close()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {**totals, "seconds": round(time.perf_counter() - started, 1), "peak_rss_mib": round(peak_mib),
            "per_target_inputs/crashes/hangs": " ".join(f"{k}={v}" for k, v in per_target.items()),
            "slowest_input_s": " ".join(f"{k}={v:.2f}" for k, v in slowest.items()),
            "hostile_builds_over_eval_budget": budget_used_up[0],
            "ratio": totals["crashes"] + totals["hangs"]}


def _keep(target: str, what: str, value: object) -> None:
    data = value if isinstance(value, bytes) else repr(value).encode("utf-8", "surrogatepass")
    FINDINGS.mkdir(exist_ok=True)
    (FINDINGS / f"{target}-{what}-{hashlib.sha256(data).hexdigest()[:12]}.bin").write_bytes(data)
