"""Preflight: what every child of a run would trip over, found once, before anything is written.

``opscreen run`` and ``opscreen op`` call these after their own arguments are
checked and before the run directory (or the op's output directory) is touched:

1. :func:`check_interpreter`: the suite's Python exists, starts, and imports
   pytest. A missing one, or one without pytest (a fresh virtual environment
   without the suite's requirements), is a one-line usage error naming the
   interpreter and what to install, instead of every op ``crashed`` or failed.
2. :func:`collect`: one ``pytest --collect-only`` of one op's node, run through
   :func:`opscreen.op.run.run_once` (so with the children's own argv,
   ``PYTEST_ADDOPTS``, environment, interpreter, suite root and device: the
   first lane's) in a temporary directory that is removed afterwards. Only
   ``--collect-only -q`` is added, before the node. The suite's own conftest
   declares its options (``--level`` with ``choices=``, ``--dtypes``...), so
   the collection finds what pytest would refuse in every child:

   * pytest's usage errors (exit status 4): ``error: unrecognized arguments``,
     ``error: argument --level: invalid choice``, an option without its value,
     a path or node id after ``--`` that does not exist, a bad ``-k``/``-m``
     expression;
   * a ``--level`` the suite's code refuses without ``choices=``
     (``'x' is not a valid BenchLevel``).

   These are one-line usage errors (exit 2). A collection that fails for any
   other reason (the library does not import, no device, a timeout) is not
   the arguments' fault and may be the device's: it prints one line and the
   run goes on; each op reports the failure as usual. FlagGems' conftest
   imports flag_gems, which needs the device, before pytest parses the
   arguments: where that import fails, the arguments cannot be checked here.

Costs one interpreter start and one collection (a few seconds; the import of
the suite's library dominates).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..errors import UsageError, check_path
from ..procgroup import run_capture
from . import scratch

IMPORT_TIMEOUT = 60.0  # s: starting the interpreter and importing pytest
COLLECT_TIMEOUT = 180.0  # s: one collection, the suite's library import included
CONFTEST_IMPORT = "ImportError while loading conftest"

# pytest's argparse: "ERROR: usage: ..." then "<prog>: error: <message>"
_ARGPARSE_RX = re.compile(r"^\S.*?: error: (.+?)\s*$")
# pytest's own usage errors about the command line's paths and expressions
_PYTEST_USAGE_RX = re.compile(
    r"^ERROR: ((?:file or directory not found|not found|Wrong expression passed to|found no collectors)\b.*?)\s*$"
)

# "-p NAME" given after -- that does not import (one of opscreen's own would be a harness bug)
_PLUGIN_RX = re.compile(r'^ERROR: (Error importing plugin "(?P<name>[^"]+)".*?)\s*$')


def _names_plugin(args: list[str], name: str) -> bool:
    return any(
        (a == "-p" and i + 1 < len(args) and args[i + 1] == name) or a == f"-p{name}" or a == f"--plugin={name}"
        for i, a in enumerate(args)
    )


def check_interpreter(python: str, cwd: str | os.PathLike | None = None) -> None:
    """The suite's interpreter ``python`` exists, runs, and can ``import pytest``
    (in ``cwd``, the suite root, as the children do); else a one-line
    :class:`UsageError` that says what to do. A check that times out (a very
    slow file system) is not an error: the children will say."""
    check_path(python, "--python")
    where = f"the suite's Python {python}"
    if os.sep in python:
        p = Path(python)
        if not p.exists():
            raise UsageError(f"{where} does not exist; give --python the interpreter of the suite's environment")
        if p.is_dir() or not os.access(p, os.X_OK):
            raise UsageError(f"{where} is not an executable file; give --python the suite's interpreter")
    elif shutil.which(python) is None:
        raise UsageError(f"{where} is not on PATH; give --python the path of the suite's interpreter")
    res = run_capture([python, "-c", "import pytest"], timeout=IMPORT_TIMEOUT, cwd=cwd)
    if res.error:
        raise UsageError(f"{where} cannot be started ({res.error}); give --python the suite's interpreter")
    if res.timed_out or res.returncode == 0:
        return
    lines = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {res.returncode}"
    if "No module named" in last and "pytest" in last:
        raise UsageError(
            f"{where} cannot import pytest: install the suite's requirements there "
            f"({python} -m pip install pytest; the bundled sample suite also needs torch: "
            "opscreen's 'suite' extra) or give --python an interpreter that has them"
        )
    if res.returncode is not None and res.returncode < 0:
        raise UsageError(f"{where} died of signal {-res.returncode} on 'import pytest'; give --python a working interpreter")
    raise UsageError(f"{where} fails on 'import pytest' ({last[:200]}); fix that environment or give --python another one")


def usage_problem(
    returncode: int | None, lines: list[str], level: str | None = None, extra_args: list[str] | None = None
) -> str | None:
    """What in a collection's output says the child's arguments are wrong
    (pytest's usage error, a plugin named after ``--`` that does not import, or a
    ``--level`` the suite refuses), else None."""
    text = [ln.rstrip() for ln in lines]
    for ln in text:
        m = _PLUGIN_RX.match(ln)
        if m and _names_plugin(extra_args or [], m.group("name")):
            return m.group(1)
    if returncode == 4 and not any(CONFTEST_IMPORT in ln for ln in text):
        if any(ln.startswith("ERROR: usage:") for ln in text):
            for ln in text:
                m = _ARGPARSE_RX.match(ln)
                if m and not ln.startswith("ERROR:"):
                    return m.group(1)
        for ln in text:
            m = _PYTEST_USAGE_RX.match(ln)
            if m:
                return m.group(1)
    if level:
        rx = re.compile(re.escape(repr(str(level))) + r" is not a valid \w+")
        for ln in text:
            m = rx.search(ln)
            if m:
                return f"--level {level}: {m.group(0)}"
    return None


def collect(req, *, say: Callable[[str], None], warm: bool = False) -> None:
    """One ``pytest --collect-only`` of ``req``'s node, as its child would run it
    (``req`` is an :class:`opscreen.op.run.OpRequest`); a :class:`UsageError`
    when pytest refuses the arguments, one line to ``say`` when the collection
    fails for another reason, nothing when it collects.

    ``warm`` (a run whose lanes will keep warm workers, ``req.isolation`` "worker"):
    the collection runs in a new warm worker for ``req``'s lane, which then waits
    (:func:`opscreen.op.lane.park`) for the lane's first op: the imports the
    collection pays are the ones that op would pay. The caller closes what no lane
    took (:func:`opscreen.op.lane.close_parked`)."""
    from .lane import park, worker_for_request

    worker = worker_for_request(req) if warm and req.isolation == "worker" else None
    try:
        _collect(req, say, worker)
    except BaseException:
        if worker is not None:
            worker.close(grace=1.0)
        raise
    if worker is not None:
        if worker.alive() and worker.ready is not None:
            worker.preflight, worker.ops = True, 0  # the lane's first op is still its first
            park(worker)
        else:
            worker.close(grace=1.0)


def _collect(req, say: Callable[[str], None], worker) -> None:
    """:func:`collect`'s collection, in ``worker`` or (None) a fresh process."""
    from .run import FRESH, run_once

    probe = replace(
        req,
        target=replace(req.target, argv=("--collect-only", "-q", *req.target.argv)),
        timeout=min(req.timeout or COLLECT_TIMEOUT, COLLECT_TIMEOUT),
        grace=min(req.grace, 2.0),
        repeats=1,
        color=False,
    )
    stop = threading.Event()
    try:
        with tempfile.TemporaryDirectory(prefix=scratch.prefix("preflight", req.env)) as tmp, _stop_on_signals(stop):
            outcome = run_once(probe, Path(tmp), stop=stop, launcher=worker or FRESH)
            log = Path(tmp) / "run.log"
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    except OSError as exc:  # no room for a temp dir, say: the children will show
        say(f"preflight: could not collect {req.op} ({exc.strerror or exc}); going on without it")
        return
    if stop.is_set() or outcome.status == "interrupted":
        raise KeyboardInterrupt
    if outcome.status == "passed":
        return
    problem = usage_problem(outcome.child_returncode, lines, req.level, list(req.extra_args))
    if problem:
        raise UsageError(
            f"pytest refuses the arguments the children would get: {problem} "
            f"(found by collecting {req.op}; check the arguments after -- and --level)"
        )
    why = _why(lines) or outcome.error or f"{outcome.status}, child status {outcome.child_returncode}"
    say(f"preflight: collecting {req.op} did not succeed ({why}); "
        "not an argument error: going on, each op will report it")


_EXC_RX = re.compile(r"^(?:E\s+)?((?:[\w.]+\.)?\w*(?:Error|Exception)\b:? ?.*?)\s*$")


def _why(lines: list[str]) -> str | None:
    """The suite's conftest failing to import (FlagGems: flag_gems without a device):
    that, with the last exception line after it."""
    for i, ln in enumerate(lines):
        if CONFTEST_IMPORT in ln:
            errs = [m.group(1) for m in map(_EXC_RX.match, lines[i + 1 :]) if m]
            return "the suite's conftest does not import" + (f": {errs[-1][:300]}" if errs else "")
    return None


@contextmanager
def _stop_on_signals(stop: threading.Event):
    """SIGINT/SIGTERM during the collection set ``stop`` (run_once then kills the
    child's group) instead of leaving it running; the caller then raises
    KeyboardInterrupt. Only in the main thread; the old handlers come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for sn in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sn)
        if handler is signal.SIG_IGN:  # a background job keeps ignoring Ctrl-C
            continue
        old[sn] = handler
        signal.signal(sn, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        for sn, handler in old.items():
            signal.signal(sn, handler)
