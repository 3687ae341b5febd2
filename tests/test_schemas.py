"""The JSON Schemas of the file contracts (src/opscreen/schemas/, docs/contracts.md, "JSON
Schemas") against real outputs: every contract file that real screens of the sample suite
write (opscreen run in fresh processes, with --repeats, in warm workers; opscreen op;
summary; calibrate), the shipped floors table, and the real old files (the H200 screens of
bench/results/2026-12-02-h200-noise-runs.tgz, the fixtures, a summary version 2) once
migrated. A writer that drifts from its schema (a key added, renamed, retyped or dropped)
fails here; so does a schema that stops saying what the writer writes."""

from __future__ import annotations

import copy
import csv
import gzip
import json
import tarfile
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

from opscreen import contracts
from opscreen.contracts import CONTRACTS
from opscreen.results.summary import COLUMNS, build_summary

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
H200 = ROOT / "bench" / "results" / "2026-12-02-h200-noise-runs.tgz"
BY_FILE = {c.filename: c for c in CONTRACTS}

# keep each op's measurement short: the files' shapes are the point, not the numbers
FAST = {"OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3", "OPSCREEN_MAX_SAMPLES": "10",
        "OPSCREEN_WARMUP_CALLS": "1"}


def schema_of(c: contracts.Contract) -> dict:
    return json.loads(files("opscreen").joinpath("schemas", c.schema_file()).read_text(encoding="utf-8"))


VALIDATORS = {c.name: jsonschema.Draft202012Validator(schema_of(c)) for c in CONTRACTS}


def problems(c: contracts.Contract, obj: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
            for e in VALIDATORS[c.name].iter_errors(obj)]


def contract_files(root: Path) -> list[tuple[contracts.Contract, Path]]:
    return sorted(((BY_FILE[p.name], p) for p in root.rglob("*.json") if p.name in BY_FILE), key=lambda x: str(x[1]))


def check_tree(root: Path) -> dict[str, int]:
    """Validate every contract file under ``root`` (migrated to the current version first);
    how many of each contract it held."""
    seen: dict[str, int] = {}
    bad = []
    for c, p in contract_files(root):
        obj = contracts.load(c, p)
        bad += [f"{p.relative_to(root)}: {m}" for m in problems(c, obj)]
        key = c.name + (f":{obj.get('kind')}" if c is contracts.RUN_IDENTITY else "")
        seen[key] = seen.get(key, 0) + 1
    assert not bad, "\n".join(bad[:20])
    return seen


# -- the schemas themselves --------------------------------------------------------------


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: c.name)
def test_each_contract_has_a_valid_schema_of_its_current_version(c):
    s = schema_of(c)
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["properties"]["schema"] == {"const": c.tag()}  # a file of another version does not pass
    assert s["additionalProperties"] is False and "schema" in s["required"]


def test_the_schemas_are_the_shipped_ones():
    shipped = {p.name for p in (ROOT / "src" / "opscreen" / "schemas").iterdir()}
    assert shipped == {c.schema_file() for c in CONTRACTS}


# -- real outputs of this opscreen -------------------------------------------------------


@pytest.fixture(scope="module")
def screens(tmp_path_factory):
    from conftest import run_cli

    root = tmp_path_factory.mktemp("schemas")

    def ok(*args):
        res = run_cli(*args, env=FAST, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    common = ("--backend", "cpu", "--dtypes", "float32", "--plain")
    ok("run", *common, "--devices", "0,1", "--ops", "relu,add", "--out", root / "op")
    ok("run", *common, "--devices", "0", "--ops", "relu", "--repeats", "2", "--out", root / "repeats")
    ok("run", *common, "--devices", "0,1", "--ops", "relu,add", "--isolation", "worker", "--out", root / "worker")
    ok("op", "add", "--backend", "cpu", "--dtypes", "float32", "--out", root / "one")
    for d in ("op", "repeats", "worker", "one"):
        ok("summary", root / d)
    ok("calibrate", root / "op", root / "worker", "--out", root / "floors" / "floors.json")
    ok("devices", "--backend", "cpu", "--peaks", "--peaks-dir", root / "peaks")
    return root


def test_every_file_a_real_screen_writes_matches_its_schema(screens):
    seen = check_tree(screens)
    # every contract, both kinds of identity, and the per-repeat files of --repeats
    assert set(seen) == {"child_config", "result", "run_identity:op", "run_identity:run", "summary", "floors",
                         "peaks"}, seen
    assert seen["summary"] == 4 and seen["floors"] == 1 and seen["run_identity:run"] == 3 and seen["peaks"] == 1
    assert (screens / "repeats" / "ops" / "relu" / "repeats" / "2" / "result.json").is_file()
    worker = json.loads((screens / "worker" / "ops" / "add" / "result.json").read_text())
    assert worker["phases"]["mode"] == "worker"  # the worker's phases were validated too
    for c, p in contract_files(screens):  # written in the current form, not only migrated to it
        assert json.loads(p.read_text())["schema"] == c.tag(), p


def test_summary_csv_holds_the_summary_json_rows_in_the_schema_columns(screens):
    cols = schema_of(contracts.SUMMARY)["properties"]["columns"]["const"]
    assert cols == COLUMNS
    for d in ("op", "repeats", "worker", "one"):
        js = json.loads((screens / d / "summary.json").read_text())
        with open(screens / d / "summary.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        assert rows[0] == cols and len(rows) - 1 == len(js["rows"]) > 0
        for line, row in zip(rows[1:], js["rows"]):
            want = ["" if v is None else ("true" if v is True else "false" if v is False else str(v)) for v in row]
            assert [x if not _num(x) else repr(float(x)) for x in line] == \
                [x if not _num(x) else repr(float(x)) for x in want]
        r = dict(zip(cols, js["rows"][0]))
        ident = js["identity"]
        assert r["run"] == d and r["run_started_at"] == ident["started_at"]
        # the sample suite is no git checkout of its own: no commit, and the column says so
        assert r["suite_commit"] == (js["caliber"].get("suite_commit") or None)
        ok = [dict(zip(cols, x)) for x in js["rows"] if x[cols.index("status")] == "ok"]
        assert any(x["lib_ci_ms"] is not None for x in ok)  # the CPU timer records the median's interval
        for x in ok:
            if x["lib_ci_ms"] is not None:
                # ms: a half width of the latency's order (on a loaded 2-core host it can pass the
                # latency itself; a unit slip, us or a relative figure, would be 1000x off)
                assert 0 < x["lib_ci_ms"] < 20 * x["lib_ms"]
            assert x["lib_noise_pct"] is None or 0 <= x["lib_noise_pct"] < 1000  # percent


def _num(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def test_a_writer_that_drifts_from_its_schema_fails(screens):
    """The schemas are strict enough to catch drift: an added, renamed, retyped or dropped
    key of a real file, a summary row one cell short or a column renamed, each fails."""
    real = {c.name: contracts.load(c, p) for c, p in contract_files(screens)}
    assert set(real) == {c.name for c in CONTRACTS}
    for c in CONTRACTS:
        obj = real[c.name]
        assert problems(c, obj) == []
        assert problems(c, {**obj, "a_new_key": 1}), c.name
        assert problems(c, {**obj, "schema": c.tag(c.version - 1) if c.version > 1 else c.prefix + "0"}), c.name
        for key in schema_of(c)["required"]:
            assert problems(c, {k: v for k, v in obj.items() if k != key}), (c.name, key)
    res = real["result"]
    assert problems(contracts.RESULT, {**res, "duration_s": str(res["duration_s"])})
    assert problems(contracts.RESULT, {**res, "status": "passd"})
    s = copy.deepcopy(real["summary"])
    s["rows"][0] = s["rows"][0][:-1]
    assert problems(contracts.SUMMARY, s)
    s = copy.deepcopy(real["summary"])
    s["columns"] = [("lib_rsd" if c == "lib_noise_pct" else c) for c in s["columns"]]
    assert problems(contracts.SUMMARY, s)
    s = copy.deepcopy(real["summary"])
    s["rows"][0][COLUMNS.index("lib_noise_pct")] = "0.3"
    assert problems(contracts.SUMMARY, s)
    s = copy.deepcopy(real["summary"])
    s["ops"][0]["a_new_field"] = 1
    assert problems(contracts.SUMMARY, s)


# -- shipped and old files, migrated ---------------------------------------------------


def test_the_shipped_floors_table_matches():
    for p in (ROOT / "src" / "opscreen" / "assets" / "data" / "floors").glob("*.json"):
        assert problems(contracts.FLOORS, contracts.load(contracts.FLOORS, p)) == [], p


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    d = tmp_path_factory.mktemp("h200")
    with tarfile.open(H200) as tf:
        tf.extractall(d, filter="data")
    return d


def test_the_real_h200_screens_match_after_migration(h200):
    raw = [json.loads(p.read_text()) for c, p in contract_files(h200) if c is contracts.RESULT]
    assert sum(r["schema"] == 1 for r in raw) >= 60  # written before the tags
    seen = check_tree(h200)
    assert seen["result"] >= 60 and seen["child_config"] >= 60 and seen["run_identity:run"] >= 5
    # and what this opscreen summarises of them
    for run in sorted(p for p in h200.iterdir() if (p / "ops").is_dir()):
        s = json.loads(build_summary(run).to_json_text())
        assert problems(contracts.SUMMARY, s) == [], run.name
        r = dict(zip(COLUMNS, s["rows"][0]))
        assert r["run"] == run.name and r["suite_commit"] and r["run_started_at"]
        assert any(x[COLUMNS.index("lib_ci_ms")] is not None for x in s["rows"])  # the H200 records carry ci


def test_the_fixtures_match_after_migration():
    seen = check_tree(FIXTURES / "worker_ab")
    assert seen == {"result": 6}
    with gzip.open(FIXTURES / "old_outputs" / "h200-op-summary-v2.json.gz", "rt", encoding="utf-8") as fh:
        old = json.load(fh)
    assert "version" in old and problems(contracts.SUMMARY, old)  # version 2 is not version 4 ...
    assert problems(contracts.SUMMARY, contracts.upgrade(contracts.SUMMARY, old)) == []  # ... until migrated
    # a real summary 3 (opscreen abf654a~1 on the same screen): no throttled column, no op telemetry
    with gzip.open(FIXTURES / "old_outputs" / "h200-op-summary-v3.json.gz", "rt", encoding="utf-8") as fh:
        v3 = json.load(fh)
    assert v3["schema"] == "opscreen.summary/3" and problems(contracts.SUMMARY, v3)
    assert problems(contracts.SUMMARY, contracts.upgrade(contracts.SUMMARY, v3)) == []
    # a real summary 4 (opscreen 5fd1465 on the same screen): no %-of-peak columns, no peaks
    with gzip.open(FIXTURES / "old_outputs" / "h200-op-summary-v4.json.gz", "rt", encoding="utf-8") as fh:
        v4 = json.load(fh)
    assert v4["schema"] == "opscreen.summary/4" and problems(contracts.SUMMARY, v4)
    assert problems(contracts.SUMMARY, contracts.upgrade(contracts.SUMMARY, v4)) == []
