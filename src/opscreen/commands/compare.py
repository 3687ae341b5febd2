"""``opscreen compare A B``: join two runs case by case after checking their caliber."""

from __future__ import annotations

import sys
from pathlib import Path

from ..results import noise
from ..results.compare import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_NOISE,
    DEFAULT_MIN_CHANGE,
    DEFAULT_THRESHOLD,
    MUST_MATCH,
    UNRESOLVED_POLICIES,
    aa_floors,
    check_caliber,
    compare_summaries,
    format_comparison,
    parse_allow,
)
from ..results.summary import load_or_build, write_summary
from ..results.summary import DEFAULT_MAX_BAND
from ._common import add_noise_k_argument, percent

NAME = "compare"
HELP = "compare two runs (A = before, B = after) case by case; refuses runs measured differently"
DESCRIPTION = (
    "Join the summaries of runs A and B (made when missing) on (op, test, dtype, shape). "
    "First the caliber check: " + ", ".join(MUST_MATCH[:-1]) + " and " + MUST_MATCH[-1] + " "
    "must match (exit status 2 and the list of differences otherwise, unless --allow-mismatch names "
    "each); suite_commit, device_name, backend and vendor may differ and are printed as the axis. "
    "Each row gets a verdict: faster/slower when its change is beyond its band (the widest of its samples' "
    "noise, the device's floors table of noise between processes, and with --repeats a test over processes) "
    "and beyond --min-change, unless a run's own samples of the row spread past --max-noise (then unresolved, basis noisy); pick when so but the op's autotuners chose different configs in A and B; same "
    "when the change's 90 % interval (change +- its band at alpha 0.1) lies within +- the --margin, or when "
    "the library launched no kernel in either run (a view); unresolved otherwise. Writes compare.csv; exit status 1 "
    "when --fail-on is given and a row regressed by at least that much or broke (and, with --unresolved "
    "fail, when a row is unresolved or pick), else 0. See docs/results.md."
)
ORDER = 45


_pct = percent


def add_arguments(p) -> None:
    p.add_argument("a", metavar="A", help="the baseline: run directory, op directory or summary.json")
    p.add_argument("b", metavar="B", help="the candidate: run directory, op directory or summary.json")
    p.add_argument(
        "--allow-mismatch", action="append", default=[], metavar="FIELD",
        help=f"compare although FIELD differs (repeatable or comma-separated; one of {', '.join(MUST_MATCH)}, or all)",
    )  # fmt: skip
    p.add_argument("--threshold", default=str(DEFAULT_THRESHOLD * 100), metavar="PCT",
                   help="relative change called faster/slower for rows without recorded noise (default 3)")
    add_noise_k_argument(p)
    p.add_argument("--min-change", default=f"{DEFAULT_MIN_CHANGE * 100:g}", metavar="PCT",
                   help="the minimum practical change: never call a change below PCT faster/slower (default "
                        f"{DEFAULT_MIN_CHANGE * 100:g})")
    p.add_argument("--floors", metavar="FILE",
                   help="the floors table (opscreen calibrate) to widen bands to (default: the one found for B's "
                        "device in the user's floors dir or shipped with opscreen, else a conservative default)")
    p.add_argument("--no-floors", action="store_true", help="no floors band: only the runs' own samples and repeats")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, metavar="A",
                   help=f"per-row false-call rate of the floors and repeats bands: 0.1, 0.05, 0.01 or 0.001 "
                        f"(default {DEFAULT_ALPHA:g})")
    p.add_argument("--aa", action="append", default=[], metavar="FILE",
                   help="A/A report(s) of bench/timing_aa.py: a row of an op it measured is 'same' within that op's "
                        "largest drift between identical runs (repeatable)")
    p.add_argument("--metric", choices=("speedup", "lib_ms"), default="speedup",
                   help="compare the speedup over torch (default; fair across devices) or the library's latency")
    p.add_argument("--margin", "--max-band", dest="max_band", default=f"{DEFAULT_MAX_BAND * 100:g}", metavar="PCT",
                   help="the equivalence margin: a row is 'same' only when its change's 90 %% interval lies within ±PCT "
                        f"(default {DEFAULT_MAX_BAND * 100:g}; --max-band is its older name)")
    p.add_argument("--max-noise", default=f"{DEFAULT_MAX_NOISE * 100:g}", metavar="PCT",
                   help="a row whose own samples (graph or profiler timer) spread past PCT (rsd) in A or B is never "
                        f"called faster, slower or pick: it is unresolved, basis noisy (default {DEFAULT_MAX_NOISE * 100:g})")
    p.add_argument("--fail-on", metavar="PCT",
                   help="exit 1 when a row is slower by at least PCT beyond its band, or broke (with --unresolved "
                        "fail, also when a row is unresolved or pick)")
    p.add_argument("--unresolved", choices=UNRESOLVED_POLICIES, default="ignore",
                   help="with --fail-on: 'ignore' (default) fails only on regressions that pass the rule and on "
                        "broken rows; 'fail' also counts unresolved and pick rows as failing")
    p.add_argument("--out", metavar="FILE", help="compare.csv path (default: B/compare.csv)")
    p.add_argument("--write-unresolved", metavar="FILE",
                   help="write the ops with unresolved rows to FILE, one per line (an --ops-file): screen them again "
                        "with --repeats 3 on both sides and compare those runs, as Pinpoint adds attempts while its "
                        "answer is unknown (scripts/opscreen-gate.sh does)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows in the regression/improvement lists (default 10)")
    p.add_argument("--rebuild", action="store_true", help="re-make both summaries even when summary.json exists")


def write_unresolved(c, path: str, source: str) -> list[str]:
    """``--write-unresolved FILE``: the ops of ``c``'s unresolved rows, most unresolved rows first,
    in ``--ops-file`` form; the ops."""
    from collections import Counter

    from ..batch.oplist import write_ops

    count = Counter(r.op for r in c.unresolved())
    ops = sorted(count, key=lambda op: (-count[op], op))
    write_ops(path, ops, f"{sum(count.values())} unresolved rows", "--write-unresolved", source)
    return ops


def run(args) -> int:
    allow = parse_allow(args.allow_mismatch)
    threshold = _pct(args.threshold) / 100.0
    min_change = _pct(args.min_change) / 100.0
    fail_on = _pct(args.fail_on) if args.fail_on is not None else None
    max_band = _pct(args.max_band) / 100.0
    max_noise = _pct(args.max_noise) / 100.0
    floors = aa_floors(args.aa) if args.aa else None  # a bad file is refused before any summary is made
    if args.alpha not in (0.1, 0.05, 0.01, 0.001):
        noise.t_critical(1, args.alpha)  # one line: the values it takes
    from ..errors import UsageError, check_out_file

    if args.floors and args.no_floors:
        raise UsageError("--floors and --no-floors: give one")
    if args.unresolved == "fail" and args.fail_on is None:
        raise UsageError("--unresolved fail is a policy of the gate: give it with --fail-on PCT")
    if args.top < 0:
        raise UsageError(f"--top {args.top}: give 0 or more rows")
    if args.out is not None:
        check_out_file(args.out, "--out", "compare.csv")
    if args.write_unresolved is not None:
        check_out_file(args.write_unresolved, "--write-unresolved", "unresolved.txt")
    table = noise.load(args.floors) if args.floors else (False if args.no_floors else True)
    # nothing is written before the caliber check: a refused comparison leaves A and B as they were
    (a, a_built), (b, b_built) = load_or_build(args.a, rebuild=args.rebuild), load_or_build(args.b, rebuild=args.rebuild)
    chk = check_caliber(a.caliber, b.caliber, allow)
    if not chk.ok:
        sys.stderr.write(f"opscreen compare: {chk.refusal_text()}\n")
        return 2
    for s, built in ((a, a_built), (b, b_built)):
        if built:
            write_summary(s)
    c = compare_summaries(a, b, metric=args.metric, k=args.noise_k, threshold=threshold, min_change=min_change, check=chk,
                          floors=floors, max_band=max_band, table=table, alpha=args.alpha,
                          max_noise=max_noise)
    out = Path(args.out) if args.out else (b.path or Path(args.b)) / "compare.csv"
    c.write_csv(out)
    print(format_comparison(c, top=args.top))
    print(f"\nwrote {out}")
    if args.write_unresolved is not None:
        ops = write_unresolved(c, args.write_unresolved, f"opscreen compare {args.a} {args.b}")
        print(f"wrote {args.write_unresolved}: {len(ops)} ops with unresolved rows"
              + (f" (opscreen run --repeats 3 --ops-file {args.write_unresolved} on both sides, then compare those)"
                 if ops else ""))
    failing = c.failing(fail_on, args.unresolved)
    n_un = sum(1 for r in failing if r.verdict.value in ("unresolved", "pick"))
    if failing:
        worst = min((r for r in failing if r.change is not None and r.verdict.value == "slower"),
                    key=lambda r: r.change, default=None)
        what = f"; worst {worst.change * 100:+.1f}% ({worst.op} {worst.dtype} {worst.shape})" if worst else ""
        un = f"; {n_un} of them unresolved or pick (--unresolved ignore lets them pass)" if n_un else ""
        print(f"FAIL: {len(failing)} rows regressed by at least {fail_on:g}% or broke{what}{un}")
        return 1
    if fail_on is not None and c.unresolved():
        from ..results.compare import narrowing

        print(f"note: {len(c.unresolved())} unresolved rows passed (--unresolved ignore); {narrowing(c)}")
    if fail_on is not None:
        print(f"PASS: no row regressed by {fail_on:g}% or more beyond its band, none broke")
    return 0
