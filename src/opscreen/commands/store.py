"""``opscreen store add RUN_DIR...`` / ``opscreen store list``: the results store (docs/store.md)."""

from __future__ import annotations

import argparse

NAME = "store"
HELP = "import finished screens into the results store (SQLite, or a shared PostgreSQL), and list them"
DESCRIPTION = (
    "The results store keeps every row of every screen imported, with its run's identity, caliber, suite "
    "commit, device and date, for opscreen history. 'store add RUN_DIR...' imports finished runs (their "
    "summary.json, or a summary built from their logs when it is missing; nothing is written into RUN_DIR); "
    "a run already in the store adds nothing. 'store list' lists the runs it holds. The store is --db URL, "
    "else $OPSCREEN_DB, else the SQLite file store.sqlite under the user's data directory. See docs/store.md."
)
ORDER = 47


def add_db_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="URL",
                   help="the store: sqlite:///PATH (or a plain PATH), or postgresql://USER@HOST/DB (the store-pg "
                        "extra); default $OPSCREEN_DB, else <data dir>/opscreen/store.sqlite")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    sub.required = True
    a = sub.add_parser("add", help="import finished run directories (or their summary.json)",
                       description="Import finished screens: every row of each run's summary, once.")
    a.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory of opscreen run, or its summary.json")
    add_db_argument(a)
    ls = sub.add_parser("list", help="list the runs in the store", description="List the runs in the store.")
    add_db_argument(ls)


def run(args) -> int:
    from ..store.db import check_url, open_store
    from ..store.importer import read_runs

    create = args.action == "add"
    check_url(args.db, create=create)  # a bad --db before any run is read
    read = read_runs(args.run_dirs) if create else None  # every run checked before the store is touched
    store = open_store(args.db, create=create)
    try:
        return _add(store, read) if create else _list(store)
    finally:
        store.close()


def _add(store, read) -> int:
    from ..store.importer import add_one

    done = [add_one(store, p, s) for p, s in read]
    for d in done:
        print(f"{'added' if d.added else 'already in the store'}: {d.name} ({d.rows} rows) from {d.path}")
    added = [d for d in done if d.added]
    print(f"opscreen store: {len(added)} runs added ({sum(d.rows for d in added)} rows), "
          f"{len(done) - len(added)} already there; store {store.url}")
    return 0


def _list(store) -> int:
    import sqlalchemy as sa

    from ..store.db import runs
    from ..tables import emit, table

    with store.read() as conn:
        got = conn.execute(sa.select(runs.c.id, runs.c.started_at, runs.c.suite_commit, runs.c.device_name,
                                     runs.c.caliber_id, runs.c.row_count, runs.c.name)
                           .order_by(runs.c.started_at, runs.c.id)).all()
    t = table("id>", "started", "commit", "device", "caliber>", "rows>", "run")
    for r in got:
        t.row(r.id, r.started_at or "", (r.suite_commit or "")[:12], r.device_name or "", r.caliber_id, r.row_count,
              r.name)
    emit([f"store {store.url}: {len(got)} runs, {sum(r.row_count for r in got)} rows", t])
    return 0
