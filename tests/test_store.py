"""The results store (opscreen store add/list; src/opscreen/store/): every row of a run once,
idempotent imports, concurrent imports from several processes, bad input, the schema's
version; each on SQLite and on a throwaway PostgreSQL server (tests/pgserver.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from opscreen import contracts
from opscreen.results.summary import COLUMNS, RUN_COLUMNS, build_summary
from opscreen.store import db as store_db
from opscreen.store.db import open_store
from storesynth import commit, db_url, pg_server, screens  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def counts(url: str) -> tuple[int, int]:
    store = open_store(url, create=False)
    try:
        with store.read() as conn:
            n_runs = conn.execute(sa.select(sa.func.count()).select_from(store_db.runs)).scalar_one()
            n_rows = conn.execute(sa.select(sa.func.count()).select_from(store_db.rows)).scalar_one()
    finally:
        store.close()
    return n_runs, n_rows


def one_line_exit_2(res) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_add_imports_every_row_with_its_run(tmp_path, db_url, cli):
    runs = screens(tmp_path, 2)
    res = cli("store", "add", *runs, "--db", db_url)
    assert res.returncode == 0, res.stderr
    assert "2 runs added" in res.stdout
    want = [build_summary(r) for r in runs]
    assert counts(db_url) == (2, sum(len(s.rows) for s in want))
    store = open_store(db_url, create=False)
    with store.read() as conn:
        got = conn.execute(sa.select(store_db.runs).order_by(store_db.runs.c.started_at)).all()
        rows = conn.execute(sa.select(store_db.rows).where(store_db.rows.c.run_id == got[0].id)).all()
        cal = json.loads(conn.execute(sa.select(store_db.calibers.c.caliber)).scalar_one())
    store.close()
    assert [g.suite_commit for g in got] == [commit(0), commit(1)]
    assert [g.started_at for g in got] == [s.identity["started_at"] for s in want]
    assert {g.device_name for g in got} == {"Synthetic GPU"} and cal["timer"] == "graph"
    assert json.loads(got[0].identity)["host"] == "synth"
    # the rows are the summary's, cell for cell (the run's own columns live in runs)
    def key(r):
        return (r["op"], r["variant"] or "", r["dtype"], r["shape"])
    mine = {key(dict(zip(COLUMNS, r))): dict(zip(COLUMNS, r)) for r in want[0].rows}
    assert len(rows) == len(mine)
    for r in rows:
        m = r._mapping
        ref = mine[key(m)]
        for c in store_db.ROW_COLUMNS:
            want_c = ref[c]
            if c == "variant":
                want_c = want_c or ""
            elif c == "truncated":
                want_c = bool(want_c)
            elif c in ("device", "test") and want_c is not None:
                want_c = str(want_c)
            assert m[c] == want_c, (c, m[c], want_c)


def test_importing_twice_adds_nothing(tmp_path, db_url, cli):
    runs = screens(tmp_path, 2)
    assert cli("store", "add", runs[0], "--db", db_url).returncode == 0
    before = counts(db_url)
    again = cli("store", "add", runs[0], "--db", db_url)
    assert again.returncode == 0 and "0 runs added" in again.stdout and "already in the store" in again.stdout
    copy = tmp_path / "elsewhere" / "renamed"  # the same screen copied and renamed is the same screen
    shutil.copytree(runs[0], copy)
    assert "0 runs added" in cli("store", "add", copy, "--db", db_url).stdout
    assert cli("summary", runs[0]).returncode == 0  # and through its summary.json
    assert "0 runs added" in cli("store", "add", runs[0] / "summary.json", "--db", db_url).stdout
    assert counts(db_url) == before
    res = cli("store", "add", runs[0], runs[1], "--db", db_url)
    assert "1 runs added" in res.stdout
    assert counts(db_url)[0] == 2


def test_a_run_without_summary_is_summarised_in_memory(tmp_path, cli):
    run = screens(tmp_path, 1)[0]
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    assert not (run / "summary.json").exists()
    assert cli("store", "add", run, "--db", url).returncode == 0
    assert not (run / "summary.json").exists() and not (run / "summary.csv").exists()  # nothing written into it
    assert counts(url)[1] == len(build_summary(run).rows)


def _worker_script(url: str, paths: list[Path]) -> list[str]:
    return [sys.executable, "-m", "opscreen", "store", "add", *map(str, paths), "--db", url]


def test_concurrent_imports_from_several_processes_lose_nothing(tmp_path, db_url):
    """Six processes start at once; each imports three of eight screens (every screen by two or
    three of them): the store ends with each screen once and all its rows."""
    runs = screens(tmp_path, 8, noise_sd=0)
    for r in runs:  # summaries made beforehand, so that the imports themselves overlap
        subprocess.run([sys.executable, "-m", "opscreen", "summary", str(r)], capture_output=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(SRC)})
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    assert subprocess.run(_worker_script(db_url, [runs[0]]), capture_output=True, env=env).returncode == 0
    go = tmp_path / "go"
    procs = []
    for k in range(6):
        mine = [runs[(k + j) % 8] for j in range(3)]
        # each waits for the same file, so that all six write at the same moment
        code = (f"import os, sys, time, runpy\nwhile not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
                f"sys.argv = {['opscreen', 'store', 'add', *map(str, mine), '--db', db_url]!r}\n"
                "runpy.run_module('opscreen', run_name='__main__')\n")
        procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    go.write_text("")
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    added = sum(int(re.search(r"(\d+) runs added", o[0]).group(1)) for o in outs)
    assert added == 7  # runs[0] was in before; every other screen added by exactly one process
    rows_each = len(build_summary(runs[0]).rows)
    assert counts(db_url) == (8, 8 * rows_each)


def test_history_and_list_read_while_an_import_holds_the_write_lock(tmp_path, db_url):
    """A store at this version is checked in a read transaction: while another process holds
    the write lock mid-import (SQLite: BEGIN IMMEDIATE, with a busy timeout of 120 s),
    ``history`` and ``store list`` answer at once instead of waiting for it."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    runs = screens(tmp_path, 3, noise_sd=0)
    subprocess.run([sys.executable, "-m", "opscreen", "store", "add", *map(str, runs), "--db", db_url],
                   capture_output=True, check=True, env=env)
    store = open_store(db_url, create=False)
    try:
        with store.write() as conn:  # an import's transaction, a row written and not committed
            conn.execute(sa.insert(store_db.meta).values(key="held", value="by this test"))
            for argv in (["history", "--json"], ["store", "list"]):
                res = subprocess.run([sys.executable, "-m", "opscreen", *argv, "--db", db_url],
                                     capture_output=True, text=True, env=env, timeout=60)
                assert res.returncode == 0, res.stderr
    finally:
        store.close()


def test_an_unfinished_run_is_refused_and_nothing_is_written(tmp_path, cli):
    good, bad = screens(tmp_path, 2)
    (bad / "ops" / "abs" / "result.json").unlink()
    (bad / "ops" / "abs" / ".complete").unlink()
    lines = (bad / "ops_status.csv").read_text().splitlines()
    (bad / "ops_status.csv").write_text("\n".join(ln for ln in lines if not ln.startswith("abs,")) + "\n")
    url = f"sqlite:///{tmp_path / 'new' / 's.sqlite'}"
    (tmp_path / "new").mkdir()
    line = one_line_exit_2(cli("store", "add", good, bad, "--db", url))
    assert "is not a finished screen" in line and "opscreen run --resume" in line
    assert not (tmp_path / "new" / "s.sqlite").exists()  # the good run was not imported either


def test_a_run_stopped_between_ops_is_refused_and_every_op_left_is_counted(tmp_path, cli):
    """A run stopped by SIGINT lists the ops it never reached as not_run in ops_status.csv (and the
    one it stopped in as interrupted): all of them are ops not finished."""
    good, bad = screens(tmp_path, 2)
    lines = (bad / "ops_status.csv").read_text().splitlines()
    head = lines[0].split(",")
    left = []
    for i in (1, 2):  # the first two ops, as the journal writes an op the run never reached
        f = dict(zip(head, lines[i].split(",")))
        left.append(f["op"])
        shutil.rmtree(bad / "ops" / f["op"])
        f.update(status="not_run", attempts="0", dtype_level="", duration_s="", device="", timer="", error="", path="")
        lines[i] = ",".join(f[h] for h in head)
    (bad / "ops_status.csv").write_text("\n".join(lines) + "\n")
    url = f"sqlite:///{tmp_path / 'new' / 's.sqlite'}"
    (tmp_path / "new").mkdir()
    line = one_line_exit_2(cli("store", "add", good, bad, "--db", url))
    assert f"is not a finished screen: 2 ops not finished ({', '.join(left)})" in line, line
    assert not (tmp_path / "new" / "s.sqlite").exists()


@pytest.mark.parametrize("what", ["missing", "op dir", "bad url", "no folder", "not a db", "mysql"])
def test_bad_input_is_one_line_exit_2(tmp_path, cli, what):
    run = screens(tmp_path, 1)[0]
    junk = tmp_path / "junk.txt"
    junk.write_text("not a database\n" * 100)
    args = {
        "missing": (tmp_path / "nope", f"sqlite:///{tmp_path / 's.sqlite'}"),
        "op dir": (run / "ops" / "abs", f"sqlite:///{tmp_path / 's.sqlite'}"),
        "bad url": (run, "postgresql://:::"),
        "no folder": (run, str(tmp_path / "no" / "such" / "s.sqlite")),
        "not a db": (run, str(junk)),
        "mysql": (run, "mysql://u@localhost/db"),
    }[what]
    line = one_line_exit_2(cli("store", "add", args[0], "--db", args[1]))
    assert line.startswith("opscreen store: ")
    assert not (tmp_path / "s.sqlite").exists()
    assert junk.read_text().startswith("not a database")


def test_history_on_a_missing_store_says_how_to_make_one(tmp_path, cli):
    line = one_line_exit_2(cli("history", "--db", tmp_path / "none.sqlite"))
    assert "opscreen store add" in line
    assert not (tmp_path / "none.sqlite").exists()


def test_a_newer_store_is_refused_in_one_line(tmp_path, db_url, cli):
    run = screens(tmp_path, 1)[0]
    assert cli("store", "add", run, "--db", db_url).returncode == 0
    eng = sa.create_engine(db_url)
    with eng.begin() as conn:
        conn.execute(sa.update(store_db.meta).where(store_db.meta.c.key == "schema")
                     .values(value=f"opscreen.store/{contracts.STORE.version + 1}"))
    eng.dispose()
    for args in (("store", "add", run), ("history",), ("store", "list")):
        line = one_line_exit_2(cli(*args, "--db", db_url))
        assert (f"newer opscreen (store schema {contracts.STORE.version + 1}, this one reads up to "
                f"{contracts.STORE.version}); upgrade opscreen") in line


def test_the_schema_is_created_once_with_its_version(tmp_path, db_url):
    store = open_store(db_url, create=True)
    with store.read() as conn:
        tag = conn.execute(sa.select(store_db.meta.c.value).where(store_db.meta.c.key == "schema")).scalar_one()
    store.close()
    assert tag == "opscreen.store/2" == contracts.STORE.tag()
    assert store_db.ensure_schema(open_store(db_url, create=False), create=False) == 2


def test_store_list_shows_the_runs(tmp_path, db_url, cli):
    runs = screens(tmp_path, 2)
    cli("store", "add", *runs, "--db", db_url)
    res = cli("store", "list", "--db", db_url)
    assert res.returncode == 0
    assert "2 runs" in res.stdout and commit(1)[:12] in res.stdout and "screen-001" in res.stdout


def test_the_rows_columns_are_summary_4s_less_the_runs():
    """Store version 2 keeps summary 4's columns (summary 3's and ``throttled``; the run's own
    three are in runs); a column a later summary version adds is not kept until a store version
    adds it with its migration, but every column kept must still be one the summary has (the
    importer reads it by name)."""
    assert list(store_db.ROW_COLUMNS) == [c for c in contracts.SUMMARY_4_COLUMNS if c not in RUN_COLUMNS]
    assert set(store_db.ROW_COLUMNS) <= set(COLUMNS)
    assert [c.name for c in store_db.rows.columns] == ["run_id", *store_db.ROW_COLUMNS]


def test_docs_name_the_stores_version():
    text = (ROOT / "docs" / "contracts.md").read_text()
    section = text.split("## Results store", 1)[1].split("\n## ", 1)[0]
    assert f'`"{contracts.STORE.tag()}"`' in section
    for table in store_db.metadata.sorted_tables:
        assert f"`{table.name}`" in section, table.name
    said = {int(n) for n in re.findall(r"update_to_(\d+)", section)}
    assert said == set(store_db.MIGRATIONS)


def test_two_screens_started_together_are_two_runs(tmp_path):
    """Same start, same host (two screens at once on one machine), another caliber: two runs."""
    a = screens(tmp_path / "a", 1, caliber={"level": "core"})[0]
    b = screens(tmp_path / "b", 1, caliber={"level": "comprehensive"})[0]
    assert json.loads((a / "run_identity.json").read_text())["started_at"] == \
        json.loads((b / "run_identity.json").read_text())["started_at"]
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    store = open_store(url, create=True)
    from opscreen.store.importer import add_runs
    assert [d.added for d in add_runs(store, [str(a), str(b), str(a)])] == [True, True, False]
    store.close()
    assert counts(url)[0] == 2


V1_STORE = ROOT / "tests" / "fixtures" / "old_outputs" / "store-v1.sqlite"


def throttle_op(run: Path, op: str, cell: str = "sw_power_cap 40%") -> None:
    """Give ``op`` of ``run`` the telemetry of an op measured while its device throttled
    (NVML read a power cap in 40 % of the samples): its rows' ``throttled`` cell reads ``cell``."""
    path = run / "ops" / op / "result.json"
    result = json.loads(path.read_text())
    result["telemetry"] = {"source": "nvml", "samples": 10, "reasons": {"sw_power_cap": 0.4},
                           "max_sm_clock_mhz": 1980, "sm_clock_busy_mhz": {"median": 1980}}
    path.write_text(json.dumps(result))
    rows = build_summary(run).rows
    assert rows and {r[COLUMNS.index("throttled")] for r in rows if r[0] == op} == {cell}


def test_a_version_1_store_is_migrated_in_place_and_keeps_throttled_from_then_on(tmp_path, cli):
    """tests/fixtures/old_outputs/store-v1.sqlite is a store that opscreen at store version 1 made
    (two synthetic screens, 48 rows). Reading it migrates it to version 2 in place: its rows
    stay, with ``throttled`` NULL (not known); a screen imported after keeps each row's cell."""
    path = tmp_path / "store.sqlite"
    shutil.copy(V1_STORE, path)
    url = f"sqlite:///{path}"
    eng = sa.create_engine(url)
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM meta WHERE key = 'schema'")).scalar_one() == "opscreen.store/1"
        assert "throttled" not in {r[1] for r in conn.execute(sa.text("PRAGMA table_info(rows)"))}
    res = cli("store", "list", "--db", url)
    assert res.returncode == 0 and "2 runs" in res.stdout, res.stdout + res.stderr
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM meta WHERE key = 'schema'")).scalar_one() == "opscreen.store/2"
        cols = [r[1] for r in conn.execute(sa.text("PRAGMA table_info(rows)"))]
        assert cols == [c.name for c in store_db.rows.columns]  # the column lands where a new store has it
        assert conn.execute(sa.text("SELECT count(*), count(throttled) FROM rows")).one() == (48, 0)
    run = screens(tmp_path, 1, first=2)[0]
    throttle_op(run, "abs")
    assert cli("store", "add", str(run), "--db", url).returncode == 0
    with eng.connect() as conn:
        got = dict(conn.execute(sa.text("SELECT op, group_concat(DISTINCT coalesce(throttled, '-')) FROM rows "
                                        "JOIN runs ON runs.id = rows.run_id WHERE runs.name = 'screen-002' "
                                        "GROUP BY op")).all())
    eng.dispose()
    assert got == {"abs": "sw_power_cap 40%", "add": "-", "mm": "-"}  # no telemetry: NULL, not "no"
    assert counts(url) == (3, 72)


def test_an_import_keeps_each_rows_throttled_cell(tmp_path, db_url):
    run = screens(tmp_path, 1)[0]
    throttle_op(run, "mm")
    from opscreen.store.importer import add_runs
    store = open_store(db_url, create=True)
    try:
        add_runs(store, [str(run)])
        with store.read() as conn:
            got = conn.execute(sa.select(store_db.rows.c.op, store_db.rows.c.throttled)).all()
    finally:
        store.close()
    assert {op for op, t in got if t == "sw_power_cap 40%"} == {"mm"}
    assert {t for op, t in got if op != "mm"} == {None}


def test_update_to_2_runs_on_each_database(tmp_path, db_url, cli):
    """The migration's DDL on SQLite and PostgreSQL alike: a store taken back to version 1's
    shape (its ``rows`` without ``throttled``, its schema row at 1) opens as version 2 again,
    with its rows and the column where a new store has it."""
    run = screens(tmp_path, 1)[0]
    throttle_op(run, "abs")
    assert cli("store", "add", str(run), "--db", db_url).returncode == 0
    eng = sa.create_engine(db_url)
    with eng.begin() as conn:
        conn.execute(sa.text("ALTER TABLE rows DROP COLUMN throttled"))
        conn.execute(sa.update(store_db.meta).where(store_db.meta.c.key == "schema").values(value="opscreen.store/1"))
    res = cli("store", "list", "--db", db_url)
    assert res.returncode == 0 and "screen-000" in res.stdout, res.stdout + res.stderr
    with eng.connect() as conn:
        assert conn.execute(sa.select(store_db.meta.c.value).where(store_db.meta.c.key == "schema")).scalar_one() \
            == contracts.STORE.tag()
        cols = [c["name"] for c in sa.inspect(conn).get_columns("rows")]
        assert conn.execute(sa.text("SELECT count(*), count(throttled) FROM rows")).one() == (24, 0)
    eng.dispose()
    assert cols == [c.name for c in store_db.rows.columns]
