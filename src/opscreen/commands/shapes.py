"""``opscreen shapes check``: validate a curated shape file against a suite."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError, check_given, shown
from ..tables import emit, first, table

NAME = "shapes"
HELP = "check a curated shape file against a suite and show what each op gets"
DESCRIPTION = (
    "'check': validate a shape file (default: the curated set for the suite) against the "
    "suite's ops and its benchmark/core_shapes.yaml (unknown op keys, shapes of a rank "
    "the op's benchmark class does not take), then print, for each op, the entry the "
    "merged file (suite core shapes + curated keys) gives it. Exit 1 when an error was "
    "found, 2 when the file cannot be used at all."
)
ORDER = 70


def add_arguments(p) -> None:
    p.add_argument("action", nargs="?", choices=["check"], help="check: validate and show the merged shapes")
    p.add_argument("--suite", metavar="PATH", help="suite root (default: the bundled sample suite)")
    p.add_argument(
        "--file",
        metavar="F",
        help="shape file to check (default: the curated set shipped with opscreen: shapes.yaml; shapes.sample.yaml for the sample suite)",
    )
    p.add_argument("--op", action="append", default=[], metavar="NAME", help="show only these ops (repeatable)")
    p.add_argument("--quiet", "-q", action="store_true", help="findings only, not the per-op table")


def _fmt_shapes(shapes, limit: int = 6) -> str:
    if not isinstance(shapes, list):
        return "DEFAULT_SHAPES"
    parts = ["x".join(str(d) for d in s) if isinstance(s, list) and all(isinstance(d, int) for d in s) else str(s) for s in shapes]
    return first(parts, limit, "  ")


def _rows(rows, ops: list[str]):
    """The rows of ``ops`` (all without); an op the suite does not have is one line, before any output."""
    known = {r.op for r in rows}
    unknown = [o for o in ops if o not in known]
    if unknown:
        raise UsageError(f"unknown op(s) for this suite: {', '.join(map(shown, unknown))}")
    return [r for r in rows if r.op in ops] if ops else rows


def run(args) -> int:
    from ..assets.inventory import default_suite_root, resolve_suite_root
    from ..assets.shape_files import CORE_SHAPES, check_shape_file, curated_shape_source, effective_shapes, load_shape_file, merge_shapes
    from ..providers.markers import scan_suite

    if args.action is None:
        raise UsageError("give an action: check (validate a shape file against the suite and show what each op "
                         "gets), e.g. opscreen shapes check")
    check_given(args.suite, "--suite", "give the suite root (leave --suite out for the bundled sample suite)")
    check_given(args.file, "--file", "give the shape file (leave --file out for the curated set)")
    root = resolve_suite_root(args.suite) if args.suite is not None else default_suite_root()
    if not (root / "benchmark").is_dir():
        raise UsageError(f"not a suite root (no benchmark/ directory): {root}")
    source = Path(args.file) if args.file is not None else curated_shape_source(root)
    curated = load_shape_file(source)
    core_path = root / CORE_SHAPES
    core = load_shape_file(core_path, what="suite shape file") if core_path.is_file() else {}
    files = scan_suite(root)
    findings = check_shape_file(root, curated, files=files)
    merged = merge_shapes(core, curated)
    # --op is checked with --quiet too: an op the suite lacks is an error, not "0 errors"
    picked = _rows(effective_shapes(root, merged, set(curated), files=files), args.op) if args.op or not args.quiet else None
    rows = None if args.quiet else picked
    out = sys.stdout
    out.write(f"shape file: {source} ({len(curated)} keys)\n")
    out.write(f"laid over:  {core_path if core_path.is_file() else '(no core_shapes.yaml)'} ({len(core)} keys)\n")
    errors = [f for f in findings if f.level == "error"]
    if findings:
        for f in findings:
            out.write(f"  {f}\n")
    else:
        out.write("  no problems\n")
    if rows is not None:
        out.write(f"what the merged file gives each op ({len(rows)}):\n")
        t = table("op", "from", "shapes")
        for r in rows:
            t.row(r.op, f"{r.origin}:{r.key}" if r.key else "default", _fmt_shapes(r.shapes))
        emit([t], out)
    out.write(f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)\n")
    return 1 if errors else 0
