"""Several processes per op (``--repeats N``): run the op N times, merge the medians.

Why: on an H200 two identical processes can disagree on one case by 2-18 % while
each measures it with an rsd of 0.01-0.2 % (``bench/results/2026-11-29-h200x2-repeats.md``):
where the driver puts a process's memory and which near-tie config a library's
autotuner picks are fixed for a process's life, so no number of samples inside one
process shows or averages them. Sampling processes does.

Lifecycle (:func:`run_repeated`, called by ``runner.run_op`` when ``repeats > 1``):

1. repeat k of N runs as a complete single run in ``<out>/repeats/<k>/`` (its own
   ``run.log``, ``record.log``, ``run_identity.json``, ``result.json``), each a fresh
   child process under the same ``--timeout``;
2. a repeat that does not pass ends the series (a failing op is not run N times);
   ``stop`` ends it too;
3. the op's own files are then written: ``record.log`` merged by
   :func:`merge_record_texts`, ``run.log`` (the harness's account: one line per
   repeat, then the whole log of the repeat that did not pass, if one did not),
   ``run_identity.json`` (repeat 1's, with a ``repeats`` block) and
   ``result.json`` (the first repeat that did not pass, else the last; with a
   ``repeats`` block, which the batch runner's ``result.json`` keeps too).

Merged row of one case (the cases of all repeats, keyed by test entry, dtype and
shape; the suite's own fields kept from the first repeat that has the case):

* ``latency_base``, ``latency``, ``gbps*``, ``tflops``: median over the repeats that
  measured it; ``speedup``: the median of the per-process speedups (a drift that
  moves both sides of one process cancels in its ratio);
* ``samples*``: the sum; ``rsd*``: the median; ``calls*``: the first repeat's;
* ``timer*``: the first repeat's, or a ``graph-fallback:...`` tag if any repeat fell back;
* added: ``repeats`` (processes that measured it), ``spread_base`` / ``spread``
  (max / min - 1 of each side's latency over those processes), ``speedup_spread``
  (the same of the speedups); ``opscreen compare`` widens a case's band to its spread.

Standard library only (the harness never imports torch).
"""

from __future__ import annotations

import json
import statistics
import threading
from pathlib import Path
from typing import Any, Callable

from ..child.timed_value import FALLBACK_PREFIX
from ..results.parse import _fin, _int, key_of, record_entries

REPEAT_DIR = "repeats"
MEDIAN_FIELDS = ("latency_base", "latency", "gbps_base", "gbps", "tflops", "utilization")
SIDES = (("_base", "latency_base"), ("", "latency"))


# -- merging record logs -----------------------------------------------------------


def _spread(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    if len(vals) < 2 or min(vals) <= 0:
        return None
    return max(vals) / min(vals) - 1.0


def _shape_key(metric: dict) -> str:
    try:
        return key_of(metric.get("shape_detail"))
    except (TypeError, ValueError):
        return "?" + str(metric.get("shape_detail"))


def _keyed(entries: list) -> list[tuple[tuple, dict, list[tuple[tuple, dict]]]]:
    """(entry key, entry, [(case key, metric)]) in file order; repeated keys get a count."""
    out = []
    seen: dict[tuple, int] = {}
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("result"), list):
            continue
        base = (str(e.get("op_name")), str(e.get("dtype")), str(e.get("mode")), str(e.get("level")))
        seen[base] = seen.get(base, 0) + 1
        cases = []
        case_seen: dict[str, int] = {}
        for m in e["result"]:
            if not isinstance(m, dict):
                continue
            sk = _shape_key(m)
            case_seen[sk] = case_seen.get(sk, 0) + 1
            cases.append(((sk, case_seen[sk]), m))
        out.append(((*base, seen[base]), e, cases))
    return out


def _timer_tag(values: list) -> Any:
    tags = [v for v in values if v is not None]
    for v in tags:
        if isinstance(v, str) and v.startswith(FALLBACK_PREFIX):
            return v
    return tags[0] if tags else None


def merge_metrics(metrics: list[dict]) -> dict:
    """One case as measured by several processes -> one row (see the module doc)."""
    measured = [m for m in metrics if _fin(m.get("latency")) is not None or _fin(m.get("speedup")) is not None]
    if not measured:
        out = dict(metrics[0])
        out["repeats"] = 0
        return out
    out = dict(measured[0])
    out["error_msg"] = None
    for name in MEDIAN_FIELDS:
        vals = [_fin(m.get(name)) for m in measured]
        vals = [v for v in vals if v is not None]
        if vals:
            out[name] = statistics.median(vals)
    speedups = []
    for m in measured:
        s = _fin(m.get("speedup"))
        if s is None:
            b, l = _fin(m.get("latency_base")), _fin(m.get("latency"))
            s = b / l if b is not None and l else None
        if s is not None:
            speedups.append(s)
    if speedups:
        out["speedup"] = statistics.median(speedups)
    for suffix, latency_field in SIDES:
        samples = [n for n in (_int(m.get("samples" + suffix)) for m in measured) if n is not None]
        if samples:
            out["samples" + suffix] = sum(samples)
        rsds = [v for v in (_fin(m.get("rsd" + suffix)) for m in measured) if v is not None]
        if rsds:
            out["rsd" + suffix] = statistics.median(rsds)
        if ("timer" + suffix) in out:
            out["timer" + suffix] = _timer_tag([m.get("timer" + suffix) for m in measured])
        out["spread" + suffix] = _spread([_fin(m.get(latency_field)) for m in measured])
    out["speedup_spread"] = _spread(speedups)
    out["repeats"] = len(measured)
    return out


def merge_record_texts(texts: list[str]) -> tuple[str, dict]:
    """The record logs of N repeats -> (merged record-log text, counts).

    Entries and cases are matched by (op, dtype, mode, level, nth such entry) and
    (shape, nth such shape); one only some repeats have is kept with what those gave.
    """
    order: list[tuple] = []
    entries: dict[tuple, dict] = {}
    cases: dict[tuple, dict[tuple, list[dict]]] = {}
    case_order: dict[tuple, list[tuple]] = {}
    truncated = 0
    for text in texts:
        parsed, cut, _bad = record_entries(text)
        truncated += bool(cut)
        for ekey, entry, metrics in _keyed(parsed):
            if ekey not in entries:
                order.append(ekey)
                entries[ekey] = entry
                cases[ekey] = {}
                case_order[ekey] = []
            for ckey, m in metrics:
                if ckey not in cases[ekey]:
                    cases[ekey][ckey] = []
                    case_order[ekey].append(ckey)
                cases[ekey][ckey].append(m)
    lines = []
    n_cases = 0
    for ekey in order:
        entry = dict(entries[ekey])
        entry["result"] = [merge_metrics(cases[ekey][ck]) for ck in case_order[ekey]]
        n_cases += len(entry["result"])
        lines.append("[INFO] " + json.dumps(entry, allow_nan=False, default=str))
    text = "".join(line + "\n" for line in lines)
    return text, {"entries": len(order), "cases": n_cases, "truncated_repeats": truncated}


# -- running ----------------------------------------------------------------------


def repeat_dir(out_dir: Path, k: int) -> Path:
    return Path(out_dir) / REPEAT_DIR / str(k)


def run_repeated(req, out_dir: Path, run_once: Callable[..., Any], *, stop: threading.Event | None = None,
                 echo: Callable[[str], None] | None = None):
    """Run ``req`` ``req.repeats`` times with ``run_once(req, dir, stop=, echo=)`` and
    write the merged op files into ``out_dir``; returns the op's outcome."""
    from .run import clear_owned, utcnow

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
    from ..fsio import atomic_write_text
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
    texts = []
    for k in range(1, len(outcomes) + 1):
        rl = repeat_dir(out_dir, k) / "record.log"
        try:
            texts.append(rl.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            texts.append("")
    merged, counts = merge_record_texts(texts)
    if merged:
        atomic_write_text(out_dir / "record.log", merged)
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
    from ..fsio import atomic_write_text
    from .run import write_json_atomic

    ident = None
    if block["ran"]:
        try:
            ident = json.loads((repeat_dir(out_dir, 1) / "run_identity.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            ident = None
    if isinstance(ident, dict):
        ident["repeats"] = block
        ident["outcome"] = outcome.status
        ident["duration_s"] = round(outcome.duration_s, 3)
        write_json_atomic(out_dir / "run_identity.json", ident)
    config = repeat_dir(out_dir, 1) / "child_config.json"  # what --replay-from reads
    if config.is_file():
        atomic_write_text(out_dir / "child_config.json", config.read_text(encoding="utf-8"))
    write_json_atomic(
        out_dir / "result.json",
        {"schema": 1, "op": req.op, "node": req.target.describe(), "device": req.device, "backend": req.backend.name,
         **outcome.as_dict()},
    )
    return outcome
