#!/usr/bin/env python3
"""The floors table judged the way the field judges a verdict rule: out of sample, by its
false calls on plain reruns and its power on a known change.

    python bench/noise_model.py RUN_DIR RUN_DIR ... [--folds 2] [--seed 1] [--json OUT]
    python bench/noise_model.py A1,A2,A3 B1,B2 ...     (draws: runs are paired within one)
    python bench/noise_model.py ... --by-op 12 [--drop OP,OP]   (whose false calls; the rates without those ops)
    python bench/noise_model.py ... --eq-alpha 0.01   (the equivalence test at the calls' 99 %: the rule before 2026-12-07)
    python bench/noise_model.py ... --finished   (each screen's unfinished ops left out)

The run dirs screened the same ops with the same settings (fresh processes and/or warm
workers: bench/device/noise.sh makes them on a GPU, ``opscreen calibrate --backend cpu``
on the CPU). An argument with commas is one draw (one device session): its runs are paired
with each other only, never with another draw's, whose screens ran on another day, lease
and opscreen checkout and share an op only by chance. Without commas, all runs are one draw. The ops are split into ``--folds`` folds at random (``--seed``); for each fold,
a floors table is fitted (``opscreen.results.noise.fit``) on every pair of runs restricted
to the OTHER folds' ops, and ``compare_summaries`` with that table judges the fold's ops:

* every pair of runs: the share of rows measured in both called faster/slower (all false:
  the setups are the same), unresolved, same, pick; per pair, and pooled by each row's
  history: reruns on one chip (rerun), reruns whose op ran on another chip of the model in
  B (chip: the ops' device UUIDs differ) and worker against fresh (cross);
* power: B's library latency scaled in memory by 1.05 on graph rows whose kernel is 10 us or
  more and by 1.10 on those under 10 us (what bench/inject.py does to a copy of the record
  logs), the share called slower and the share called ``same`` (a false equivalence); rows
  whose library launched no kernel (basis ``no-kernel``, a view) are not counted; rows measured
  while a side's device throttled are counted apart (`` throttled``), and so are the rows of
  an op whose autotune picks differ between A and B (`` pick``: compare calls them ``pick``).

A screen's unfinished ops (the screen stopped before they ended; a resume runs them again) are
judged on the rows they recorded, as ``compare`` judges them; ``--finished`` leaves them out of
that screen and says so. Use it on screens made before 2026-12-07, when an op cut short
recorded no autotune pick (its rows of a flipped config were then called, not ``pick``).

It prints one line per pair kind and the pooled figures; these are the figures of
bench/results/2026-12-02-h200-noise-model.md and docs/results.md.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.commands.calibrate import draw_groups  # noqa: E402
from opscreen.errors import UsageError  # noqa: E402
from opscreen.results import noise  # noqa: E402
from opscreen.results.compare import DEFAULT_MIN_CHANGE, SMALL_KERNEL_MS, Verdict, compare_summaries  # noqa: E402
from opscreen.results.summary import COL, NOISY, UNFINISHED, load_or_build  # noqa: E402

MEASURED = {Verdict.FASTER, Verdict.SLOWER, Verdict.SAME, Verdict.UNRESOLVED, Verdict.PICK}
INJECT = ((SMALL_KERNEL_MS, 1.10), (math.inf, 1.05))  # (below this latency, ms: factor)


def restrict(s, ops: set):
    """A copy of summary ``s`` with only the rows and ops of ``ops``."""
    t = copy.copy(s)
    t.rows = [r for r in s.rows if r[COL["op"]] in ops]
    t.ops = [o for o in s.ops if o.op in ops]
    return t


def injected(s):
    """A copy of ``s`` whose graph rows' library latency is scaled by INJECT (speedup follows)."""
    t = copy.copy(s)
    rows = []
    for r in s.rows:
        r = list(r)
        if r[COL["status"]] == "ok" and r[COL["lib_timer"]] == "graph" == r[COL["torch_timer"]] and r[COL["lib_ms"]]:
            lat = min(r[COL["lib_ms"]], r[COL["torch_ms"]] or math.inf)
            f = next(f for edge, f in INJECT if lat < edge)
            r[COL["lib_ms"]] *= f
            r[COL["speedup"]] = r[COL["speedup"]] / f if r[COL["speedup"]] else r[COL["speedup"]]
        rows.append(r)
    t.rows = rows
    return t


def tally(c, out: dict, key: str | None = None, by_op: dict | None = None) -> None:
    """Count ``c``'s measured rows by verdict under ``key``, or (no key) under each row's own
    history, the floors cell's (rerun, chip: the op ran on another chip in B, cross); and the
    called rows by history and op into ``by_op``."""
    for r in c.rows:
        if r.verdict in MEASURED:
            k = key or (r.floors or c.history).split("/", 1)[0]
            e = out.setdefault(k, {"rows": 0, "called": 0, "unresolved": 0, "same": 0, "pick": 0, "noisy": 0})
            e["rows"] += 1
            e["noisy"] += r.basis == "noisy"  # of the unresolved: a side's own samples past --max-noise
            e[{"faster": "called", "slower": "called"}.get(r.verdict.value, r.verdict.value)] += 1
            if by_op is not None and r.verdict in (Verdict.FASTER, Verdict.SLOWER):
                by_op[f"{k} {r.op}"] = by_op.get(f"{k} {r.op}", 0) + 1


def power(c, out: dict) -> None:
    """Count ``c``'s injected graph rows called slower, and those called ``same`` (a false
    equivalence: the library did change, by 5 or 10 %, at or past the 5 % margin), by the row's
    history (``rerun``: one chip; ``chip``: the op ran on another chip in B, where a 5 % step
    lies within two chips' own spread) and latency bin, and apart for rows a side measured while
    its device throttled (``throttled``: judged by their own cells or the conservative default)
    and rows of an op whose autotune picks differ between A and B (``pick``: compare names such a
    row's move ``pick``, never ``slower``, whatever the step: A and B ran different kernels)."""
    for r in c.rows:
        if r.verdict not in MEASURED or not (r.a_timer == "graph" and r.b_timer == "graph") or r.basis == "no-kernel":
            continue  # a graph replay of no kernel (a view) has no kernel time to slow down
        small = min(r.a_torch_ms, r.a_lib_ms) < SMALL_KERNEL_MS
        hist = (r.floors or c.history).split("/", 1)[0]
        key = (f"{hist} " + ("<10us x1.10" if small else ">=10us x1.05") + (" throttled" if r.throttled else "")
               + (" pick" if r.op in c.picks else ""))
        e = out.setdefault(key, {"rows": 0, "slower": 0, "same": 0})
        e["rows"] += 1
        e["slower"] += r.verdict == Verdict.SLOWER
        e["same"] += r.verdict == Verdict.SAME


def evaluate(summaries, folds: int, seed: int, draws: list[list[int]] | None = None, eq_alpha: float = noise.EQ_ALPHA,
             max_noise: float = NOISY, min_change: float = DEFAULT_MIN_CHANGE) -> dict:
    """``draws``: lists of indices into ``summaries``; runs are paired within one (default: all one).
    ``eq_alpha``: the equivalence test's level (compare's default; 0.01, the calls' own, is the rule
    before 2026-12-07). ``max_noise``: the noisy rows' limit, in the fit and in compare alike (a large
    value is the rule before 2026-12-07, which had none). ``min_change``: the smallest change
    compare calls (its ``--min-change``)."""
    kw = {"eq_alpha": eq_alpha, "max_noise": max_noise, "min_change": min_change}
    draws = draws or [list(range(len(summaries)))]
    combos = [(i, j) for d in draws for i, j in itertools.combinations(d, 2)]
    ops = sorted({o.op for s in summaries for o in s.ops})
    random.Random(seed).shuffle(ops)
    parts = [set(ops[i::folds]) for i in range(folds)]
    rates: dict = {}
    pw: dict = {}
    called: dict = {}  # "history op" -> rows called faster or slower
    for k, test_ops in enumerate(parts):
        train = set(ops) - test_ops
        tr = [restrict(s, train) for s in summaries]
        pairs = [(tr[i], tr[j], noise.history_of(tr[i].caliber.get("isolation"), tr[j].caliber.get("isolation")))
                 for i, j in combos]
        table = noise.fit(pairs, name=f"fold {k}", match=".*", provenance={}, max_noise=max_noise)
        te = [restrict(s, test_ops) for s in summaries]
        for a, b in ((te[i], te[j]) for i, j in combos):
            hist = noise.history_of(a.caliber.get("isolation"), b.caliber.get("isolation"))
            tally(compare_summaries(a, b, table=table, check=None, **kw), rates, f"{hist} {a.name}->{b.name}")
            tally(compare_summaries(a, b, table=table, **kw), rates, by_op=called)
            if hist in ("rerun", "worker"):
                power(compare_summaries(a, injected(b), table=table, **kw), pw)
    return {"ops": len(ops), "folds": folds, "seed": seed, "rates": rates, "power": pw, "called_by_op": called}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="two or more run dirs of the same ops")
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--eq-alpha", type=float, default=noise.EQ_ALPHA, metavar="A",
                    help=f"the equivalence test's level: same needs the 1 - A interval inside the margin (default "
                         f"{noise.EQ_ALPHA:g}, compare's; 0.01 is the rule before 2026-12-07)")
    ap.add_argument("--max-noise", type=float, default=NOISY * 100, metavar="PCT",
                    help=f"the noisy rows' limit, in the fit and in compare alike (default {NOISY * 100:g}, "
                         "compare's; 1e9 is the rule before 2026-12-07, which had none)")
    ap.add_argument("--min-change", type=float, default=DEFAULT_MIN_CHANGE * 100, metavar="PCT",
                    help="the smallest change compare calls faster or slower (default %(default)g, compare's)")
    ap.add_argument("--by-op", type=int, default=0, metavar="N",
                    help="also print the N ops with the most rows called, by history (false calls: whose are they?)")
    ap.add_argument("--drop", default="", metavar="OP,OP",
                    help="leave these ops out of every run, fitting and judging alike (what would the rates be without them?)")
    ap.add_argument("--finished", action="store_true",
                    help="leave out each screen's unfinished ops (a screen stopped before they ended: their rows "
                         "are judged, as compare does, unless this is given)")
    a = ap.parse_args(argv)
    try:  # RUN,RUN,... is one draw, as for opscreen calibrate
        groups = [[str(p) for p in g] for g in draw_groups(a.runs)]
    except UsageError as exc:
        ap.error(str(exc))
    paths = [r for g in groups for r in g]
    if len(paths) < 2:
        ap.error("give two or more run dirs")
    summaries = []
    for r in paths:
        s = load_or_build(r)[0]
        stopped = sorted(o.op for o in s.ops if o.status in UNFINISHED) if a.finished else []
        if stopped:
            print(f"{r}: left out its {len(stopped)} unfinished op(s), {', '.join(stopped)}")
        if a.drop or stopped:
            s = restrict(s, {o.op for o in s.ops} - set(a.drop.split(",")) - set(stopped))
        if len(groups) > 1:
            s.name = r  # a draw's "op" is not another draw's "op"
        summaries.append(s)
    starts = [sum(len(g) for g in groups[:k]) for k in range(len(groups))]
    draws = [list(range(st, st + len(g))) for st, g in zip(starts, groups)]
    res = evaluate(summaries, a.folds, a.seed, draws, a.eq_alpha, a.max_noise / 100, a.min_change / 100)
    res["draws"] = groups
    print(f"{res['ops']} ops, {res['folds']} folds by op (seed {res['seed']}); tables fitted out of fold")
    for key, e in sorted(res["rates"].items(), key=lambda kv: (" " in kv[0], kv[0])):
        n = e["rows"] or 1
        print(f"  {key:<28} rows {e['rows']:5d}  called {100 * e['called'] / n:5.2f}%  unresolved "
              f"{100 * e['unresolved'] / n:5.2f}% (noisy {e['noisy']})  same {100 * e['same'] / n:5.2f}%  pick {e['pick']}")
    for key, e in sorted(res["power"].items()):
        print(f"  power {key:<26} rows {e['rows']:5d}  slower {100 * e['slower'] / max(1, e['rows']):5.1f}%"
              f"  same (false) {100 * e['same'] / max(1, e['rows']):4.1f}%")
    if a.by_op:
        total = sum(res["called_by_op"].values())
        print(f"  called rows by op ({total} in all), the {a.by_op} most:")
        for key, n in sorted(res["called_by_op"].items(), key=lambda kv: (-kv[1], kv[0]))[:a.by_op]:
            print(f"    {key:<44} {n:4d}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
