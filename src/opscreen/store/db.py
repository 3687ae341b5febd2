"""The results store's database: its schema in SQLAlchemy Core, its version, its migrations.

One schema for SQLite (the default: one file under the user's data directory,
:func:`opscreen.settings.store_db`) and PostgreSQL (a team's shared database, through
the psycopg 3 driver: ``pip install -e '.[store-pg]'``). Tables (docs/store.md):

``meta``
    ``key``/``value``; the row ``schema`` holds the store's version,
    ``"opscreen.store/2"`` (:data:`opscreen.contracts.STORE`).
``calibers``
    one row per distinct caliber (what :data:`opscreen.results.compare.MUST_MATCH` names,
    plus the device and backend): ``key`` (its digest) and the caliber as JSON.
``runs``
    one row per imported screen: ``run_key`` (unique: what makes a second import of the
    same run add nothing), its name, start, suite commit, device, caliber and identity.
``rows``
    every row of every run's summary, in summary 4's columns (the run's columns are the
    ``runs`` row's): summary 3's and ``throttled``, whether the op's device throttled while
    it measured (NULL where that is not known: a summary before version 4, or a row imported
    by a store of version 1).

Writes take the database's write lock at the start of their transaction (SQLite:
``BEGIN IMMEDIATE`` with a busy timeout; PostgreSQL: the unique index on ``run_key`` and
an advisory lock around creating the schema), so concurrent imports from several
processes or machines serialise instead of losing or doubling a run.

A store of a newer version is refused in one line; an older one is migrated in place,
one ``MIGRATIONS[N]`` step after another, in one transaction. The store is at version 2;
its one migration, ``MIGRATIONS[2]`` (:func:`update_to_2`), adds the ``throttled`` column
to the ``rows`` of a version 1 store, NULL in every row it held.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from .. import contracts
from ..errors import UsageError, shown

__all__ = ["STORE", "ROW_COLUMNS", "MIGRATIONS", "Store", "check_url", "open_store", "normalize_url", "metadata",
           "meta", "calibers", "runs", "rows"]

STORE = contracts.STORE
#: a number of our own for pg_advisory_xact_lock while the schema is created or migrated
_PG_LOCK = 0x6F7073_33

# the rows' columns: summary 4's (contracts.SUMMARY_4_COLUMNS: summary 3's, then throttled) less
# the run's own three, which the runs table holds; a summary version that changes them needs a
# store migration (store 2 added throttled: update_to_2)
_FLOAT = ("torch_ms", "lib_ms", "speedup", "tflops", "torch_gbps", "lib_gbps", "torch_noise_pct", "lib_noise_pct",
          "torch_ci_ms", "lib_ci_ms", "torch_spread", "lib_spread", "speedup_spread", "torch_host_ms", "lib_host_ms")
_INT = ("torch_samples", "lib_samples", "repeats")
_BOOL = ("truncated",)
ROW_COLUMNS = tuple(c for c in contracts.SUMMARY_4_COLUMNS if c not in ("run", "run_started_at", "suite_commit"))


def _row_column(name: str) -> sa.Column:
    kind = sa.Float if name in _FLOAT else sa.Integer if name in _INT else sa.Boolean if name in _BOOL else sa.Text
    return sa.Column(name, kind, nullable=name not in ("op", "variant", "dtype", "shape", "status"))


metadata = sa.MetaData()
meta = sa.Table("meta", metadata, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.Text, nullable=False))
calibers = sa.Table(
    "calibers", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False, unique=True),
    sa.Column("caliber", sa.Text, nullable=False),
)
runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_key", sa.String(64), nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("started_at", sa.String(40)),
    sa.Column("suite_commit", sa.String(64)),
    sa.Column("suite_dirty", sa.Boolean),
    sa.Column("device_name", sa.Text),
    sa.Column("backend", sa.String(32)),
    sa.Column("host", sa.Text),
    sa.Column("caliber_id", sa.Integer, sa.ForeignKey("calibers.id"), nullable=False),
    sa.Column("identity", sa.Text, nullable=False),
    sa.Column("opscreen_version", sa.String(32)),
    sa.Column("source", sa.Text),
    sa.Column("row_count", sa.Integer, nullable=False),
    sa.Column("imported_at", sa.String(40), nullable=False),
)
rows = sa.Table(
    "rows", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    *(_row_column(c) for c in ROW_COLUMNS),
)
sa.Index("rows_op_run", rows.c.op, rows.c.run_id)
sa.Index("rows_run", rows.c.run_id)
sa.Index("runs_caliber_device", runs.c.caliber_id, runs.c.device_name)


def update_to_2(conn: Connection) -> None:
    """store 1 -> 2: ``rows`` gets the nullable text column ``throttled`` (summary 4's). Store 1
    did not keep it, so every row already there reads NULL: not known, as in a summary before
    version 4. The column is added last, where a new store has it too."""
    col = sa.schema.CreateColumn(rows.c.throttled).compile(dialect=conn.dialect)
    table = conn.dialect.identifier_preparer.format_table(rows)
    conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {col}"))


#: N -> update_to_N(connection): turns a store of version N-1 into version N, in place
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: update_to_2}


@dataclass
class Store:
    """An open store: the engine, and its URL as shown (the password hidden)."""

    engine: Engine
    url: str

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that holds the write lock from its start (SQLite: BEGIN IMMEDIATE)."""
        with _db_errors(self.url), self.engine.connect() as conn:
            conn.execution_options(opscreen_write=True)
            with conn.begin():
                if self.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with _db_errors(self.url), self.engine.connect() as conn, conn.begin():
            yield conn

    def close(self) -> None:
        self.engine.dispose()


@contextmanager
def _db_errors(url: str) -> Iterator[None]:
    """A database that refuses (cannot connect, not a database, locked for too long):
    one line naming the store and the driver's first line."""
    try:
        yield
    except DBAPIError as exc:
        first = (str(exc.orig) if exc.orig is not None else str(exc)).strip().splitlines() or [type(exc).__name__]
        if "locked" in first[0]:
            hint = "another process held the store's write lock for over 2 minutes; try again"
        elif url.startswith("sqlite"):
            hint = "is it a store that opscreen store add made?"
        else:
            hint = "check the URL, that the database server runs and that you may write there"
        raise UsageError(f"--db {url}: {first[0]} ({hint})") from None


def normalize_url(text: str) -> str:
    """A ``--db`` value as a URL: a plain path is a SQLite file; ``postgresql://`` uses psycopg 3."""
    if "://" not in text:
        return "sqlite:///" + os.path.abspath(os.path.expanduser(text))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is no number
        raise UsageError(f"--db {shown(text)}: not a database URL (sqlite:///PATH, or "
                         "postgresql://USER@HOST/DB)") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def _sqlite_file(url: sa.URL, create: bool, default: bool) -> None:
    """A SQLite store's file: it must exist to be read; to be written, its folder must (the
    default folder, under the data root, is made)."""
    path = url.database
    if not path or path == ":memory:":
        raise UsageError("--db sqlite: give a file (sqlite:///PATH): a store in memory keeps nothing")
    folder = os.path.dirname(os.path.abspath(path))
    if not create and not os.path.isfile(path):
        raise UsageError(f"no results store at {path}: import screens first (opscreen store add RUN_DIR...), "
                         "or name the store with --db URL")
    if create and default:
        os.makedirs(folder, exist_ok=True)
    if create and not os.path.isdir(folder):
        if os.path.exists(folder):
            raise UsageError(f"--db {path}: {folder} is not a folder; choose another --db")
        raise UsageError(f"--db {path}: the folder {folder} does not exist; make it or choose another --db")


def _engine(url: sa.URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = sa.create_engine(url, connect_args={"timeout": 120})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_conn, _record):  # SQLAlchemy begins the transactions itself (below)
            dbapi_conn.isolation_level = None
            dbapi_conn.execute("PRAGMA foreign_keys = ON")

        @sa.event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("opscreen_write") else "BEGIN")

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def check_url(db: str | None, *, create: bool, environ=None) -> tuple[sa.URL, bool]:
    """``db`` (a URL or a SQLite path; None: :func:`opscreen.settings.store_db`) as a URL the
    store can use, and whether it is the default; a one-line UsageError otherwise. Nothing is
    created but the default SQLite file's folder, and that only to ``create``."""
    from ..settings import store_db

    env = os.environ if environ is None else environ
    default = db is None
    text = store_db(env) if default else db
    if not str(text).strip():
        raise UsageError("--db '': give the store's URL (sqlite:///PATH or postgresql://USER@HOST/DB)")
    url = make_url(normalize_url(str(text)))
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise UsageError(f"--db {url.render_as_string()}: a {backend} database is not supported; use sqlite or "
                         "postgresql")
    if backend == "sqlite":
        _sqlite_file(url, create, default)
    return url, default


def open_store(db: str | None, *, create: bool, environ=None) -> Store:
    """The store at ``db`` (:func:`check_url`), its schema created (``create``, when the
    database holds none) or checked and migrated to this opscreen's version."""
    url, _default = check_url(db, create=create, environ=environ)
    try:
        engine = _engine(url)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise UsageError(f"--db {url.render_as_string()}: its driver is not installed ({exc}); for PostgreSQL: "
                         "pip install -e '.[store-pg]' in opscreen's checkout") from None
    store = Store(engine=engine, url=url.render_as_string())
    try:
        ensure_schema(store, create=create)
    except BaseException:
        store.close()
        raise
    return store


def ensure_schema(store: Store, *, create: bool) -> int:
    """Create the schema in an empty database (``create``), else check its version and run
    the migrations from it to this opscreen's; returns the version found. A store already at
    this version is checked in a read transaction: a ``history`` or a ``store list`` started
    during a long ``store add`` does not wait for the import's write lock to check it."""
    with store.read() as conn:
        if sa.inspect(conn).has_table("meta"):
            found = _check_version(conn, store.url)
            if found == STORE.version:
                return found
    with store.write() as conn:  # created or migrated under the write lock; checked again there
        if not sa.inspect(conn).has_table("meta"):
            if not create:
                raise UsageError(f"{store.url} holds no results store: import screens first "
                                 "(opscreen store add RUN_DIR... --db URL)")
            metadata.create_all(conn)
            conn.execute(sa.insert(meta).values(key="schema", value=STORE.tag()))
            return STORE.version
        found = _check_version(conn, store.url)
        v = found
        while v < STORE.version:
            v += 1
            MIGRATIONS[v](conn)
            conn.execute(sa.update(meta).where(meta.c.key == "schema").values(value=STORE.tag(v)))
        return found


def _check_version(conn: Connection, where: str) -> int:
    """The store's version; :class:`opscreen.contracts.NewerVersion` or ``Damaged`` (one line)."""
    tag = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema")).scalar_one_or_none()
    if tag is None:
        raise contracts.Damaged(f"the store at {where} has no schema row in its meta table: not a store of opscreen")
    v = contracts.version_of(STORE, {"schema": tag})
    if v is None:
        raise contracts.Damaged(f"the store at {where} says schema {tag!r}, this opscreen reads "
                                f"{STORE.tag(1)} to {STORE.tag()}")
    if v > STORE.version:
        raise contracts.NewerVersion(f"the store at {where} was written by a newer opscreen (store schema {v}, this "
                                     f"one reads up to {STORE.version}); upgrade opscreen")
    return v
