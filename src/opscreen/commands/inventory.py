"""``opscreen inventory``: list a suite's ops, verified by pytest collection."""

from __future__ import annotations

import argparse
import os
import sys
import threading

from ..errors import UsageError, check_given, check_out_file

NAME = "inventory"
HELP = "list the ops (markers) of one or more suite checkouts, scan verified by pytest collection"
DESCRIPTION = (
    "Scan benchmark/test_*.py of each suite (AST, cached), then verify the scan by "
    "'pytest --collect-only' of each file in the suite's Python (a few at a time, with a "
    "timeout). Writes every op with its files, tests, checkouts and verified_by "
    "(collect | scan), and every disagreement between scan and collection, as YAML "
    "(JSON when --out ends with .json)."
)
ORDER = 60


def add_arguments(p) -> None:
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="PATH",
        help="suite checkout root (holds benchmark/); repeatable (default: the bundled sample suite)",
    )
    p.add_argument("--out", metavar="FILE", help="write here (default: stdout); .json for JSON")
    p.add_argument("--python", metavar="PY", help="the suite's interpreter for collection (default: this one)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="collection processes at a time (default: min(4, CPUs))")
    p.add_argument(
        "--collect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify the scan with pytest --collect-only (default); --no-collect: scan only",
    )
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="seconds per file collection (default 120)")
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        metavar="N",
        help="files per collection process (default 1: one process per file, as a per-op run)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment for the collection processes, e.g. GEMS_VENDOR=nvidia (repeatable)",
    )
    p.add_argument(
        "--stub",
        action="append",
        default=[],
        metavar="MODULE",
        help="collect with a stand-in for this top-level module (e.g. flag_gems on a machine "
        "without its device); the inventory says so (repeatable)",
    )
    p.add_argument("--portable", action="store_true",
                   help="record each checkout's folder name and the interpreter's file name instead of their "
                        "paths on this machine (for an inventory committed as data)")
    p.add_argument("--cache-dir", metavar="DIR", help="scan cache (default $OPSCREEN_CACHE_DIR or ~/.cache/opscreen)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each file's collection result on stderr")


def _parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def _parse_stubs(items: list[str]) -> list[str]:
    for item in items:
        if not item.isidentifier():
            raise UsageError(f"--stub wants a top-level module name, got {item!r}")
    return items


class _Progress:
    """What the inventory says on stderr while it works (it took ~20 s in silence): a line
    per stage, then the files collected so far: one line kept up to date on a terminal,
    else a line at every tenth of the files; with ``-v`` each file's result instead."""

    def __init__(self, stream, verbose: bool):
        self.stream, self.verbose = stream, verbose
        try:
            self.tty = stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.lock = threading.Lock()
        self.total = self.done = self.shown = 0
        self.open_line = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def stage(self, text: str, files: int | None) -> None:
        with self.lock:
            self._close_line()
            self.total, self.done, self.shown = files or 0, 0, 0
            self._write(f"opscreen inventory: {text}\n")

    def file_done(self, line: str) -> None:
        with self.lock:
            self.done += 1
            if self.verbose:
                self._write(f"  {line}\n")
            elif self.tty:
                self._write(f"\r  collected {self.done}/{self.total} files")
                self.open_line = True
            elif self.done == self.total or self.done * 10 // max(1, self.total) > self.shown * 10 // max(1, self.total):
                self.shown = self.done
                self._write(f"  collected {self.done}/{self.total} files\n")

    def _close_line(self) -> None:
        if self.open_line:
            self._write("\n")
            self.open_line = False

    def end(self) -> None:
        with self.lock:
            self._close_line()


def run(args) -> int:
    from pathlib import Path

    from ..assets.inventory import build_inventory, default_suite_root, dump_inventory, inventory_dict

    suites = args.suite or [str(default_suite_root())]
    from ..settings import check_cache_dir, check_timeout, checked_cache_root

    check_timeout(args.timeout)
    if args.out is not None:  # before the collection (seconds to minutes) rather than after it
        check_out_file(args.out, "--out", "inventory.yaml")
    if args.cache_dir is not None:
        check_given(args.cache_dir, "--cache-dir", "give the scan cache's folder (leave --cache-dir out for the default)")
        check_cache_dir(args.cache_dir, "--cache-dir")
    else:
        checked_cache_root(os.environ)
    jobs = args.jobs if args.jobs is not None else min(4, os.cpu_count() or 1)
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    python = args.python
    if python is not None and os.sep in python and not Path(python).exists():
        raise UsageError(f"--python not found: {python}")
    shown = _Progress(sys.stderr, args.verbose)
    inv = build_inventory(
        suites,
        python=python,
        collect=args.collect,
        jobs=jobs,
        timeout=args.timeout,
        batch=args.batch,
        env=_parse_env(args.env),
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        progress=shown.file_done,
        stubs=_parse_stubs(args.stub),
        stage=shown.stage,
    )
    shown.end()
    data = inventory_dict(inv, portable=args.portable)
    text = dump_inventory(data, args.out)
    if args.out is None:
        sys.stdout.write(text)
    s = data["summary"]
    for co in data["checkouts"]:
        coll = co["collection"]
        how = (
            "collection off"
            if coll.get("mode") == "off"
            else f"collected ok {coll['files_ok']}, error {coll['files_error']}, timeout {coll['files_timeout']}, skipped {coll['files_skipped']}"
        )
        commit = (co["commit"] or "no git")[:12] + (" (dirty)" if co["dirty"] else "") + (
            " (declared)" if co.get("commit_source") == "declared" else "")
        sys.stderr.write(
            f"{co['name']} @ {commit}: {co['files']} files, {co['tests']} tests, {co['ops']} ops, "
            f"{len(co['files_whose_stem_is_not_a_marker'])} file(s) whose stem is not a marker; {how}\n"
        )
    sys.stderr.write(
        f"ops: {s['ops']} (verified by collect: {s['verified_by_collect']}, by scan only: {s['verified_by_scan']}); "
        f"disagreements: {s['disagreements']}" + (f"; written to {args.out}" if args.out else "") + "\n"
    )
    return 0
