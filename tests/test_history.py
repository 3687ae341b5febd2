"""opscreen history (src/opscreen/store/history.py): a known step is found at its commit, a flat
noisy series has no change point, a step within the case's floors band is no change, a case that
flips back and forth is flaky, a step at the last run is pending and one after the first is early; the command's output and its
bad input. On SQLite and PostgreSQL for the store-reading path, SQLite for the rest."""

from __future__ import annotations

import io
import json
import math

import pytest

from opscreen.results import noise
from opscreen.store.db import open_store
from opscreen.store.history import format_history, load_history, series_text
from opscreen.store.importer import add_runs
from storesynth import commit, db_url, floors_table, pg_server, screens  # noqa: F401  (fixtures)

CASE = ("abs", "float16", 1)  # (op, dtype, shape index) that the steps are injected into


def step_at(at: int, factor: float, case=CASE):
    """The library's latency times ``factor`` from run ``at`` on, in ``case`` only."""
    def f(i, op, dtype, si):
        return factor if (op, dtype, si) == case and i >= at else 1.0
    return f


def history(tmp_path, runs, rms=None, url=None, **kw):
    url = url or f"sqlite:///{tmp_path / 'h.sqlite'}"
    store = open_store(url, create=True)
    try:
        add_runs(store, map(str, runs))
        table = noise.load(floors_table(tmp_path / f"floors-{rms}.json", rms)) if rms is not None else None
        return load_history(store, kw.pop("op", None), None, table=table, **kw)
    finally:
        store.close()


def test_a_known_step_is_found_at_its_commit(tmp_path, db_url):
    runs = screens(tmp_path, 10, factor=step_at(6, 1.08))  # the library 8 % slower from commit 6 on
    h = history(tmp_path, runs, rms=0.006, url=db_url)  # bands 3.25 x 0.6 % = 1.95 %
    changed = [c for c in h.cases if c.changes]
    assert len(changed) == 1, [(c.key(), series_text(c)) for c in changed]
    c = changed[0]
    assert (c.op, c.dtype) == CASE[:2] and not c.flaky
    (ch,) = c.changes
    assert (ch.before_commit, ch.after_commit) == (commit(5), commit(6))
    assert ch.direction == "slower" and not ch.pending and ch.separated
    assert ch.step == pytest.approx(1 / 1.08 - 1, abs=0.006)
    assert (ch.n_before, ch.n_after) == (6, 4)
    assert ch.basis == "floors" and ch.band == pytest.approx(noise.t_critical(9) * 0.006)
    assert "6 runs at" in ch.evidence() and "the band ±1.95%" in ch.evidence()


def test_a_flat_noisy_series_has_no_change_point(tmp_path):
    # nothing injected; each run's latency off by 0.42 %, so two runs differ by 0.6 % rms: the table's
    runs = screens(tmp_path, 14, noise_sd=0.006 / math.sqrt(2), seed=3)
    h = history(tmp_path, runs, rms=0.006)
    assert len(h.cases) >= 20
    assert [c.key() for c in h.cases if c.changes] == []
    assert [c.key() for c in h.cases if c.flaky] == []
    # the same series judged by a band six times too narrow (no minimum change, the samples'
    # noise hardly counted): its noise reads as steps and flips
    (tmp_path / "narrow").mkdir()
    narrow = history(tmp_path / "narrow", runs, rms=0.001, min_change=0.0, k=0.1)
    assert sum(1 for c in narrow.cases if c.changes or c.flaky) >= 5


def test_a_step_within_the_band_is_no_change(tmp_path):
    runs = screens(tmp_path, 10, factor=step_at(5, 1.03), noise_sd=0.002)  # 3 % slower from commit 5
    narrow = history(tmp_path, runs, rms=0.003)  # band 0.98 %: the step is beyond it
    assert [(c.op, c.dtype) for c in narrow.cases if c.changes] == [CASE[:2]]
    wide = history(tmp_path, runs, rms=0.012)  # band 3.9 %: the same step is within it
    assert [c.key() for c in wide.cases if c.changes] == []
    # the case's series is the same in both: only the noise model differs
    a = next(c for c in narrow.cases if c.changes)
    b = next(c for c in wide.cases if c.key() == a.key())
    assert [p.value for p in a.points] == [p.value for p in b.points]


def test_a_case_that_flips_back_and_forth_is_flaky(tmp_path):
    def flip(i, op, dtype, si):
        return 1.10 if (op, dtype, si) == CASE and i % 2 else 1.0  # 10 % slower on every odd commit
    runs = screens(tmp_path, 10, factor=flip)
    h = history(tmp_path, runs, rms=0.006)
    flaky = [c for c in h.cases if c.flaky]
    assert [(c.op, c.dtype) for c in flaky] == [CASE[:2]]
    assert flaky[0].flips == 8 and flaky[0].moves == [-1, 1] * 4 + [-1]
    assert "|" not in series_text(flaky[0])  # its fitted steps are not marked as changes
    assert [c.key() for c in h.cases if c.changes and not c.flaky] == []


def test_a_step_and_its_revert_are_two_change_points_not_flaky(tmp_path):
    def revert(i, op, dtype, si):
        return 1.08 if (op, dtype, si) == CASE and 4 <= i < 8 else 1.0
    h = history(tmp_path, screens(tmp_path, 12, factor=revert), rms=0.006)
    (c,) = [c for c in h.cases if c.changes]
    assert not c.flaky and c.flips == 1
    assert [(ch.after_commit, ch.direction) for ch in c.changes] == [(commit(4), "slower"), (commit(8), "faster")]


def test_a_step_at_the_last_run_is_pending(tmp_path):
    h = history(tmp_path, screens(tmp_path, 8, factor=step_at(7, 0.90)), rms=0.006)  # 10 % faster at the last
    (c,) = [c for c in h.cases if c.changes]
    (ch,) = c.changes
    assert ch.pending and ch.direction == "faster" and ch.after_commit == commit(7)
    assert "pending: 1 run after it" in ch.evidence()


def test_a_step_after_the_first_run_is_early(tmp_path):
    """One run before a step cannot tell a level from an odd first run: the change is called,
    and marked early (a screen of an earlier commit confirms it), not merged away."""
    h = history(tmp_path, screens(tmp_path, 8, factor=step_at(1, 0.80)), rms=0.006)  # 25 % faster from 1
    (c,) = [c for c in h.cases if c.changes]
    (ch,) = c.changes
    assert ch.early and not ch.pending and ch.direction == "faster"
    assert (ch.before_commit, ch.after_commit, ch.n_before, ch.n_after) == (commit(0), commit(1), 1, 7)
    assert ch.tags() == " (early)" and "1 run at" in ch.evidence() and "early: 1 run before it" in ch.evidence()
    # two runs before it are a level: the same step one commit later is a plain change
    (tmp_path / "two").mkdir()
    h2 = history(tmp_path / "two", screens(tmp_path / "two", 8, factor=step_at(2, 0.80)), rms=0.006)
    (ch2,) = [ch for c in h2.cases for ch in c.changes]
    assert not ch2.early and ch2.n_before == 2 and ch2.after_commit == commit(2)


def test_one_odd_run_inside_the_series_is_an_outlier(tmp_path):
    def spike(i, op, dtype, si):
        return 1.15 if (op, dtype, si) == CASE and i == 4 else 1.0
    h = history(tmp_path, screens(tmp_path, 10, factor=spike), rms=0.006)
    assert [c.key() for c in h.cases if c.changes] == []


def test_a_view_has_no_change_point_until_it_launches_a_kernel(tmp_path):
    """A view: the graph replays no kernel, so every run reads the replay's overhead (here 1e-5 of
    the case's latency, under 0.2 us a call), one process 1.7 x another. No change point, basis
    no-kernel; the same case launching a kernel from run 6 on is a step, found at its commit."""
    jumpy = lambda i, op, dtype, si: (1e-5 * (1.7 if i % 2 else 1.0)) if (op, dtype, si) == CASE else 1.0  # noqa: E731
    h = history(tmp_path / "a", screens(tmp_path / "a", 10, factor=jumpy), rms=0.006)
    (c,) = [c for c in h.cases if c.basis == "no-kernel"]  # that case alone
    assert (c.op, c.dtype, c.changes, c.flips, c.moves) == (*CASE[:2], [], 0, [0] * 9)
    assert not any(x.changes for x in h.cases)
    launches = lambda i, op, dtype, si: (1e-5 if i < 6 else 1.0) if (op, dtype, si) == CASE else 1.0  # noqa: E731
    h = history(tmp_path / "b", screens(tmp_path / "b", 10, factor=launches), rms=0.006)
    changed = [x for x in h.cases if x.changes]
    assert len(changed) == 1 and changed[0].basis != "no-kernel"
    (ch,) = changed[0].changes
    assert (ch.before_commit, ch.after_commit, ch.direction) == (commit(5), commit(6), "slower")


def test_the_lib_ms_metric_calls_a_slower_library_slower(tmp_path):
    h = history(tmp_path, screens(tmp_path, 8, factor=step_at(4, 1.10)), rms=0.006, metric="lib_ms")
    (c,) = [c for c in h.cases if c.changes]
    (ch,) = c.changes
    assert ch.direction == "slower" and ch.step == pytest.approx(0.10, abs=0.01)


def test_without_a_table_the_conservative_default_decides(tmp_path):
    h = history(tmp_path, screens(tmp_path, 8, factor=step_at(4, 1.25)))
    assert h.table == "conservative default"
    (c,) = [c for c in h.cases if c.changes]
    assert c.basis == "floors-default"
    cell = noise.conservative().cell("rerun", "graph", 0.0)
    assert c.band >= min(x.band() for x in noise.conservative().cells if x.history == "rerun") and cell is not None


def test_history_cli_prints_series_change_points_and_json(tmp_path, cli):
    runs = screens(tmp_path, 8, factor=step_at(5, 1.10))
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    assert cli("store", "add", *runs, "--db", url).returncode == 0
    floors = floors_table(tmp_path / "f.json", 0.006)
    res = cli("history", "abs", "--db", url, "--floors", floors)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "8 runs of caliber 1" in out and "on Synthetic GPU" in out
    assert f"{commit(4)[:12]}..{commit(5)[:12]}" in out and "slower" in out
    assert "change points: 1 in 1 cases" in out and " | " in out  # the series marks it
    every = cli("history", "--db", url, "--floors", floors)
    assert "shown (those with change points or flaky" in every.stdout
    js = json.loads(cli("history", "abs", "--db", url, "--floors", floors, "--json").stdout)
    (case,) = [c for c in js["cases"] if c["changes"]]
    assert case["changes"][0]["after_commit"] == commit(5) and "evidence" in case["changes"][0]
    assert len(js["runs"]) == 8 and "timing" not in case


def _git_history(repo, n: int) -> list[str]:
    """A git repo of ``n`` commits, one a day (committer dates 2026-07-01 on); their ids, oldest first."""
    import os
    import subprocess

    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    ids = []
    for i in range(n):
        (repo / "f").write_text(str(i))
        when = f"2026-07-{1 + i:02d}T12:00:00Z"
        subprocess.run(["git", "-C", str(repo), "add", "f"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", f"c{i}"], check=True,
                       env={**env, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
        ids.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                                  text=True).stdout.strip())
    return ids


def test_repo_orders_a_backfill_by_commit_date(tmp_path, cli):
    """Screens of the four oldest commits made after those of the four newest (a backfill): by run
    start the series is out of commit order; ``--repo`` orders it by the commits' dates and finds
    the step at its commit. A path that is no checkout, or one that lacks a run's commit, is one line."""
    ids = _git_history(tmp_path / "suite", 8)
    runs = screens(tmp_path, 8, factor=step_at(5, 1.10), commits=ids, day=lambda i: 20 + i if i < 4 else i)
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    assert cli("store", "add", *runs, "--db", url).returncode == 0
    floors = floors_table(tmp_path / "f.json", 0.006)
    js = json.loads(cli("history", "abs", "--db", url, "--floors", floors, "--json", "--repo",
                        tmp_path / "suite").stdout)
    assert [r["suite_commit"] for r in js["runs"]] == ids and js["ordered_by"].startswith("commit date in")
    (case,) = [c for c in js["cases"] if c["changes"]]
    (ch,) = case["changes"]
    assert (ch["before_commit"], ch["after_commit"]) == (ids[4], ids[5]) and ch["direction"] == "slower"
    by_start = json.loads(cli("history", "abs", "--db", url, "--floors", floors, "--json").stdout)
    assert [r["suite_commit"] for r in by_start["runs"]] == ids[4:] + ids[:4] and by_start["ordered_by"] == "run start"
    out = cli("history", "abs", "--db", url, "--floors", floors, "--repo", tmp_path / "suite").stdout
    assert "ordered by commit date in" in out
    for repo, says in ((tmp_path, "not a git checkout"), (_git_other(tmp_path / "other"), "does not know the suite commit")):
        res = cli("history", "abs", "--db", url, "--repo", repo)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert says in res.stderr


def _git_other(repo):
    _git_history(repo, 1)
    return repo


@pytest.mark.parametrize("args, says", [
    (("nosuch",), "the store holds no runs of nosuch"),
    (("--device", "Other GPU"), "no runs on 'Other GPU'"),
    (("--caliber", "9"), "--caliber 9: no runs"),
    (("--min-size", "0"), "--min-size 0"),
    (("--min-change", "x"), "not a percentage"),
])
def test_history_bad_input_is_one_line_exit_2(tmp_path, cli, args, says):
    url = f"sqlite:///{tmp_path / 'b.sqlite'}"
    assert cli("store", "add", *screens(tmp_path, 2), "--db", url).returncode == 0
    res = cli("history", *args, "--db", url)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert says in res.stderr


def test_calibers_are_kept_apart(tmp_path):
    a = screens(tmp_path / "a", 4, caliber={"level": "core"})
    b = screens(tmp_path / "b", 3, caliber={"level": "comprehensive"}, first=10)
    url = f"sqlite:///{tmp_path / 'k.sqlite'}"
    store = open_store(url, create=True)
    add_runs(store, map(str, a + b))
    latest = load_history(store, "abs", None)
    assert len(latest.runs) == 3 and latest.caliber["level"] == "comprehensive"
    assert [c["runs"] for c in latest.other_calibers] == [4]
    older = load_history(store, "abs", None, caliber=latest.other_calibers[0]["id"])
    store.close()
    assert len(older.runs) == 4 and {r["suite_commit"] for r in older.runs} == {commit(i) for i in range(4)}


def test_the_noise_model_band_is_the_cells(tmp_path):
    """The band a case gets is its floors cell's at one process per side (compare's), not narrower."""
    h = history(tmp_path, screens(tmp_path, 4), rms=0.02)
    assert {round(c.band, 9) for c in h.cases if c.basis == "floors"} == {round(noise.t_critical(9) * 0.02, 9)}
    assert math.isclose(noise.t_critical(9), 3.25, abs_tol=0.01)


def test_the_store_commands_never_import_torch(tmp_path):
    """history, publish and the importer, with asv's step detection loaded: no torch, no numpy."""
    import subprocess
    import sys

    code = ("import sys\nimport opscreen.store.history as h, opscreen.store.publish, opscreen.store.importer\n"
            "h._segments([0.0, 0.1, 0.0, 0.2], 0.01, 2)\n"
            "bad = sorted(m for m in ('torch', 'numpy', 'scipy') if m in sys.modules)\n"
            "sys.exit('imported: ' + ', '.join(bad) if bad else 0)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


# ---------------------------------------------------------------- the fast paths (bench/store_scale.py)


def test_plain_output_is_the_rich_tables_line_for_line(tmp_path, monkeypatch):
    """Off a terminal history joins its tables' lines itself (rich takes 1 ms a row: half of
    ``history OP`` on 500 screens); the text is the same as rich's, change points, flaky cases,
    a second caliber and all."""
    from opscreen.store import history as hist

    def flip(i, op, dtype, si):
        return 1.10 if (op, dtype, si) == ("add", "float32", 2) and i % 2 else step_at(6, 1.08)(i, op, dtype, si)
    h = history(tmp_path, screens(tmp_path, 10, factor=flip), rms=0.006)
    assert any(c.changes for c in h.cases) and any(c.flaky for c in h.cases)
    fast = [hist.format_history(h, op, show_all=a, like=io.StringIO()) for op, a in ((None, False), ("abs", False),
                                                                                      (None, True))]
    from opscreen import tables

    monkeypatch.setattr(tables, "_joinable", lambda _f: False)  # rich draws every table (to_text still plain)
    slow = [hist.format_history(h, op, show_all=a, like=io.StringIO()) for op, a in ((None, False), ("abs", False),
                                                                                      (None, True))]
    assert fast == slow


@pytest.mark.parametrize("cells, joined", [
    ([("1", "ab", "±1.00%"), ("12", "", "x")], True),  # right-aligned, an empty cell, a non-ASCII character
    ([("0", "a b  c", "2026-01-01T08:00:00Z")], True),
    ([], True),
    ([("3", "名前", "x")], False),  # wide characters: rich draws it
    ([("4", " lead", "trail ")], False),  # blanks at a cell's ends: rich draws it
    ([("5", "tab\there", "x")], False),
])
def test_a_grid_off_a_terminal_is_what_rich_draws(cells, joined):
    from opscreen.tables import Grid, grid_text, table, to_text

    g, t = Grid("#>", "name", "value>"), table("#>", "name", "value>")
    for r in cells:
        g.row(*r)
        t.row(*r)
    drawn = g.drawn(io.StringIO())
    assert all(isinstance(x, str) for x in drawn) == joined
    rich = to_text(["head", t], like=io.StringIO())
    assert to_text(["head", *drawn], like=io.StringIO()) == rich == grid_text(["head", g], like=io.StringIO())


def test_a_series_within_its_band_is_never_cut():
    """detect skips asv when a series' whole range is within its band: the segments' levels all
    lie in that range, so every boundary would merge anyway."""
    import random

    from opscreen.store.history import _merge_once, _segments

    rng = random.Random(7)
    for n in (2, 3, 7, 40, 200):
        for _ in range(20):
            band = rng.choice((0.01, 0.02, 0.05))
            ys = [rng.uniform(0, band) for _ in range(n)]
            ys[0], ys[-1] = 0.0, band  # the range exactly the band
            for min_size in (1, 2, 3):
                segs = _segments(ys, band, min_size)
                while len(segs) > 1 and _merge_once(segs, ys, band, min_size):
                    pass
                assert len(segs) == 1, (n, band, min_size)


def test_asv_step_detect_is_loaded_without_asvs_plugins():
    """history loads asv's step_detect.py without asv's __init__ (its plugin manager and every
    plugin: 0.4 s); the fit is asv's own, C helper included."""
    import subprocess
    import sys

    code = ("import random, sys\nfrom opscreen.store import history as h\n"
            "m = h._step_detect()\nassert m._rangemedian is not None, 'no C helper'\n"
            "assert not any(k == 'asv' or k.startswith('asv.') for k in sys.modules), sorted(sys.modules)\n"
            "r = random.Random(3)\nys = [r.gauss(0, 0.01) + (0.1 if i > 60 else 0) for i in range(150)]\n"
            "mine = m.solve_potts_approx(ys, [1.0] * len(ys), gamma=0.05)\nassert h._step_detect() is m\n"
            "import asv.step_detect as a\n"
            "assert a.solve_potts_approx(ys, [1.0] * len(ys), gamma=0.05) == mine\n"
            "print(len(mine[0]))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert int(res.stdout) >= 2  # the step is there


def test_a_case_missing_from_a_run_keeps_its_place_in_the_series():
    """history's values line up with its runs table: '-' where a run does not hold the case."""
    from opscreen.store.history import CaseHistory, Point

    case = CaseHistory(op="abs", variant="", dtype="float16", shape="[[64]]", test=None,
                       points=[Point(run=0, value=1.0, status="ok"), Point(run=2, value=None, status="failed"),
                               Point(run=3, value=1.25, status="ok")])
    assert series_text(case, 5) == "1.000 - F 1.250 -"
    assert series_text(case) == "1.000 F 1.250"  # without the run count: only the runs that hold it


def test_a_case_measured_while_its_device_throttled_is_judged_by_the_throttled_default(tmp_path):
    """One run of ``abs`` throttled (the store's ``throttled`` column): abs's cases are judged as
    compare judges a throttled row. The test's table has no throttled cell, so the conservative
    default decides them; every other case keeps the table's cell, and the step is still found."""
    from test_store import throttle_op

    runs = screens(tmp_path, 10, factor=step_at(6, 1.25))
    throttle_op(runs[3], "abs")
    h = history(tmp_path, runs, rms=0.006)
    by_op = {}
    for c in h.cases:
        by_op.setdefault(c.op, set()).add((c.basis, c.throttled_runs))
    assert by_op == {"abs": {("floors-default", 1)}, "add": {("floors", 0)}, "mm": {("floors", 0)}}
    (c,) = [c for c in h.cases if c.changes]
    (ch,) = c.changes
    assert (c.op, c.dtype) == CASE[:2] and ch.direction == "slower" and ch.throttled == 1
    assert c.band > noise.t_critical(9) * 0.006  # wider than the table's unthrottled cell
    assert ", throttled in 1 run" in ch.evidence() and c.basis_text().endswith(", throttled in 1 run")
    assert h.to_json()["cases"][[x.key() for x in h.cases].index(c.key())]["throttled_runs"] == 1
    values = series_text(c).split()
    assert values[3].endswith("*") and sum(v.endswith("*") for v in values) == 1  # run 3 alone
    assert "'*' measured while the device throttled" in format_history(h, "abs", like=io.StringIO())
    add = history(tmp_path, runs, rms=0.006, op="add")  # no run of add throttled: nothing said
    assert "throttled" not in format_history(add, "add", like=io.StringIO())
