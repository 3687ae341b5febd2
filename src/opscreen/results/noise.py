"""The noise between processes: floors tables, what ``opscreen compare`` widens a row's band to.

One run's samples show the noise inside one process (a graph replay's rsd is about
0.05 %); two processes of one setup read a case further apart (memory placement, the
state a warm worker's earlier ops left). A *floors table* holds, for one device model,
how far apart two processes read, measured by ``opscreen calibrate`` on a seeded random
draw of the suite's ops, per *cell*:

* ``history``: ``rerun`` (both runs in fresh processes, the op on the same device),
  ``worker`` (both runs in warm workers, on any device: an op's reading in a worker
  depends on what the worker ran before it, and two worker screens of one draw read
  4-7 times further apart than two fresh ones on an H200), ``chip`` (a fresh rerun whose
  op ran on another device of the model in B: two chips of one model differ on a case by
  a few percent, stably, which no rerun on one chip shows) or ``cross`` (one run in fresh
  processes, the other in warm workers, on any device). A table without ``chip`` cells
  (made on one GPU) judges those rows by its ``rerun`` cells, and compare says that this
  under-covers them; a table without ``worker`` cells (floors 1, whose ``rerun`` cells
  pooled fresh and worker reruns) judges worker reruns by its ``cross`` cells, the only
  ones that saw a worker's spread, and compare says so;
* ``timer``: the row's timer group (:func:`timer_group`: ``graph``, ``profiler``,
  ``direct``, ``wallclock``, or ``mixed`` for rows whose sides or runs used different timers);
* the row's kernel latency bin: the smaller of its latencies, below or above
  :data:`BIN_EDGES_MS` (10 us);
* ``throttled``: whether either run measured the row's op while its device throttled
  (:func:`throttled_side`, opscreen.results.throttle: a power or thermal clock-event reason, or a busy SM clock under
  75 % of its maximum). A power-capped kernel's clock moves with its draw, and on an H100 at
  700 W such rows (the attention ops) read apart between two processes by p50 0.34 %, p99 5.6 %,
  where the unthrottled rows of 10 us or more read p50 0.05 %, p99 1.7 %
  (bench/results/2026-12-05-h100-calibrate-attempt.md). Their own cells keep them from widening
  the others' bands and from being judged by bands that never saw a moving clock. A table
  without a throttled cell for a throttled row, or with one that fewer ops back than the
  conservative default's (no calibrated op throttled, a few did, or a table made before
  2026-12-07), leaves it to the conservative default (:func:`judging`), and compare says so.

For each cell the table keeps the rows and distinct ops behind it, the root mean square of
``d = ln(speedup_B / speedup_A)`` over those rows (``rms``; ``rms_torch`` and ``rms_lib``
for each side's latency, since on one device model each side is judged on its own) and its quantiles, and the *band*: the wider of

* ``t(ops - 1, 1 - alpha/2) x rms``, the half-width that a row's ``|d|`` stays within on a
  rerun with probability ``1 - alpha`` when ``d`` is normal with one scale for every op.
  The t critical value (not the normal's) pays for estimating the scale from few
  processes: rows of one op share its process, so the ops, not the rows, are the
  replicates;
* ``q``: the ``1 - alpha/2`` quantile of ``|d|`` over the cell's rows with each op weighing
  the same (``q_speedup``, ``q_torch``, ``q_lib``). Ops are not alike: on a 32-op H200
  draw a few ops (``tril``, ``nanmedian_out``) spread 3-4 times wider than the rest, so
  one pooled scale under-covers them. The quantile covers what the measured ops did,
  whatever their mixture; weighing ops alike keeps an op with 200 rows from deciding it.

A row measured as the median of ``N`` processes per side (``--repeats``) gets
``band x sqrt((1/N_A + 1/N_B) / 2)``.

A device without a table gets :func:`conservative`: bands wide enough for what an H200
showed between fresh processes and warm workers, and every line of ``compare`` says a
default decided. docs/results.md explains the rule with a worked example; the file format
is in docs/contracts.md ("floors.json"). Standard library only.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .. import contracts
from ..child.autotune import differing as _picks_differing
from ..child.timed_value import timer_method
from ..errors import UsageError
from . import throttle as _throttle
from ..tables import first
from .summary import COL, NOISY, no_kernel, noisy

__all__ = [
    "FLOORS", "BIN_EDGES_MS", "DEFAULT_ALPHA", "EQ_ALPHA", "HISTORIES", "FALLBACK", "Cell", "FloorsTable", "t_critical", "timer_group",
    "history_of", "row_history", "device_uuids", "fit", "judging", "throttled_side", "op_picks", "load", "find", "conservative", "floors_dirs", "write",
]

FLOORS = contracts.FLOORS
BIN_EDGES_MS = (0.010,)  # [0, 10 us), [10 us, inf): the split two H200 sessions' A/A figures showed
DEFAULT_ALPHA = 0.01  # two-sided, per row: the expected false calls are alpha x rows on a rerun
#: the equivalence test's level: ``same`` needs the change's 1 - EQ_ALPHA interval inside the margin,
#: two one-sided tests at EQ_ALPHA / 2 = 5 % each (TOST, Schuirmann 1987: the 90 % interval of
#: bioequivalence), where ``faster``/``slower`` need the change beyond the 1 - DEFAULT_ALPHA band
EQ_ALPHA = 0.10
HISTORIES = ("rerun", "worker", "chip", "cross")
#: the history whose cells judge a history's rows when a table has none of its own: its rerun
#: cells for chip rows (made on one GPU), its cross cells for worker rows (floors 1, which pooled
#: worker reruns into rerun: the cross cells are the only ones that saw a worker's spread)
FALLBACK = {"chip": "rerun", "worker": "cross"}

# Two-sided critical values of Student's t, t(nu, 1 - alpha/2), for alpha 0.10, 0.05, 0.01,
# 0.001 (any statistics table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2); between the listed
# nu the value is interpolated linearly in 1/nu, which is exact to 3 digits here. A table,
# not scipy: the harness needs these few numbers and nothing else from it.
_T_NU = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 26, 28, 30, 40, 60, 120)
_T = {
    0.10: (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761,
           1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.717, 1.711, 1.706, 1.701, 1.697, 1.684, 1.671, 1.658, 1.645),
    0.05: (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
           2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.074, 2.064, 2.056, 2.048, 2.042, 2.021, 2.000, 1.980, 1.960),
    0.01: (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977,
           2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.819, 2.797, 2.779, 2.763, 2.750, 2.704, 2.660, 2.617, 2.576),
    0.001: (636.62, 31.599, 12.924, 8.610, 6.869, 5.959, 5.408, 5.041, 4.781, 4.587, 4.437, 4.318, 4.221, 4.140,
            4.073, 4.015, 3.965, 3.922, 3.883, 3.850, 3.792, 3.745, 3.707, 3.674, 3.646, 3.551, 3.460, 3.373, 3.291),
}


def t_critical(nu: float, alpha: float = DEFAULT_ALPHA) -> float:
    """Two-sided Student t critical value ``t(nu, 1 - alpha/2)`` for alpha in 0.10, 0.05,
    0.01, 0.001; ``nu`` below 1 is taken as 1, infinite ``nu`` gives the normal's value."""
    if alpha not in _T:
        raise UsageError(f"--alpha {alpha:g}: choose one of {', '.join(f'{a:g}' for a in sorted(_T))}")
    vals = _T[alpha]
    if nu is None or math.isinf(nu):
        return vals[-1]
    nu = max(1.0, float(nu))
    if nu >= _T_NU[-1]:  # between 120 and infinity, linear in 1/nu
        return vals[-1] + (vals[-2] - vals[-1]) * (_T_NU[-1] / nu)
    for i in range(len(_T_NU) - 1):
        a, b = _T_NU[i], _T_NU[i + 1]
        if a <= nu <= b:
            w = (1.0 / a - 1.0 / nu) / (1.0 / a - 1.0 / b)
            return vals[i] + (vals[i + 1] - vals[i]) * w
    return vals[0]


def timer_group(torch_timer: str | None, lib_timer: str | None) -> str:
    """A row side pair's timer group: the method both sides used (``graph``, ``profiler``,
    ``direct``, ``wallclock``), ``mixed`` when they differ or one fell back."""
    mt = timer_method(torch_timer) if torch_timer else None
    ml = timer_method(lib_timer) if lib_timer else None
    if mt is None or mt != ml or torch_timer != lib_timer:
        return "mixed"
    return mt


def history_of(iso_a: str | None, iso_b: str | None) -> str:
    """A pair of runs' history: ``worker`` when both ran in warm workers, ``rerun`` when
    both used another same isolation (fresh processes; unknown counts as op), else
    ``cross``. :func:`row_history` refines a rerun per op."""
    a, b = iso_a or "op", iso_b or "op"
    if a != b:
        return "cross"
    return "worker" if a == "worker" else "rerun"


def device_uuids(summary: Any) -> dict[str, str]:
    """op -> the UUID of the device it ran on, for the ops whose identity recorded one."""
    return {o.op: o.device_uuid for o in summary.ops if getattr(o, "device_uuid", None)}


def row_history(history: str, uuid_a: str | None, uuid_b: str | None) -> str:
    """An op's history in a pair of runs: ``chip`` for a ``rerun`` whose op ran on another
    device in B than in A (both runs recorded its UUID: a screen over several GPUs puts an
    op on another chip in most reruns), else the pair's history (a ``worker`` pair stays
    ``worker`` on any device: its own spread is the wider one)."""
    if history == "rerun" and uuid_a and uuid_b and uuid_a != uuid_b:
        return "chip"
    return history


def bin_of(latency_ms: float) -> tuple[float, float]:
    lo = 0.0
    for edge in BIN_EDGES_MS:
        if latency_ms < edge:
            return lo, edge
        lo = edge
    return lo, math.inf


@dataclass
class Cell:
    """One (history, timer group, latency bin) of a floors table; fractions of ln(B/A)."""

    history: str
    timer: str
    lo_ms: float
    hi_ms: float  # math.inf for the last bin (written as null)
    rows: int
    ops: int
    rms: float  # root mean square of d = ln(speedup_B / speedup_A)
    rms_lib: float  # the same of ln(lib_ms_B / lib_ms_A)
    rms_torch: float | None = None  # the same of ln(torch_ms_B / torch_ms_A) (None in tables before it: rms)
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    pairs: int = 0
    alpha: float = DEFAULT_ALPHA
    # the 1 - alpha/2 quantile of |d| with each op weighing the same (None in tables before it)
    q_speedup: float | None = None
    q_lib: float | None = None
    q_torch: float | None = None
    # the same at 1 - eq_alpha/2, for the equivalence test (None in tables before it: t x rms decides)
    eq_alpha: float = EQ_ALPHA
    q_speedup_eq: float | None = None
    q_lib_eq: float | None = None
    q_torch_eq: float | None = None
    # rows whose op either run measured while its device throttled (absent in tables before 2026-12-07: False)
    throttled: bool = False

    @property
    def nu(self) -> float:
        return math.inf if self.ops <= 0 else max(1, self.ops - 1)

    def band(self, metric: str = "speedup", n_a: int = 1, n_b: int = 1, alpha: float | None = None) -> float:
        """The half-width of ``|d|`` on a rerun at ``alpha`` (default the table's), for
        medians of ``n_a`` and ``n_b`` processes."""
        metric = {"lib_ms": "lib"}.get(metric, metric)
        scale = {"speedup": self.rms, "lib": self.rms_lib,
                 "torch": self.rms_torch if self.rms_torch is not None else self.rms}[metric]
        a = self.alpha if alpha is None else alpha
        half = t_critical(self.nu, a) * scale
        q = getattr(self, f"q_{metric}") if a == self.alpha else getattr(self, f"q_{metric}_eq") if a == self.eq_alpha else None
        if q is not None:  # measured at the table's alpha and eq_alpha only
            half = max(half, q)
        return half * math.sqrt((1.0 / max(1, n_a) + 1.0 / max(1, n_b)) / 2.0)

    def label(self) -> str:
        hi = "" if math.isinf(self.hi_ms) else f"<{self.hi_ms * 1000:g}us"
        lo = f">={self.lo_ms * 1000:g}us" if self.lo_ms > 0 else ""
        return f"{self.history}/{self.timer}/{lo}{hi}" + ("/throttled" if self.throttled else "")

    def to_json(self) -> dict:
        d = asdict(self)
        d["hi_ms"] = None if math.isinf(self.hi_ms) else self.hi_ms
        d["band"] = round(self.band(), 6)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Cell":
        known = set(cls.__dataclass_fields__)
        vals = {k: v for k, v in d.items() if k in known}
        vals["hi_ms"] = math.inf if vals.get("hi_ms") is None else float(vals["hi_ms"])
        return cls(**vals)


@dataclass
class FloorsTable:
    """A device model's cells, its provenance (how it was measured) and which devices it
    is for (``match``: a regular expression the device name must match in full)."""

    name: str
    match: str
    cells: list[Cell]
    provenance: dict = field(default_factory=dict)
    default: bool = False  # the conservative built-in table
    path: str | None = None

    def cell(self, history: str, timer: str, latency_ms: float, throttled: bool = False) -> Cell | None:
        lo, hi = bin_of(latency_ms)
        for c in self.cells:
            if (c.history == history and c.timer == timer and c.lo_ms == lo and c.hi_ms == hi
                    and bool(c.throttled) == bool(throttled)):
                return c
        return None

    def judging_cell(self, history: str, timer: str, latency_ms: float, throttled: bool = False) -> Cell | None:
        """The cell that judges a row of ``history``: its own, else the :data:`FALLBACK` history's
        (a table made on one GPU has no chip cells; a floors 1 table has no worker cells). A
        throttled row is judged by a throttled cell only: None where the table has none."""
        cell = self.cell(history, timer, latency_ms, throttled)
        if cell is None and history in FALLBACK:
            cell = self.cell(FALLBACK[history], timer, latency_ms, throttled)
        return cell

    def matches(self, device_name: str | None) -> bool:
        return bool(device_name) and re.fullmatch(self.match, str(device_name)) is not None

    def to_json(self) -> dict:
        return {"schema": FLOORS.tag(), "name": self.name, "match": self.match, "provenance": self.provenance,
                "bin_edges_ms": list(BIN_EDGES_MS), "cells": [c.to_json() for c in self.cells]}


def judging(table: "FloorsTable | None", history: str, timer: str, latency_ms: float,
            throttled: bool = False) -> tuple[Cell | None, str]:
    """The cell that judges a row and the basis it names: ``table``'s (:meth:`FloorsTable.judging_cell`,
    basis ``floors``), else the conservative default's (basis ``floors-default``): no table, no cell
    of the row's history, timer and bin in it, or a throttled row whose throttled cell fewer ops
    back than the default's cells claim (10). A calibration draws few ops that throttle (2 of 34 on
    an H100 at 700 W), and ``t(1)`` is 63.7: such a cell's band (50-65 % there) says less than the
    default's, so the better-backed of the two judges; a device whose ops throttle often gets a
    throttled cell of its own (bench/results/2026-12-05-h100-calibrate-attempt.md)."""
    cell = table.judging_cell(history, timer, latency_ms, throttled) if table is not None else None
    if cell is not None and not _too_thin(cell):
        return cell, "floors"
    return _conservative_cached().cell(history, timer, latency_ms), "floors-default"


def _quantile(sorted_vals: list[float], q: float) -> float:
    i = min(len(sorted_vals) - 1, max(0, math.ceil(q * len(sorted_vals)) - 1))
    return sorted_vals[i]


def _op_weighted_quantile(by_op: dict[str, list[float]], q: float) -> float:
    """The ``q`` quantile of ``|x|`` over every op's values, each op weighing 1 in all."""
    pts = sorted((abs(x), 1.0 / len(v)) for v in by_op.values() for x in v)
    need, acc = q * len(by_op), 0.0
    for x, w in pts:
        acc += w
        if acc >= need - 1e-9:
            return x
    return pts[-1][0]


def fit(pairs: Iterable[tuple[Any, Any, str]], *, name: str, match: str, provenance: dict,
        alpha: float = DEFAULT_ALPHA, max_noise: float = NOISY) -> FloorsTable:
    """A table from pairs of summaries ``(A, B, history)`` of the same ops: every row
    measured in both with a positive speedup and library latency falls into its cell, except
    the rows of an op whose recorded autotune picks differ between A and B (:func:`op_picks`):
    ``compare`` names their moves ``pick``, so their spread is not the noise the other ops'
    bands must cover. The ops so left out are named in the provenance (``pick_ops_left_out``:
    op -> the pairs, ``A->B``, where its picks differed). Rows noisy in A or B (:func:`noisy`)
    are left out too, and counted per op (``noisy_rows_left_out``): compare calls none of them."""
    acc: dict[tuple, dict] = {}
    n_pairs: dict[tuple, set] = {}
    left_out: dict[str, list[str]] = {}
    noisy_out: dict[str, int] = {}
    for k, (a, b, pair_history) in enumerate(pairs):
        rows_a = {_key(r): r for r in a.rows if _usable(r)}
        ua, ub = device_uuids(a), device_uuids(b)
        picked = op_picks(a, b)
        for op in sorted(picked):
            left_out.setdefault(op, []).append(f"{getattr(a, 'name', '?')}->{getattr(b, 'name', '?')}")
        for rb in b.rows:
            ra = rows_a.get(_key(rb))
            if ra is None or not _usable(rb) or rb[COL["op"]] in picked:
                continue
            if noisy(ra, limit=max_noise) or noisy(rb, limit=max_noise):
                noisy_out[rb[COL["op"]]] = noisy_out.get(rb[COL["op"]], 0) + 1
                continue
            ga = timer_group(ra[COL["torch_timer"]], ra[COL["lib_timer"]])
            group = ga if ga == timer_group(rb[COL["torch_timer"]], rb[COL["lib_timer"]]) else "mixed"
            lat = min(ra[COL["torch_ms"]], ra[COL["lib_ms"]], rb[COL["torch_ms"]], rb[COL["lib_ms"]])
            history = row_history(pair_history, ua.get(rb[COL["op"]]), ub.get(rb[COL["op"]]))
            key = (history, group, *bin_of(lat), throttled_side(ra, rb) is not None)
            e = acc.setdefault(key, {"d": [], "dl": [], "dt": [], "ops": set(), "by_op": {}})
            d = (math.log(rb[COL["speedup"]] / ra[COL["speedup"]]), math.log(rb[COL["lib_ms"]] / ra[COL["lib_ms"]]),
                 math.log(rb[COL["torch_ms"]] / ra[COL["torch_ms"]]))
            for k2, x in zip(("d", "dl", "dt"), d):
                e[k2].append(x)
                e["by_op"].setdefault((k2, rb[COL["op"]]), []).append(x)
            e["ops"].add(rb[COL["op"]])
            n_pairs.setdefault(key, set()).add(k)
    cells = []
    for key in sorted(acc, key=lambda t: (HISTORIES.index(t[0]) if t[0] in HISTORIES else 9, t[1], t[2], t[4])):
        e = acc[key]
        ad = sorted(abs(x) for x in e["d"])
        per_op = {k2: {o: v for (k, o), v in e["by_op"].items() if k == k2} for k2 in ("d", "dl", "dt")}
        qs, qe = ({k2: round(_op_weighted_quantile(vals, 1 - a / 2), 6) for k2, vals in per_op.items()}
                  for a in (alpha, EQ_ALPHA))
        cells.append(Cell(
            history=key[0], timer=key[1], lo_ms=key[2], hi_ms=key[3], rows=len(ad), ops=len(e["ops"]),
            rms=round(math.sqrt(math.fsum(x * x for x in e["d"]) / len(ad)), 6),
            rms_lib=round(math.sqrt(math.fsum(x * x for x in e["dl"]) / len(ad)), 6),
            rms_torch=round(math.sqrt(math.fsum(x * x for x in e["dt"]) / len(ad)), 6),
            p50=round(_quantile(ad, 0.5), 6), p90=round(_quantile(ad, 0.9), 6), p99=round(_quantile(ad, 0.99), 6),
            max=round(ad[-1], 6), pairs=len(n_pairs[key]), alpha=alpha,
            q_speedup=qs["d"], q_lib=qs["dl"], q_torch=qs["dt"],
            q_speedup_eq=qe["d"], q_lib_eq=qe["dl"], q_torch_eq=qe["dt"], throttled=key[4],
        ))
    if left_out:
        provenance = {**provenance, "pick_ops_left_out": left_out}
    if noisy_out:
        provenance = {**provenance, "noisy_rows_left_out": dict(sorted(noisy_out.items()))}
    return FloorsTable(name=name, match=match, cells=cells, provenance=provenance)


def throttled_side(ra: list, rb: list) -> str | None:
    """Which run measured this row while its device throttled: A, B, A+B, or None (summary.csv's
    ``throttled`` cell; empty where no telemetry was read: not throttled, as far as is known)."""
    i = COL["throttled"]
    sides = [n for n, r in (("A", ra), ("B", rb)) if _throttle.is_throttled(r[i] if i < len(r) else None)]
    return "+".join(sides) or None


def op_picks(a: Any, b: Any) -> dict[str, list[dict]]:
    """op -> the autotuned kernels' winners A and B recorded with different configs."""
    pa = {o.op: o.autotune for o in a.ops if o.autotune}
    out = {}
    for o in b.ops:
        if o.autotune and o.op in pa:
            diff = _picks_differing(pa[o.op], o.autotune)
            if diff:
                out[o.op] = diff
    return out


def ops_by_timer(summary: Any) -> dict[str, set[str]]:
    """Timer group (a floors cell's ``timer``) -> the ops with measured rows of it in ``summary``."""
    out: dict[str, set[str]] = {}
    for r in summary.rows:
        if _usable(r):
            out.setdefault(timer_group(r[COL["torch_timer"]], r[COL["lib_timer"]]), set()).add(r[COL["op"]])
    return out


def _key(r: list) -> tuple:
    return (r[COL["op"]], r[COL["variant"]] or "", r[COL["dtype"]], r[COL["shape"]])


def _usable(r: list) -> bool:
    vals = (r[COL["speedup"]], r[COL["lib_ms"]], r[COL["torch_ms"]])
    return (r[COL["status"]] == "ok" and all(isinstance(v, (int, float)) and v > 0 for v in vals)
            and not no_kernel(r[COL["lib_ms"]], r[COL["lib_timer"]]) and not no_kernel(r[COL["torch_ms"]], r[COL["torch_timer"]]))


# The built-in table for a device that has none: the widest an H200 showed between two
# processes (worker against fresh, graph rows under 10 us: rms 4.1 %), rounded up, on 10 ops.
_CONSERVATIVE = {  # (timer, below 10 us?) -> rms (log fraction)
    ("graph", True): 0.045, ("graph", False): 0.015,
    ("profiler", True): 0.06, ("profiler", False): 0.03,
    ("direct", True): 0.10, ("direct", False): 0.05,
    ("wallclock", True): 0.10, ("wallclock", False): 0.05,
    ("mixed", True): 0.10, ("mixed", False): 0.05,
}


#: the ops the conservative default's cells claim (t(9)); a throttled cell backed by fewer does not judge
CONSERVATIVE_OPS = 10


def _too_thin(cell: Cell) -> bool:
    """A throttled cell backed by fewer ops than the conservative default claims: :func:`judging`
    leaves its rows to the default."""
    return cell.throttled and cell.ops < CONSERVATIVE_OPS


def conservative() -> FloorsTable:
    """The table a device without one gets (its cells say ``ops`` 10: t(9) = 3.25), one
    set of cells for every history."""
    cells = []
    for history in HISTORIES:
        for (timer, small), rms in _CONSERVATIVE.items():
            lo, hi = (0.0, BIN_EDGES_MS[0]) if small else (BIN_EDGES_MS[0], math.inf)
            cells.append(Cell(history=history, timer=timer, lo_ms=lo, hi_ms=hi, rows=0, ops=CONSERVATIVE_OPS, rms=rms, rms_lib=rms,
                              rms_torch=rms))
    return FloorsTable(name="conservative default", match=".*", cells=cells, default=True,
                       provenance={"note": "no floors table for this device: run `opscreen calibrate` to measure one"})


@functools.lru_cache(maxsize=1)
def _conservative_cached() -> FloorsTable:
    return conservative()


def load(path: str | Path, flag: str = "--floors") -> FloorsTable:
    """Read a floors file; one-line UsageError (naming ``flag``) for anything that is not one."""
    p = Path(path)
    try:
        obj = contracts.load(FLOORS, p)
    except contracts.ContractError as exc:
        raise UsageError(f"{flag} {p}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{flag} {p}: cannot read it ({exc.strerror or exc})") from None
    try:
        cells = [Cell.from_json(c) for c in obj.get("cells") or []]
        table = FloorsTable(name=str(obj.get("name") or p.stem), match=str(obj.get("match") or ".*"), cells=cells,
                            provenance=dict(obj.get("provenance") or {}), path=str(p))
        re.compile(table.match)
    except (TypeError, ValueError, re.error) as exc:
        raise UsageError(f"{flag} {p}: not a floors table of opscreen calibrate ({exc})") from None
    return table


def floors_dirs(environ=None) -> list[Path]:
    """Where :func:`find` looks, first match wins: the user's floors dir
    (:func:`opscreen.settings.floors_dir`: what ``opscreen calibrate`` writes), then the
    tables shipped with opscreen (``assets/data/floors``)."""
    from ..settings import floors_dir

    env = os.environ if environ is None else environ
    return [Path(floors_dir(env)), Path(__file__).resolve().parent.parent / "assets" / "data" / "floors"]


def find(device_name: str | None, dirs: Iterable[Path] | None = None) -> FloorsTable | None:
    """The first floors table whose ``match`` fits the device name, in :func:`floors_dirs` order."""
    for d in dirs if dirs is not None else floors_dirs():
        try:
            files = sorted(Path(d).glob("*.json"))
        except OSError:
            continue
        for f in files:
            try:
                table = load(f)
            except UsageError:
                continue
            if table.matches(device_name):
                return table
    return None


def write(table: FloorsTable, path: str | Path) -> Path:
    contracts.write(FLOORS, path, table.to_json(), fsync=False)
    return Path(path)


def format_table(table: FloorsTable) -> list[str]:
    """The table as text lines: one per cell, the figures in percent."""
    lines = [f"floors table: {table.name} (devices matching the regular expression {table.match})"]
    for c in table.cells:
        q = " ".join(f"{n} {getattr(c, n) * 100:.2f}" for n in ("p50", "p90", "p99", "max") if getattr(c, n) is not None)
        lines.append(f"  {c.label():<28} rows {c.rows:4d} ops {c.ops:3d}  |d| % {q}  bands ±: speedup "
                     f"{c.band() * 100:.2f}%, torch {c.band('torch') * 100:.2f}%, lib {c.band('lib') * 100:.2f}% "
                     f"(alpha {c.alpha:g})")
    thin = [c for c in table.cells if _too_thin(c)]
    if thin:
        lines.append(f"  throttled cells of fewer than {CONSERVATIVE_OPS} ops ({', '.join(c.label() for c in thin)}): compare judges "
                     "those rows by the conservative default; calibrate more ops that throttle (--extends) to measure them")
    picked, loud = (table.provenance or {}).get("pick_ops_left_out"), (table.provenance or {}).get("noisy_rows_left_out")
    if picked:
        lines.append(f"  left out: the rows of {len(picked)} op(s) whose autotune picks differed in a pair "
                     f"({first(sorted(picked), 6)}): compare names their moves pick")
    if loud:
        lines.append(f"  left out: {sum(loud.values())} noisy row(s) of {len(loud)} op(s), their own samples past "
                     f"{NOISY * 100:g}% ({first(sorted(loud), 6)}): "
                     "a disturbed device; compare calls none of them")
    return lines
