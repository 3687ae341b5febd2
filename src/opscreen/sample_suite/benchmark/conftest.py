"""pytest options and result recording of the sample suite (FlagGems' conventions).

Options: ``--mode kernel|operator|wrapper|cudagraph``, ``--level core|comprehensive``
(default comprehensive), ``--warmup`` / ``--iter`` (ms), ``--dtypes`` (repeatable),
``--metrics`` (repeatable), ``--shape_file``, ``--record none|log|json``, ``--output``.

``Config`` is the module-level settings object read by ``benchmark.base``. Unlike
FlagGems (which rebinds it in ``pytest_configure``) it is created at import and
updated in place, so a module that imported it early still sees the settings.

With ``--record log`` the logger ``flag_gems_benchmark`` gets a ``FileHandler``
writing ``[INFO] <message>`` lines to ``result_<invocation args>.log`` in the
current directory; its first line is ``Benchmark record logger enabled``.
"""

from __future__ import annotations

import json
import logging
import os

import pytest
import torch

import minigems

from . import consts

device = minigems.device
vendor_name = minigems.vendor_name

recordLogger = logging.getLogger("flag_gems_benchmark")
recordLogger.propagate = False

BUILTIN_MARKS = (
    "parametrize",
    "skip",
    "skipif",
    "xfail",
    "usefixtures",
    "filterwarnings",
    "timeout",
    "tryfirst",
    "trylast",
)
TEST_RESULTS: dict = {}
REPORT_FILE = "benchmark_result.json"
SHAPE_FILE = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")
DTYPE_CHOICES = [
    str(d).split(".")[-1]
    for d in consts.FLOAT_DTYPES + consts.INT_DTYPES + consts.BOOL_DTYPES + [torch.cfloat]
]


class BenchConfig:
    """Settings of one pytest session; filled from the command line at configure time."""

    def __init__(self):
        self.mode = consts.BenchMode.KERNEL
        self.bench_level = consts.BenchLevel.COMPREHENSIVE
        self.warm_up = consts.DEFAULT_WARMUP_TIME
        self.repetition = consts.DEFAULT_ITER_TIME
        self.record_log = False
        self.record_json = False
        self.user_desired_dtypes = None
        self.user_desired_metrics = None
        self.shape_file = SHAPE_FILE
        self.output = REPORT_FILE
        self.query = False


Config = BenchConfig()


def update_result(op, data):
    """Keep one op's result for the ``--record json`` report."""
    if not Config.record_json:
        return
    TEST_RESULTS.setdefault(op, {}).setdefault("details", []).append(data)


def emit_record_logger(message: str) -> None:
    """Write one ``[INFO]`` line to the record log (``--record log`` only)."""
    if not Config.record_log:
        return
    for handler in recordLogger.handlers[:1]:
        # A FileHandler that someone closed (or moved) reopens its file lazily.
        if isinstance(handler, logging.FileHandler) and handler.stream is None:
            handler.acquire()
            try:
                handler.stream = handler._open()
            finally:
                handler.release()
    recordLogger.info(message)


def _number(text):
    value = float(text)
    return int(value) if value.is_integer() else value


def pytest_addoption(parser):
    parser.addoption(
        "--mode",
        default="kernel",
        choices=[m.value for m in consts.BenchMode],
        help="How latency is measured: kernel (do_bench), operator, wrapper, cudagraph.",
    )
    parser.addoption(
        "--level",
        default="comprehensive",
        choices=[lv.value for lv in consts.BenchLevel],
        help="core: the shape file's shapes; comprehensive: plus each benchmark's extra shapes.",
    )
    parser.addoption(
        "--warmup",
        default=consts.DEFAULT_WARMUP_TIME,
        help="Time (ms) of warmup runs before each measurement.",
    )
    parser.addoption(
        "--iter",
        default=consts.DEFAULT_ITER_TIME,
        help="Time (ms) of the measured runs of each measurement.",
    )
    parser.addoption(
        "--metrics",
        action="append",
        default=None,
        choices=sorted(consts.ALL_AVAILABLE_METRICS),
        help="Metrics to measure (repeatable); default: the benchmark's own list.",
    )
    parser.addoption(
        "--dtypes",
        action="append",
        default=None,
        choices=DTYPE_CHOICES,
        help="Data types to measure (repeatable); one the op does not support fails the test.",
    )
    parser.addoption(
        "--shape_file",
        default=SHAPE_FILE,
        help="YAML shape file (keys: op names and benchmark class names).",
    )
    try:
        parser.addoption(
            "--record",
            default="none",
            choices=["none", "log", "json"],
            help="Record results to result_<args>.log (log) or to --output (json).",
        )
        parser.addoption("--output", default=REPORT_FILE, help="Report file of --record json.")
    except ValueError:  # already registered by another conftest
        pass


def _record_log_name(args) -> str:
    parts = [a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args]
    return "result_{}.log".format("_".join(parts)).replace("_-", "-")


def pytest_configure(config):
    global REPORT_FILE
    Config.mode = consts.BenchMode(config.getoption("--mode"))
    Config.bench_level = consts.BenchLevel(config.getoption("--level"))
    Config.warm_up = _number(config.getoption("--warmup"))
    Config.repetition = _number(config.getoption("--iter"))
    names = config.getoption("--dtypes")
    Config.user_desired_dtypes = [getattr(torch, n) for n in names] if names else None
    Config.user_desired_metrics = config.getoption("--metrics")
    Config.shape_file = config.getoption("--shape_file")
    record = config.getoption("--record")
    Config.record_log = record == "log"
    Config.record_json = record == "json"
    if Config.record_json:
        Config.output = REPORT_FILE = config.getoption("--output")

    if Config.record_log:
        for old in list(recordLogger.handlers):
            recordLogger.removeHandler(old)
            old.close()
        handler = logging.FileHandler(
            _record_log_name(config.invocation_params.args), mode="w", encoding="utf-8"
        )
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        recordLogger.addHandler(handler)
        recordLogger.setLevel(logging.INFO)
        emit_record_logger("Benchmark record logger enabled")


def _reason(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    if isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    return str(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marks = [m.name for m in item.iter_markers() if m.name not in BUILTIN_MARKS]
    # As in FlagGems, the first non-builtin mark is the op id.
    report.opid = marks[0] if marks else item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if not Config.record_json:
        return
    entry = TEST_RESULTS.setdefault(report.opid, {})
    if report.when == "setup" and report.outcome == "skipped":
        entry.update(result="skipped", reason=_reason(report), test_case=report.nodeid)
    elif report.when == "call":
        failed = report.outcome in ("skipped", "failed")
        entry.update(
            result=report.outcome,
            test_case=report.nodeid,
            reason=_reason(report) if failed else None,
        )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not Config.record_json:
        return
    data = TEST_RESULTS
    if os.path.exists(REPORT_FILE):
        with open(REPORT_FILE, encoding="utf-8") as f:
            data = {**json.load(f), **TEST_RESULTS}
    with open(REPORT_FILE, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
