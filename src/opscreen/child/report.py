"""Child plugin: readable result tables and a record log in the output dir.

* Replaces ``benchmark.consts.BenchmarkResult.__str__`` with a table in the
  suite's own wording (``Operator: ...``, ``SUCCESS``/``FAILED``, the same
  column names, so ``grep SUCCESS run.log`` still works) plus three tag columns
  (``Timer``, ``Samples``, ``Noise(%)``) before ``Size Detail``, and folds inputs
  that are identical in every row into one legend line above the columns.
* Extends ``to_json`` so every record-log row carries ``timer``, ``samples``,
  ``rsd``, ``calls``, ``host_ms``, ``ci``, ``fallback``, ``graph_ms`` (and ``*_base``
  for the torch side), and every entry the
  ``test_case`` (pytest node id) that measured it, as FlagGems' ``--record json`` names it.
* Moves the suite's record log to the output directory as ``record.log``. The
  suite opens ``result_<args>.log`` relative to the current directory while it
  configures pytest; the child runs in the suite root, so from the first
  ``pytest_configure`` to the last ``pytest_sessionstart`` hook the current
  directory is the output dir: the file is created there, never in the suite
  root (outside the run dir, and left behind when the child is killed or the
  move fails on a full disk). Collection and the tests run in the suite root.
Colours only when the harness says its own output is a terminal
(``OPSCREEN_COLOR=1``): the child writes to a pipe, and run.log gets no ANSI codes.
* Like with like: a row whose one side was graph-timed and whose other side fell
  back (profiler or direct) is written with the graph side's figure from the other
  side's timer, when the timing plugin measured one (``alt``): latency, speedup, GB/s
  and TFLOPS follow, and ``graph_ms`` keeps the graph figure it replaced
  (:func:`like_for_like`; the table and the record log agree).
The format is specified in docs/contracts.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import pytest

from . import config as _config
from .timed_value import TAG_NAMES, TIMER_GRAPH, TimedFloat, tags_of, timer_method

RECORD_LOGGER = "flag_gems_benchmark"
_PATCHED: set = set()
_CURRENT_TEST: list = [None]  # node id of the test running now

GREEN, RED, YELLOW, RESET = "\033[32m", "\033[31m", "\033[33m", "\033[0m"


def _color() -> bool:
    return os.environ.get("OPSCREEN_COLOR") == "1"


def _paint(text: str, code: str) -> str:
    return f"{code}{text}{RESET}" if _color() else text


def _tag(value, attr):
    return getattr(value, attr, None)


def timer_cell(base, lib) -> str:
    tb, tl = _tag(base, "timer"), _tag(lib, "timer")
    if tb is None and tl is None:
        return "-"
    if tb == tl or tl is None or tb is None:
        return str(tb or tl)
    return f"{tb}|{tl}"


def pair_cell(base, lib, attr, fmt) -> str:
    def one(v):
        x = _tag(v, attr)
        return "-" if x is None else fmt(x)

    return f"{one(base)}|{one(lib)}"


def fold_inputs(details: list) -> tuple[list[tuple[int, str]], list]:
    """Positions of list-shaped shape details that are identical in every row.

    Returns ``(legend, rows)`` where legend is ``[(position, repr)]`` and rows are
    the details with those positions removed. Folds only when there are at least
    two rows, every detail is a list of the same length >= 2, and at least one
    position still varies.
    """
    if len(details) < 2 or not all(isinstance(d, list) for d in details):
        return [], details
    n = len(details[0])
    if n < 2 or any(len(d) != n for d in details):
        return [], details
    same = [i for i in range(n) if len({repr(d[i]) for d in details}) == 1]
    if not same or len(same) == n:
        return [], details
    legend = [(i, repr(details[0][i])) for i in same]
    rows = [[x for i, x in enumerate(d) if i not in same] for d in details]
    return legend, rows


def _scale(m, name: str, factor: float) -> None:
    v = getattr(m, name, None)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v:
        setattr(m, name, v * factor)


def like_for_like(m) -> bool:
    """Write row ``m`` with both sides of one timer where one side is graph-timed, the
    other fell back, and the graph side carries an ``alt`` figure of the other's timer.
    The suite's derived figures follow (speedup, and GB/s and TFLOPS, which are inverse
    to the latency they came from). Idempotent; True when the row was changed."""
    base, lib = getattr(m, "latency_base", None), getattr(m, "latency", None)
    if getattr(m, "_opscreen_like", False) or not isinstance(base, TimedFloat) or not isinstance(lib, TimedFloat):
        return False
    mb, ml = timer_method(base.timer), timer_method(lib.timer)
    if mb == ml:
        return False
    if mb == TIMER_GRAPH and base.alt is not None and timer_method(base.alt.timer) == ml and float(base.alt) > 0:
        new_base, new_lib = base.alt.replacing(float(base)), lib
        _scale(m, "gbps_base", float(base) / float(new_base))
    elif ml == TIMER_GRAPH and lib.alt is not None and timer_method(lib.alt.timer) == mb and float(lib.alt) > 0:
        new_base, new_lib = base, lib.alt.replacing(float(lib))
        for name in ("gbps", "tflops"):
            _scale(m, name, float(lib) / float(new_lib))
    else:
        return False
    m.latency_base, m.latency = new_base, new_lib
    if float(new_lib) > 0:
        m.speedup = float(new_base) / float(new_lib)
    m._opscreen_like = True
    return True


def format_result(res) -> str:
    for m in res.result:
        like_for_like(m)
    rows = list(res.result)
    first = rows[0] if rows else None
    has_tflops = bool(first is not None and first.tflops and first.tflops != 0.0)
    has_gbps = first is not None and first.gbps is not None
    details = [m.shape_detail for m in rows]
    legend, shown = fold_inputs(details)
    cols = [f"{'Status':<10}", f"{'Torch Latency (ms)':>20}", f"{'Gems Latency (ms)':>20}", f"{'Gems Speedup':>20}"]
    if has_tflops:
        cols.append(f"{'TFLOPS':>20}")
    if has_gbps:
        cols += [f"{'Torch GBPS ':>20}", f"{'Gems GBPS ':>20}"]
    cols += [f"{'Timer':>30}", f"{'Samples':>12}", f"{'Noise(%)':>16}", f"{'Size Detail':>20}"]
    header_cols = " ".join(cols)
    out = [f"\nOperator: {res.op_name}  Performance Test (dtype={res.dtype}, mode={res.mode},level={res.level})"]
    if legend:
        out.append("Same in every row: " + ", ".join(f"[{i}]={r}" for i, r in legend))
    out.append(header_cols)
    out.append("-" * len(header_cols))

    def num(v, fmt):
        return format(v, fmt) if v is not None else "N/A"

    for m, detail in zip(rows, shown):
        status = "SUCCESS" if m.error_msg is None else "FAILED"
        line = _paint(f"{status:<10}", GREEN if status == "SUCCESS" else RED)
        line += f"{num(m.latency_base, '.6f'):>20}{num(m.latency, '.6f'):>20}{num(m.speedup, '.3f'):>20}"
        if has_tflops:
            line += f"{num(m.tflops, '.3f') if m.tflops else 'N/A':>20}"
        if has_gbps:
            line += f"{num(m.gbps_base, '.3f'):>20}{num(m.gbps, '.3f'):>20}"
        tcell = timer_cell(m.latency_base, m.latency)
        tpad = " " + f"{tcell:>29}"
        line += _paint(tpad, YELLOW) if "fallback" in tcell else tpad
        line += " " + f"{pair_cell(m.latency_base, m.latency, 'samples', lambda x: str(int(x))):>11}"
        line += " " + f"{pair_cell(m.latency_base, m.latency, 'rsd', lambda x: f'{100.0 * x:.2f}'):>15}"
        line += " " * 10 + f"{detail if detail is not None else 'N/A'}"
        out.append(line)
    return "\n".join(out) + "\n"


def row_tags(m) -> dict:
    """The tags of a result row, torch's side as ``<tag>_base`` before the library's."""
    base, lib = tags_of(m.latency_base), tags_of(m.latency)
    out: dict = {}
    for key in TAG_NAMES:
        out[f"{key}_base"] = base[key]
        out[key] = lib[key]
    return out


def patch_consts(mod) -> bool:
    cls = getattr(mod, "BenchmarkResult", None)
    if cls is None or id(cls) in _PATCHED:
        return False
    orig_to_json = cls.to_json

    def to_json(self) -> str:
        for m in self.result:
            like_for_like(m)
        data = json.loads(orig_to_json(self))
        for row, m in zip(data.get("result") or [], self.result):
            if isinstance(row, dict):
                row.update(row_tags(m))
        if _CURRENT_TEST[0] and isinstance(data, dict) and not data.get("test_case"):
            data["test_case"] = _CURRENT_TEST[0]
        return json.dumps(data, default=str)

    cls.__str__ = format_result
    cls.to_json = to_json
    _PATCHED.add(id(cls))
    return True


def _patch_loaded() -> None:
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name == "benchmark.consts" or name.endswith(".benchmark.consts")):
            patch_consts(mod)


def _is_suite_record_file(path: str) -> bool:
    """A regular file named like the suite's record log (``result_*.log``)."""
    import stat

    name = os.path.basename(path)
    if not (name.startswith(("result_", "result-")) and name.endswith(".log")):
        return False
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def relocate_record_log(dest: str) -> None:
    """Point the suite's record logger at ``dest``, keeping what it wrote so far.

    Only a handler writing the suite's own record file (``result_*.log``, a
    regular file) is moved; any other handler on that logger (pytest attaches
    one on ``/dev/null`` to non-propagating loggers) is left exactly as it is.
    """
    logger = logging.getLogger(RECORD_LOGGER)
    for h in list(logger.handlers):
        if not isinstance(h, logging.FileHandler):
            continue
        src = getattr(h, "baseFilename", None)
        if not src or os.path.abspath(src) == os.path.abspath(dest) or not _is_suite_record_file(src):
            continue
        fmt, level = h.formatter, h.level
        h.flush()
        logger.removeHandler(h)
        h.close()
        try:  # another child of the same suite may race for a file of the same name
            if os.path.dirname(os.path.abspath(src)) == os.path.dirname(os.path.abspath(dest)):
                os.replace(src, dest)  # in the output dir already: needs no space
            else:
                shutil.copyfile(src, dest)
                os.unlink(src)
        except OSError:
            pass
        nh = logging.FileHandler(dest, mode="a", encoding="utf-8")
        nh.setLevel(level)
        if fmt is not None:
            nh.setFormatter(fmt)
        logger.addHandler(nh)


_SAVED_CWD: list[str] = []


def _enter_out_dir() -> None:
    """Make the output dir the current directory (see the module docstring)."""
    out = _config.load().get("out_dir")
    if not out or _SAVED_CWD:
        return
    try:
        cwd = os.getcwd()
        os.chdir(out)
    except OSError:
        return
    _SAVED_CWD.append(cwd)


def _leave_out_dir() -> None:
    if _SAVED_CWD:
        try:
            os.chdir(_SAVED_CWD.pop())
        except OSError:
            pass


def _take_over() -> None:
    """Patch the suite's result class and move its record log into the output dir.
    Done at the end of session start, once the suite's conftest has set up its
    record logger (in ``pytest_configure`` or ``pytest_sessionstart``)."""
    cfg = _config.load()
    _patch_loaded()
    if cfg.get("record_log_path"):
        relocate_record_log(cfg["record_log_path"])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _enter_out_dir()
    _patch_loaded()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    try:
        _take_over()
    finally:
        _leave_out_dir()


def pytest_collection_finish(session):
    _patch_loaded()


def pytest_runtest_logstart(nodeid, location):
    _CURRENT_TEST[0] = nodeid


def pytest_runtest_logfinish(nodeid, location):
    _CURRENT_TEST[0] = None
