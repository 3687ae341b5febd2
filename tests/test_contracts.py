"""The versioned file contracts (opscreen/contracts.py, docs/contracts.md): round trip,
a newer version is one line through the real CLI, an older one is migrated, the doc's
table matches the code, and the module imports only the standard library."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tarfile
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
    assert json.loads((j.op_dir("abs") / "result.json").read_text())["schema"] == RESULT.tag() == "opscreen.result/2"
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
    js["schema"] = SUMMARY.tag(SUMMARY.version + 1)
    (run_dir / "summary.json").write_text(json.dumps(js))
    _one_line_exit_2(cli("compare", run_dir / "summary.json", run_dir / "summary.json", "--out", tmp_path / "c.csv"),
                     f"schema {SUMMARY.version + 1}")
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
    p.write_text(json.dumps({**json.loads(p.read_text()), "schema": RESULT.tag(RESULT.version + 1)}))
    with pytest.raises(contracts.NewerVersion, match="result.json was written by a newer opscreen"):
        j.scan()


def test_child_config_newer_is_a_config_error(tmp_path):
    p = tmp_path / "child_config.json"
    p.write_text(json.dumps({"schema": CHILD_CONFIG.tag(3), "timer": "graph"}))
    with pytest.raises(child_config.ConfigError, match="newer opscreen .schema 3"):
        child_config.load(str(p))
    p.write_text(json.dumps({"schema": 1, "timer": "graph"}))  # the form before the tags
    assert child_config.load(str(p)) == {"schema": CHILD_CONFIG.tag(), "timer": "graph"}


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


OLD = ROOT / "tests" / "fixtures" / "old_outputs"


def _old_summary() -> dict:
    """A real summary.json version 2: written by opscreen 0c2dc82 (before the noise in percent
    and the schema tags) for the `op` screen of bench/results/2026-12-02-h200-noise-runs.tgz."""
    with gzip.open(OLD / "h200-op-summary-v2.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_a_real_summary_version_2_is_migrated(tmp_path):
    old = _old_summary()
    assert old["version"] == 2 and old["kind"] == "opscreen.summary" and "schema" not in old
    oc = old["columns"]
    up = contracts.upgrade(SUMMARY, json.loads(json.dumps(old)))
    assert up["schema"] == SUMMARY.tag() == "opscreen.summary/5" and "version" not in up and "kind" not in up
    assert list(up)[0] == "schema"
    uc = up["columns"]
    assert "torch_rsd" not in uc and set(COLUMNS) == set(uc)
    for o, u in zip(old["rows"], up["rows"]):
        for side in ("torch", "lib"):
            was, now = o[oc.index(f"{side}_rsd")], u[uc.index(f"{side}_noise_pct")]
            assert (was is None and now is None) or now == pytest.approx(100 * was, abs=1e-6)
        assert u[uc.index("torch_ci_ms")] is None and u[uc.index("lib_ci_ms")] is None  # version 2 dropped it
        assert u[uc.index("run")] == "op" and u[uc.index("suite_commit")] == "ed2508bcb5a03000e9774734201d840ba362cd11"
        assert u[uc.index("run_started_at")] == old["identity"]["started_at"]
    # the commands read it as they read their own, and the old file stays as it was
    p = tmp_path / "summary.json"
    p.write_text(json.dumps(old))
    s = load_summary(p)
    assert len(s.rows) == len(old["rows"]) > 100 and s.name == "op"
    assert json.loads(p.read_text())["version"] == 2
    noisy = [r for r in s.rows if r[COLUMNS.index("lib_noise_pct")] is not None]
    assert noisy and all(0 < r[COLUMNS.index("lib_noise_pct")] < 100 for r in noisy)


def test_a_summary_version_3_gets_the_throttled_column_and_the_ops_telemetry_empty():
    """summary 3 -> 4: the rows get ``throttled`` and the ops ``telemetry``, ``device_state`` and
    ``throttled``, all None (version 3 recorded no telemetry); nothing else moves."""
    v3 = contracts.summary_update_to_3(contracts.summary_update_to_2(_old_summary()))
    assert v3["schema"] == "opscreen.summary/3" and list(v3["columns"]) == list(contracts.SUMMARY_3_COLUMNS)
    up = contracts.summary_update_to_4(json.loads(json.dumps(v3)))
    assert up["columns"] == [*contracts.SUMMARY_3_COLUMNS, "throttled"] == list(contracts.SUMMARY_4_COLUMNS)
    assert len(up["rows"]) == len(v3["rows"]) > 100
    assert all(r[:-1] == o and r[-1] is None for r, o in zip(up["rows"], v3["rows"]))
    assert up["ops"] and all(o["telemetry"] is None and o["device_state"] is None and o["throttled"] is None
                             for o in up["ops"])
    assert contracts.summary_update_to_4(up) == up  # a second pass adds nothing


def test_a_real_summary_version_3_is_read_with_its_rows_unknown_throttled(tmp_path):
    """A summary.json that opscreen wrote before the telemetry (abf654a~1, the `op` screen of
    bench/results/2026-12-02-h200-noise-runs.tgz): read as it was, the new cells empty."""
    with gzip.open(OLD / "h200-op-summary-v3.json.gz", "rt", encoding="utf-8") as fh:
        old = json.load(fh)
    assert old["schema"] == "opscreen.summary/3" and "throttled" not in old["columns"]
    p = tmp_path / "summary.json"
    p.write_text(json.dumps(old))
    s = load_summary(p)
    assert len(s.rows) == len(old["rows"]) > 100 and all(len(r) == len(COLUMNS) for r in s.rows)
    n = len(old["columns"])
    assert [r[:n] for r in s.rows] == old["rows"] and {r[COLUMNS.index("throttled")] for r in s.rows} == {None}
    assert s.ops and all(o.telemetry is None and o.device_state is None and o.throttled is None for o in s.ops)
    assert json.loads(p.read_text())["schema"] == "opscreen.summary/3"  # the file stays as it was


def test_a_real_summary_version_4_gets_the_peak_columns_empty(tmp_path):
    """summary 4 -> 5: a summary.json opscreen 5fd1465 wrote (before the peaks) for the `op` screen of
    bench/results/2026-12-02-h200-noise-runs.tgz: every row keeps its cells and gets the five
    %-of-peak cells empty, the head ``peaks`` None; the file on disk stays version 4."""
    with gzip.open(OLD / "h200-op-summary-v4.json.gz", "rt", encoding="utf-8") as fh:
        old = json.load(fh)
    assert old["schema"] == "opscreen.summary/4" and "peak_basis" not in old["columns"] and "peaks" not in old
    assert old["columns"] == list(contracts.SUMMARY_4_COLUMNS)
    up = contracts.upgrade(SUMMARY, json.loads(json.dumps(old)))
    assert up["schema"] == "opscreen.summary/5" and up["columns"] == COLUMNS == list(contracts.SUMMARY_5_COLUMNS)
    assert up["peaks"] is None and len(up["rows"]) == len(old["rows"]) > 100
    assert all(r == [*o, None, None, None, None, None] for r, o in zip(up["rows"], old["rows"]))
    assert contracts.summary_update_to_5(up) == up  # a second pass adds nothing
    p = tmp_path / "summary.json"
    p.write_text(json.dumps(old))
    s = load_summary(p)
    assert s.peaks is None and all(r[COLUMNS.index("lib_pct_peak")] is None for r in s.rows)
    assert any(r[COLUMNS.index("tflops")] for r in s.rows)  # rows that a peaks file would fill, left empty
    assert json.loads(p.read_text())["schema"] == "opscreen.summary/4"


def test_a_summary_version_1_is_migrated_through_2_and_3():
    old = _old_summary()
    cols = old["columns"]
    ti = cols.index("test")
    v1 = {**old, "version": 1, "columns": [("test" if c == "variant" else c) for i, c in enumerate(cols) if i != ti],
          "rows": [[x for i, x in enumerate(r) if i != ti] for r in old["rows"]]}  # version 1 called the variant "test"
    up = contracts.upgrade(SUMMARY, v1)
    assert up["schema"] == SUMMARY.tag() and "variant" in up["columns"] and "test" in up["columns"]
    uc = up["columns"]
    want = {(r[cols.index("op")], r[cols.index("variant")], r[cols.index("dtype")], r[cols.index("shape")]) for r in old["rows"]}
    assert {(r[uc.index("op")], r[uc.index("variant")], r[uc.index("dtype")], r[uc.index("shape")]) for r in up["rows"]} == want
    assert all(r[uc.index("test")] == "" for r in up["rows"])


def test_the_old_bare_numbers_are_read_as_their_version(tmp_path):
    """Files written before the tags (``"schema": 1``): the real ones of the H200 screens."""
    with tarfile.open(ROOT / "bench" / "results" / "2026-12-02-h200-noise-runs.tgz") as tf:
        tf.extractall(tmp_path, filter="data")
    op = tmp_path / "op" / "ops" / "arccos"
    for c in (CHILD_CONFIG, RESULT):
        raw = json.loads((op / c.filename).read_text())
        assert raw["schema"] == 1
        up = contracts.load(c, op / c.filename)
        assert up["schema"] == c.tag() and {k: v for k, v in up.items() if k != "schema"} == \
            {k: v for k, v in raw.items() if k != "schema"}
    assert contracts.version_of(RESULT, {"schema": 1}) == 1 and contracts.version_of(RESULT, {"schema": "opscreen.result/1"}) == 1
    assert contracts.version_of(RESULT, {"schema": "opscreen.summary/1"}) is None  # another contract's tag
    assert contracts.version_of(SUMMARY, {"version": 2}) == 2 and contracts.version_of(SUMMARY, {"schema": "opscreen.summary/3"}) == 3


def test_every_contract_writes_one_convention():
    for c in CONTRACTS:
        assert c.field == "schema" and c.prefix == f"opscreen.{c.name.replace('run_identity', 'identity')}/"
        assert c.tag() == f"{c.prefix}{c.version}"


def test_files_without_a_version_field_are_version_1(tmp_path):
    for c in (CHILD_CONFIG, RESULT, RUN_IDENTITY):
        p = tmp_path / c.filename
        p.write_text(json.dumps({"op": "abs"}))
        # version 1, migrated to the current one where that is newer
        assert contracts.read(c, p) == ({"op": "abs"} if c.version == 1 else {"op": "abs", "schema": c.tag()})


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
