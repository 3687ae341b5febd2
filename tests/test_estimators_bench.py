"""bench/estimators.py: split pooled processes into two pretend runs, compare statistics.

The processes are written as FlagGems record logs (the real H200 abs record, its
latencies rewritten per process), so the bench reads them through the harness's parser
exactly as it reads a real `opscreen op --repeats N` folder."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
FIXTURE_RECORD = Path(__file__).resolve().parent / "fixtures" / "flaggems-h200" / "abs_record.log"
sys.path.insert(0, str(BENCH))

import estimators  # noqa: E402


def write_processes(op_dir: Path, torch_scale: list[float], lib_scale: list[float] | None = None) -> None:
    """One repeats/<k>/record.log per process: every case of the fixture with its torch
    latency times torch_scale[k] (and the library's times lib_scale[k])."""
    lines = FIXTURE_RECORD.read_text().splitlines()
    for k, ts in enumerate(torch_scale, start=1):
        ls = (lib_scale or [1.0] * len(torch_scale))[k - 1]
        out = []
        for line in lines:
            if not line.startswith("[INFO] {"):
                out.append(line)
                continue
            entry = json.loads(line[len("[INFO] "):])
            for r in entry["result"]:
                r["latency_base"] *= ts
                r["latency"] *= ls
                r["speedup"] = r["latency_base"] / r["latency"]
            out.append("[INFO] " + json.dumps(entry))
        d = op_dir / "repeats" / str(k)
        d.mkdir(parents=True)
        (d / "record.log").write_text("\n".join(out) + "\n")


def test_splits_are_disjoint_distinct_and_capped():
    pairs = estimators.splits(6, 3, 1000, random.Random(0))
    assert len(pairs) == 10  # C(6,3) / 2: each unordered pair of halves once
    for a, b in pairs:
        assert len(a) == len(b) == 3 and not set(a) & set(b)
    assert len({frozenset((a, b)) for a, b in pairs}) == 10
    assert len(estimators.splits(10, 3, 50, random.Random(0))) == 50


def test_statistics_on_known_values():
    assert estimators._trimmed([1.0, 2.0, 3.0, 10.0]) == 2.5
    assert estimators._trimmed([5.0, 1.0, 3.0]) == 3.0  # the median below 4 values
    assert estimators._low_half([4.0, 1.0, 3.0, 2.0]) == 1.5
    assert estimators._low_half([7.0]) == 7.0


def test_a_rare_slow_mode_is_absorbed_by_min_not_by_mean(tmp_path):
    """Six processes: the torch side of one of them 30 % slower (a placement the driver
    sometimes hands out). min over 3 processes always finds a fast one; the mean moves
    whenever the slow process is in one half."""
    op = tmp_path / "abs"
    write_processes(op, [1.0, 1.0, 1.3, 1.0, 1.0, 1.0])
    procs = estimators.processes([op])
    assert len(procs) == 6 and len(procs[0]) > 10
    rep = estimators.evaluate(procs, 3, 200, seed=1)
    assert rep["splits"] == 10 and rep["processes"] == 6
    st = rep["stats"]
    assert st["min"]["max_of_max"] == pytest.approx(0.0, abs=1e-9) and st["min"]["target_met"] == 1.0
    assert st["median"]["max_of_max"] == pytest.approx(0.0, abs=1e-9)
    # the slow process in one half and not the other: mean 1.1 against 1.0
    assert st["mean"]["max_of_max"] == pytest.approx(10.0, rel=1e-6)
    assert st["mean"]["target_met"] == 0.0


def test_a_fifty_fifty_mode_defeats_every_statistic_at_three(tmp_path):
    """Two placements as likely as each other: the halves can hold 3 fast against 3 slow
    processes, and then no statistic of 3 agrees; min meets the target in the splits
    where each half holds a fast process."""
    op = tmp_path / "abs"
    write_processes(op, [1.0, 1.2, 1.0, 1.2, 1.0, 1.2])
    rep = estimators.evaluate(estimators.processes([op]), 3, 200, seed=1)
    for stat in estimators.STATS:
        assert rep["stats"][stat]["max_of_max"] == pytest.approx(20.0, rel=1e-6), stat
    assert rep["stats"]["min"]["target_met"] == pytest.approx(0.9)  # 1 of 10 splits is all-fast vs all-slow


def test_a_drift_of_both_sides_of_a_process_cancels_in_every_statistic(tmp_path):
    """A process whose clock moved both sides by 10 %: its speedups equal the others',
    and each side's statistic moves by the same factor, so nothing differs."""
    op = tmp_path / "abs"
    scale = [1.0, 1.1, 1.0, 1.0, 1.1, 1.0]
    write_processes(op, scale, scale)
    rep = estimators.evaluate(estimators.processes([op]), 3, 200, seed=1)
    for stat in estimators.STATS:
        assert rep["stats"][stat]["max_of_max"] == pytest.approx(0.0, abs=1e-9), stat


def test_cli_pools_folders_and_refuses_too_few_processes(tmp_path):
    a, b = tmp_path / "runA" / "abs", tmp_path / "runB" / "abs"
    write_processes(a, [1.0, 1.0, 1.0])
    write_processes(b, [1.0, 1.0, 1.05])
    out = tmp_path / "rep.json"
    res = subprocess.run([sys.executable, str(BENCH / "estimators.py"), str(a), str(b), "--n", "3",
                          "--json", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "6 processes" in res.stdout and "10 splits of 3 vs 3" in res.stdout
    rep = json.loads(out.read_text())
    assert rep["processes"] == 6 and set(rep["stats"]) == set(estimators.STATS)
    res = subprocess.run([sys.executable, str(BENCH / "estimators.py"), str(a), "--n", "2"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "3 processes found, need at least 4" in res.stderr
    res = subprocess.run([sys.executable, str(BENCH / "estimators.py"), str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "not a folder" in res.stderr
