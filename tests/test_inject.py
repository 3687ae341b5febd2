"""bench/inject.py: a copy of a real run dir whose chosen rows' library latency is times a
factor, every other byte kept, listed in injected.json by the summary's own keys."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchload import BENCH, load_bench
from opscreen.results.parse import parse_record_log
from opscreen.results.summary import COL, build_summary, ensure_summary

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORKER_AB = FIXTURES / "worker_ab" / "op"  # a run dir of an H200: ops/<op>/record.log, result.json, .complete
ABS_LOG = FIXTURES / "flaggems-h200" / "abs_record.log"  # FlagGems' own record log: no timer fields
SCALED = ("latency", "speedup", "gbps", "tflops")


@pytest.fixture(scope="module")
def inj():
    return load_bench("inject")


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def entries(path: Path) -> list[tuple[str, dict | None]]:
    """(line, its JSON entry or None) for every line of a record log."""
    out = []
    for line in path.read_text().split("\n"):
        b = line.find("{")
        out.append((line, json.loads(line[b:]) if b >= 0 else None))
    return out


def chosen_by_hand(r: dict, timer: str | None, min_us: float, max_us: float = float("inf")) -> bool:
    if r.get("error_msg") or not r.get("latency") or not r.get("latency_base"):
        return False
    if timer is not None and r.get("timer") != timer:
        return False
    return min_us <= 1000 * min(r["latency"], r["latency_base"]) < max_us


def scaled_by_hand(r: dict, factor: float) -> dict:
    r = dict(r)
    r["latency"] = r["latency"] * factor
    for k in SCALED[1:]:
        if isinstance(r.get(k), float):
            r[k] = r[k] / factor
    return r


def check_copy(src: Path, out: Path, factor: float, timer: str | None, min_us: float,
               max_us: float = float("inf")) -> int:
    """Every record line of the copy is the source's with exactly the hand-chosen rows scaled
    (byte for byte: prefix, JSON layout and all), every other file is byte-identical; returns
    how many rows were scaled."""
    n = 0
    a, b = files(src), files(out)
    assert set(b) - set(a) == {"injected.json"}
    for rel, data in a.items():
        if Path(rel).name != "record.log":
            assert b[rel] == data, rel
            continue
        old, new = entries(src / rel), entries(out / rel)
        assert len(old) == len(new)
        for (ol, oe), (nl, ne) in zip(old, new):
            if oe is None or not isinstance(oe.get("result"), list):
                assert nl == ol
                continue
            assert nl[: nl.find("{")] == ol[: ol.find("{")] and json.dumps(oe) == ol[ol.find("{"):]
            want = dict(oe, result=[scaled_by_hand(r, factor) if chosen_by_hand(r, timer, min_us, max_us) else r
                                    for r in oe["result"]])
            n += sum(chosen_by_hand(r, timer, min_us, max_us) for r in oe["result"])
            assert nl[nl.find("{"):] == json.dumps(want)
            for r in ne["result"]:
                if r.get("speedup") and r.get("latency"):
                    assert r["speedup"] == pytest.approx(r["latency_base"] / r["latency"], rel=1e-9)
    return n


def test_graph_rows_of_ten_us_and_more_scaled_by_exactly_the_factor(inj, tmp_path, capsys):
    out = tmp_path / "b"
    assert inj.main([str(WORKER_AB), str(out), "--factor", "1.05", "--timer", "graph", "--min-us", "10"]) == 0
    n = check_copy(WORKER_AB, out, 1.05, "graph", 10.0)
    assert 0 < n < 30  # some rows under 10 us stay as they were
    text = capsys.readouterr().out
    assert f"in all: {n} of 30 rows read" in text and "norm_scalaropt_dim: " in text
    # injected.json names exactly the rows whose summary changed, by the summary's key
    injected = json.loads((out / "injected.json").read_text())
    assert injected["factor"] == 1.05 and len(injected["rows"]) == n
    keys = {(r["op"], r["variant"], r["dtype"], r["shape"]) for r in injected["rows"]}
    sa, sb = build_summary(WORKER_AB), build_summary(out)
    key = lambda r: (r[COL["op"]], r[COL["variant"]] or "", r[COL["dtype"]], r[COL["shape"]])  # noqa: E731
    a_rows = {key(r): r for r in sa.rows}
    changed = set()
    for r in sb.rows:
        ra = a_rows[key(r)]
        assert r[COL["torch_ms"]] == ra[COL["torch_ms"]]
        if r[COL["lib_ms"]] != ra[COL["lib_ms"]]:
            changed.add(key(r))
            assert r[COL["lib_ms"]] == ra[COL["lib_ms"]] * 1.05
            assert r[COL["speedup"]] == pytest.approx(ra[COL["speedup"]] / 1.05, rel=1e-12)
        else:  # the same row but for the run's name (the copy's folder)
            assert r[:COL["run"]] + r[COL["run"] + 1:] == ra[:COL["run"]] + ra[COL["run"] + 1:]
    assert {r[COL["run"]] for r in sb.rows} == {out.name}
    assert changed == keys and {op for op, *_ in keys} == {"norm_scalaropt_dim"}  # flatten's rows: under 10 us


def test_a_variant_is_keyed_as_the_summary_keys_it(inj, tmp_path):
    """flatten's rows come from op_name flatten.using_ints: the summary's variant."""
    out = tmp_path / "b"
    assert inj.main([str(WORKER_AB), str(out), "--factor", "1.5", "--ops", "flatten"]) == 0
    rows = json.loads((out / "injected.json").read_text())["rows"]
    keys = {(r["op"], r["variant"], r["dtype"], r["shape"]) for r in rows}
    summary = {(r[COL["op"]], r[COL["variant"]], r[COL["dtype"]], r[COL["shape"]]) for r in build_summary(out).rows}
    assert len(keys) == 15 and keys <= summary and {r["variant"] for r in rows} == {"flatten.using_ints"}


def test_max_us_fraction_and_seed(inj, tmp_path):
    def rows(out):
        return [(r["op"], r["variant"], r["dtype"], r["shape"]) for r in
                json.loads((out / "injected.json").read_text())["rows"]]

    full = tmp_path / "full"
    assert inj.main([str(WORKER_AB), str(full), "--factor", "2", "--min-us", "1", "--max-us", "100"]) == 0
    assert check_copy(WORKER_AB, full, 2.0, None, 1.0, 100.0) == len(rows(full)) > 4
    draws = []
    for name in ("h1", "h2"):
        assert inj.main([str(WORKER_AB), str(tmp_path / name), "--factor", "2", "--min-us", "1", "--max-us", "100",
                         "--fraction", "0.5", "--seed", "7"]) == 0
        draws.append(rows(tmp_path / name))
    assert draws[0] == draws[1] and len(draws[0]) == round(0.5 * len(rows(full)))
    assert set(draws[0]) < set(rows(full))


def test_an_op_dir_without_timer_fields(inj, tmp_path, capsys):
    """One op dir (record.log at its top) of FlagGems' plain record log: --timer graph finds
    nothing there (exit 2, nothing written); no --timer scales the rows by size."""
    src = tmp_path / "abs"
    src.mkdir()
    shutil.copy(ABS_LOG, src / "record.log")
    assert inj.main([str(src), str(tmp_path / "none"), "--factor", "1.1", "--timer", "graph"]) == 2
    assert "no row" in capsys.readouterr().err and not (tmp_path / "none").exists()
    out = tmp_path / "out"
    assert inj.main([str(src), str(out), "--factor", "1.1", "--max-us", "30"]) == 0
    n = check_copy(src, out, 1.1, None, 0.0, 30.0)
    rows = json.loads((out / "injected.json").read_text())["rows"]
    assert len(rows) == n and {r["op"] for r in rows} == {"abs"} and all(r["variant"] == "" for r in rows)


def test_repeats_and_a_second_log_handler(inj, tmp_path):
    """Each repeat's record.log gets the op's chosen rows scaled; a line a second log handler
    wrote again is one entry, rewritten the same."""
    src = tmp_path / "run"
    op = src / "ops" / "norm_scalaropt_dim"
    shutil.copytree(WORKER_AB / "ops" / "norm_scalaropt_dim", op)
    text = (op / "record.log").read_text()
    for k in ("1", "2"):
        (op / "repeats" / k).mkdir(parents=True)
        (op / "repeats" / k / "record.log").write_text(text)
    first = next(line for line in text.split("\n") if line.startswith("[INFO] {"))
    twice = text.rstrip("\n") + "\nINFO     logger:conftest.py:94 " + first[len("[INFO] "):] + "\n"
    (op / "record.log").write_text(twice)
    assert len(parse_record_log(op / "record.log").rows) == 15
    out = tmp_path / "out"
    assert inj.main([str(src), str(out), "--factor", "1.3", "--timer", "graph", "--min-us", "5"]) == 0
    n = check_copy(src, out, 1.3, "graph", 5.0)  # counts the rows of the line written twice twice
    lines = (out / "ops" / "norm_scalaropt_dim" / "record.log").read_text().split("\n")
    assert lines[1][len("[INFO] "):] == lines[-2][len("INFO     logger:conftest.py:94 "):] != first[len("[INFO] "):]
    k = len(json.loads((out / "injected.json").read_text())["rows"])
    in_first = sum(chosen_by_hand(r, "graph", 5.0) for r in json.loads(first[len("[INFO] "):])["result"])
    assert k > in_first > 0 and n == 3 * k + in_first


def test_stale_summary_and_compare_outputs_are_left_out(inj, tmp_path):
    src = tmp_path / "run"
    shutil.copytree(WORKER_AB, src)
    ensure_summary(src)
    (src / "compare.csv").write_text("op\n")
    (src / "report.html").write_text("<html></html>")
    out = tmp_path / "out"
    assert inj.main([str(src), str(out), "--factor", "1.05"]) == 0
    for name in ("summary.json", "summary.csv", "compare.csv", "report.html"):
        assert (src / name).is_file() and not (out / name).exists()
    assert (out / "ops" / "flatten" / ".complete").read_bytes() == (src / "ops" / "flatten" / ".complete").read_bytes()


def test_timer_methods(inj):
    m = inj.timer_matches
    assert m("graph", "graph") and not m("graph-fallback:capture", "graph") and not m(None, "graph")
    assert m("graph-fallback:capture", "direct") and m("graph-fallback:replay+profiler", "profiler")
    assert m("profiler", "profiler") and m("graph-fallback:warmup+profiler", "graph-fallback")
    assert m(None, None) and m("wallclock", None) and not m("wallclock", "graph")


@pytest.mark.parametrize("case", ["missing", "out_not_empty", "out_is_file", "factor_zero", "factor_negative",
                                  "out_inside", "unknown_op", "empty_ops", "unknown_timer", "no_row", "no_factor"])
def test_bad_input_exits_2_and_writes_nothing(inj, tmp_path, capsys, case):
    src = tmp_path / "run"
    shutil.copytree(WORKER_AB, src)
    out = tmp_path / "out"
    argv = [str(src), str(out), "--factor", "1.05"]
    if case == "missing":
        argv[0] = str(tmp_path / "nope")
    elif case == "out_not_empty":
        out.mkdir()
        (out / "keep").write_text("x")
    elif case == "out_is_file":
        out.write_text("x")
    elif case.startswith("factor"):
        argv[3] = "0" if case == "factor_zero" else "-1"
    elif case == "out_inside":
        argv[1] = str(src / "copy")
    elif case == "unknown_op":
        argv += ["--ops", "abs"]
    elif case == "empty_ops":
        argv += ["--ops", ""]
    elif case == "unknown_timer":
        argv += ["--timer", "cuda-events"]
    elif case == "no_row":
        argv += ["--min-us", "1e9"]
    elif case == "no_factor":
        argv = argv[:2]
    before, names = files(tmp_path), sorted(str(p) for p in tmp_path.rglob("*"))
    if case in ("no_factor", "unknown_timer"):
        with pytest.raises(SystemExit) as exc:
            inj.main(argv)
        rc = exc.value.code
    else:
        rc = inj.main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and err.startswith("inject: "), err
    assert files(tmp_path) == before and sorted(str(p) for p in tmp_path.rglob("*")) == names


def test_the_script_runs_as_a_command(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(BENCH / "inject.py"), str(WORKER_AB), str(out), "--factor", "1.5",
                        "--ops", "norm_scalaropt_dim"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "norm_scalaropt_dim: 15 of 15 rows scaled" in p.stdout and "flatten" not in p.stdout
    p = subprocess.run([sys.executable, str(BENCH / "inject.py"), str(WORKER_AB), str(out), "--factor", "1.5"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "not an empty folder" in p.stderr
