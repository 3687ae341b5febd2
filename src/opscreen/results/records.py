"""Merging the record logs of several processes (``--repeats N``) into one.

Repeat k of an op's series writes ``<op dir>/repeats/<k>/record.log``; this module
reads those logs and writes the op's own ``record.log`` with one row per case
(the cases of all repeats, keyed by test entry, dtype and shape; the suite's own
fields kept from the first repeat that has the case):

* ``latency_base``, ``latency``, ``gbps*``, ``tflops``: median over the repeats that
  measured it; ``speedup``: the median of the per-process speedups (a drift that
  moves both sides of one process cancels in its ratio);
* ``samples*``: the sum; ``rsd*``: the median; ``calls*``: the first repeat's;
* ``timer*``: the first repeat's, or a ``graph-fallback:...`` tag if any repeat fell back;
  ``fallback*``: the first repeat's reason; ``host_ms*``, ``graph_ms*``, ``ci*``: the median;
* added: ``repeats`` (processes that measured it), ``spread_base`` / ``spread``
  (max / min - 1 of each side's latency over those processes), ``speedup_spread``
  (the same of the speedups); ``opscreen compare`` widens a case's band to its spread.

Running the processes is :mod:`opscreen.op.repeats`; reading the merged rows is
:mod:`opscreen.results.parse`. Standard library only (the harness never imports torch).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from ..child.timed_value import FALLBACK_PREFIX
from ..fsio import atomic_write_text
from .parse import finite_or_none, int_or_none, key_of, record_entries

REPEAT_DIR = "repeats"
MEDIAN_FIELDS = ("latency_base", "latency", "gbps_base", "gbps", "tflops", "utilization")
SIDES = (("_base", "latency_base"), ("", "latency"))


def repeat_dir(out_dir: Path, k: int) -> Path:
    """Where repeat ``k`` (1-based) of an op's series writes its files."""
    return Path(out_dir) / REPEAT_DIR / str(k)


def merge_repeat_records(out_dir: Path, ran: int) -> dict:
    """Merge the record logs of repeats 1..``ran`` into ``out_dir/record.log``
    (written only when some case was recorded); returns the counts."""
    texts = []
    for k in range(1, ran + 1):
        rl = repeat_dir(out_dir, k) / "record.log"
        try:
            texts.append(rl.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            texts.append("")
    merged, counts = merge_record_texts(texts)
    if merged:
        atomic_write_text(Path(out_dir) / "record.log", merged)
    return counts



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
    measured = [m for m in metrics if finite_or_none(m.get("latency")) is not None or finite_or_none(m.get("speedup")) is not None]
    if not measured:
        out = dict(metrics[0])
        out["repeats"] = 0
        return out
    out = dict(measured[0])
    out["error_msg"] = None
    for name in MEDIAN_FIELDS:
        vals = [finite_or_none(m.get(name)) for m in measured]
        vals = [v for v in vals if v is not None]
        if vals:
            out[name] = statistics.median(vals)
    speedups = []
    for m in measured:
        s = finite_or_none(m.get("speedup"))
        if s is None:
            b, l = finite_or_none(m.get("latency_base")), finite_or_none(m.get("latency"))
            s = b / l if b is not None and l else None
        if s is not None:
            speedups.append(s)
    if speedups:
        out["speedup"] = statistics.median(speedups)
    for suffix, latency_field in SIDES:
        samples = [n for n in (int_or_none(m.get("samples" + suffix)) for m in measured) if n is not None]
        if samples:
            out["samples" + suffix] = sum(samples)
        rsds = [v for v in (finite_or_none(m.get("rsd" + suffix)) for m in measured) if v is not None]
        if rsds:
            out["rsd" + suffix] = statistics.median(rsds)
        if ("timer" + suffix) in out:
            out["timer" + suffix] = _timer_tag([m.get("timer" + suffix) for m in measured])
        for name in ("host_ms", "graph_ms", "ci"):
            vals = [v for v in (finite_or_none(m.get(name + suffix)) for m in measured) if v is not None]
            if vals:
                out[name + suffix] = statistics.median(vals)
        why = [m.get("fallback" + suffix) for m in measured if m.get("fallback" + suffix)]
        if why:
            out["fallback" + suffix] = why[0]
        out["spread" + suffix] = _spread([finite_or_none(m.get(latency_field)) for m in measured])
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
