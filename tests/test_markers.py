"""The AST scan of benchmark files (opscreen.providers.markers)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from opscreen.providers import markers
from opscreen.providers.markers import BUILTIN_MARKS, FileInfo, TestInfo, op_index, scan_file, scan_source, scan_suite

SUITE = Path(__file__).parent / "fixtures" / "suites" / "markers"


@pytest.fixture(scope="module")
def scanned() -> dict[str, FileInfo]:
    files = [scan_file(p, SUITE) for p in markers.suite_files(SUITE)]
    return {f.path.rsplit("/", 1)[-1]: f for f in files}


def by_name(info: FileInfo) -> dict[str, TestInfo]:
    return {t.name: t for t in info.tests}


def test_paths_are_relative_to_the_suite_root(scanned):
    assert scanned["test_stacked.py"].path == "benchmark/test_stacked.py"
    assert all(f.path.startswith("benchmark/test_") for f in scanned.values())


def test_stacked_markers_in_pytest_order_without_builtins(scanned):
    t = by_name(scanned["test_stacked.py"])
    # pytest's iter_markers order: the decorator closest to the def first
    assert t["test_stacked"].markers == ("beta", "alpha")
    assert t["test_mark_with_arguments"].markers == ("gamma",)  # timeout/usefixtures/xfail dropped
    assert t["test_from_pytest_import_mark"].markers == ("delta",)  # `from pytest import mark`
    assert t["test_repeat_is_an_op"].markers == ("repeat",)  # a plugin's mark name, an op here
    assert t["test_stacked"].lineno == 11


def test_builtin_marks_are_flaggems_list():
    assert {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout"} <= BUILTIN_MARKS
    assert "repeat" not in BUILTIN_MARKS


def test_module_pytestmark_list(scanned):
    t = by_name(scanned["test_module_marks.py"])
    assert t["test_module_only"].markers == ("modop",)
    assert t["test_own_then_module"].markers == ("own", "modop")
    assert "helper_not_a_test" not in t


def test_param_marks(scanned):
    t = by_name(scanned["test_params.py"])
    assert t["test_param_marks_from_variable"].markers == ("p_one", "p_two")  # argvalues is a module name
    assert t["test_param_marks_inline"].markers == ("p_three", "p_four")  # single mark and a tuple
    assert t["test_builtin_param_mark"].markers == ("outer_op",)  # marks=pytest.mark.xfail is builtin


def test_marks_through_variables(scanned):
    t = by_name(scanned["test_variables.py"])
    assert t["test_mark_from_variable"].markers == ("varop",)  # skipif variable dropped
    assert t["test_subscript_mark"].markers == ("first_of_two",)
    assert t["test_getattr_mark"].markers == ("dynamic_name",)
    assert t["test_helper_builds_the_benchmark"].markers == ("varop",)  # .with_args(...)


def test_classes(scanned):
    t = by_name(scanned["test_classes.py"])
    assert set(t) == {"TestThing::test_method", "TestThing::test_plain_method", "TestThing::TestInner::test_inner"}
    assert t["TestThing::test_method"].markers == ("meth", "cls_attr", "cls_deco")
    assert t["TestThing::test_plain_method"].markers == ("cls_attr", "cls_deco")
    assert t["TestThing::TestInner::test_inner"].markers == ("inner", "cls_attr", "cls_deco")


def test_shadowed_conditional_and_unmarked(scanned):
    t = by_name(scanned["test_shadow.py"])
    assert t["test_twice"].markers == ("second_def",)  # the later def wins
    assert t["test_ghost"].markers == ("ghost",)  # both branches of an `if` are scanned
    assert t["test_without_marker"].markers == ()
    assert t["test_async_def"].markers == ()


def test_syntax_error_is_reported_not_raised(scanned):
    f = scanned["test_broken.py"]
    assert f.tests == ()
    assert f.error is not None and f.error.startswith("SyntaxError") and "line 5" in f.error


def test_bench_class_and_dtypes(scanned):
    t = by_name(scanned["test_stacked.py"])
    assert t["test_stacked"].bench_class == "base.UnaryPointwiseBenchmark"
    assert t["test_stacked"].dtypes_expr == "consts.FLOAT_DTYPES"
    # a multi-line list comes back on one line
    assert t["test_mark_with_arguments"].bench_class == "base.BlasBenchmark"
    assert t["test_mark_with_arguments"].dtypes_expr == "['float32', 'int32']"
    assert t["test_from_pytest_import_mark"].bench_class is None
    assert t["test_from_pytest_import_mark"].dtypes_expr is None
    m = by_name(scanned["test_module_marks.py"])
    assert m["test_module_only"].bench_class == "GenericBenchmark"
    assert m["test_module_only"].dtypes_expr is None  # the class default applies
    assert m["test_own_then_module"].dtypes_expr == "['float32']"  # local variable resolved
    p = by_name(scanned["test_params.py"])
    assert p["test_param_marks_from_variable"].bench_class == "base.BlasBenchmark"  # every param agrees
    assert p["test_param_marks_inline"].bench_class is None  # params disagree
    c = by_name(scanned["test_classes.py"])
    assert c["TestThing::test_method"].bench_class == "MoreLocal"  # module class deriving from *Benchmark
    v = by_name(scanned["test_variables.py"])
    assert v["test_helper_builds_the_benchmark"].bench_class == "base.UnaryPointwiseBenchmark"  # via a helper
    assert v["test_helper_builds_the_benchmark"].dtypes_expr == "['bfloat16']"


def test_scan_source_flaggems_forms():
    src = '''
import pytest
import torch
from . import base, consts

@pytest.mark.div_tensor
@pytest.mark.skipif(flag_gems.vendor_name == "x", reason="r")
def test_div():
    bench = base.BinaryPointwiseBenchmark(op_name="div_tensor", torch_op=torch.div, dtypes=consts.FLOAT_DTYPES)
    bench.run()

@pytest.mark.parametrize(
    "op_name, torch_op, input_fn, bench_cls",
    [
        pytest.param("addmm", torch.addmm, None, ParallelBlasBenchmark, marks=pytest.mark.addmm),
        pytest.param("bmm", torch.bmm, None, ParallelBlasBenchmark, marks=pytest.mark.bmm),
    ],
)
def test_blas_benchmark(op_name, torch_op, input_fn, bench_cls):
    bench = bench_cls(input_fn=input_fn, op_name=op_name, torch_op=torch_op, dtypes=FLOAT_DTYPES)
    bench.run()
'''
    info = scan_source(src, "benchmark/test_x.py")
    t = {x.name: x for x in info.tests}
    assert t["test_div"] == TestInfo("test_div", ("div_tensor",), 8, "base.BinaryPointwiseBenchmark", "consts.FLOAT_DTYPES")
    assert t["test_blas_benchmark"].markers == ("addmm", "bmm")
    assert t["test_blas_benchmark"].bench_class == "ParallelBlasBenchmark"
    assert t["test_blas_benchmark"].dtypes_expr == "FLOAT_DTYPES"


def test_scan_suite_sorted_and_op_index(tmp_path):
    files = scan_suite(SUITE, cache_dir=tmp_path)
    assert [f.path for f in files] == sorted(f.path for f in files)
    idx = op_index(files)
    assert list(idx) == sorted(idx)
    assert idx["varop"] == [
        ("benchmark/test_variables.py", "test_helper_builds_the_benchmark"),
        ("benchmark/test_variables.py", "test_mark_from_variable"),
    ]
    assert idx["cls_deco"][0] == ("benchmark/test_classes.py", "TestThing::TestInner::test_inner")
    assert "skipif" not in idx and "parametrize" not in idx


def test_cache_is_used_and_invalidated(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    cache = tmp_path / "cache"
    first = scan_suite(suite, cache_dir=cache)
    cache_files = list(cache.glob("markers-*.json"))
    assert len(cache_files) == 1
    # A warm scan must not parse anything.
    calls = []
    orig = markers.scan_source
    markers.scan_source = lambda *a, **k: calls.append(a) or orig(*a, **k)
    try:
        assert scan_suite(suite, cache_dir=cache) == first
        assert calls == []
        target = suite / "benchmark" / "test_stacked.py"
        target.write_text(target.read_text().replace("@pytest.mark.alpha", "@pytest.mark.omega"))
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        again = scan_suite(suite, cache_dir=cache)
        assert len(calls) == 1
    finally:
        markers.scan_source = orig
    stacked = next(f for f in again if f.path == "benchmark/test_stacked.py")
    assert stacked.tests[0].markers == ("beta", "omega")
    # A removed file leaves the result, a corrupt cache is ignored.
    (suite / "benchmark" / "test_broken.py").unlink()
    cache_files[0].write_text("{not json")
    assert "benchmark/test_broken.py" not in [f.path for f in scan_suite(suite, cache_dir=cache)]


def test_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSCREEN_CACHE_DIR", str(tmp_path / "c"))
    assert markers.default_cache_dir() == tmp_path / "c"
    scan_suite(SUITE)
    assert list((tmp_path / "c").glob("markers-*.json"))


def test_unwritable_cache_dir_is_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert scan_suite(SUITE, cache_dir=blocker / "sub")  # mkdir fails: scan still works


def test_speed_on_many_files(tmp_path):
    """~700 FlagGems-like files: cold well under 2 s, warm under 0.2 s (generous bounds here)."""
    bench = tmp_path / "suite" / "benchmark"
    bench.mkdir(parents=True)
    body = (SUITE / "benchmark" / "test_stacked.py").read_text() * 3
    for i in range(700):
        (bench / f"test_op{i:03d}.py").write_text(body.replace("alpha", f"alpha{i}"))
    t0 = time.perf_counter()
    cold = scan_suite(tmp_path / "suite", cache_dir=tmp_path / "cache")
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = scan_suite(tmp_path / "suite", cache_dir=tmp_path / "cache")
    t_warm = time.perf_counter() - t0
    assert cold == warm and len(cold) == 700
    assert t_cold < 6.0, t_cold  # 2-core shared CI machine: 3x headroom over the 2 s target
    assert t_warm < 0.6, t_warm
