"""bench/compare_aa.py: what `opscreen compare` calls changed between two runs of one setup,
by kernel size (synthetic runs of tests/synth.py, whose rows carry 0.05-0.45 % noise a side,
so a 3 % move is always called and no move never is)."""

from __future__ import annotations

import json

import pytest

from benchload import load_bench
from synth import make_run

SMALL = 0.008  # ms: a library side this fast puts its row under 10 us


@pytest.fixture(scope="module")
def caa():
    return load_bench("compare_aa")


def test_size_bins(caa):
    assert caa.size_bin(0.5, 0.009) == "<10us"
    assert caa.size_bin(0.010, 0.2) == "10-100us"
    assert caa.size_bin(0.1, 0.3) == ">=100us"
    assert caa.size_bin(None, 0.3) is None and caa.size_bin(0.1, 0) is None


def test_only_the_moved_small_rows_are_called_changed(caa, tmp_path, capsys):
    a, same, moved = tmp_path / "a", tmp_path / "same", tmp_path / "moved"
    got = make_run(a, n_ops=40, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0)
    make_run(same, n_ops=40, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0)
    make_run(moved, n_ops=40, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0,
             perturb=lambda op, dt, si, lib: lib * 1.03 if lib < SMALL else lib)
    small = sum(1 for o in got for r in o.rows if r["lib_ms"] < SMALL)
    assert small > 0

    out = tmp_path / "t.json"
    assert caa.main([str(a), str(same), str(a), str(moved), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    aa, ab = report["pairs"][f"{a} -> {same}"], report["pairs"][f"{a} -> {moved}"]
    assert all(v["called_changed"] == 0 and v["same"] == v["rows"] for v in aa.values())
    assert ab["<10us"]["called_changed"] == ab["<10us"]["slower"] == small  # lib slower: speedup down
    assert ab["10-100us"]["called_changed"] == ab[">=100us"]["called_changed"] == 0
    assert ab["<10us"]["p95_pct"] == pytest.approx(3.0, abs=0.01)
    pooled = report["pooled"]["<10us"]
    assert pooled["rows"] == aa["<10us"]["rows"] + ab["<10us"]["rows"] and pooled["called_changed"] == small
    text = capsys.readouterr().out
    assert f"<10us {small}/{ab['<10us']['rows']} called changed" in text and text.rstrip().splitlines()[-1].startswith("pooled:")


def test_runs_come_in_pairs(caa, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        caa.main([str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")])
    assert exc.value.code == 2 and "in pairs" in capsys.readouterr().err
