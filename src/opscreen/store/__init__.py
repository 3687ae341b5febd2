"""The results store: screens across suite commits (``opscreen store``, ``opscreen history``).

``db`` holds the schema (SQLAlchemy Core; SQLite or PostgreSQL), its version
(``"opscreen.store/2"``, :data:`opscreen.contracts.STORE`) and its migrations;
``importer`` puts a finished run's summary rows in, once; ``history`` reads a case's
series back and finds its change points and flaky verdicts. docs/store.md describes
them. Importing this package imports neither SQLAlchemy nor the change-point library.
"""
