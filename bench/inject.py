#!/usr/bin/env python3
"""Inject a known change: a copy of a run dir whose library latency of chosen rows is times a factor.

    python bench/inject.py RUN_DIR OUT_DIR --factor 1.05 [--timer graph] [--min-us 10] [--max-us X]
                           [--seed S --fraction F] [--ops a,b]

Copies RUN_DIR (a run dir, ``opscreen run --out``, or one op dir, ``opscreen op --out``) to
OUT_DIR and, in every record.log of the copy (an op's own and, with ``--repeats``, each
repeat's), multiplies the library's ``latency`` of the chosen rows by ``--factor``: torch's
``latency_base`` stays, ``speedup`` is divided by the factor (it is latency_base / latency;
a ``--repeats`` row's median of ratios moves by the same factor), ``gbps`` and ``tflops``
too (the library's; ``gbps_base`` stays). The row's other figures (``rsd``, ``ci``,
``host_ms``, ``graph_ms``) and every other byte of the file are kept. run.log's printed
tables are not rewritten: the summary takes a row's latencies from record.log.

Chosen rows, by what they read before the injection: the library side's timer method
(``--timer``: ``graph``, ``profiler``, ``direct``, ``wallclock``, as
opscreen.child.timed_value.timer_method reads a tag, or the tag's word before any ``:``
or ``+``, so ``graph-fallback`` picks every fallback row and ``graph`` only rows the graph
timed), the faster side min(latency_base, latency) in [--min-us, --max-us), the ops of
``--ops``; of those, with ``--fraction F``, round(F x n) (at least one) drawn at random (``--seed``).
A row that failed or lacks a latency is never chosen.

Stale summary.json / summary.csv / compare.csv / report.html are removed from the copy, so
``opscreen summary``/``compare`` build them again. OUT_DIR/injected.json lists every scaled
row by the summary's key (op, variant, dtype, shape) with its factor: bench/verdict_rates.py
``--injected`` reads it to say how many of exactly those rows compare called slower (the
power figures of the noise model of issue 31, bench/results/, with bench/device/noise.sh).

Bad input (a missing RUN_DIR, a non-empty OUT_DIR, factor <= 0, no row chosen, a record
line that cannot be rewritten byte for byte) prints one line and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.child.timed_value import (FALLBACK_PREFIX, TIMER_DIRECT, TIMER_GRAPH, TIMER_PROFILER,  # noqa: E402
                                        TIMER_WALLCLOCK, timer_method)
from opscreen.errors import UsageError  # noqa: E402
from opscreen.results.parse import parse_record_log  # noqa: E402
from opscreen.results.summary import resolve_run  # noqa: E402

SCHEMA = "opscreen.bench.inject/1"
TIMERS = (TIMER_GRAPH, FALLBACK_PREFIX.rstrip(":"), TIMER_PROFILER, TIMER_DIRECT, TIMER_WALLCLOCK)  # --timer
STALE = ("summary.json", "summary.csv", "compare.csv", "report.html")  # rebuilt from the changed logs
# json.dumps styles a record line may have been written in (FlagGems': the first)
STYLES = ({}, {"ensure_ascii": False}, {"separators": (",", ":")}, {"separators": (",", ":"), "ensure_ascii": False})


def timer_matches(tag: str | None, want: str | None) -> bool:
    """Does the library side's timer tag match ``--timer`` (None: any)?"""
    if want is None:
        return True
    if not tag:
        return False
    return timer_method(tag) == want or re.split(r"[:+]", tag, maxsplit=1)[0] == want


def row_key(op: str, row) -> tuple[str, str, str, str]:
    """The summary's key of a record row of op dir ``op``: (op, variant, dtype, shape)
    (opscreen.results.summary._summarize_op names the variant so)."""
    variant = row.op if row.op != op else ""
    if row.occurrence > 1:
        variant = f"{variant}#{row.occurrence}"
    return (op, variant, row.dtype, row.shape)


def eligible(row, timer: str | None, min_us: float, max_us: float) -> bool:
    if row.status != "SUCCESS" or not row.torch_ms or not row.lib_ms or row.torch_ms < 0 or row.lib_ms < 0:
        return False
    return timer_matches(row.lib_timer, timer) and min_us <= 1000.0 * min(row.torch_ms, row.lib_ms) < max_us


def record_logs(op_dir: Path) -> list[Path]:
    """The op's own record.log (what the summary reads) first, then each repeat's."""
    logs = [op_dir / "record.log"] + sorted((op_dir / "repeats").glob("*/record.log"))
    return [p for p in logs if p.is_file()]


def _scale(r: dict, factor: float) -> None:
    r["latency"] = r["latency"] * factor
    for name in ("speedup", "gbps", "tflops"):
        v = r.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            r[name] = v / factor


def _dump_like(obj, body: str):
    """The json.dumps style that writes ``body`` back byte for byte, or None."""
    for style in STYLES:
        if json.dumps(obj, **style) == body:
            return style
    return None


def rewrite(text: str, chosen: list[bool], factor: float, where: str) -> str:
    """``text`` (a record log) with the library latency of the result rows flagged in
    ``chosen`` (in parse_record_log's order) scaled. Walks the lines the way
    opscreen.results.parse.record_entries reads them: a line repeated by a second log
    handler is one entry, and gets the same rewrite."""
    lines = text.split("\n")
    seen: dict[str, str] = {}
    i = 0
    for n, line in enumerate(lines):
        b = line.find("{")
        if b < 0:
            continue
        body = line[b:].rstrip()
        if body in seen:
            lines[n] = line[:b] + seen[body] + line[b + len(body):]
            continue
        seen[body] = body
        try:
            entry = json.loads(body)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), list):
            continue
        hit = False
        for r in entry["result"]:
            if isinstance(r, dict):
                if chosen[i]:
                    _scale(r, factor)
                    hit = True
                i += 1
        if hit:
            style = _dump_like(json.loads(body), body)
            if style is None:
                raise UsageError(f"{where}: line {n + 1} is not in a JSON layout this tool writes back byte for "
                                 "byte; leave that op out (--ops) or rewrite the line by hand")
            seen[body] = json.dumps(entry, **style)
            lines[n] = line[:b] + seen[body] + line[b + len(body):]
    if i != len(chosen):
        raise UsageError(f"{where}: read {i} result rows where parse_record_log reads {len(chosen)}; not rewritten")
    return "\n".join(lines)


def plan(run: Path, args) -> tuple[list, dict[Path, str], dict[str, tuple[int, int]]]:
    """(the chosen rows as injected.json lists them, {record.log relative to run: new
    text}, {op: (rows scaled, rows read)}), computed before anything is written."""
    _, root, op_dirs = resolve_run(run)
    names = {op for op, _ in op_dirs}
    want = {o for o in args.ops.split(",") if o} if args.ops is not None else None
    if want is not None and want - names:
        raise UsageError(f"--ops: {', '.join(sorted(want - names))} not in {run} (it holds {len(names)} ops)")
    logs = []  # (op, path, rows, the op's own record.log)
    candidates = []  # (op, key, row) of the op's own record.log, eligible
    for op, d in op_dirs:
        if want is not None and op not in want:
            continue
        for p in record_logs(d):
            rows = parse_record_log(p).rows
            logs.append((op, p, rows, p == d / "record.log"))
            if p == d / "record.log":
                candidates += [(op, row_key(op, r), r) for r in rows
                               if eligible(r, args.timer, args.min_us, args.max_us)]
    if not candidates:
        raise UsageError(f"no row of {run} matches (timer {args.timer or 'any'}, faster side in "
                         f"[{args.min_us:g}, {args.max_us:g}) us, ops {args.ops or 'all'}): widen the selection")
    if args.fraction < 1:
        k = max(1, round(args.fraction * len(candidates)))
        candidates = [candidates[i] for i in sorted(random.Random(args.seed).sample(range(len(candidates)), k))]
    keys = {(op, key) for op, key, _ in candidates}
    texts, counts = {}, {}
    for op, p, rows, own in logs:
        chosen = [(op, row_key(op, r)) in keys for r in rows]
        if any(chosen):
            texts[p.relative_to(root)] = rewrite(p.read_bytes().decode("utf-8", "surrogateescape"), chosen,
                                                 args.factor, str(p))
        if own:
            counts[op] = (sum(chosen), len(rows))
    listed = [{"op": key[0], "variant": key[1], "dtype": key[2], "shape": key[3], "factor": args.factor,
               "lib_timer": r.lib_timer, "torch_timer": r.torch_timer, "torch_ms": r.torch_ms,
               "lib_ms_before": r.lib_ms, "lib_ms_after": r.lib_ms * args.factor} for _, key, r in candidates]
    return listed, texts, counts


def write_copy(run: Path, out: Path, texts: dict[Path, str], injected: dict) -> None:
    """Copy ``run`` into a temporary folder beside ``out``, rewrite, clean, then rename it to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.inject-{os.getpid()}"
    try:
        shutil.copytree(run, tmp, symlinks=True)
        for rel, text in texts.items():
            (tmp / rel).write_bytes(text.encode("utf-8", "surrogateescape"))
        for d in [tmp, *(p for p in (tmp / "ops").glob("*") if p.is_dir())]:
            for name in STALE:
                if (d / name).is_file():
                    (d / name).unlink()
        (tmp / "injected.json").write_text(json.dumps(injected, indent=1) + "\n")
        if out.is_dir():
            out.rmdir()  # checked empty
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"inject: {message} (see --help)\n")


def check(args) -> None:
    run, out = args.run_dir, args.out_dir
    if not math.isfinite(args.factor) or args.factor <= 0:
        raise UsageError(f"--factor {args.factor:g}: give a number above 0 (1.05: the library 5 % slower)")
    if not (0 < args.fraction <= 1):
        raise UsageError(f"--fraction {args.fraction:g}: give a share in (0, 1]")
    if not (0 <= args.min_us < args.max_us):
        raise UsageError(f"--min-us {args.min_us:g} --max-us {args.max_us:g}: need 0 <= min < max")
    if args.ops is not None and not any(args.ops.split(",")):
        raise UsageError(f"--ops {args.ops!r}: name one op or more (comma-separated), or leave --ops out")
    if not run.is_dir():
        raise UsageError(f"{run} is not a directory: give the --out folder of 'opscreen run' or 'opscreen op'")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder: name a new OUT_DIR (or remove that one)")
    r, o = run.resolve(), out.resolve()
    if o == r or r in o.parents:
        raise UsageError(f"{out} is inside {run}: put the copy somewhere else")


def main(argv=None) -> int:
    ap = _Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--factor", type=float, required=True, help="library latency times this (1.05: 5 %% slower)")
    ap.add_argument("--timer", choices=TIMERS, help="only rows whose library side this timer measured; default any")
    ap.add_argument("--min-us", type=float, default=0.0, help="faster side at least this (us, default 0)")
    ap.add_argument("--max-us", type=float, default=math.inf, help="faster side under this (us, default no bound)")
    ap.add_argument("--fraction", type=float, default=1.0, help="scale this share of the matching rows, at random")
    ap.add_argument("--seed", type=int, default=0, help="seed of the --fraction draw (default 0)")
    ap.add_argument("--ops", help="comma-separated ops: only these")
    args = ap.parse_args(argv)
    try:
        check(args)
        rows, texts, counts = plan(args.run_dir, args)
    except UsageError as exc:
        sys.stderr.write(f"inject: {exc}\n")
        return 2
    injected = {"schema": SCHEMA, "source": str(args.run_dir.resolve()), "factor": args.factor,
                "selection": {"timer": args.timer, "min_us": args.min_us,
                              "max_us": None if math.isinf(args.max_us) else args.max_us,
                              "fraction": args.fraction, "seed": args.seed if args.fraction < 1 else None,
                              "ops": sorted(counts) if args.ops is not None else None},
                "per_op": {op: n for op, (n, _) in counts.items() if n}, "rows": rows}
    try:
        write_copy(args.run_dir, args.out_dir, texts, injected)
    except OSError as exc:
        sys.stderr.write(f"inject: cannot write {args.out_dir}: {exc.strerror or exc}\n")
        return 1
    for op, (n, total) in counts.items():
        if n:
            print(f"{op}: {n} of {total} rows scaled")
    total = sum(t for _, t in counts.values())
    print(f"in all: {len(rows)} of {total} rows read, in {len(injected['per_op'])} ops, library latency "
          f"x{args.factor:g}; wrote {args.out_dir / 'injected.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
