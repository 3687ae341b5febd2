"""bench/verdict_rates.py: how often `opscreen compare` calls rows changed, on real run dirs
(tests/fixtures: an H200 run and FlagGems' own record log) against themselves and against
copies bench/inject.py changed by a known factor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchload import load_bench

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORKER_AB = FIXTURES / "worker_ab"
ABS_LOG = FIXTURES / "flaggems-h200" / "abs_record.log"
# the fixture run dirs keep no identity (no device name): judge them with the H200 table they were measured on
H200 = ["--floors", Path(__file__).resolve().parent.parent / "src" / "opscreen" / "assets" / "data" / "floors" / "nvidia-h200.json"]


@pytest.fixture(scope="module")
def vr():
    return load_bench("verdict_rates")


@pytest.fixture(scope="module")
def inj():
    return load_bench("inject")


def rates(vr, argv, tmp_path) -> dict:
    out = tmp_path / "rates.json"
    assert vr.main([*map(str, argv), "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_a_run_against_itself_calls_nothing(vr, tmp_path, capsys):
    run = WORKER_AB / "op"
    before = sorted(run.rglob("*"))
    rep = rates(vr, [run, run, *H200], tmp_path)
    assert rep["rows_in_both"] == 30
    for cell, t in rep["rates"].items():
        assert t["called"]["n"] == 0 and t["other"]["n"] == 0, cell
        assert t["same"]["n"] + t["unresolved"]["n"] == t["rows"]
    # the fixtures name no device, so the speedup is judged alone, by the H200 table's fresh-rerun
    # speedup band (3.76 % under 10 us, 3.39 % above: the op-weighted quantile, torch's spread in it),
    # within the 5 % margin: the 15 norm_scalaropt_dim rows are the same; the 15 flatten rows (a view:
    # the graph replays no kernel, 7.5-15 ns a call, samples' noise 8-62 %) are the same by basis
    # no-kernel, where their samples' noise would have left them unresolved; never called
    assert rep["rates"]["graph"]["rows"] == 30
    assert rep["rates"][">=10us"]["same"]["n"] == rep["rates"][">=10us"]["rows"] == 7
    assert rep["rates"]["all"]["same"]["n"] == 30 and rep["rates"]["all"]["unresolved"]["n"] == 0
    assert rep["rates"]["<10us"]["rows"] + rep["rates"][">=10us"]["rows"] == 30
    assert "power" not in rep and sorted(run.rglob("*")) == before  # nothing written into the run
    assert "called    0 (  0.0 %" in capsys.readouterr().out


def test_every_injected_graph_row_is_called_slower(vr, inj, tmp_path, capsys):
    a, b = WORKER_AB / "op", tmp_path / "b"
    assert inj.main([str(a), str(b), "--factor", "1.5", "--timer", "graph", "--min-us", "1"]) == 0
    capsys.readouterr()
    rep = rates(vr, [a, b, "--injected", b / "injected.json", *H200], tmp_path)
    p = rep["power"]
    assert p["injected"] == 15 and p["expected"] == "slower" and p["not_measured_in_both"] == 0
    g = p["rates"]["graph"]
    assert g["rows"] == 15 and g["verdicts"] == {"slower": 15} and g["called"]["pct"] == 100.0
    assert p["rates"]["graph, <10us"]["rows"] + p["rates"]["graph, >=10us"]["rows"] == 15
    assert all(t["called"]["n"] == 0 for t in rep["not_injected"].values())  # flatten: not injected, not called
    assert rep["rates"]["all"]["verdicts"]["slower"] == 15
    text = capsys.readouterr().out
    assert "power 100.0 %" in text and "rows not injected (false calls):" in text


def test_an_injected_view_is_same_until_it_reads_as_a_kernel(vr, inj, tmp_path):
    """flatten's rows are views: the graph replays no kernel, 7.5-15 ns a call (their samples'
    bands 38-185 %). x1.5 keeps them under compare's no-kernel limit (0.2 us): `same`, basis
    no-kernel, never a kernel's slowdown; x40 lifts B to 0.3-0.6 us, a reading of device work,
    which is then judged by its band: never same. Scaling keeps each row's rsd, so 14 of B's 15
    rows read device work at the view's 38-185 %: unresolved, basis noisy (compare calls no row
    noisier than 10 %); the one under 10 % is called slower."""
    a = WORKER_AB / "op"
    for factor, want in (("1.5", {"same": 15}), ("40", {"unresolved": 14, "slower": 1})):
        b = tmp_path / f"b{factor}"
        assert inj.main([str(a), str(b), "--factor", factor, "--ops", "flatten"]) == 0
        p = rates(vr, [a, b, "--injected", b / "injected.json", *H200], tmp_path)["power"]
        assert p["rates"]["all"]["verdicts"] == want, factor


def test_threshold_rows_and_a_faster_injection(vr, inj, tmp_path):
    """FlagGems' own record log (no timer, no noise: compare's 3 % threshold): x1.05 is
    called slower on every row, x0.9 faster, all in the 'other timers' group."""
    a = tmp_path / "a"
    (a / "ops" / "abs").mkdir(parents=True)
    shutil.copy(ABS_LOG, a / "ops" / "abs" / "record.log")
    for factor, verdict in (("1.05", "slower"), ("0.9", "faster")):
        b = tmp_path / f"b{factor}"
        assert inj.main([str(a), str(b), "--factor", factor]) == 0
        rep = rates(vr, [a, b, "--injected", b / "injected.json", "--no-floors"], tmp_path)
        p = rep["power"]
        assert p["expected"] == verdict and p["rates"]["other timers"]["verdicts"] == {verdict: 15}
        assert "graph" not in p["rates"] and rep["not_injected"] == {}


def test_other_verdicts_are_counted_by_name(vr):
    """A verdict the enum gains later for rows measured in both (a "pick") is "other", by name."""
    def row(verdict, timer="graph", lib=0.005, b_timer=None):
        return SimpleNamespace(verdict=SimpleNamespace(value=verdict), a_timer=timer, b_timer=b_timer or timer,
                               a_torch_ms=0.02, a_lib_ms=lib)

    t = vr.tally([row("slower"), row("pick"), row("pick", lib=0.5), row("same", "graph|graph-fallback:capture"),
                  row("unresolved", lib=None), row("faster", b_timer="graph|graph-fallback:capture")])
    assert t["all"]["rows"] == 6 and t["all"]["other"] == {"n": 2, "pct": 33.33} and t["all"]["called"]["n"] == 2
    assert t["graph, <10us"]["verdicts"] == {"slower": 1, "pick": 1}
    assert t["other timers"]["verdicts"] == {"same": 1, "faster": 1}
    assert t["graph, size unknown"]["unresolved"]["n"] == 1
    assert list(t)[0] == "all" and "pick 2" in vr.rate_line("all", t["all"])


def identity_run(tmp_path: Path, name: str, isolation: str) -> Path:
    run = tmp_path / name
    shutil.copytree(WORKER_AB / "op", run)
    (run / "run_identity.json").write_text(json.dumps({
        "schema": "opscreen.identity/1", "kind": "run",
        "caliber": {"timer": "graph", "level": "core", "shape_mode": "upstream", "isolation": isolation}}))
    return run


def test_runs_measured_differently_are_refused_unless_allowed(vr, tmp_path, capsys):
    a, b = identity_run(tmp_path, "a", "op"), identity_run(tmp_path, "b", "worker")
    assert vr.main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verdict_rates: ") and "--allow-mismatch isolation" in err and len(err.splitlines()) == 1
    rep = rates(vr, [a, b, "--allow-mismatch", "isolation"], tmp_path)
    assert rep["allowed"] == ["isolation"] and rep["rows_in_both"] == 30


@pytest.mark.parametrize("case", ["missing_run", "bad_injected", "unknown_field"])
def test_bad_input_exits_2(vr, tmp_path, capsys, case):
    run = WORKER_AB / "op"
    argv = {"missing_run": [str(tmp_path / "nope"), str(run)],
            "bad_injected": [str(run), str(run), "--injected", str(tmp_path / "x.json")],
            "unknown_field": [str(run), str(run), "--allow-mismatch", "colour"]}[case]
    (tmp_path / "x.json").write_text("{}")
    assert vr.main(argv + ["--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verdict_rates: ") and len(err.splitlines()) == 1
    assert not (tmp_path / "out.json").exists()
