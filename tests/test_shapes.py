"""Curated shapes: merge over a suite's core_shapes.yaml, check, and a real run on the sample suite."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from opscreen.assets import shape_files as S
from opscreen.commands import shapes as shapes_cmd
from opscreen.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "src" / "opscreen" / "sample_suite"
MARKERS = Path(__file__).parent / "fixtures" / "suites" / "markers"

CORE_YAML = """
single_dim_shapes: &single_dim_shapes
  shapes:
    - [64]
    - [1024]
  shape_desc: "M"

vdot:
  <<: *single_dim_shapes

softmax:
  shapes:
    - [64, 64]
  shape_desc: "M, N"

BlasBenchmark:
  shapes:
    - [2, 384, 384, 384]
    - [16, 1024, 1024, 1024]
  shape_desc: "B, M, N, K"

Benchmark:
  shapes:
    - [1073741824]
    - [64, 64]
"""


def core() -> dict:
    return yaml.safe_load(CORE_YAML)


def run_command(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="opscreen shapes")
    shapes_cmd.add_arguments(p)
    try:
        return shapes_cmd.run(p.parse_args(list(argv)))
    except UsageError:
        return 2


def test_merge_keeps_every_suite_key_and_curated_wins():
    suite = core()
    curated = {"softmax": {"shapes": [[1, 4096]]}, "mm": {"shapes": [[1, 64, 512, 512]], "shape_desc": "B, M, N, K"}}
    merged = S.merge_shapes(suite, curated)
    assert list(merged)[: len(suite)] == list(suite)  # suite keys and order survive
    assert set(merged) == set(suite) | {"mm"}
    assert merged["BlasBenchmark"] == suite["BlasBenchmark"]  # BLAS class shapes preserved
    assert merged["Benchmark"] == suite["Benchmark"]
    assert merged["softmax"]["shapes"] == [[1, 4096]]  # curated op key wins
    assert merged["softmax"]["shape_desc"] == "M, N"  # kept from the suite when curated has none
    assert merged["mm"] == curated["mm"]
    assert merged["vdot"]["shapes"] == [[64], [1024]]  # merge key resolved by safe_load
    assert suite == core()  # inputs untouched


def test_curated_class_key_wins_too():
    merged = S.merge_shapes(core(), {"BlasBenchmark": {"shapes": [[1, 8, 8, 8]]}})
    assert merged["BlasBenchmark"] == {"shapes": [[1, 8, 8, 8]], "shape_desc": "B, M, N, K"}


def test_merge_rejects_malformed_entries():
    with pytest.raises(UsageError, match="'mm'"):
        S.merge_shapes(core(), {"mm": [[1, 2, 3, 4]]})


def test_write_merged_file_has_no_aliases(tmp_path):
    suite = tmp_path / "suite"
    (suite / "benchmark").mkdir(parents=True)
    (suite / "benchmark" / "core_shapes.yaml").write_text(CORE_YAML)
    src = tmp_path / "curated.yaml"
    src.write_text("softmax:\n  shapes: [[1, 4096]]\n")
    dest = S.write_merged_shape_file(suite, src, tmp_path / "out" / "merged.yaml")
    assert dest == tmp_path / "out" / "merged.yaml"
    text = dest.read_text()
    assert "&" not in text.split("\n", 4)[-1] and "*" not in text  # anchors resolved, none written
    data = yaml.safe_load(text)
    assert data["BlasBenchmark"]["shapes"] == [[2, 384, 384, 384], [16, 1024, 1024, 1024]]
    assert data["softmax"] == {"shapes": [[1, 4096]], "shape_desc": "M, N"}
    assert data["vdot"] == data["single_dim_shapes"]


def test_write_merged_without_suite_file_and_bad_inputs(tmp_path):
    suite = tmp_path / "suite"
    (suite / "benchmark").mkdir(parents=True)
    src = tmp_path / "c.yaml"
    src.write_text("mm:\n  shapes: [[1, 2, 3, 4]]\n")
    assert yaml.safe_load(S.write_merged_shape_file(suite, src, tmp_path / "m.yaml").read_text()) == {
        "mm": {"shapes": [[1, 2, 3, 4]]}
    }
    src.write_text("mm: [\n")
    with pytest.raises(UsageError, match=r"c.yaml:2: not valid YAML: ") as bad:
        S.write_merged_shape_file(suite, src, tmp_path / "m.yaml")
    assert "\n" not in str(bad.value)
    src.write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="must be a mapping"):
        S.write_merged_shape_file(suite, src, tmp_path / "m.yaml")
    with pytest.raises(UsageError, match="cannot read"):
        S.write_merged_shape_file(suite, tmp_path / "missing.yaml", tmp_path / "m.yaml")


def test_shipped_curated_files_are_clean():
    for name in ("shapes.yaml", "shapes.sample.yaml"):
        data = S.load_shape_file(REPO / "ops" / name)
        assert {"add", "softmax", "mm", "layer_norm", "sum"} <= set(data)
        for key, entry in data.items():
            assert entry["shapes"] and all(isinstance(s, list) for s in entry["shapes"]), key
    assert S.check_shape_file(SAMPLE, S.load_shape_file(REPO / "ops" / "shapes.sample.yaml")) == []


def test_curated_source_by_suite(monkeypatch):
    monkeypatch.delenv("OPSCREEN_CURATED_SHAPES", raising=False)
    # the curated set shipped in the package (ops/ of a checkout links to it)
    assert S.curated_shape_source() == (REPO / "ops" / "shapes.yaml").resolve() == S.DATA_DIR / "shapes.yaml"
    assert S.curated_shape_source(SAMPLE) == (REPO / "ops" / "shapes.sample.yaml").resolve()
    monkeypatch.setenv("OPSCREEN_CURATED_SHAPES", "/x/y.yaml")
    assert S.curated_shape_source(SAMPLE) == Path("/x/y.yaml")


def _suite_with_blas(tmp_path) -> Path:
    suite = tmp_path / "suite"
    (suite / "benchmark").mkdir(parents=True)
    (suite / "benchmark" / "core_shapes.yaml").write_text(CORE_YAML)
    (suite / "benchmark" / "base.py").write_text(
        "class Benchmark: pass\nclass BlasBenchmark(Benchmark): pass\nclass UnaryReductionBenchmark(Benchmark): pass\n"
    )
    (suite / "benchmark" / "test_ops.py").write_text(
        "import pytest\nfrom . import base\n\n"
        "class MyBlas(base.BlasBenchmark):\n    pass\n\n"
        "@pytest.mark.mm\ndef test_mm():\n    base.BlasBenchmark(op_name='mm', input_fn=None, torch_op=None).run()\n\n"
        "@pytest.mark.addmm\ndef test_addmm():\n    MyBlas(op_name='addmm', input_fn=None, torch_op=None).run()\n\n"
        "@pytest.mark.softmax\ndef test_softmax():\n    base.UnaryReductionBenchmark(op_name='softmax', torch_op=None).run()\n\n"
        "@pytest.mark.mm\ndef test_mm_self_transpose():\n    base.UnaryReductionBenchmark(op_name='mm_self_transpose', torch_op=None).run()\n"
    )
    return suite


def test_class_chain(tmp_path):
    suite = _suite_with_blas(tmp_path)
    assert S.class_chain(suite, "MyBlas", "benchmark/test_ops.py") == ["MyBlas", "BlasBenchmark", "Benchmark"]
    assert S.class_chain(suite, "base.BlasBenchmark") == ["BlasBenchmark", "Benchmark"]
    assert S.class_chain(suite, None) == []


def test_check_finds_wrong_rank_and_unknown_keys(tmp_path):
    suite = _suite_with_blas(tmp_path)
    curated = {
        "mm": {"shapes": [[64, 64, 64]]},  # BlasBenchmark takes (B, M, N, K): rank 4
        "addmm": {"shapes": [[1, 64, 64, 64]]},  # subclass of BlasBenchmark, right rank
        "softmax": {"shapes": [[1, 2, 3, 4, 5]]},  # the suite's softmax entry is 2-D only
        "mm_self_transpose": {"shapes": [[64, 64]]},  # an op_name, not a marker
        "no_such_op": {"shapes": [[1]]},
        "bad": {"shape": [[1]]},
        "BlasBenchmark": {"shapes": [[1, 8, 8, 8]]},
    }
    found = {(f.level, f.key): f.message for f in S.check_shape_file(suite, curated)}
    assert "rank 3" in found[("error", "mm")] and "'BlasBenchmark' has rank 4" in found[("error", "mm")]
    assert "B, M, N, K" in found[("error", "mm")]
    assert not any(k == "addmm" for _, k in found)
    assert "the suite's own 'softmax' entry has rank 2" in found[("error", "softmax")]
    assert ("warning", "mm_self_transpose") in found
    assert "unknown op" in found[("error", "no_such_op")]
    assert "non-empty 'shapes'" in found[("error", "bad")]
    assert "class key" in found[("warning", "BlasBenchmark")]


def test_effective_shapes(tmp_path):
    suite = _suite_with_blas(tmp_path)
    merged = S.merge_shapes(core(), {"softmax": {"shapes": [[1, 4096]]}})
    rows = {r.op: r for r in S.effective_shapes(suite, merged, {"softmax"})}
    assert (rows["softmax"].origin, rows["softmax"].key) == ("curated", "softmax")
    assert (rows["mm"].origin, rows["mm"].key) == ("suite", "BlasBenchmark")
    assert (rows["addmm"].key, rows["addmm"].chain) == ("BlasBenchmark", ["MyBlas", "BlasBenchmark", "Benchmark"])
    rows = {r.op: r for r in S.effective_shapes(suite, {}, set())}
    assert rows["mm"].origin == "default" and rows["mm"].shapes is None


def test_command_check(tmp_path, capsys):
    assert run_command("check") == 0  # the sample suite with its curated set
    out = capsys.readouterr().out
    assert "no problems" in out
    assert re.search(r"^\s+mm\s+curated:mm\s+1x1x1024x512", out, re.M)
    assert re.search(r"^\s+bmm\s+suite:BlasBenchmark\s+2x64x64x64", out, re.M)
    bad = tmp_path / "bad.yaml"
    bad.write_text("mm:\n  shapes: [[64, 64]]\nnope:\n  shapes: [[1]]\n")
    assert run_command("check", "--file", str(bad), "--op", "mm") == 1
    out = capsys.readouterr().out
    assert "error: mm: shapes of rank 2" in out and "error: nope: unknown op" in out
    assert "2 error(s)" in out
    bad.write_text(": [\n")
    assert run_command("check", "--file", str(bad)) == 2
    assert run_command("check", "--op", "not_an_op") == 2
    assert run_command("check", "--suite", str(tmp_path)) == 2


def _printed_shapes(output: str) -> list[list[list[int]]]:
    """Each result row's tensor shapes, from 'torch.Size([..])' in its Size Detail."""
    rows = []
    for line in output.splitlines():
        if line.startswith("SUCCESS") or line.startswith("FAILED"):
            rows.append([ast.literal_eval(m) for m in re.findall(r"torch\.Size\((\[[^\]]*\])\)", line)])
    return rows


def _run_sample(op: str, shape_file: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("OPSCREEN_CHILD_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", f"benchmark/test_{op}.py", "-m", op, "--level", "core", "-s",
         "--shape_file", str(shape_file), "--dtypes", "float32"],
        cwd=SAMPLE, capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL,
    )


def test_sample_suite_blas_ops_keep_their_ranks_under_curated_mode(tmp_path):
    """mm (curated key) and bmm (no key: the suite's BlasBenchmark class key) on the sample suite."""
    assert (SAMPLE / "benchmark" / "test_mm.py").is_file(), "the bundled sample suite is missing"
    merged = S.write_merged_shape_file(SAMPLE, S.curated_shape_source(SAMPLE), tmp_path / "merged.yaml")
    for op, rank in (("mm", 2), ("bmm", 3)):
        r = _run_sample(op, merged)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        rows = _printed_shapes(r.stdout)
        assert rows, r.stdout[-3000:]
        assert all(len(s) == rank for row in rows for s in row), rows
        if op == "mm":  # the curated (B, M, N, K) = (1, 64, 512, 512) -> (64, 512) x (512, 512)
            assert [[64, 512], [512, 512]] in rows


def test_sample_suite_bmm_fails_with_the_curated_file_alone(tmp_path):
    """Why the merge exists: without the class keys, bmm gets 1-D default shapes."""
    r = _run_sample("bmm", S.curated_shape_source(SAMPLE))
    assert r.returncode != 0
