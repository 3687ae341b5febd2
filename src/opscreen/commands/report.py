"""``opscreen report RUN_DIR``: one self-contained HTML page of a run (and a comparison)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError, check_out_file, check_writable_dir
from ..results import noise
from ..results.compare import MUST_MATCH, check_caliber, compare_summaries, parse_allow
from ..results.report import write_report
from ..results.summary import DEFAULT_MAX_BAND, load_or_build, write_summary
from ._common import add_noise_k_argument, percent

NAME = "report"
HELP = "write a self-contained HTML report of a run (optionally compared with another run)"
DESCRIPTION = (
    "Write one HTML file (default RUN_DIR/report.html) that needs no network and leads with the verdict: "
    "the counts by status (an op that did not pass never counts as passed; the cases it measured before it "
    "stopped are marked partial and left out of the geometric mean), the geometric-mean speedup, the "
    "unresolved cases and what to do about them; then the speedup distribution per dtype, the ops by "
    "geometric-mean speedup, the lowest speedups, every case in one sortable, filterable table, a section "
    "per op, the graph fallbacks, and the run identity folded at the end. With --against OTHER_RUN, the "
    "comparison comes first (OTHER_RUN is the baseline A, RUN_DIR is B): the counts per verdict, the "
    "regressions, the improvements, the unresolved rows by what decided their band; runs measured "
    "differently are refused as in 'opscreen compare' (exit status 2)."
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
    p.add_argument("--margin", "--max-band", dest="max_band", default=f"{DEFAULT_MAX_BAND * 100:g}", metavar="PCT",
                   help="the equivalence margin of --against, as in 'opscreen compare', and the band beyond which "
                        f"this run's own cases count as unresolved (default {DEFAULT_MAX_BAND * 100:g}; --max-band "
                        "is its older name)")
    p.add_argument("--floors", metavar="FILE", help="with --against: the floors table to widen bands to, as in 'opscreen compare'")
    p.add_argument("--no-floors", action="store_true", help="with --against: no floors band, as in 'opscreen compare'")
    add_noise_k_argument(p)


def _out_file(args) -> Path:
    """The HTML file to write, checked before anything is read or written: ``--out``, else
    RUN_DIR/report.html (beside the summary.json when RUN_DIR names one)."""
    if args.out is not None:
        return check_out_file(args.out, "--out", "report.html")
    p = Path(args.run_dir)
    out = (p.parent if p.is_file() else p) / "report.html"
    if p.is_dir():
        check_writable_dir(p, "--out")
    return out


def _cache(summary) -> None:
    """Keep a summary built for the report beside its run (summary.csv, summary.json), as
    ``opscreen summary`` would; a run dir that cannot be written keeps none, and says so."""
    try:
        write_summary(summary)
    except OSError as exc:
        sys.stderr.write(f"opscreen report: the summary of {summary.path} was not kept there "
                         f"({exc.strerror or exc}); the report is written\n")


def run(args) -> int:
    allow = parse_allow(args.allow_mismatch)
    max_band = percent(args.max_band) / 100.0
    if args.floors and args.no_floors:
        raise UsageError("--floors and --no-floors: give one")
    table = noise.load(args.floors) if args.floors else (False if args.no_floors else True)
    out = _out_file(args)
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
        comparison = compare_summaries(a, s, k=args.noise_k, check=chk, max_band=max_band, table=table)
    s.max_band = max_band
    s.noise_k = args.noise_k
    write_report(s, out, comparison)  # the report first: a failure leaves the inputs as they were
    for summary, built in ((s, s_built), (a, a_built)):
        if built:
            _cache(summary)
    print(f"wrote {out}")
    return 0
