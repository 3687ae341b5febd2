#!/usr/bin/env python3
"""How often `opscreen compare` calls rows changed: false calls on a rerun, power on an injected change.

    python bench/verdict_rates.py A B [--injected B/injected.json] [--allow-mismatch F ...] [--json OUT]

A and B are run dirs (or op dirs). Both summaries are read (a summary.json still fresh) or
built, in memory, as ``opscreen compare`` builds them, and joined with the project's own
``compare_summaries`` and its default bands (the floors table found for the runs' device,
else the conservative default; ``--floors FILE`` or ``--no-floors`` as compare's). Of the rows measured in both runs it prints how
many compare called changed (``faster`` or ``slower``), ``unresolved`` (band over
``--max-band``'s 5 %), ``same``, and any other verdict for rows measured in both, counted
by name, with their shares: in all, by timer (``graph``: both sides graph-timed in both
runs; ``other timers``: fallback, profiler, wallclock or mixed) and by kernel size (A's
faster side under ``SMALL_KERNEL_MS``, 10 us, or not). On a rerun (an A/A) every call is a
false one: that is the false-call rate of docs/results.md ("Small kernels": a rerun called
19 of 64 graph rows under 10 us on an H200).

With ``--injected FILE`` (bench/inject.py's OUT_DIR/injected.json, B being that OUT_DIR):
the power, the share of exactly the injected rows that compare called in the injected
direction (``slower`` for a factor above 1), and their ``unresolved`` and ``same`` shares,
by the same bins; and the rates above over the rows not injected. These are the noise-model
figures of issue 31 (false-call rate and power per timer and size, bench/results/, made with
bench/device/noise.sh).

The caliber check is compare's: runs measured differently are refused (exit 2) unless each
differing field is named in ``--allow-mismatch`` (repeatable, comma-separated, or ``all``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.errors import UsageError, read_input  # noqa: E402
from opscreen.results.compare import SMALL_KERNEL_MS, Verdict, compare_summaries, parse_allow  # noqa: E402
from opscreen.results import noise  # noqa: E402
from opscreen.results.summary import load_or_build  # noqa: E402

NOT_IN_BOTH = (Verdict.NEW, Verdict.GONE, Verdict.BROKEN, Verdict.FIXED, Verdict.FAILED)
OUTCOMES = ("called", "unresolved", "same", "other")
SIZES = (f"<{SMALL_KERNEL_MS * 1000:g}us", f">={SMALL_KERNEL_MS * 1000:g}us", "size unknown")
TIMERS = ("graph", "other timers")
ORDER = ["all", *(g for t in TIMERS for g in (t, *(f"{t}, {s}" for s in SIZES))), *SIZES]


def outcome(verdict: str) -> str:
    """called (faster, slower), unresolved, same, or other (any other verdict of a row measured in both)."""
    return {Verdict.FASTER.value: "called", Verdict.SLOWER.value: "called", Verdict.UNRESOLVED.value: "unresolved",
            Verdict.SAME.value: "same"}.get(verdict, "other")


def cells(r) -> tuple[str, ...]:
    """The bins a joined row counts in: all, its timer group, its size, both."""
    timer = "graph" if r.a_timer == r.b_timer == "graph" else "other timers"
    if r.a_torch_ms and r.a_lib_ms:
        size = SIZES[0] if min(r.a_torch_ms, r.a_lib_ms) < SMALL_KERNEL_MS else SIZES[1]
    else:
        size = SIZES[2]
    return ("all", timer, size, f"{timer}, {size}")


def tally(rows: list) -> dict[str, dict]:
    """Per bin: rows, each verdict's count, and each outcome's count and share (%)."""
    out: dict[str, dict] = {}
    for r in rows:
        for c in cells(r):
            t = out.setdefault(c, {"rows": 0, "verdicts": {}})
            t["rows"] += 1
            t["verdicts"][r.verdict.value] = t["verdicts"].get(r.verdict.value, 0) + 1
    for t in out.values():
        for o in OUTCOMES:
            n = sum(k for v, k in t["verdicts"].items() if outcome(v) == o)
            t[o] = {"n": n, "pct": round(100.0 * n / t["rows"], 2)}
    return {c: out[c] for c in ORDER if c in out}


def rate_line(cell: str, t: dict) -> str:
    v = t["verdicts"]
    others = ", ".join(f"{k} {n}" for k, n in sorted(v.items()) if outcome(k) == "other")
    return (f"  {cell:26s} rows {t['rows']:5d}  called {t['called']['n']:4d} ({t['called']['pct']:5.1f} %: "
            f"{v.get('faster', 0)} faster, {v.get('slower', 0)} slower)  unresolved {t['unresolved']['n']:4d} "
            f"({t['unresolved']['pct']:5.1f} %)  same {t['same']['n']:4d} ({t['same']['pct']:5.1f} %)  "
            f"other {t['other']['n']} ({t['other']['pct']:.1f} %{': ' + others if others else ''})")


def power_line(cell: str, t: dict, expected: str) -> str:
    v = t["verdicts"]
    shares = ", ".join(f"{k} {n} ({100.0 * n / t['rows']:.1f} %)" for k, n in
                       sorted(v.items(), key=lambda kv: (kv[0] != expected, -kv[1], kv[0])))
    return f"  {cell:26s} injected {t['rows']:5d}  power {100.0 * v.get(expected, 0) / t['rows']:5.1f} %  ({shares})"


def read_injected(path: Path) -> tuple[set, float]:
    """The keys (op, variant, dtype, shape) bench/inject.py scaled, and its factor."""
    try:
        data = json.loads(read_input(path, "injected rows"))
        keys = {(r["op"], r["variant"], r["dtype"], r["shape"]) for r in data["rows"]}
        return keys, float(data["factor"])
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"--injected {path}: not the injected.json of bench/inject.py") from None


def report(a: Path, b: Path, allow: set, injected: Path | None, table=True) -> dict:
    sa, _ = load_or_build(a)
    sb, _ = load_or_build(b)
    c = compare_summaries(sa, sb, allow=allow, table=table)
    if not c.check.ok:
        raise UsageError(c.check.refusal_text().replace("\n", "; "))
    both = [r for r in c.rows if r.verdict not in NOT_IN_BOTH]
    out = {"a": str(a), "b": str(b), "allowed": sorted(f for f, _, _ in c.check.allowed),
           "rows_in_both": len(both), "rates": tally(both)}
    if injected is not None:
        keys, factor = read_injected(injected)
        hit = [r for r in both if r.key in keys]
        expected = (Verdict.SLOWER if factor > 1 else Verdict.FASTER if factor < 1 else Verdict.SAME).value
        out["not_injected"] = tally([r for r in both if r.key not in keys])
        out["power"] = {"factor": factor, "expected": expected, "injected": len(keys),
                        "not_measured_in_both": len(keys) - len(hit), "rates": tally(hit)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="run dir A (the baseline)")
    ap.add_argument("b", type=Path, help="run dir B")
    ap.add_argument("--injected", type=Path, help="bench/inject.py's injected.json of B: also print the power")
    ap.add_argument("--allow-mismatch", action="append", metavar="FIELD", help="as opscreen compare's (repeatable)")
    ap.add_argument("--floors", type=Path, help="the floors table to judge with, as opscreen compare --floors")
    ap.add_argument("--no-floors", action="store_true", help="no floors band, as opscreen compare --no-floors")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)
    try:
        table = noise.load(args.floors) if args.floors else (False if args.no_floors else True)
        rep = report(args.a, args.b, parse_allow(args.allow_mismatch), args.injected, table)
    except UsageError as exc:
        sys.stderr.write(f"verdict_rates: {exc}\n")
        return 2
    print(f"{args.a} -> {args.b}: {rep['rows_in_both']} rows measured in both"
          + (f" (allowed to differ: {', '.join(rep['allowed'])})" if rep["allowed"] else ""))
    for cell, t in rep["rates"].items():
        print(rate_line(cell, t))
    if "power" in rep:
        p = rep["power"]
        print("rows not injected (false calls):" + ("" if rep["not_injected"] else " none"))
        for cell, t in rep["not_injected"].items():
            print(rate_line(cell, t))
        print(f"power: {p['injected']} rows injected (library latency x{p['factor']:g}), "
              f"{p['not_measured_in_both']} of them not measured in both; share called {p['expected']}:")
        for cell, t in p["rates"].items():
            print(power_line(cell, t, p["expected"]))
    if args.json:
        args.json.write_text(json.dumps(rep, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
