"""The bundled sample suite (``src/opscreen/sample_suite``) behaves like FlagGems' suite.

Each test copies the suite into a temporary directory and runs pytest there in a
subprocess (the suite imports torch, which the harness process never does), the
way FlagGems is run: from the suite root, ``python -m pytest benchmark/test_<op>.py
-m <op> --level core``. One subprocess costs about 2 s (python, torch, collection).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "src" / "opscreen" / "sample_suite"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="the sample suite needs torch"
)

# file -> (markers in order, family). The op unit is the marker, not the file.
EXPECTED_OPS = {
    "test_abs.py": (["abs", "abs_"], "unary pointwise"),
    "test_exp.py": (["exp"], "unary pointwise"),
    "test_relu.py": (["relu"], "unary pointwise"),
    "test_gelu.py": (["gelu"], "unary pointwise"),
    "test_add.py": (["add"], "binary pointwise"),
    "test_mul.py": (["mul"], "binary pointwise"),
    "test_where.py": (["where_self", "where_self_out"], "ternary pointwise (generic)"),
    "test_sum.py": (["sum"], "reduction"),
    "test_mean.py": (["mean"], "reduction"),
    "test_softmax.py": (["softmax"], "softmax"),
    "test_layer_norm.py": (["layer_norm"], "norm"),
    "test_clone.py": (["clone"], "memory (GB/s)"),
    "test_mm.py": (["mm"], "BLAS"),
    "test_bmm.py": (["bmm"], "BLAS"),
}

# BenchmarkMetrics' fields in FlagGems (the keys of every record-log "result" entry).
METRIC_KEYS = [
    "legacy_shape", "shape_detail", "latency_base", "latency", "gbps_base", "gbps",
    "speedup", "accuracy", "tflops", "utilization", "compared_speedup", "error_msg",
]
# consts.DEFAULT_SHAPES of the suite (also its shape file's `Benchmark` key).
DEFAULT_SHAPES = [[1048576], [64, 64], [512, 512], [16, 128, 128]]

HEADER_RE = re.compile(
    r"^Operator: (\S+)  Performance Test \(dtype=(torch\.\w+), mode=(\w+),level=(\w+)\)$"
)
KNOWN_COLUMNS = [
    "Status", "Torch Latency (ms)", "Gems Latency (ms)", "Gems Speedup",
    "TFLOPS", "Torch GBPS", "Gems GBPS", "Size Detail",
]


@pytest.fixture
def suite(tmp_path):
    root = tmp_path / "suite"
    shutil.copytree(SUITE, root, ignore=shutil.ignore_patterns("__pycache__", "result*.log"))
    return root


def run_suite(root, *args, plugin_dir=None, timeout=180):
    env = dict(os.environ)
    for key in ("PYTEST_ADDOPTS", "OPSCREEN_CHILD_CONFIG", "GEMS_VENDOR", "PYTHONPATH"):
        env.pop(key, None)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if plugin_dir is not None:
        env["PYTHONPATH"] = str(plugin_dir)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-q", *map(str, args)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def parse_tables(text):
    """FlagGems' printed tables: [{op, dtype, mode, level, columns, rows}], rows split on whitespace."""
    lines = text.splitlines()
    tables = []
    for i, line in enumerate(lines):
        m = HEADER_RE.match(line)
        if not m:
            continue
        col_line, rule = lines[i + 1], lines[i + 2]
        assert set(rule) == {"-"}, rule
        columns = [c for c in KNOWN_COLUMNS if c in col_line]
        assert col_line.split()[0] == "Status" and col_line.rstrip().endswith("Size Detail")
        rows = []
        for row in lines[i + 3:]:
            if not row.strip() or not row.startswith(("SUCCESS", "FAILED")):
                break
            # status + numeric columns, then the size detail (which contains spaces)
            rows.append(row.split(None, len(columns) - 1))
        tables.append(dict(zip(("op", "dtype", "mode", "level"), m.groups()), columns=columns, rows=rows))
    return tables


def detail_key(printed: str) -> str:
    """The printed size detail as the compact JSON shape key of the record log."""
    text = re.sub(r"torch\.Size\(\[([^\]]*)\]\)", r"[\1]", printed)
    text = re.sub(r"torch\.(\w+)", r"'torch.\1'", text)
    return json.dumps(ast.literal_eval(text), separators=(",", ":"))


def record_rows(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "[INFO] Benchmark record logger enabled"
    assert all(ln.startswith("[INFO] ") for ln in lines)
    return [json.loads(ln[len("[INFO] "):]) for ln in lines[1:]]


def shape_file():
    return yaml.safe_load((SUITE / "benchmark" / "core_shapes.yaml").read_text())


# -- static checks (no subprocess) ------------------------------------------------


def test_files_and_markers():
    bench = SUITE / "benchmark"
    found = {}
    for path in sorted(bench.glob("test_*.py")):
        found[path.name] = re.findall(r"^@pytest\.mark\.(\w+)\s*$", path.read_text(), re.M)
    assert found == {name: markers for name, (markers, _) in EXPECTED_OPS.items()}
    markers = [m for ms, _ in EXPECTED_OPS.values() for m in ms]
    assert len(markers) == len(set(markers)) == 16
    # a file whose stem is none of its markers, like FlagGems' test_where.py
    assert "where" not in found["test_where.py"]
    assert {"benchmark", "pytest.ini", "src"} <= {p.name for p in SUITE.iterdir()}
    assert not (SUITE / "__init__.py").exists(), "must not be a package: benchmark/ would import as opscreen.sample_suite.benchmark"


def test_package_data_globs_cover_the_suite():
    """pyproject's package-data patterns ship every file of the suite, not only .py."""
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["opscreen"]
    pkg = ROOT / "src" / "opscreen"
    shipped = {p for pat in patterns for p in pkg.glob(pat) if p.is_file()}
    files = {
        p for p in SUITE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not fnmatch.fnmatch(p.name, "result*.log")
    }
    assert {SUITE / "pytest.ini", SUITE / "benchmark" / "core_shapes.yaml"} <= files
    assert files <= shipped, sorted(str(p) for p in files - shipped)


def test_pytest_ini_like_flaggems():
    ini = (SUITE / "pytest.ini").read_text()
    assert re.search(r"^pythonpath\s*=\s*src\s*$", ini, re.M)
    assert "ignore::pytest.PytestUnknownMarkWarning" in ini


def test_shape_file_keys():
    table = shape_file()
    assert {"Benchmark", "BlasBenchmark", "UnaryPointwiseBenchmark", "UnaryReductionBenchmark", "NormBenchmark"} <= set(table)
    assert {"softmax", "clone", "where_self", "where_self_out"} <= set(table)
    assert table["Benchmark"]["shapes"] == DEFAULT_SHAPES
    assert all(len(s) == 4 for s in table["BlasBenchmark"]["shapes"])
    assert table["UnaryPointwiseBenchmark"]["shapes"] != DEFAULT_SHAPES


# -- runs --------------------------------------------------------------------------


def test_add_table_and_record_log(suite):
    res = run_suite(suite, "benchmark/test_add.py", "-m", "add", "--level", "core", "--record", "log")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    tables = parse_tables(res.stdout)
    assert [t["dtype"] for t in tables] == ["torch.float16", "torch.float32", "torch.bfloat16"]
    shapes = shape_file()["Benchmark"]["shapes"]  # BinaryPointwiseBenchmark has no key of its own
    for t in tables:
        assert (t["op"], t["mode"], t["level"]) == ("add", "kernel", "core")
        assert t["columns"] == ["Status", "Torch Latency (ms)", "Gems Latency (ms)", "Gems Speedup", "TFLOPS", "Size Detail"]
        assert len(t["rows"]) == len(shapes)
        for status, base, lat, speedup, tflops, detail in t["rows"]:
            assert status == "SUCCESS"
            assert float(base) > 0 and float(lat) > 0 and float(tflops) >= 0
            assert float(speedup) == pytest.approx(float(base) / float(lat), rel=0.01, abs=0.002)
        assert [json.loads(detail_key(r[-1]))[0] for r in t["rows"]] == shapes

    # FlagGems' naming rule: every invocation arg, "/" "=" -> "_", ".py" dropped,
    # joined by "_", then "_-" -> "-" (so run_suite's leading "-s -q" give "result-s-q_")
    log = suite / "result-s-q_benchmark_test_add-m_add--level_core--record_log.log"
    assert log.is_file(), sorted(p.name for p in suite.iterdir())
    rows = record_rows(log)
    assert [r["dtype"] for r in rows] == [t["dtype"] for t in tables]
    for rec, t in zip(rows, tables):
        assert list(rec) == ["op_name", "dtype", "mode", "level", "result"]
        assert (rec["op_name"], rec["mode"], rec["level"]) == ("add", "kernel", "core")
        for entry, printed in zip(rec["result"], t["rows"]):
            assert list(entry) == METRIC_KEYS
            assert entry["error_msg"] is None and entry["gbps"] is None
            assert f"{entry['latency_base']:.6f}" == printed[1]
            # the record log's shape key equals the key a run.log parser derives
            assert json.dumps(entry["shape_detail"], separators=(",", ":")) == detail_key(printed[-1])


def test_generic_op_with_out_and_gbps_columns(suite):
    res = run_suite(
        suite, "benchmark/test_where.py", "benchmark/test_clone.py",
        "-m", "where_self_out or clone", "--level", "core", "--dtypes", "float32",
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    tables = {t["op"]: t for t in parse_tables(res.stdout)}
    assert set(tables) == {"where_self_out", "clone"}
    clone = tables["clone"]
    assert clone["columns"] == ["Status", "Torch Latency (ms)", "Gems Latency (ms)", "Gems Speedup", "Torch GBPS", "Gems GBPS", "Size Detail"]
    assert [json.loads(detail_key(r[-1])) for r in clone["rows"]] == [[s] for s in shape_file()["clone"]["shapes"]]
    assert all(float(r[4]) > 0 and float(r[5]) > 0 for r in clone["rows"])
    # an out= op prints (args, kwargs), as FlagGems does
    first = tables["where_self_out"]["rows"][0][-1]
    assert first == "([torch.Size([64, 64]), torch.Size([64, 64]), torch.Size([64, 64])], {'out': torch.Size([64, 64])})"
    assert json.loads(detail_key(first)) == [[[64, 64], [64, 64], [64, 64]], {"out": [64, 64]}]


def test_marker_is_not_the_file_stem(suite):
    res = run_suite(suite, "benchmark/test_where.py", "-m", "where", "--level", "core")
    assert res.returncode == 5, res.stdout[-2000:]  # nothing selected


def test_unsupported_dtype_fails_the_test(suite):
    res = run_suite(suite, "benchmark/test_abs.py", "-m", "abs", "--level", "core", "--dtypes", "int32")
    assert res.returncode == 1, res.stdout[-2000:]
    assert "ValueError" in res.stdout and "can't be supported by this op 'abs'" in res.stdout
    assert not parse_tables(res.stdout)


def test_unknown_dtype_name_is_a_usage_error(suite):
    res = run_suite(suite, "benchmark/test_abs.py", "-m", "abs", "--dtypes", "float64")
    assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-2000:]
    assert "invalid choice" in res.stderr


def test_blas_ops_take_2d_3d_shapes_from_the_class_key(suite):
    res = run_suite(
        suite, "benchmark/test_mm.py", "benchmark/test_bmm.py", "-m", "mm or bmm",
        "--level", "core", "--dtypes", "float32", "--record", "log",
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    blas = shape_file()["BlasBenchmark"]["shapes"]
    logs = list(suite.glob("result*.log"))
    assert len(logs) == 1
    rows = {r["op_name"]: r for r in record_rows(logs[0])}
    assert [e["shape_detail"] for e in rows["mm"]["result"]] == [[[m, k], [k, n]] for b, m, n, k in blas]
    assert [e["shape_detail"] for e in rows["bmm"]["result"]] == [[[b, m, k], [b, k, n]] for b, m, n, k in blas]
    for rec in rows.values():
        assert all(e["tflops"] > 0 for e in rec["result"])
    assert all("TFLOPS" in t["columns"] for t in parse_tables(res.stdout))


def test_shape_file_without_class_keys_falls_back_to_default_shapes(suite, tmp_path):
    """FlagGems' pitfall: a replacement shape file without the class-name keys gives
    every benchmark without an op key the 1-D-first DEFAULT_SHAPES; BLAS ops then fail."""
    custom = tmp_path / "only_add.yaml"
    custom.write_text("add:\n  shapes:\n    - [1024]\n")
    res = run_suite(
        suite, "benchmark/test_add.py", "benchmark/test_abs.py", "benchmark/test_mm.py",
        "-m", "add or abs or mm", "--level", "core", "--dtypes", "float32", "--shape_file", custom,
    )
    assert res.returncode == 1, res.stdout[-3000:]
    tables = {t["op"]: t for t in parse_tables(res.stdout)}
    assert [json.loads(detail_key(r[-1])) for r in tables["add"]["rows"]] == [[[1024], [1024]]]
    assert [json.loads(detail_key(r[-1]))[0] for r in tables["abs"]["rows"]] == DEFAULT_SHAPES
    assert "mm" not in tables
    assert "Operator=mm" in res.stdout and "not enough values to unpack" in res.stdout
    assert re.search(r"^FAILED benchmark/test_mm\.py::test_mm\b", res.stdout, re.M)
    assert "2 passed" in res.stdout


TIMING_PLUGIN = '''
import pytest

CALLS = []


def fake_do_bench(fn, warmup=None, rep=None, return_mode=None, **kwargs):
    assert return_mode == "median" and warmup == 3 and rep == 7
    fn()
    CALLS.append(1)
    return 2.0


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # importing the suite's base module this early must not break its Config
    import benchmark.base

    benchmark.base.do_bench = fake_do_bench


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"fake do_bench calls: {len(CALLS)}")
'''


def test_kernel_mode_timing_goes_through_base_do_bench(suite, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "fake_timer.py").write_text(TIMING_PLUGIN)
    out = tmp_path / "out.json"
    res = run_suite(
        suite, "-p", "fake_timer", "benchmark/test_add.py", "-m", "add", "--level", "core",
        "--dtypes", "float32", "--warmup", "3", "--iter", "7", "--record", "json", "--output", out,
        plugin_dir=plugins,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    (table,) = parse_tables(res.stdout)
    assert {(r[1], r[2], r[3]) for r in table["rows"]} == {("2.000000", "2.000000", "1.000")}
    assert f"fake do_bench calls: {2 * len(table['rows'])}" in res.stdout
    report = json.loads(out.read_text())
    assert report["add"]["result"] == "passed" and report["add"]["reason"] is None
    assert report["add"]["test_case"] == "benchmark/test_add.py::test_add"
    (detail,) = report["add"]["details"]
    assert detail["dtype"] == "torch.float32" and [e["latency"] for e in detail["result"]] == [2.0] * len(table["rows"])


def test_cudagraph_mode_fails_on_cpu(suite):
    res = run_suite(suite, "benchmark/test_relu.py", "-m", "relu", "--level", "core", "--mode", "cudagraph")
    assert res.returncode == 1, res.stdout[-2000:]
    assert "cudagraph mode needs a CUDA device" in res.stdout


MINIGEMS_CHECK = '''
import sys, torch, minigems

print(minigems.device, minigems.vendor_name, minigems.__version__)
torch.manual_seed(0)
x = torch.randn(64, 96)
y = torch.randn(64, 96)
a, b, c = torch.randn(4, 8, 16), torch.randn(4, 16, 32), torch.randn(8, 16)
w, bias = torch.randn(96), torch.randn(96)
checks = {
    "abs": (minigems.abs(x), torch.abs(x)),
    "abs_": (minigems.abs_(x.clone()), torch.abs(x)),
    "exp": (minigems.exp(x), torch.exp(x)),
    "relu": (minigems.relu(x), torch.relu(x)),
    "gelu": (minigems.gelu(x), torch.nn.functional.gelu(x)),
    "add": (minigems.add(x, y), torch.add(x, y)),
    "mul": (minigems.mul(x, y), torch.mul(x, y)),
    "where": (minigems.where(x > 0, x, y), torch.where(x > 0, x, y)),
    "where_out": (minigems.where(x > 0, x, y, out=torch.empty_like(x)), torch.where(x > 0, x, y)),
    "sum": (minigems.sum(x, 1), torch.sum(x, 1)),
    "sum_all": (minigems.sum(x), torch.sum(x)),
    "mean": (minigems.mean(x, 1), torch.mean(x, 1)),
    "softmax": (minigems.softmax(x, 1), torch.softmax(x, 1)),
    "layer_norm": (minigems.layer_norm(x, (96,), w, bias), torch.layer_norm(x, (96,), w, bias)),
    "clone": (minigems.clone(x), x),
    "mm": (minigems.mm(c.t(), c), c.t().mm(c)),
    "bmm": (minigems.bmm(a, b), torch.bmm(a, b)),
}
# Another formulation of the same function (exp as exp2, softmax by hand, ...) rounds
# differently; 1e-3 relative tells a right formula from a wrong one with a wide margin
# (an intermittent 1.5e-4 difference of exp was seen on this CPU under load).
bad = [k for k, (got, want) in checks.items() if not torch.allclose(got, want, rtol=1e-3, atol=1e-4)]
print("BAD", bad, [((checks[k][0] - checks[k][1]).abs().max().item(), checks[k][1].abs().max().item()) for k in bad])
sys.exit(1 if bad else 0)
'''


def test_minigems_matches_torch_and_reads_only_gems_vendor(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(SUITE / "src"), GEMS_VENDOR="acme", PYTHONDONTWRITEBYTECODE="1")
    res = subprocess.run(
        [sys.executable, "-c", MINIGEMS_CHECK], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[0] == "cpu acme 0.1.0"
