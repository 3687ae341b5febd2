"""The versioned file contracts (opscreen/contracts.py, docs/contracts.md): round trip,
a newer version is one line through the real CLI, an older one is migrated, the doc's
table matches the code, and the module imports only the standard library."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opscreen import contracts
from opscreen.batch.journal import Journal
from opscreen.child import config as child_config
from opscreen.contracts import CHILD_CONFIG, CONTRACTS, RESULT, RUN_IDENTITY, SUMMARY
from opscreen.results.summary import COLUMNS, build_summary, load_summary, write_summary

sys.path.insert(0, os.path.dirname(__file__))
from synth import make_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _newer(c):
    return c.tag(c.version + 1)


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    make_run(d, n_ops=4, seed=3, statuses={f"op{i:04d}": "passed" for i in range(4)})
    return d


def _one_line_exit_2(res, *words):
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "newer opscreen" in lines[0] and "upgrade opscreen" in lines[0], lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert "Traceback" not in res.stderr


# -- round trip ----------------------------------------------------------------------


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: c.name)
def test_round_trip(tmp_path, c):
    p = tmp_path / c.filename
    obj = {"op": "abs", "nested": {"a": [1, 2.5, None]}, c.field: "stale"}
    written = contracts.write(c, p, obj)
    on_disk = json.loads(p.read_text())
    assert on_disk == written and list(on_disk)[0] == c.field and on_disk[c.field] == c.tag()
    assert contracts.load(c, p) == on_disk == contracts.read(c, p)


def test_writers_stamp_the_current_versions(tmp_path):
    j = Journal(tmp_path / "run")
    j.complete("abs", {"op": "abs", "status": "passed"})
    j.write_identity({"kind": "run", "settings": {}})
    assert json.loads((j.op_dir("abs") / "result.json").read_text())["schema"] == RESULT.tag() == 1
    assert json.loads((j.root / "run_identity.json").read_text())["schema"] == RUN_IDENTITY.tag() == "opscreen.identity/1"
    assert j.read_identity()["kind"] == "run" and set(j.scan()) == {"abs"}


# -- newer: one line ---------------------------------------------------------------


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: c.name)
def test_newer_version_raises_one_line(tmp_path, c):
    p = tmp_path / c.filename
    p.write_text(json.dumps({c.field: _newer(c), "op": "abs"}))
    with pytest.raises(contracts.NewerVersion) as info:
        contracts.read(c, p)
    msg = str(info.value)
    assert "\n" not in msg and str(p) in msg and f"{c.version + 1}" in msg and "upgrade opscreen" in msg


def test_summary_cli_on_a_run_dir_with_a_newer_identity(run_dir, cli):
    ident = json.loads((run_dir / "run_identity.json").read_text())
    ident["schema"] = "opscreen.identity/7"
    (run_dir / "run_identity.json").write_text(json.dumps(ident))
    _one_line_exit_2(cli("summary", run_dir), "run_identity.json", "schema 7")
    assert not (run_dir / "summary.json").exists() and not (run_dir / "summary.csv").exists()


def test_summary_cli_on_an_op_result_with_a_newer_schema(run_dir, cli):
    res = run_dir / "ops" / "op0002" / "result.json"
    obj = json.loads(res.read_text())
    obj["schema"] = 5
    res.write_text(json.dumps(obj))
    _one_line_exit_2(cli("summary", run_dir), "op0002", "result.json", "schema 5")
    assert not (run_dir / "summary.json").exists()


def test_compare_cli_on_a_newer_summary(run_dir, cli, tmp_path):
    write_summary(build_summary(run_dir))
    js = json.loads((run_dir / "summary.json").read_text())
    js["version"] = SUMMARY.version + 1
    (run_dir / "summary.json").write_text(json.dumps(js))
    _one_line_exit_2(cli("compare", run_dir / "summary.json", run_dir / "summary.json", "--out", tmp_path / "c.csv"),
                     f"summary version {SUMMARY.version + 1}")
    assert not (tmp_path / "c.csv").exists()


def test_run_resume_on_a_newer_identity(tmp_path, cli):
    out = tmp_path / "run"
    out.mkdir()
    ident = {"schema": "opscreen.identity/2", "kind": "run", "settings": {"backend": "cpu"}, "caliber": {}}
    (out / "run_identity.json").write_text(json.dumps(ident))
    before = sorted(p.name for p in out.iterdir())
    _one_line_exit_2(cli("run", "--out", out, "--backend", "cpu"), "run_identity.json", "schema 2")
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written, no lock taken


def test_journal_scan_refuses_a_newer_result(tmp_path):
    j = Journal(tmp_path / "run")
    j.complete("abs", {"op": "abs", "status": "passed"})
    p = j.op_dir("abs") / "result.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "schema": 2}))
    with pytest.raises(contracts.NewerVersion, match="result.json was written by a newer opscreen"):
        j.scan()


def test_child_config_newer_is_a_config_error(tmp_path):
    p = tmp_path / "child_config.json"
    p.write_text(json.dumps({"schema": 2, "timer": "graph"}))
    with pytest.raises(child_config.ConfigError, match="newer opscreen .schema 2"):
        child_config.load(str(p))
    p.write_text(json.dumps({"schema": 1, "timer": "graph"}))
    assert child_config.load(str(p))["timer"] == "graph"


# -- damaged: as before ----------------------------------------------------------------


def test_damaged_files_read_as_none_and_journal_treats_them_as_incomplete(tmp_path):
    for c in CONTRACTS:
        p = tmp_path / c.filename
        for text in ("", "{trunc", "[1, 2]", json.dumps({c.field: "x" if c.prefix else 0})):
            p.write_text(text)
            assert contracts.read(c, p) is None
            with pytest.raises(contracts.Damaged):
                contracts.load(c, p)
        assert contracts.read(c, tmp_path / "missing.json") is None
    j = Journal(tmp_path / "run")
    j.complete("abs", {"op": "abs", "status": "passed"})
    (j.op_dir("abs") / "result.json").write_text('{"schema": 1, "op": "ab')
    assert j.scan() == {} and list(j.drop_damaged()) == ["abs"]


# -- older: migrated -------------------------------------------------------------------


def test_summary_version_1_is_migrated(run_dir):
    write_summary(build_summary(run_dir))
    js = json.loads((run_dir / "summary.json").read_text())
    v2_rows = {tuple(r[:1] + r[2:]) for r in js["rows"]}
    ti, vi = js["columns"].index("test"), js["columns"].index("variant")
    js["version"] = 1
    js["columns"] = [c for c in js["columns"] if c != "test"]
    js["columns"][js["columns"].index("variant")] = "test"  # version 1 called the variant "test"
    js["rows"] = [[x for i, x in enumerate(r) if i != ti] for r in js["rows"]]
    up = contracts.upgrade(SUMMARY, js)
    assert up["version"] == 2 and "variant" in up["columns"] and "test" in up["columns"]
    (run_dir / "summary.json").write_text(json.dumps(js))
    s = load_summary(run_dir)
    assert all(r[COLUMNS.index("test")] == "" for r in s.rows)
    assert {tuple(r[:1] + r[2:]) for r in s.rows} == v2_rows and vi == COLUMNS.index("variant")


def test_files_without_a_version_field_are_version_1(tmp_path):
    for c in (CHILD_CONFIG, RESULT, RUN_IDENTITY):
        p = tmp_path / c.filename
        p.write_text(json.dumps({"op": "abs"}))
        assert contracts.read(c, p) == {"op": "abs"}


def test_migrations_run_in_order(tmp_path):
    steps = []
    c = contracts.Contract("demo", "demo.json", "schema", 3, migrations={
        2: lambda o: (steps.append(2), {**o, "b": o["a"]})[1],
        3: lambda o: (steps.append(3), {**o, "c": o["b"] + 1})[1],
    })
    assert contracts.upgrade(c, {"schema": 1, "a": 1}) == {"schema": 3, "a": 1, "b": 1, "c": 2} and steps == [2, 3]
    assert contracts.upgrade(c, {"schema": 3, "a": 1}) == {"schema": 3, "a": 1}


# -- the doc and the code agree ----------------------------------------------------------


def _doc_table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "contracts.md").read_text()
    section = text.split("## File versions", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("contract", "---"):
            rows[cells[0]] = cells
    return rows


def test_docs_table_matches_the_code():
    rows = _doc_table()
    assert set(rows) == {c.name for c in CONTRACTS}
    for c in CONTRACTS:
        _, filename, fld, version, migrations = rows[c.name]
        assert f"`{c.filename}`" in filename and fld == f"`{c.field}`"
        assert version == (f'`"{c.tag()}"`' if c.prefix else str(c.tag())), (c.name, version)
        said = {int(n) for n in re.findall(r"update_to_(\d+)", migrations)}
        assert said == set(c.migrations), (c.name, migrations)
        assert said <= set(c.versions())  # the doc names no version the code does not know
        for n in re.findall(r"\d+", version):
            assert int(n) in c.versions()


# -- standard library only ---------------------------------------------------------------


def test_contracts_imports_only_the_standard_library():
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import opscreen.contracts\n"
        "new = sorted(set(sys.modules) - before)\n"
        "print('\\n'.join(new))\n"
        "bad = [m for m in new if m.split('.')[0] not in sys.stdlib_module_names and m.split('.')[0] != '_distutils_hack'"
        " and m not in ('opscreen', 'opscreen.contracts', 'opscreen.fsio')]\n"
        "sys.exit('non-stdlib: ' + ','.join(bad) if bad else 0)\n"
    )
    # -S: no site-packages; -E: no PYTHONPATH; only src on the path
    res = subprocess.run([sys.executable, "-S", "-E", "-c", f"import sys; sys.path.insert(0, {str(SRC)!r})\n" + code],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "opscreen.contracts" in res.stdout.split()


def test_op_replay_from_a_newer_child_config(tmp_path, cli):
    first = tmp_path / "first"
    first.mkdir()
    (first / "child_config.json").write_text(json.dumps({"schema": 3, "op": "abs", "settings": {"op": "abs"}}))
    again = tmp_path / "again"
    _one_line_exit_2(cli("op", "--out", again, env={"REPLAY_FROM": str(first)}, cwd=tmp_path),
                     "REPLAY_FROM", "child_config.json", "schema 3")
    assert not again.exists()
