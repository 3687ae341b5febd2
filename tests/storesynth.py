"""Screens over suite commits for the store's tests: synthetic run dirs (tests/synth.py) of the
same cases, one per commit, with a noise between runs and steps injected at chosen commits;
a floors table of a chosen width; the store fixtures (SQLite and a throwaway PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import uuid
from pathlib import Path
from typing import Callable

import pytest

from opscreen.results import noise
from synth import make_run

DEVICE = "Synthetic GPU"  # no shipped floors table matches it: a test's table, or the conservative default
OPS = ("abs", "add", "mm")


def commit(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def screens(root: Path, n: int, *, factor: Callable[[int, str, str, int], float] | None = None,
            noise_sd: float = 0.004, seed: int = 0, device: str = DEVICE, ops=OPS, first: int = 0,
            caliber: dict | None = None, commits: list[str] | None = None,
            day: Callable[[int], int] | None = None) -> list[Path]:
    """``n`` finished screens of the same cases at commits ``first .. first + n - 1`` (run ``i``
    started on day ``i``, or ``day(i)``; its suite commit :func:`commit` ``(i)``, or ``commits[i]``),
    each case's library latency times ``exp(N(0, noise_sd))`` and times ``factor(i, op, dtype, shape_index)``."""
    out = []
    for i in range(first, first + n):
        rng = random.Random(f"{seed}:{i}")

        def perturb(op, dtype, si, lib_ms, i=i, rng=rng):
            f = math.exp(rng.gauss(0.0, noise_sd)) if noise_sd else 1.0
            return lib_ms * f * (factor(i, op, dtype, si) if factor else 1.0)

        d = root / f"screen-{i:03d}"
        cal = {"suite_commit": commits[i] if commits else commit(i), "device_name": device, **(caliber or {})}
        make_run(d, n_ops=len(ops), op_names=list(ops), seed=seed, dtypes=("float16", "float32"), shapes=(3, 4),
                 perturb=perturb, caliber=cal, fail_rate=0, timeout_rate=0, fatal_rate=0)
        ident = json.loads((d / "run_identity.json").read_text())
        d_ = day(i) if day else i
        ident["started_at"] = f"2026-{1 + d_ // 28:02d}-{1 + d_ % 28:02d}T08:00:00Z"
        ident["state"] = "finished"
        (d / "run_identity.json").write_text(json.dumps(ident, indent=1))
        out.append(d)
    return out


def floors_table(path: Path, rms: float, device: str = DEVICE) -> Path:
    """A floors table for ``device`` whose every rerun cell has scale ``rms`` from 10 ops
    (band = t(9, 0.995) x rms = 3.25 x rms)."""
    cells = []
    for timer in ("graph", "profiler", "direct", "wallclock", "mixed"):
        for lo, hi in ((0.0, noise.BIN_EDGES_MS[0]), (noise.BIN_EDGES_MS[0], math.inf)):
            cells.append(noise.Cell(history="rerun", timer=timer, lo_ms=lo, hi_ms=hi, rows=100, ops=10, rms=rms,
                                    rms_lib=rms, rms_torch=rms))
    table = noise.FloorsTable(name=f"test table rms {rms}", match=device, cells=cells,
                              provenance={"note": "made by tests/storesynth.py"})
    return noise.write(table, path)


# ---------------------------------------------------------------- the stores


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for the session; skipped when none can be started, failed under CI."""
    import pgserver

    try:
        server = pgserver.start()
    except pgserver.Unavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no PostgreSQL server for the store's tests: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A new, empty store: a SQLite file under tmp_path, or a fresh database on the session's server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    server = request.getfixturevalue("pg_server")
    return server.create_database("t_" + uuid.uuid4().hex[:12])
