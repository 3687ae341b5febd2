"""``opscreen summary RUN_DIR``: summary.csv and summary.json for a run (or one op dir)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import check_given, check_writable_dir
from ..results.summary import DAMAGED, build_summary, format_summary, write_summary
from ._common import add_max_band_argument, add_noise_k_argument, percent

NAME = "summary"
HELP = "parse a run's logs into summary.csv / summary.json and print geometric-mean speedups"
DESCRIPTION = (
    "Parse every RUN_DIR/ops/<op>/ (record.log, run.log, result.json, run_identity.json) into "
    "RUN_DIR/summary.csv (one row per op, test, dtype, shape) and RUN_DIR/summary.json, and print "
    "counts by status and geometric-mean speedups per dtype. RUN_DIR may also be a single op "
    "directory (opscreen op --out DIR)."
)
ORDER = 40


def add_arguments(p) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory (opscreen run --out) or op directory (opscreen op --out)")
    p.add_argument("--out", metavar="DIR", help="write summary.csv/summary.json here (default: RUN_DIR)")
    p.add_argument("--json", action="store_true", help="print the summary's head (counts, geomeans, ops) as JSON")
    add_max_band_argument(p)
    add_noise_k_argument(p)


def run(args) -> int:
    max_band = percent(args.max_band) / 100.0
    check_given(args.out, "--out", "give the folder to write summary.csv and summary.json in (default: RUN_DIR)")
    out = args.out if args.out is not None else (args.run_dir if Path(args.run_dir).is_dir() else None)
    if out is not None:  # before the run is read
        check_writable_dir(out, "--out")
    s = build_summary(args.run_dir)
    s.max_band = max_band
    s.noise_k = args.noise_k
    csv_path, json_path = write_summary(s, args.out)
    damaged = [o for o in s.ops if o.status == DAMAGED]
    for o in damaged:  # the summary says so; the exit status too
        sys.stderr.write(f"opscreen summary: {o.op}: {o.error}\n")
    rc = 1 if damaged else 0
    if args.json:
        head = json.loads(s.to_json_text())
        head.pop("rows", None)
        print(json.dumps(head, indent=2))
        return rc
    print(format_summary(s))
    print(f"wrote {csv_path} and {json_path.name}")
    return rc
