"""``opscreen report RUN_DIR``: one self-contained HTML page of a run (and a comparison)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..results.compare import MUST_MATCH, check_caliber, compare_summaries, parse_allow
from ..results.report import write_report
from ..results.summary import load_or_build, write_summary
from ._common import add_max_band_argument, add_noise_k_argument, percent

NAME = "report"
HELP = "write a self-contained HTML report of a run (optionally compared with another run)"
DESCRIPTION = (
    "Write one HTML file (default RUN_DIR/report.html) that needs no network: the run identity, "
    "counts by status, the speedup distribution per dtype, the ops sorted by geometric-mean "
    "speedup, the slowest cases and the failures with links to their run.log. With --against "
    "OTHER_RUN, the comparison (OTHER_RUN is the baseline A, RUN_DIR is B), regressions first; "
    "runs measured differently are refused as in 'opscreen compare' (exit status 2)."
)
ORDER = 50


def add_arguments(p) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory (opscreen run --out) or op directory")
    p.add_argument("--against", metavar="OTHER_RUN", help="baseline run to compare with (run dir, op dir or summary.json)")
    p.add_argument("--out", metavar="FILE", help="HTML file to write (default RUN_DIR/report.html)")
    p.add_argument(
        "--allow-mismatch", action="append", default=[], metavar="FIELD",
        help=f"with --against: compare although FIELD differs ({', '.join(MUST_MATCH)}, or all)",
    )  # fmt: skip
    p.add_argument("--rebuild", action="store_true", help="re-make the summaries even when summary.json exists")
    add_max_band_argument(p)
    add_noise_k_argument(p)


def run(args) -> int:
    allow = parse_allow(args.allow_mismatch)
    max_band = percent(args.max_band) / 100.0
    # nothing is written before the caliber check: a refused comparison leaves both runs as they were
    s, s_built = load_or_build(args.run_dir, rebuild=args.rebuild)
    comparison = None
    a, a_built = None, False
    if args.against:
        a, a_built = load_or_build(args.against, rebuild=args.rebuild)
        chk = check_caliber(a.caliber, s.caliber, allow)
        if not chk.ok:
            sys.stderr.write(f"opscreen report: {chk.refusal_text()}\n")
            return 2
        comparison = compare_summaries(a, s, k=args.noise_k, check=chk, max_band=max_band)
    for summary, built in ((s, s_built), (a, a_built)):
        if built:
            write_summary(summary)
    s.max_band = max_band
    s.noise_k = args.noise_k
    out = Path(args.out) if args.out else (s.path or Path(args.run_dir)) / "report.html"
    write_report(s, out, comparison)
    print(f"wrote {out}")
    return 0
