"""Autotune picks (child/autotune.py): which config each autotuned kernel of an op chose in
its process, recorded in the op identity, and ``compare``'s ``pick`` verdict when two runs
chose differently. Triton is the stand-in of tests/fixtures/fake_triton (its Autotuner has
Triton's shape); the end-to-end test runs the fault suite's ``autotuned`` op twice, each
process picking another config (``FAKE_TRITON_PICK``)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE_TRITON = ROOT / "tests" / "fixtures" / "fake_triton"
FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"

from test_batch_faults import faults  # noqa: E402,F401 - the shared fault-suite fixture


@pytest.fixture
def fake_triton(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKE_TRITON))
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    import triton

    yield triton
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        del sys.modules[name]


def test_picks_of_the_tuners_an_op_ran(fake_triton, monkeypatch):
    from opscreen.child import autotune

    triton = fake_triton
    from triton.runtime.autotuner import LibTunerLike

    @triton.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
    def k(n, BLOCK, num_warps):
        return n * BLOCK

    def lib_kernel(n, B, num_warps):
        return 0

    lt = LibTunerLike(lib_kernel, [triton.Config({"B": 1}), triton.Config({"B": 2})], ["n"])

    @triton.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
    def unused(n, BLOCK, num_warps):
        return 0

    monkeypatch.setenv("FAKE_TRITON_PICK", "1")
    autotune.start()
    k.run(n=5)
    k.run(n=7)
    lt.run(n=3)
    rec = autotune.picks()
    assert rec["source"] == "triton.runtime.autotuner"
    name = next(n for n in rec["kernels"] if n.endswith(".k"))
    assert rec["kernels"][name] == {"picks": {"(5,)": "BLOCK: 128, num_warps: 4", "(7,)": "BLOCK: 128, num_warps: 4"},
                                    "from": "cache", "configs": 2}
    assert next(v for n, v in rec["kernels"].items() if n.endswith("lib_kernel"))["from"] == "last"
    assert not any(n.endswith("unused") for n in rec["kernels"])  # never ran in this op
    # a worker's next op: forgotten, and patching twice does not wrap twice
    assert autotune.start() == 0
    assert autotune.picks()["kernels"] == {}
    # the comparison of two records: only (kernel, key) both hold, with another config
    other = json.loads(json.dumps(rec))
    other["kernels"][name]["picks"]["(5,)"] = "BLOCK: 64, num_warps: 4"
    other["kernels"][name]["picks"]["(9,)"] = "BLOCK: 64, num_warps: 4"
    assert autotune.differing(rec, other) == [
        {"kernel": name, "key": "(5,)", "a": "BLOCK: 128, num_warps: 4", "b": "BLOCK: 64, num_warps: 4"}]
    assert autotune.differing(rec, rec) == [] and autotune.differing(None, rec) == []


def test_a_copy_of_the_module_imported_afresh_notes_the_tuners_itself(fake_triton, monkeypatch):
    """A warm worker drops ``opscreen.child.*`` after each op and imports it afresh, while
    Triton's classes keep the wrapper the first copy put on ``run``: the new copy must patch
    again (over the original ``run``, never wrapper on wrapper), or it records nothing."""
    import importlib

    import opscreen.child
    from opscreen.child import autotune as first

    triton = fake_triton
    from triton.runtime.autotuner import Autotuner

    @triton.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
    def k(n, BLOCK, num_warps):
        return n

    first.start()
    k.run(n=1)
    (name,) = first.picks()["kernels"]
    assert name.endswith(".k")
    monkeypatch.delitem(sys.modules, "opscreen.child.autotune")  # what the worker's hygiene does
    monkeypatch.delattr(opscreen.child, "autotune")
    second = importlib.import_module("opscreen.child.autotune")
    assert second is not first
    assert second.start() == 2  # Autotuner and LibTunerLike, patched again by the new copy
    assert not hasattr(Autotuner.run.__wrapped__, "__wrapped__")
    k.run(n=2)
    (name, entry), = second.picks()["kernels"].items()
    assert name.endswith(".k") and set(entry["picks"]) == {"(1,)", "(2,)"}  # the tuner's cache: both keys
    assert second.start() == 0 and second.picks()["kernels"] == {}


def test_each_op_of_a_warm_worker_records_its_picks(faults):
    """Two autotuned ops in one worker: the second imports the plugin afresh after the
    first patched Triton's classes, and records its own picks too (until 2026-12-07 it
    recorded none: the H100 worker screen of seed 20261210 had 0 of 24 ops with a pick)."""
    faults.env["PYTHONPATH"] += os.pathsep + str(FAKE_TRITON)
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "autotuned,autotuned_b", "--isolation", "worker", "--timeout", "60")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    pids, kernels = set(), {}
    for op in ("autotuned", "autotuned_b"):
        ph = json.loads((out / "ops" / op / "result.json").read_text())["phases"]
        assert ph["mode"] == "worker", ph
        pids.add(ph["worker"]["pid"])
        rec = json.loads((out / "ops" / op / "run_identity.json").read_text())["autotune"]
        kernels[op] = [k.rsplit(".", 1)[-1] for k in rec["kernels"]]
    assert len(pids) == 1
    assert kernels == {"autotuned": ["kernel"], "autotuned_b": ["kernel_b"]}
    faults.assert_no_leftovers()


def test_an_op_cut_short_keeps_the_picks_of_the_rows_it_recorded(faults):
    """An op killed by its timeout in the middle of a test, after two cases were measured
    through the timing plugin and logged: the identity holds their picks (written after each
    measured case whose picks changed, not only at the session's end, nor only after a test),
    so two such runs that picked differently compare as ``pick`` on the rows both recorded.
    Until 2026-12-07 such an op's identity held no pick and ``compare`` called the rows of a
    flipped config slower or faster (an H100 screen cut by its call's time limit)."""
    faults.env["PYTHONPATH"] += os.pathsep + str(FAKE_TRITON)
    runs = {}
    for name, pick in (("a", "0"), ("b", "1")):
        out = faults.tmp / name
        res = faults.run(out, "--devices", "0", "--ops", "autotuned_hang", "--timeout", "6",
                         env={"FAKE_TRITON_PICK": pick})
        assert res.returncode != 0, res.stdout[-2000:]
        op_dir = out / "ops" / "autotuned_hang"
        assert json.loads((op_dir / "result.json").read_text())["status"] == "timeout"
        ident = json.loads((op_dir / "run_identity.json").read_text())
        assert ident["outcome"] == "timeout"
        (kernel, entry), = ident["autotune"]["kernels"].items()
        assert kernel.endswith("test_autotuned.kernel")
        runs[name] = (out, set(entry["picks"].values()))
    assert runs["a"][1] == {"BLOCK: 64, num_warps: 4"} and runs["b"][1] == {"BLOCK: 128, num_warps: 4"}
    table = faults.tmp / "cmp.csv"
    res = subprocess.run([sys.executable, "-m", "opscreen", "compare", str(runs["a"][0]), str(runs["b"][0]),
                          "--out", str(table)], env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    with open(table, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["verdict"] for r in rows] == ["pick", "pick"], res.stdout  # B's library 2x slower: never "slower"
    faults.assert_no_leftovers()


def test_no_triton_nothing_to_record():
    from opscreen.child import autotune

    if "triton.runtime.autotuner" in sys.modules:
        pytest.skip("a real or stand-in triton is imported in this process")
    assert autotune.start() == 0
    assert autotune.picks() == {"source": None, "kernels": {}}


def _op(suite: Path, out: Path, pick: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSCREEN_", "FAKE_TRITON"))}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(FAULTS / "stub_torch"), str(FAKE_TRITON)]),
               FAULTS_STATE_DIR=str(tmp / "state"), FAKE_TRITON_PICK=pick, PYTHONDONTWRITEBYTECODE="1",
               FAKE_TRITON_STATE=str(tmp / "picks.txt"))
    return subprocess.run([sys.executable, "-m", "opscreen", "op", "autotuned", "--suite", str(suite), "--backend",
                           "cpu", "--out", str(out), *extra], env=env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)


def test_two_processes_that_pick_differently_compare_as_pick(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, pick in ((a, "0"), (b, "1"), (c, "0")):
        res = _op(suite, out, pick, tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    ident = json.loads((a / "run_identity.json").read_text())
    (name, entry), = ident["autotune"]["kernels"].items()
    assert name.endswith("test_autotuned.kernel") and entry["from"] == "cache"
    assert entry["picks"] == {"(64,)": "BLOCK: 64, num_warps: 4", "(4096,)": "BLOCK: 64, num_warps: 4"}

    def compare(x, y):
        res = subprocess.run([sys.executable, "-m", "opscreen", "compare", str(x), str(y), "--fail-on", "5",
                              "--out", str(tmp_path / "cmp.csv")], env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        with open(tmp_path / "cmp.csv", newline="") as fh:
            return res, list(csv.DictReader(fh))

    res, rows = compare(a, b)  # the library twice as slow, with another config: pick, not slower
    assert res.returncode == 0, res.stdout + res.stderr  # --unresolved ignore: a pick does not fail the gate
    assert [r["verdict"] for r in rows] == ["pick", "pick"]
    assert all("A BLOCK: 64, num_warps: 4 | B BLOCK: 128, num_warps: 4" in r["pick"] for r in rows)
    assert "autotune picks differ in 1 op(s)" in res.stdout
    rep = subprocess.run([sys.executable, "-m", "opscreen", "report", str(b), "--against", str(a), "--out",
                          str(tmp_path / "r.html")], env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    html = (tmp_path / "r.html").read_text()
    section = html.split('id="autotune"')[1].split("</section>")[0]
    assert "A against B" in section and "A BLOCK: 64, num_warps: 4 | B BLOCK: 128, num_warps: 4" in section
    res, rows = compare(a, c)  # the same picks in both processes: no pick, nothing called
    assert {r["verdict"] for r in rows} <= {"same", "unresolved"} and not any(r["pick"] for r in rows)


def test_summary_lists_picks_that_differ_between_an_ops_processes(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    out = tmp_path / "r"
    res = _op(suite, out, "next", tmp_path, "--repeats", "2")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    from opscreen.results.summary import build_summary, format_summary

    s = build_summary(out)
    flips = s.autotune_flips()
    assert [(f["key"], f["configs"]) for f in flips] == [
        ("(4096,)", ["BLOCK: 64, num_warps: 4", "BLOCK: 128, num_warps: 4"]),
        ("(64,)", ["BLOCK: 64, num_warps: 4", "BLOCK: 128, num_warps: 4"])]
    text = format_summary(s)
    assert "autotune picks that differ between an op's processes (2 kernel keys" in text
    assert json.loads(s.to_json_text())["autotune_flips"] == flips
    from opscreen.results.report import write_report

    html = write_report(s, tmp_path / "r.html").read_text()
    section = html.split('id="autotune"')[1].split("</section>")[0]
    assert "this run&#39;s processes" in section and "BLOCK: 64, num_warps: 4 | BLOCK: 128, num_warps: 4" in section  # escaped
