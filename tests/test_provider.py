from __future__ import annotations

from pathlib import Path

import pytest

from opscreen.errors import UsageError
from opscreen.providers.flaggems import SAMPLE_SUITE, Suite, check_op_name, safe_dir_name
from opscreen.settings import parse_dtypes

FILES = {
    "test_abs.py": "import pytest\n@pytest.mark.abs\ndef test_abs(): pass\n@pytest.mark.abs_\ndef test_abs_inplace(): pass\n",
    "test_where.py": "import pytest\n@pytest.mark.where_self\ndef test_where_self(): pass\n@pytest.mark.where_self_out\ndef test_where_self_out(): pass\n",
    "test_mm.py": "import pytest\n@pytest.mark.mm\ndef test_mm(): pass\n",
    "test_blas_perf_parallel.py": (
        "import pytest\n@pytest.mark.parametrize('op', [pytest.param('mm', marks=pytest.mark.mm),"
        " pytest.param('addmm', marks=pytest.mark.addmm)])\ndef test_blas(op): pass\n"
    ),
    "test_Concat.py": "import pytest\n@pytest.mark.concat\ndef test_concat(): pass\n",
}


@pytest.fixture
def suite(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSCREEN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "suite"
    (root / "benchmark").mkdir(parents=True)
    (root / "benchmark" / "__init__.py").write_text("")
    for name, text in FILES.items():
        (root / "benchmark" / name).write_text(text)
    return Suite.locate(str(root), env={})


def test_op_by_marker(suite):
    n = suite.resolve("abs")
    assert n.argv == ("benchmark/test_abs.py", "-m", "abs") and n.how == "marker"


def test_inplace_variant_found_in_other_file(suite):
    assert suite.resolve("abs_").argv == ("benchmark/test_abs.py", "-m", "abs_")


def test_marker_in_several_files_prefers_the_stem_file(suite):
    assert suite.resolve("mm").argv == ("benchmark/test_mm.py", "-m", "mm")
    assert suite.resolve("addmm").argv == ("benchmark/test_blas_perf_parallel.py", "-m", "addmm")


def test_stem_that_is_no_marker_selects_the_files_markers(suite):
    n = suite.resolve("where")
    assert n.argv == ("benchmark/test_where.py", "-m", "where_self or where_self_out") and n.how == "file_stem"


def test_file_stem_case_differs_from_marker(suite):
    assert suite.resolve("concat").files == ("benchmark/test_Concat.py",)


def test_op_file_and_test_node(suite):
    assert suite.resolve("abs", op_file="test_abs.py").argv == ("benchmark/test_abs.py", "-m", "abs")
    n = suite.resolve(test_node="benchmark/test_abs.py::test_abs_inplace")
    assert n.argv == ("benchmark/test_abs.py::test_abs_inplace",) and n.op == "test_abs_inplace"


def test_unknown_op_names_nearest(suite):
    with pytest.raises(UsageError) as ei:
        suite.resolve("abss")
    assert "nearest" in str(ei.value) and "abs" in str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.parametrize("bad", ["../etc", "a/b", "abs; rm -rf /", "$(id)", "x y", "", "1abs", "and"])
def test_hostile_op_names_rejected(suite, bad):
    with pytest.raises(UsageError):
        suite.resolve(bad)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "test_nosuch.py", "-p evil", "benchmark/../x.py"])
def test_hostile_files_and_nodes_rejected(suite, bad):
    with pytest.raises(UsageError):
        suite.resolve("abs", op_file=bad)
    with pytest.raises(UsageError):
        suite.resolve(test_node=bad + "::test_x")


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "x;y", "bench/test.py::t[a-b]", "é"])
def test_safe_dir_name_never_escapes(name, tmp_path):
    d = safe_dir_name(name)
    assert d and "/" not in d and d not in (".", "..") and ".." not in d
    assert (tmp_path / d).resolve().parent == tmp_path.resolve()


def test_check_op_name():
    assert check_op_name("abs_") == "abs_"
    with pytest.raises(UsageError):
        check_op_name("not")


def test_parse_dtypes():
    assert parse_dtypes("float16, torch.bfloat16 float16") == ["float16", "bfloat16"]
    assert parse_dtypes(None) is None
    with pytest.raises(UsageError):
        parse_dtypes("float16;rm")
    # a name torch does not know fails in every op's pytest: refused here, in one line
    with pytest.raises(UsageError, match="bad dtype 'float99': give torch dtype names"):
        parse_dtypes("float16,float99")
    assert parse_dtypes("float8_e4m3fn complex64 int64 bool") == ["float8_e4m3fn", "complex64", "int64", "bool"]


def test_the_dtype_list_names_only_torch_dtypes():
    torch = pytest.importorskip("torch")
    from opscreen.settings import TORCH_DTYPES

    assert [n for n in sorted(TORCH_DTYPES) if not isinstance(getattr(torch, n, None), torch.dtype)] == []


def test_suite_root_precedence(tmp_path, suite):
    assert Suite.locate(None, env={}).root == SAMPLE_SUITE.resolve()
    assert Suite.locate(None, env={"FLAGGEMS_ROOT": str(suite.root)}).root == suite.root
    with pytest.raises(UsageError):
        Suite.locate(str(tmp_path / "nowhere"), env={})
