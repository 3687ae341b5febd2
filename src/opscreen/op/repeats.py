"""Several processes per op (``--repeats N``): run the op N times, merge the medians.

Why: on an H200 two identical processes can disagree on one case by 2-18 % while
each measures it with an rsd of 0.01-0.2 % (``bench/results/2026-11-29-h200x2-repeats.md``):
where the driver puts a process's memory and which near-tie config a library's
autotuner picks are fixed for a process's life, so no number of samples inside one
process shows or averages them. Sampling processes does.

Lifecycle (:func:`run_repeated`, called by ``op.run.run_op`` when ``repeats > 1``):

1. repeat k of N runs as a complete single run in ``<out>/repeats/<k>/`` (its own
   ``run.log``, ``record.log``, ``run_identity.json``, ``result.json``), each a fresh
   child process under the same ``--timeout``;
2. a repeat that does not pass ends the series (a failing op is not run N times);
   ``stop`` ends it too;
3. the op's own files are then written: ``record.log`` merged by
   :func:`opscreen.results.records.merge_record_texts`, ``run.log`` (the harness's account: one line per
   repeat, then the whole log of the repeat that did not pass, if one did not),
   ``run_identity.json`` (repeat 1's, with a ``repeats`` block) and
   ``result.json`` (the first repeat that did not pass, else the last; with a
   ``repeats`` block, which the batch runner's ``result.json`` keeps too).

How the record logs are merged into one row per case: :mod:`opscreen.results.records`.

Standard library only (the harness never imports torch).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from .folder import clear_owned
from ..results.records import REPEAT_DIR, merge_repeat_records, repeat_dir


# -- running ----------------------------------------------------------------------


def run_repeated(req, out_dir: Path, run_once: Callable[..., Any], *, stop: threading.Event | None = None,
                 echo: Callable[[str], None] | None = None):
    """Run ``req`` ``req.repeats`` times with ``run_once(req, dir, stop=, echo=)`` and
    write the merged op files into ``out_dir``; returns the op's outcome."""
    from ..fsio import utcnow

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_owned(out_dir)
    n = int(req.repeats)
    with open(out_dir / "run.log", "w", encoding="utf-8") as log:  # written as the series goes

        def say(line: str, quiet: bool = False) -> None:
            log.write(line + "\n")
            log.flush()
            if echo is not None and not quiet:
                echo(line + "\n")

        say(f"[opscreen] op {req.op} | {n} repeats, one process each | out {out_dir} | started {utcnow()}")
        outcome, block = _series(req, out_dir, n, run_once, say, stop, echo)
    _write_op_files(req, out_dir, outcome, block)
    return outcome


def _series(req, out_dir: Path, n: int, run_once, say, stop, echo):
    """Run the repeats, merge their record logs, and say how it went; (outcome, block)."""
    from .request import EXIT_INTERRUPTED, OpOutcome

    outcomes = []
    for k in range(1, n + 1):
        if stop is not None and stop.is_set():
            break
        say(f"[opscreen] repeat {k}/{n}: {REPEAT_DIR}/{k}/")
        o = run_once(req, repeat_dir(out_dir, k), stop=stop, echo=echo)
        outcomes.append(o)
        err = f" | {o.error}" if o.error and o.status != "passed" else ""
        say(f"[opscreen] repeat {k}/{n} {o.status} in {o.duration_s:.1f} s{err}")
        if o.status != "passed":
            break
    counts = merge_repeat_records(out_dir, len(outcomes))
    block = {"requested": n, "ran": len(outcomes), "passed": sum(o.status == "passed" for o in outcomes),
             "dir": REPEAT_DIR, "outcomes": [o.status for o in outcomes]}
    bad = next((o for o in outcomes if o.status != "passed"), None)
    last = bad or (outcomes[-1] if outcomes else None)
    duration = sum(o.duration_s for o in outcomes)
    if bad is None and len(outcomes) < n:  # stopped between repeats: the op is not done
        outcome = OpOutcome("interrupted", EXIT_INTERRUPTED, None, duration,
                            f"stopped after {len(outcomes)} of {n} repeats", out_dir, last.timer if last else "", block)
    else:
        outcome = OpOutcome(last.status, last.exit_code, last.child_returncode, duration, last.error, out_dir, last.timer, block)
    if bad is not None:
        # the failing process's own log, for whoever reads run.log (and the batch
        # runner's failure signature): the repeat that passed before it told nothing
        k = outcomes.index(bad) + 1
        say(f"[opscreen] the log of repeat {k}/{n} ({REPEAT_DIR}/{k}/run.log), which did not pass:", quiet=True)
        try:
            text = (repeat_dir(out_dir, k) / "run.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = "[opscreen] (unreadable)\n"
        say(text.rstrip("\n"), quiet=True)
    say(f"[opscreen] merged {len(outcomes)} of {n} repeats: {counts['cases']} cases in record.log "
        f"(medians; spread = max/min - 1 between processes)")
    say(f"[opscreen] result {outcome.status} (exit {outcome.exit_code}, child {outcome.child_returncode}) "
        f"in {duration:.1f} s" + (f" | {outcome.error}" if outcome.error and outcome.status != "passed" else ""))
    return outcome, block


def _write_op_files(req, out_dir: Path, outcome, block: dict) -> None:
    """The op's identity (repeat 1's, with the repeats block), child config and result."""
    from .. import contracts
    from ..fsio import atomic_write_text
    from .request import op_result

    ident = contracts.read(contracts.RUN_IDENTITY, repeat_dir(out_dir, 1) / "run_identity.json") if block["ran"] else None
    if ident is not None:
        ident["repeats"] = block
        ident["outcome"] = outcome.status
        ident["duration_s"] = round(outcome.duration_s, 3)
        contracts.write(contracts.RUN_IDENTITY, out_dir / "run_identity.json", ident)
    config = repeat_dir(out_dir, 1) / "child_config.json"  # what --replay-from reads
    if config.is_file():
        atomic_write_text(out_dir / "child_config.json", config.read_text(encoding="utf-8"))
    contracts.write(contracts.RESULT, out_dir / "result.json", op_result(req, outcome))
    return outcome
