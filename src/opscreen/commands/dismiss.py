"""``opscreen dismiss check``: validate a dismiss list."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError, check_given
from ..tables import emit, table

NAME = "dismiss"
HELP = "check a dismiss list (ops deliberately not measured, each with a reason)"
DESCRIPTION = (
    "'check': validate a dismiss file (default: the list shipped with opscreen, ops/dismiss.yaml "
    "in a checkout): every entry needs op, a non-empty reason, a date (YYYY-MM-DD), optionally evidence; no op "
    "twice; with --suite, every op must be a marker of that suite. Exit 2 on a bad file."
)
ORDER = 75


def add_arguments(p) -> None:
    p.add_argument("action", nargs="?", choices=["check"], help="check: validate and list the entries")
    p.add_argument("file", nargs="?", metavar="FILE", help="dismiss file (default: the list shipped with opscreen, ops/dismiss.yaml in a checkout)")
    p.add_argument("--suite", metavar="PATH", help="also check that each op is a marker of this suite (AST scan)")


def default_dismiss_file() -> Path:
    from ..assets import DATA_DIR, default_asset

    path = default_asset("dismiss.yaml")
    if path is None:
        raise UsageError(f"no dismiss file given and the default {DATA_DIR / 'dismiss.yaml'} is missing from this installation")
    return path


def run(args) -> int:
    from ..assets.dismiss import load_dismiss

    if args.action is None:
        raise UsageError("give an action: check (validate a dismiss list and show its entries), "
                         "e.g. opscreen dismiss check")
    check_given(args.file, "FILE", "give the dismiss file (leave it out for the list shipped with opscreen)")
    check_given(args.suite, "--suite", "give the suite root whose markers the ops must be")
    path = Path(args.file) if args.file is not None else default_dismiss_file()
    known = None
    if args.suite is not None:
        from ..assets.inventory import resolve_suite_root
        from ..providers.markers import op_index, scan_suite

        known = set(op_index(scan_suite(resolve_suite_root(args.suite))))
    entries = load_dismiss(path, known)
    out = sys.stdout
    scope = f", all markers of {args.suite}" if known is not None else ""
    out.write(f"{path}: {len(entries)} dismissed op(s){scope}\n")
    if entries:
        t = table("op", "date", "reason", "evidence")
        for e in entries.values():
            t.row(e.op, e.date, e.reason, e.evidence or "-")
        emit([t], out)
    return 0
