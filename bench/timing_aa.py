#!/usr/bin/env python3
"""A/A test of the graph timer on a GPU machine: is the timing reproducible?

For each op it runs two identical ``opscreen op <op> --backend cuda --timer
graph --suite $FLAGGEMS_ROOT --out <dir>`` runs, reads both ``record.log`` files
(docs/contracts.md: FlagGems' ``[INFO] {json}`` rows with ``timer``,
``samples``, ``rsd`` added) and reports, per op and overall:

* per-case speedup difference between the two runs, |speedup_A / speedup_B - 1|:
  median, p90, max (the H200 baseline: upstream kernel mode had a median 20 %
  and p90 ~180 %, upstream cudagraph mode a median 0.1 %, p90 1.1 %, max 2.4 %);
* cases that fell back (timer ``graph-fallback:<phase>``) and why (the
  ``opscreen timing: N x graph-fallback:...`` lines of run.log);
* cases without a number, the op's status and wall time per run.

Two groups: ``main`` (add, softmax, sum, abs, layer_norm, mm) and
``fallback`` (nonzero, masked_select, isin, bincount, mode,
unique_consecutive: upstream's cudagraph mode lost every measurement of these
to capture errors; here every case must yield a number).

With ``--upstream`` it also runs FlagGems' own ``--mode cudagraph`` through
pytest for the main ops and compares its speedups with run A's on the shapes
both report (all, and small ones where the torch latency is under
``--small-ms``).

Prints a compact table at the end and writes JSON to ``--out``. Standard
library only; run it with the Python that has opscreen installed.

    python bench/timing_aa.py --suite $FLAGGEMS_ROOT --out aa.json [--device 0] [--upstream]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from opscreen.results.parse import record_entries  # noqa: E402  (the harness's own record-log reader)
from opscreen.results.summary import percentile  # noqa: E402  (the same p90 as `opscreen summary`)

MAIN_OPS = ("add", "softmax", "sum", "abs", "layer_norm", "mm")
FALLBACK_OPS = ("nonzero", "masked_select", "isin", "bincount", "mode", "unique_consecutive")
SCHEMA = "opscreen.bench.timing_aa/1"
# "... x graph-fallback:capture (kind): ..." (timed directly) or "... x graph-fallback:capture+profiler (kind): ..."
FALLBACK_LINE = re.compile(r"opscreen timing: (\d+) x graph-fallback:(\w+(?:\+profiler)?) \(([^)]*)\): (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# -- small statistics ---------------------------------------------------------------


def spread(values):
    vals = [v for v in values if v is not None]
    return {"n": len(vals), "median": percentile(vals, 50), "p90": percentile(vals, 90),
            "max": max(vals) if vals else None}


def rel_diff(a, b):
    if a is None or b is None or not a or not b:
        return None
    return abs(a / b - 1.0)


# -- record.log -----------------------------------------------------------------------


def shape_key(detail) -> str:
    return json.dumps(detail, separators=(",", ":"), sort_keys=False)


def read_record_log(path: Path) -> dict:
    """(op, dtype, shape key) -> row dict (latency_base, latency, speedup, timers, ...).
    A shape the suite lists twice (test_mm's 4096^3) keeps both rows: the second
    one's shape key ends in ``#2`` (as ``occurrence`` in opscreen's own parser)."""
    cases = {}
    seen = Counter()
    if not path.is_file():
        return cases
    entries, _truncated, _bad = record_entries(path.read_text(encoding="utf-8", errors="replace"))
    for entry in entries:
        if not isinstance(entry, dict) or "result" not in entry:
            continue
        for row in entry.get("result") or []:
            key = (entry.get("op_name"), entry.get("dtype"), shape_key(row.get("shape_detail")))
            seen[key] += 1
            if seen[key] > 1:
                key = (*key[:2], f"{key[2]}#{seen[key]}")
            base, lib = row.get("latency_base"), row.get("latency")
            speedup = row.get("speedup")
            if speedup is None and base and lib:
                speedup = base / lib
            cases[key] = {
                "latency_base": base, "latency": lib, "speedup": speedup,
                "timer_base": row.get("timer_base"), "timer": row.get("timer"),
                "samples_base": row.get("samples_base"), "samples": row.get("samples"),
                "rsd_base": row.get("rsd_base"), "rsd": row.get("rsd"),
                "calls_base": row.get("calls_base"), "calls": row.get("calls"),
                "repeats": row.get("repeats"), "speedup_spread": row.get("speedup_spread"),
                "error": row.get("error_msg"),
            }
    return cases


def run_logs(out_dir: Path) -> list:
    """The op's run.log, and with --repeats each repeat's (the op's own is then the
    harness's account without the child's lines)."""
    reps = sorted((out_dir / "repeats").glob("*/run.log"), key=lambda p: int(p.parent.name)) \
        if (out_dir / "repeats").is_dir() else []
    return reps or [out_dir / "run.log"]


def read_fallback_reasons(run_log: Path) -> list:
    out = []
    if not run_log.is_file():
        return out
    for line in run_log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = FALLBACK_LINE.search(ANSI.sub("", line))
        if m:
            out.append({"count": int(m.group(1)), "phase": m.group(2), "kind": m.group(3), "example": m.group(4)[:300]})
    return out


def fatal_lines(run_log: Path) -> list:
    if not run_log.is_file():
        return []
    return [ln.strip() for ln in run_log.read_text(encoding="utf-8", errors="replace").splitlines()
            if "OPSCREEN-FATAL:" in ln][:3]


# -- running ----------------------------------------------------------------------------


T0 = time.monotonic()


def time_left(args) -> float:
    """Seconds a run may take: --timeout, shortened to what --deadline leaves."""
    if not args.deadline:
        return args.timeout
    return min(args.timeout, args.deadline - (time.monotonic() - T0) - 15)


def run_op(args, op: str, out_dir: Path) -> dict:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    limit = time_left(args)
    if limit < 30:
        return {"cmd": "", "exit_code": None, "status": "skipped (deadline)", "error": None, "wall_s": 0.0,
                "duration_s": None, "n_cases": 0, "timers": {}, "fallback_reasons": [], "fatal": [],
                "tail": "", "_cases": {}}
    cmd = shlex.split(args.opscreen) + [
        "op", op, "--backend", args.backend, "--timer", args.timer, "--suite", args.suite,
        "--out", str(out_dir), "--device", str(args.device), "--timeout", str(int(limit)),
        *shlex.split(args.op_args or ""),
    ]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 120,
                              stdin=subprocess.DEVNULL)
        code, tail = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        code, tail = None, "bench: opscreen op did not return in time"
    wall = time.monotonic() - t0
    result = {}
    try:
        result = json.loads((out_dir / "result.json").read_text())
    except (OSError, ValueError):
        pass
    cases = read_record_log(out_dir / "record.log")
    timers = Counter()
    for c in cases.values():
        timers[c["timer_base"] or "?"] += 1
        timers[c["timer"] or "?"] += 1
    return {
        "cmd": " ".join(shlex.quote(c) for c in cmd),
        "exit_code": code,
        "status": result.get("status"),
        "error": result.get("error"),
        "wall_s": round(wall, 1),
        "duration_s": result.get("duration_s"),
        "n_cases": len(cases),
        "timers": dict(timers),
        "fallback_reasons": [r for log in run_logs(out_dir) for r in read_fallback_reasons(log)],
        "fatal": [line for log in run_logs(out_dir) for line in fatal_lines(log)][:3],
        "tail": tail if code not in (0,) else "",
        "_cases": cases,
    }


TABLE_ROW = re.compile(r"^(SUCCESS|FAILED)\s+(\S+)\s+(\S+)\s+(\S+)\s+(?:\S+\s+)*?(\[.*|\{.*)$")
HEADER = re.compile(r"Operator:\s*(\S+)\s+Performance Test \(dtype=([^,]+),")


def normalize_repr(detail: str) -> str:
    """The table's Size Detail repr, as a compact JSON-ish key comparable to shape_key."""
    s = re.sub(r"torch\.Size\((\[[^\]]*\])\)", r"\1", detail.strip())
    s = s.replace("(", "[").replace(")", "]").replace("'", '"')
    s = s.replace("True", "true").replace("False", "false").replace("None", "null")
    return re.sub(r"\s+", "", s)


def run_upstream(args, op: str) -> dict:
    root = Path(args.suite)
    test_file = root / "benchmark" / f"test_{op}.py"
    if not test_file.is_file():
        return {"skipped": f"no benchmark/test_{op}.py"}
    limit = time_left(args)
    if limit < 30:
        return {"skipped": "deadline"}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(args.device))
    cmd = [args.python, "-m", "pytest", f"benchmark/test_{op}.py", "-m", op, "--mode", "cudagraph",
           "--warmup", "25", "--iter", "100", "--level", "core", "-s", "-p", "no:cacheprovider"]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=limit,
                              stdin=subprocess.DEVNULL)
        text, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = (exc.stdout or b"").decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or ""), None
    rows = {}
    dtype = None
    for raw in text.splitlines():
        line = ANSI.sub("", raw).strip()
        h = HEADER.search(line)
        if h:
            dtype = h.group(2).strip()
            continue
        m = TABLE_ROW.match(line)
        if m and m.group(1) == "SUCCESS" and dtype:
            try:
                base, lib, sp = float(m.group(2)), float(m.group(3)), float(m.group(4))
            except ValueError:
                continue
            rows[(op, dtype, normalize_repr(m.group(5)))] = {"latency_base": base, "latency": lib, "speedup": sp}
    return {"exit_code": code, "wall_s": round(time.monotonic() - t0, 1), "n_cases": len(rows), "_rows": rows}


def compare_upstream(ours: dict, up: dict, small_ms: float) -> dict:
    ours_norm = {(k[0], k[1], re.sub(r"\s+", "", k[2])): v for k, v in ours.items()}
    all_d, small_d, matched = [], [], 0
    for key, row in up.items():
        mine = ours_norm.get(key)
        if not mine:
            continue
        matched += 1
        d = rel_diff(mine.get("speedup"), row["speedup"])
        all_d.append(d)
        if row["latency_base"] < small_ms:
            small_d.append(d)
    return {"matched": matched, "upstream_cases": len(up), "all": spread(all_d), "small": spread(small_d)}


# -- report -------------------------------------------------------------------------------


def split_median(runs: list) -> dict:
    """Median-of-k against median-of-k: per case, the median speedup of the first half of
    the runs against that of the second half (each run a fresh process). Says whether
    sampling k processes per op brings the between-process spread under the targets."""
    k = len(runs) // 2
    halves = (runs[:k], runs[k:2 * k])
    keys = set().union(*(r["_cases"].keys() for r in runs[:2 * k]))
    deltas = []
    for key in keys:
        meds = []
        for half in halves:
            vals = [r["_cases"][key]["speedup"] for r in half
                    if key in r["_cases"] and r["_cases"][key]["speedup"]]
            meds.append(percentile(vals, 50) if len(vals) == k else None)
        d = rel_diff(meds[0], meds[1])
        if d is not None:
            deltas.append(d)
    return {"k": k, "speedup_delta": spread(deltas)}


def within_spread(ra, rb, floor: float = 0.005):
    """With --repeats rows in both runs: is |ln(speedup_B / speedup_A)| within
    ln(1 + the larger recorded speedup_spread, at least ``floor``)? None when unknown."""
    if not ra or not rb or not ra.get("speedup") or not rb.get("speedup"):
        return None
    spreads = [r.get("speedup_spread") for r in (ra, rb) if r.get("speedup_spread") is not None]
    if not spreads:
        return None
    return abs(math.log(rb["speedup"] / ra["speedup"])) <= math.log1p(max(max(spreads), floor)) + 1e-12


def analyse(op: str, group: str, runs: list) -> dict:
    a, b = runs[0]["_cases"], runs[1]["_cases"] if len(runs) > 1 else {}
    cases, deltas, lat_deltas = [], [], []
    side_deltas = {"latency_base": [], "latency": []}
    calls_differ = spread_known = spread_inside = 0
    for key in sorted(set(a) | set(b), key=str):
        ra, rb = a.get(key), b.get(key)
        d = rel_diff(ra and ra["speedup"], rb and rb["speedup"])
        if d is not None:
            deltas.append(d)
        for side in ("latency_base", "latency"):
            ld = rel_diff(ra and ra[side], rb and rb[side])
            if ld is not None:
                lat_deltas.append(ld)
                side_deltas[side].append(ld)
        if ra and rb and (ra.get("calls_base"), ra.get("calls")) != (rb.get("calls_base"), rb.get("calls")):
            calls_differ += 1
        inside = within_spread(ra, rb)
        if inside is not None:
            spread_known += 1
            spread_inside += inside
        cases.append({
            "latency": [ra and [ra["latency_base"], ra["latency"]], rb and [rb["latency_base"], rb["latency"]]],
            "calls": [ra and [ra.get("calls_base"), ra.get("calls")], rb and [rb.get("calls_base"), rb.get("calls")]],
            "dtype": key[1], "shape": key[2],
            "speedup": [ra and ra["speedup"], rb and rb["speedup"]],
            "delta": d,
            "timers": [ra and [ra["timer_base"], ra["timer"]], rb and [rb["timer_base"], rb["timer"]]],
            "samples": [ra and [ra["samples_base"], ra["samples"]], rb and [rb["samples_base"], rb["samples"]]],
            "rsd": [ra and [ra["rsd_base"], ra["rsd"]], rb and [rb["rsd_base"], rb["rsd"]]],
        })
    missing = sum(1 for r in runs for c in r["_cases"].values()
                  if c["latency"] is None or c["latency_base"] is None)
    fell_back = [c for c in cases if any(t and any(x and str(x).startswith("graph-fallback") for x in t)
                                         for t in c["timers"])]
    return {
        "group": group,
        "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs],
        "speedup_delta": spread(deltas),
        "latency_delta": spread(lat_deltas),
        # which side moves between runs: torch (no autotuning) or the library
        "latency_delta_torch": spread(side_deltas["latency_base"]),
        "latency_delta_lib": spread(side_deltas["latency"]),
        "cases_calls_differ": calls_differ,
        # --repeats: cases whose A/A difference stayed inside the spread either run recorded
        # (what `opscreen compare` calls "same" by the spread alone)
        "cases_with_spread": spread_known,
        "cases_within_spread": spread_inside,
        "cases_without_number": missing,
        "cases_fell_back": len(fell_back),
        "cases": cases,
    }


def pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def print_table(report: dict) -> None:
    cols = ("op", "group", "status", "cases", "Δspd med", "p90", "max", "fallback", "no-num", "wall A/B s")
    rows = []
    for op, r in report["ops"].items():
        st = "/".join(str(run.get("status") or run.get("exit_code")) for run in r["runs"])
        walls = "/".join(f"{run['wall_s']:.0f}" for run in r["runs"])
        sd = r["speedup_delta"]
        rows.append((op, r["group"], st, str(max(run["n_cases"] for run in r["runs"])), pct(sd["median"]),
                     pct(sd["p90"]), pct(sd["max"]), str(r["cases_fell_back"]), str(r["cases_without_number"]), walls))
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*cols))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(fmt.format(*row))
    print()
    for op, r in report["ops"].items():
        reasons = Counter()
        for run in r["runs"]:
            for fb in run["fallback_reasons"]:
                reasons[(fb["phase"], fb["kind"], fb["example"][:100])] += fb["count"]
            for line in run.get("fatal") or ():
                print(f"{op}: {line}")
        for (phase, kind, example), n in reasons.most_common():
            print(f"{op}: {n} x graph-fallback:{phase} ({kind}): {example}")
        if len(r["runs"]) > 1 and r["latency_delta_torch"]["n"]:
            t, g = r["latency_delta_torch"], r["latency_delta_lib"]
            print(f"{op}: |Δlatency| torch side med {pct(t['median'])} p90 {pct(t['p90'])} max {pct(t['max'])}; "
                  f"library side med {pct(g['median'])} p90 {pct(g['p90'])} max {pct(g['max'])}; "
                  f"calls per sample differ in {r['cases_calls_differ']} cases")
        if r.get("cases_with_spread"):
            print(f"{op}: {r['cases_within_spread']} of {r['cases_with_spread']} cases differ by no more than "
                  "the spread between processes either run recorded (--repeats)")
        if "split_median" in r:
            m = r["split_median"]["speedup_delta"]
            print(f"{op}: median of {r['split_median']['k']} runs vs median of {r['split_median']['k']} others: "
                  f"|Δspeedup| med {pct(m['median'])} p90 {pct(m['p90'])} max {pct(m['max'])}")
        if "upstream" in r and "all" in r["upstream"]:
            u = r["upstream"]
            print(f"{op}: vs upstream --mode cudagraph: matched {u['matched']}/{u['upstream_cases']}, "
                  f"|Δspeedup| all med {pct(u['all']['median'])} p90 {pct(u['all']['p90'])} max {pct(u['all']['max'])}; "
                  f"small med {pct(u['small']['median'])} max {pct(u['small']['max'])} (n={u['small']['n']})")
    s = report["summary"]
    print()
    for group, g in s.items():
        print(f"{group}: {g['ops']} ops, {g['cases']} cases, Δspeedup median {pct(g['speedup_delta']['median'])}, "
              f"p90 {pct(g['speedup_delta']['p90'])}, max {pct(g['speedup_delta']['max'])}; "
              f"fell back {g['cases_fell_back']}, without a number {g['cases_without_number']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default=os.environ.get("FLAGGEMS_ROOT"), help="FlagGems root (default $FLAGGEMS_ROOT)")
    p.add_argument("--out", required=True, help="JSON report path")
    p.add_argument("--work", help="where the op output dirs go (default: <out>.d)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--op-args", default="", help="more arguments for every `opscreen op` call, e.g. "
                   "'--test-node benchmark/test_mm.py::test_mm' or '--dtypes float16'")
    p.add_argument("--backend", default="cuda", help="opscreen backend (default cuda; cpu to try the script on the sample suite)")
    p.add_argument("--timer", default="graph", help="opscreen timer (default graph)")
    p.add_argument("--timeout", type=float, default=1800.0, help="per-op timeout passed to opscreen op (s)")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="whole-script budget in s: each run's timeout shrinks to fit, runs that no longer fit are skipped")
    p.add_argument("--ops", help=f"main-group ops, comma-separated (default {','.join(MAIN_OPS)})")
    p.add_argument("--fallback-ops", help=f"fallback-group ops (default {','.join(FALLBACK_OPS)}; '' for none)")
    p.add_argument("--runs", type=int, default=2, help="identical runs per main-group op (default 2)")
    p.add_argument("--split-median", action="store_true",
                   help="with --runs 2k (k >= 2): also compare the per-case median of the first k runs with that of the last k")
    p.add_argument("--fallback-runs", type=int, default=1,
                   help="runs per fallback-group op (default 1: the question there is whether every case gets a number)")
    p.add_argument("--opscreen", default=f"{shlex.quote(sys.executable)} -m opscreen", help="how to call opscreen")
    p.add_argument("--python", default=sys.executable, help="the suite's Python, for --upstream")
    p.add_argument("--upstream", action="store_true", help="also run FlagGems' --mode cudagraph for the main ops")
    p.add_argument("--small-ms", type=float, default=0.05, help="'small shape': torch latency below this (ms)")
    args = p.parse_args(argv)
    if not args.suite:
        p.error("--suite (or $FLAGGEMS_ROOT) is required")
    if args.runs < 2:
        p.error("--runs must be at least 2")
    main_ops = [o for o in (args.ops.split(",") if args.ops is not None else MAIN_OPS) if o]
    fb_ops = [o for o in (args.fallback_ops.split(",") if args.fallback_ops is not None else FALLBACK_OPS) if o]
    work = Path(args.work or (args.out + ".d"))
    report = {"schema": SCHEMA, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "args": vars(args), "ops": {}}
    for group, ops in (("main", main_ops), ("fallback", fb_ops)):
        for op in ops:
            runs = []
            for i in range(args.runs if group == "main" else max(1, args.fallback_runs)):
                tag = "AB"[i] if i < 2 else str(i)
                print(f"bench: {op} run {tag} ...", file=sys.stderr, flush=True)
                runs.append(run_op(args, op, work / f"run{tag}" / op))
            entry = analyse(op, group, runs)
            if args.split_median and len(runs) >= 4:
                entry["split_median"] = split_median(runs)
            if args.upstream and group == "main":
                print(f"bench: {op} upstream --mode cudagraph ...", file=sys.stderr, flush=True)
                up = run_upstream(args, op)
                if "_rows" in up:
                    up.update(compare_upstream(runs[0]["_cases"], up.pop("_rows"), args.small_ms))
                entry["upstream"] = up
            report["ops"][op] = entry
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))  # keep partial results
    summary = {}
    for group in ("main", "fallback"):
        ops = [r for r in report["ops"].values() if r["group"] == group]
        if not ops:
            continue
        deltas = [c["delta"] for r in ops for c in r["cases"] if c["delta"] is not None]
        summary[group] = {
            "ops": len(ops),
            "cases": sum(len(r["cases"]) for r in ops),
            "speedup_delta": spread(deltas),
            "cases_fell_back": sum(r["cases_fell_back"] for r in ops),
            "cases_without_number": sum(r["cases_without_number"] for r in ops),
            "wall_s": sum(run["wall_s"] for r in ops for run in r["runs"]),
        }
    report["summary"] = summary
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print_table(report)
    print(f"\nJSON: {args.out}")
    bad = sum(g["cases_without_number"] for g in summary.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
