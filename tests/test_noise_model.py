"""bench/noise_model.py and the shipped H200 floors table on the real H200 screens of three random
draws of FlagGems ops (bench/results/2026-12-04-h200-noise-three-draws.md):

- seed 20261208 (``2026-12-02-h200-noise-runs.tgz``): 28 ops measured, the first 13 in two screens
  of fresh processes and three of warm workers on one chip, the other 19 in two of fresh processes,
  each on a chip of its own, and 15 of them in two of warm workers on a fourth;
- seed 20261219: 10 ops on one chip, two screens of fresh processes (``2026-12-03-h200-pad-runs.tgz``)
  and four of warm workers, telemetry off, on, off, on (``2026-12-03-h200-telemetry-runs.tgz``);
- seed 20261230 (``2026-12-04-h200-noise-runs.tgz``): 9 ops measured on one chip, three screens of
  fresh processes, telemetry off, on, off.

Runs are paired within their draw only. The verdict rule judged out of sample keeps its false calls
on fresh reruns within the issue's 1 % and catches injected slowdowns; warm-worker reruns stay the
noisier history they were measured to be. A change to the rule or the fit that breaks either fails
here."""

from __future__ import annotations

import itertools
import json
import tarfile
from pathlib import Path

import pytest

from benchload import load_bench

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
# draw -> [(tarball, member run dir, name here)]
DRAWS = {
    "20261208": [("2026-12-02-h200-noise-runs.tgz", m, m)
                 for m in ("op", "op2", "wk", "wk2", "wk3", "op_b", "op2_b", "wk_b", "wk2_b")],
    "20261219": [("2026-12-03-h200-pad-runs.tgz", m, m) for m in ("op", "op2")]
                + [("2026-12-03-h200-telemetry-runs.tgz", m, f"wk_{m}") for m in ("off", "on", "off2", "on2")],
    "20261230": [("2026-12-04-h200-noise-runs.tgz", m, m) for m in ("off", "op", "off2")],
}


@pytest.fixture(scope="module")
def draws(tmp_path_factory):
    """{seed: [run dir, ...]}, each draw's run dirs unpacked under a folder of its own."""
    root = tmp_path_factory.mktemp("h200")
    out = {}
    for seed, runs in DRAWS.items():
        for tgz in {t for t, _, _ in runs}:
            d = root / "x" / tgz
            if not d.exists():
                with tarfile.open(RESULTS / tgz) as tf:  # without the ops' .pyshim links (absolute)
                    tf.extractall(d, filter=lambda m, p: None if m.issym() or m.islnk() else tarfile.data_filter(m, p))
        out[seed] = []
        (root / seed).mkdir()
        for tgz, member, name in runs:
            dst = root / seed / name
            (root / "x" / tgz / member).rename(dst)
            out[seed].append(dst)
    return out


def _loaded(draws):
    from opscreen.results.summary import load_or_build

    summaries, groups = [], []
    for seed, dirs in draws.items():
        idx = []
        for d in dirs:
            s = load_or_build(d)[0]
            s.name = f"{seed}/{d.name}"
            idx.append(len(summaries))
            summaries.append(s)
        groups.append(idx)
    return summaries, groups


def test_out_of_fold_rates_on_real_h200_screens(draws):
    nm = load_bench("noise_model")
    summaries, groups = _loaded(draws)
    res = nm.evaluate(summaries, folds=2, seed=1, draws=groups)
    assert res["ops"] == 50  # in the runs' op lists; 45 measured (the rest timed out or were cut in every screen)
    rates, power = res["rates"], res["power"]
    rerun, worker, chip, cross = (rates[h] for h in ("rerun", "worker", "chip", "cross"))
    assert rerun["rows"] == 852 and worker["rows"] == 1765 and chip["rows"] == 416
    # fresh reruns on one chip: 0.82 % called (issue 31's target: <= 1 %)
    assert rerun["called"] / rerun["rows"] <= 0.01
    # unresolved 11.4 % (12.6 % when `same` took the 99 % interval): nonzero_numpy's profiler rows, a cell one op backs
    assert rerun["unresolved"] / rerun["rows"] <= 0.12
    # warm-worker reruns: 4.99 % called, judged by their own cells; still far from a fresh rerun
    assert 0.02 <= worker["called"] / worker["rows"] <= 0.06
    assert chip["called"] / chip["rows"] <= 0.01
    # worker against fresh processes: the widest cells, the most calls (4.3 %: why --isolation auto stays op)
    # and unresolved rows (31 %, 51 % with the 99 % interval for `same`)
    assert cross["called"] / cross["rows"] > 3 * rerun["called"] / rerun["rows"]
    assert cross["unresolved"] / cross["rows"] > 2 * rerun["unresolved"] / rerun["rows"]
    for key in ("rerun <10us x1.10", "rerun >=10us x1.05", "worker <10us x1.10", "worker >=10us x1.05"):
        e = power[key]
        assert e["rows"] > 200 and e["slower"] / e["rows"] >= 0.95, key  # measured 99.0-100 %


def test_the_shipped_table_is_the_fit_of_these_screens(draws):
    from opscreen.results import noise

    summaries, groups = _loaded(draws)
    pairs = [(summaries[i], summaries[j],
              noise.history_of(summaries[i].caliber.get("isolation"), summaries[j].caliber.get("isolation")))
             for g in groups for i, j in itertools.combinations(g, 2)]
    fitted = noise.fit(pairs, name="x", match=".*", provenance={})
    shipped = noise.find("NVIDIA H200")

    def cells(t):
        return [(c.label(), c.rows, c.ops, c.rms, c.rms_torch, c.rms_lib, c.q_speedup, c.q_torch, c.q_lib,
                 c.eq_alpha, c.q_speedup_eq, c.q_torch_eq, c.q_lib_eq) for c in t.cells]

    assert cells(fitted) == cells(shipped)
    assert {c.history for c in shipped.cells} == {"rerun", "worker", "chip", "cross"}
    assert [d["seed"] for d in shipped.provenance["draws"]] == [20261208, 20261219, 20261230]


def test_calibrate_tops_a_draw_up_to_every_timer_of_a_real_screen(draws, tmp_path):
    """``calibrate --timers-from``: the seeded draw first (the same ops as without it), then, from
    the same generator, ops of each timer the screen used until each is backed by
    ``--min-per-timer`` (or by all it has). On seed 20261230's screen `nonzero_numpy` is the only
    op the profiler timed: a plain draw of 4 from 30 ops leaves it out, the top-up takes it."""
    import argparse
    import random

    from opscreen.commands import calibrate
    from opscreen.results import noise
    from opscreen.results.summary import load_or_build

    screen = next(d for d in draws["20261230"] if d.name == "off")
    by = noise.ops_by_timer(load_or_build(screen)[0])
    assert by["profiler"] == {"nonzero_numpy"} and len(by["graph"]) == 7
    others = [f"unscreened_{i:02d}" for i in range(21)]  # in the suite, never screened: no timer known
    ops = sorted({o for v in by.values() for o in v} | {"linalg_svd"} | set(others))
    inv = tmp_path / "inv.yaml"
    inv.write_text("schema: opscreen.inventory/1\nops:\n" + "".join(f"  {o}: {{}}\n" for o in ops))

    def args(**kw):
        base = dict(seed="5", sample=4, inventory=str(inv), suite=None, python=None, timers_from=str(screen),
                    min_per_timer=3)
        return argparse.Namespace(**{**base, **kw})

    plain = random.Random(5).sample(ops, 4)
    assert "nonzero_numpy" not in plain
    drawn, seed, topped = calibrate._draw(args())
    assert seed == 5 and drawn[:4] == plain and len(set(drawn)) == len(drawn)
    assert topped["profiler"] == ["nonzero_numpy"]  # all the profiler has
    for group, members in by.items():
        assert sum(o in members for o in drawn) >= min(3, len(members)), group
    assert all(o in by[g] for g, extra in topped.items() for o in extra)
    assert calibrate._draw(args()) == (drawn, seed, topped)  # the same seed, the same draw
    assert calibrate._draw(args(timers_from=None)) == (plain, 5, {})
    for bad in (dict(min_per_timer=0), dict(timers_from=str(tmp_path / "nowhere")),
                dict(timers_from=f"{screen},{tmp_path / 'nowhere'}"), dict(sample=1), dict(sample=0, timers_from=None)):
        with pytest.raises(calibrate.UsageError):
            calibrate._draw(args(**bad))
    # several screens: the union of their timers (seed 20261208's nll_loss2d_backward is profiler-timed too)
    other = next(d for d in draws["20261208"] if d.name == "op_b")
    by2 = noise.ops_by_timer(load_or_build(other)[0])
    assert "nll_loss2d_backward" in by2["profiler"] and "nonzero_numpy" not in by2["profiler"]
    inv.write_text("schema: opscreen.inventory/1\nops:\n" + "".join(
        f"  {o}: {{}}\n" for o in sorted(set(ops) | {o for v in by2.values() for o in v})))
    both = f"{screen},{other}"
    drawn2, _, topped2 = calibrate._draw(args(timers_from=both))
    assert set(topped2["profiler"]) == {"nonzero_numpy", "nll_loss2d_backward"}
    # --sample 0: only the top-up, every timer to --min-per-timer (or all it has)
    only, _, topped0 = calibrate._draw(args(sample=0, timers_from=both))
    assert only == [o for g in sorted(topped0) for o in topped0[g]]
    assert set(topped0["profiler"]) == {"nonzero_numpy", "nll_loss2d_backward"} and len(topped0["graph"]) == 3
    assert calibrate._draw(args(sample=0, timers_from=both)) == (only, 5, topped0)
    # --extends the shipped table (whose 45 ops hold both screens' ops): none is drawn again, so a
    # top-up of the same screens finds nothing left to add; the plain draw takes unmeasured ops only
    shipped = str(noise.find("NVIDIA H200").path)
    calibrated = set(noise.load(shipped).provenance["ops"])
    assert {"nonzero_numpy", "nll_loss2d_backward"} <= calibrated
    with pytest.raises(calibrate.UsageError, match="every timer already has 3 ops in"):
        calibrate._draw(args(sample=0, timers_from=both, extends=shipped))
    ext, _, topped_ext = calibrate._draw(args(sample=4, timers_from=both, extends=shipped))
    assert topped_ext == {} and len(ext) == 4 and not set(ext) & calibrated


def test_compare_names_the_thin_cells_behind_its_unresolved_rows(draws):
    """A rerun of seed 20261230 judged by the shipped table: every unresolved row is
    `nonzero_numpy`'s, in profiler cells that one op backs, and compare says so and what helps."""
    from opscreen.results.compare import THIN_OPS, compare_summaries, format_comparison, thin_cells
    from opscreen.results.summary import load_or_build

    runs = {d.name: load_or_build(d)[0] for d in draws["20261230"]}
    # the same test at the calls' 99 % (eq_alpha 0.01): with the default 90 % interval the table, which
    # holds these very screens, calls every row of them same
    c = compare_summaries(runs["off"], runs["off2"], eq_alpha=0.01)
    un = c.unresolved()
    assert un and {r.op for r in un} == {"nonzero_numpy"}
    thin = thin_cells(c, un)
    assert set(thin) == {"rerun/profiler/>=10us", "rerun/profiler/<10us"} and sum(n for _, n in thin.values()) == len(un)
    assert all(ops < THIN_OPS for ops, _ in thin.values())
    text = format_comparison(c)
    assert f"{len(un)} of them in floors cells fewer than {THIN_OPS} ops back (rerun/profiler/" in text
    assert "opscreen calibrate --timers-from RUN_DIR" in text
    # a row in a well-backed cell is never named thin
    assert thin_cells(c, [r for r in c.rows if r.floors and "graph" in r.floors]) == {}


def test_cells_backed_by_more_ops_meet_the_chip_targets(draws):
    """The learning curve of bench/results/2026-12-04-h200-thin-cells.md: with three folds by op
    (tables fitted on two thirds of the ops, 9-11 behind each chip cell where two folds leave 3-7),
    a fresh rerun with the op on another chip meets issue 31's targets: <= 3 % called, <= 10 %
    unresolved, a 5 % step caught on >= 95 %. Fresh reruns on one chip stay at 12.6 % unresolved:
    90 of their 852 rows are `nonzero_numpy`'s profiler rows, and no other op of the draws backs
    a profiler rerun cell."""
    nm = load_bench("noise_model")
    summaries, groups = _loaded(draws)
    res = nm.evaluate(summaries, folds=3, seed=1, draws=groups)
    chip, rerun = res["rates"]["chip"], res["rates"]["rerun"]
    assert chip["rows"] == 416 and chip["called"] / chip["rows"] <= 0.03 and chip["unresolved"] / chip["rows"] <= 0.10
    e = res["power"]["chip >=10us x1.05"]
    assert e["slower"] / e["rows"] >= 0.95  # 97.4 %; with two folds 49-87 %
    assert rerun["called"] / rerun["rows"] <= 0.01
    assert rerun["unresolved"] >= 90 and (rerun["unresolved"] - 90) / (rerun["rows"] - 90) <= 0.03  # 2.2 % besides those


def test_a_larger_minimum_change_trades_false_calls_for_false_same(draws, h100, tmp_path, capsys):
    """bench/results/2026-12-08-min-change.md (not adopted): ``--min-change 3`` cuts the H200's
    warm-worker calls from 4.3 % to 0.3 % out of sample and keeps the power on one chip, but leaves
    worker against fresh processes above 1.5 % in two splits of three, and on the H100's chip
    history it calls one injected 5 % step in seven `same` (one in 30 at compare's 1 %)."""
    nm = load_bench("noise_model")
    summaries, groups = _loaded(draws)
    at = {mc: nm.evaluate(summaries, folds=3, seed=2, draws=groups, min_change=mc / 100) for mc in (1, 3)}
    rate = {mc: {h: e["called"] / e["rows"] for h, e in r["rates"].items()} for mc, r in at.items()}
    assert rate[1]["worker"] > 0.02 and rate[3]["worker"] < 0.005
    assert rate[3]["rerun"] == 0 and rate[3]["cross"] > 0.015  # 1.90 %: linalg_vecdot's moves are past any minimum
    for key in ("rerun >=10us x1.05", "worker >=10us x1.05"):
        e = at[3]["power"][key]
        assert e["slower"] / e["rows"] >= 0.95, key
    args = _h100_draws(h100)
    same = {}
    for mc in (1, 3):
        out = tmp_path / f"{mc}.json"
        assert nm.main(args + ["--folds", "3", "--seed", "1", "--finished", "--min-change", str(mc), "--json", str(out)]) == 0
        e = json.loads(out.read_text())["power"]["chip >=10us x1.05"]
        same[mc] = e["same"] / e["rows"]
    assert same[1] < 0.05 and same[3] > 0.10  # 3.1 % and 13.7 %


def test_whose_false_calls_and_the_rates_without_them(draws, capsys, tmp_path):
    """bench/results/2026-12-06-input-seeds.md: out of sample (three folds, seed 1) most false calls
    are `nanmedian_out`'s, an op whose unseeded inputs change its work from process to process
    (`--by-op`); `--drop nanmedian_out` refits and judges without it: the chip history calls nothing
    and warm-worker reruns fall from 4.3 % to 1.25 %."""
    nm = load_bench("noise_model")
    args = [",".join(str(d) for d in dirs) for dirs in draws.values()] + ["--folds", "3", "--seed", "1"]
    assert nm.main(args + ["--by-op", "3", "--json", str(tmp_path / "all.json")]) == 0
    out = capsys.readouterr().out
    called = json.loads((tmp_path / "all.json").read_text())["called_by_op"]
    total, nanmedian = sum(called.values()), sum(n for k, n in called.items() if k.endswith(" nanmedian_out"))
    assert total == 237 and nanmedian == 159 and "cross nanmedian_out" in out
    assert nm.main(args + ["--drop", "nanmedian_out", "--json", str(tmp_path / "drop.json")]) == 0
    assert capsys.readouterr().out.startswith("49 ops, 3 folds")
    dropped = json.loads((tmp_path / "drop.json").read_text())
    rates = dropped["rates"]
    assert not any(k.endswith(" nanmedian_out") for k in dropped["called_by_op"])
    assert rates["chip"]["called"] == 0 and rates["chip"]["rows"] == 381
    assert round(100 * rates["worker"]["called"] / rates["worker"]["rows"], 2) == 1.25


H100_ARCHIVES = ("2026-12-06-h100-calibrate-runs.tgz", "2026-12-07-h100-worker-aa-runs.tgz",
                 "2026-12-07-h100-worker-picks-runs.tgz",  # adds 20261210/wk2, wk3, op3
                 "2026-12-08-h100-one-host-runs.tgz")  # seed 20261211: op, wk and op2 (8 of 16 ops) on one host


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    """The H100's screens (one folder per draw seed), unpacked once for this module's tests."""
    root = tmp_path_factory.mktemp("h100")
    for name in H100_ARCHIVES:
        with tarfile.open(RESULTS / name) as tf:
            tf.extractall(root, filter=lambda m, p: None if m.issym() or m.islnk() else tarfile.data_filter(m, p))
    return root


def _h100_draws(root: Path, one_host: bool = False) -> list[str]:
    """noise_model's arguments for the H100's draws, one comma group each: four of two fresh
    screens, seed 20261210's five screens and, with ``one_host``, seed 20261211's three."""
    args = [f"{root}/{s}/op-1,{root}/{s}/op-2" for s in (20261205, 20261206, 20261207, 20261208)]
    args.append(",".join(f"{root}/20261210/{m}" for m in ("op", "op2", "wk2", "wk3", "op3")))
    if one_host:
        args.append(",".join(f"{root}/20261211/{m}" for m in ("op", "op2", "wk")))
    return args


def _named(root: Path, name: str):
    """The summary of run dir ``root/name``, named ``name`` (as a draw names its runs)."""
    from opscreen.results.summary import load_or_build

    s = load_or_build(root / name)[0]
    s.name = name
    return s


def test_the_shipped_h100_table_is_the_fit_of_its_calibrate_screens(h100):
    """The H100 table (assets/data/floors/nvidia-h100-80gb-hbm3.json) is what `opscreen calibrate`
    fits from the screens of bench/results/2026-12-06-h100-calibrate-runs.tgz, the two fresh
    screens of 2026-12-07-h100-worker-aa-runs.tgz (seed 20261210; its worker screen is not fitted:
    the worker recorded no autotune pick then, so two ops' pick flips would pass for noise) and the
    two worker screens of 2026-12-07-h100-worker-picks-runs.tgz (which record their picks; their
    noisy rows are left out: bench/results/2026-12-07-noisy-rows.md) and seed 20261211's fresh,
    worker and second fresh screen on one host (2026-12-08-h100-one-host-runs.tgz), each draw
    paired within itself; a draw the archive holds but the table does not name (20261209, cut short: one screen
    of 8 ops and 2 of its second) is left for a later session to resume."""
    from opscreen.results import noise

    shipped = noise.find("NVIDIA H100 80GB HBM3")
    draws = shipped.provenance["draws"]
    assert [d["seed"] for d in draws] == [20261205, 20261206, 20261207, 20261208, 20261210, 20261211]
    assert sorted(p.name for p in h100.iterdir()) == sorted([str(d["seed"]) for d in draws] + ["20261209"])
    assert draws[-2]["runs"] == ["20261210/op", "20261210/op2", "20261210/wk2", "20261210/wk3"]
    assert draws[-1]["runs"] == ["20261211/op", "20261211/op2", "20261211/wk"]
    pairs = []
    for d in draws:
        for a, b in itertools.combinations([_named(h100, name) for name in d["runs"]], 2):
            pairs.append((a, b, noise.history_of(a.caliber.get("isolation"), b.caliber.get("isolation"))))
    fitted = noise.fit(pairs, name="x", match=".*", provenance={})

    def cells(t):
        return [(c.label(), c.rows, c.ops, c.rms, c.q_speedup, c.q_torch, c.q_lib, c.q_speedup_eq, c.q_lib_eq)
                for c in t.cells]

    assert cells(fitted) == cells(shipped)
    # 71 ops measured: 32-33 behind each rerun cell of the graph timer, and the rows of the 2 ops a
    # power cap throttled (flash_attention_backward, log_normal_) in a cell of their own, too thin
    # to judge (compare leaves those rows to the conservative default: noise.judging); the two ops
    # whose picks flipped between seed 20261210's processes are left out of the fit
    assert len(shipped.provenance["ops"]) == 71
    assert [(c.ops, c.throttled) for c in shipped.cells if c.history == "rerun" and c.timer == "graph"] == [
        (33, False), (32, False), (2, True)]
    # seed 20261211's worker against its fresh screens, on one host: the cross cells gain 11-12 ops,
    # and the small kernels' speedup band narrows from 21.8 % (two hosts' torch kernels) to 7.3 %
    assert [(c.label(), c.ops, round(c.band() * 100, 2)) for c in shipped.cells
            if c.history == "cross" and c.timer == "graph"] == [("cross/graph/<10us", 25, 7.3), ("cross/graph/>=10us", 26, 4.4)]
    assert "underscore_flash_attention_forward" in shipped.provenance["pick_ops_left_out"]
    assert {op for op, pairs in shipped.provenance["pick_ops_left_out"].items()
            if "20261210/op->20261210/op2" in pairs} == {"cross_entropy_loss", "moe_sum"}
    # the workers' cells: 13 and 15 ops, the one noisy op among them (normal_tensor_float) left out
    assert [(c.label(), c.ops) for c in shipped.cells if c.history == "worker" and c.timer == "graph"] == [
        ("worker/graph/<10us", 13), ("worker/graph/>=10us", 15)]
    assert shipped.provenance["noisy_rows_left_out"]["normal_tensor_float"] == 15


def test_h100_worker_against_fresh_calls_only_ops_whose_autotune_picks_flip(h100):
    """bench/results/2026-12-07-h100-worker-aa.md: the H100's five draws (56 ops), seed 20261210
    with a warm-worker screen beside its two fresh ones, judged out of sample (three folds, seed 1).
    Fresh reruns call 0.26 %; worker against fresh calls 2.7 %, every call on `cross_entropy_loss`
    and `moe_sum`, the two ops whose autotune picks flipped between the fresh processes (the
    worker, then, recorded no pick: child/autotune.py), and the injected steps are caught on every
    row of a kernel both sides picked alike; rows of an op whose picks differ are counted apart."""
    nm = load_bench("noise_model")
    groups = [[f"{s}/op-1", f"{s}/op-2"] for s in (20261205, 20261206, 20261207, 20261208)]
    groups.append(["20261210/op", "20261210/op2", "20261210/wk"])
    summaries = [_named(h100, name) for g in groups for name in g]
    starts = list(itertools.accumulate([0] + [len(g) for g in groups]))
    idx = [list(range(a, b)) for a, b in zip(starts, starts[1:])]
    res = nm.evaluate(summaries, folds=3, seed=1, draws=idx)
    assert res["ops"] == 56
    rerun, cross = res["rates"]["rerun"], res["rates"]["cross"]
    assert rerun["called"] / rerun["rows"] <= 0.01 and rerun["unresolved"] / rerun["rows"] <= 0.10
    assert cross["rows"] == 662 and cross["called"] == 18  # 2.7 %
    assert {k for k in res["called_by_op"] if k.startswith("cross ")} == {"cross cross_entropy_loss", "cross moe_sum"}
    power = res["power"]
    for key in ("rerun <10us x1.10", "rerun >=10us x1.05"):
        assert power[key]["rows"] > 150 and power[key]["slower"] == power[key]["rows"], key  # 100 %
    assert power["rerun <10us x1.10 pick"]["slower"] == 0  # compare says pick there, never slower


def test_h100_workers_that_record_their_picks_against_fresh_processes(h100, capsys, tmp_path):
    """bench/results/2026-12-07-h100-worker-picks.md: seed 20261210 again, two warm-worker screens
    (wk2, wk3) and a fresh one cut short by its call's time limit (op3, 8 of 24 ops ended) on a
    second H100, each op recording its autotune picks; with the first chip's op and op2 one draw,
    judged out of sample (three folds, seed 1) and op3's unfinished ops left out (``--finished``:
    its cut op, `cross_entropy_loss`, recorded no pick before 2026-12-07). Worker against fresh
    no row (bench/results/2026-12-07-noisy-rows.md), against the fresh reruns' 0.26 %: the flips of
    `cross_entropy_loss` and `moe_sum` are named pick, and `normal_tensor_float`'s smallest case,
    up to 7x slower in that host's workers at a replay noise of 20-41 %, is unresolved, basis noisy
    (until 2026-12-07 its 8 rows were called, 0.50 %, and its noise widened every worker and cross
    cell under 10 us: a quarter of the worker-against-fresh rows stayed unresolved, now 11.5 %)."""
    nm = load_bench("noise_model")
    args = _h100_draws(h100)
    assert nm.main(args + ["--folds", "3", "--seed", "1", "--finished", "--by-op", "5",
                           "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert "20261210/op3: left out its 16 unfinished op(s)" in out and "cross_entropy_loss" in out
    res = json.loads((tmp_path / "f.json").read_text())
    rerun, cross = res["rates"]["rerun"], res["rates"]["cross"]
    assert (rerun["rows"], rerun["called"]) == (783, 2) and rerun["unresolved"] / rerun["rows"] < 0.02
    assert (cross["rows"], cross["called"], cross["pick"]) == (1606, 0, 47)  # narrower cells: more flips beyond them
    assert 0.10 < cross["unresolved"] / cross["rows"] < 0.12
    assert not {k for k in res["called_by_op"] if k.startswith("cross ")}
    worker_small = res["power"]["worker <10us x1.10"]
    assert worker_small["rows"] == 63 and worker_small["slower"] == 53  # 84 % (30 % before the noisy rule)
    assert cross["noisy"] == 8  # normal_tensor_float's: the rest is the narrower cells' doing
    # the rule before it (no limit, in the fit or in compare): those 8 rows called, a quarter unresolved
    assert nm.main(args + ["--folds", "3", "--seed", "1", "--finished", "--max-noise", "1e9",
                           "--json", str(tmp_path / "before.json")]) == 0
    capsys.readouterr()
    before = json.loads((tmp_path / "before.json").read_text())["rates"]["cross"]
    assert (before["called"], before["pick"], before["noisy"]) == (8, 14, 0) and before["unresolved"] / before["rows"] > 0.2
    # without --finished, op3's cut cross_entropy_loss (no pick recorded) is judged as compare judges it
    assert nm.main(args + ["--folds", "3", "--seed", "1", "--json", str(tmp_path / "all.json")]) == 0
    assert "unfinished" not in capsys.readouterr().out
    called = json.loads((tmp_path / "all.json").read_text())["called_by_op"]
    assert called.get("cross cross_entropy_loss", 0) > 0


def test_the_summary_names_the_ops_whose_readings_were_noisy(h100):
    """bench/results/2026-12-07-noisy-rows.md: the second H100 host's warm worker (wk3) read 9 rows
    of 5 ops at an rsd past 10 %; the summary names them, and a fresh screen of the draw has none."""
    from opscreen.results.summary import format_summary, noisy_rows

    wk3, op = _named(h100, "20261210/wk3"), _named(h100, "20261210/op")
    assert noisy_rows(wk3) == {"normal_tensor_float": 3, "round": 2, "rrelu_with_noise_functional": 2,
                               "dunder_ior_tensor": 1, "lerp_tensor": 1}
    assert "noisy: 9 ok rows whose own samples spread past 10%" in format_summary(wk3)
    assert noisy_rows(op) == {} and "noisy: " not in format_summary(op)  # its views (no kernel) do not count


def test_h100_worker_against_fresh_on_one_host(h100, capsys, tmp_path):
    """bench/results/2026-12-08-h100-one-host.md: seed 20261211's 16 random ops in fresh processes,
    a warm worker and fresh again (8 ops) on one host, judged out of sample with the other five
    draws (three folds, seed 2). Worker against fresh calls 1 of 551 rows; the fresh rerun of the
    same ops calls 7 rows, all `scatter_reduce_two_` (atomics), and fresh reruns stay within 1 %."""
    nm = load_bench("noise_model")
    args = _h100_draws(h100, one_host=True)
    assert nm.main(args + ["--folds", "3", "--seed", "2", "--finished", "--by-op", "8",
                           "--json", str(tmp_path / "f.json")]) == 0
    capsys.readouterr()
    res = json.loads((tmp_path / "f.json").read_text())
    rates = res["rates"]
    one_host = [v for k, v in rates.items() if k.startswith("cross ") and "20261211/" in k]
    assert sum(v["rows"] for v in one_host) == 551 and sum(v["called"] for v in one_host) == 1
    fresh = next(v for k, v in rates.items() if k.startswith("rerun ") and "20261211/" in k)
    assert (fresh["rows"], fresh["called"]) == (210, 7)
    assert res["called_by_op"]["rerun scatter_reduce_two_"] == 7
    assert rates["rerun"]["called"] / rates["rerun"]["rows"] <= 0.01
    assert res["power"]["rerun >=10us x1.05"]["slower"] / res["power"]["rerun >=10us x1.05"]["rows"] >= 0.99
