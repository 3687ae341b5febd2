"""``opscreen history``: each case's series over suite commits, its change points, flaky cases.

A *series* is one case (op, variant, dtype, shape) across the store's runs of one
caliber on one device model, ordered by the runs' start. Its values are the metric
(the speedup over torch by default, or the library's latency) in log space, so a step
is a ratio.

Change points: asv's step detection (``asv.step_detect``: a penalised piecewise-constant
fit, the Potts model, with an L1 cost) proposes the segments, its penalty per jump set by
the case's band; then the noise model decides which of their boundaries are changes. A
boundary whose step is within the case's *band* is no change, and its two segments merge
into one; so does an inner segment of fewer than ``min_size`` runs (one odd run between
two levels is an outlier, not a level). The band is the widest of

* the case's cell of the device's floors table (``results/noise.py``: found by the
  device's name; history ``rerun``, the case's timer group and latency bin), at one
  process per side: how far two processes of one setup read this kind of case apart;
  a device without a table, or a cell the table lacks, gets the conservative default.
  A case that any run with a value measured while its device throttled (the store's
  ``throttled`` column, summary 4 on) is judged as compare judges a throttled row: by the
  table's throttled cell when one backed by 10 ops or more is there, else by the
  conservative default (``noise.judging``); a step of such a case may be the throttle's;
* ``k`` times the samples' own noise of two runs (the median over the series);
* the minimum practical change (``--min-change``, 1 % as in compare).

A last segment shorter than ``min_size`` is still reported, as *pending*: the latest
screens moved, and the next one will say whether they stay there. A first segment that
short is reported too, as *early*: the series' first screens read on another level than
all that follow, and only a screen of an earlier commit (or a rerun of the first) tells a
change from an odd first run. Merging it away instead hid a real ×4.6 step after the
first run of a real history (bench/results/2026-12-03-h200-telemetry-peaks-history-pad.md).

A case is *flaky* when its verdict between consecutive runs flips back and forth: a
move beyond the band (or the case breaking or passing again) one way, then the other,
then the first again (``FLAKY_FLIPS`` reversals). A step and its revert is one reversal,
not a flaky case. A flaky case's change points are not reported as changes.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import sys
import types
from dataclasses import asdict, dataclass, field
from typing import Callable

import sqlalchemy as sa

from ..errors import UsageError
from ..results import noise as _noise
from ..results import throttle as _throttle
from ..results.summary import no_kernel
from ..tables import Grid, grid_text
from .db import Store, calibers, rows, runs

__all__ = ["Point", "ChangePoint", "CaseHistory", "History", "load_history", "detect", "FLAKY_FLIPS",
           "DEFAULT_MIN_SIZE", "DEFAULT_MIN_CHANGE", "METRICS", "format_history", "series_text"]

FLAKY_FLIPS = 2
DEFAULT_MIN_SIZE = 2
DEFAULT_MIN_CHANGE = 0.01
DEFAULT_K = 2.0
#: the metric -> (its column, the floors scale, +1 when a larger value is faster)
METRICS = {"speedup": ("speedup", "speedup", +1), "lib_ms": ("lib_ms", "lib", -1)}


@dataclass
class Point:
    """One run's value of a case (``value`` None: not measured there; ``status`` says why)."""

    run: int  # index into History.runs
    value: float | None
    status: str
    noise_pct: float | None = None
    # the row's throttled cell (summary 4 on): the reasons, "no", or None (not known: an older
    # summary, no telemetry, or a row a store of version 1 imported)
    throttled: str | None = None

    @property
    def was_throttled(self) -> bool:
        return _throttle.is_throttled(self.throttled)


@dataclass
class ChangePoint:
    """A step between two segments of a series: the change lies in ``(before_commit, after_commit]``."""

    at: int  # index (into History.runs) of the first run after the step
    before_commit: str | None
    after_commit: str | None
    before: float  # the segments' levels (medians), in the metric's unit
    after: float
    step: float  # after / before - 1
    direction: str  # faster | slower
    band: float  # the band it beat, a fraction (of ln)
    basis: str  # floors | floors-default | samples | min-change
    cell: str | None
    n_before: int
    n_after: int
    separated: bool  # no run before reads on the far side of any run after
    pending: bool  # fewer than min_size runs after it: the next screens confirm it
    early: bool = False  # fewer than min_size runs before it: a screen of an earlier commit confirms it
    throttled: int = 0  # the case's runs (with a value) measured while the device throttled: judged as throttled

    def tags(self) -> str:
        """`` (early)``, `` (pending)``, both or neither: what the change's direction is shown with."""
        return (" (early)" if self.early else "") + (" (pending)" if self.pending else "")

    def evidence(self) -> str:
        ratio = abs(math.log1p(self.step)) / self.band if self.band > 0 else math.inf
        over = "no run before overlaps a run after" if self.separated else "single runs overlap"
        pend = f"; pending: {self.n_after} run after it" if self.pending else ""
        if self.early:
            pend += f"; early: {self.n_before} run before it"
        runs = "run" if self.n_before == 1 else "runs"
        return (f"{self.n_before} {runs} at {self.before:.4g}, {self.n_after} at {self.after:.4g}; {ratio:.1f}x the "
                f"band ±{self.band * 100:.2f}% ({_basis_text(self.basis, self.cell, self.throttled)}); {over}{pend}")


@dataclass
class CaseHistory:
    op: str
    variant: str
    dtype: str
    shape: str
    test: str | None
    points: list[Point]
    band: float = 0.0
    basis: str = ""
    cell: str | None = None
    changes: list[ChangePoint] = field(default_factory=list)
    flips: int = 0
    moves: list[int] = field(default_factory=list)  # per consecutive pair: +1 faster/fixed, -1 slower/broke, 0
    # per point: (torch_ms, lib_ms, torch_timer, lib_timer), the band's inputs (not in the JSON)
    timing: list[tuple] = field(default_factory=list, repr=False)

    @property
    def flaky(self) -> bool:
        return self.flips >= FLAKY_FLIPS

    @property
    def throttled_runs(self) -> int:
        """How many of its runs with a value measured it while the device throttled: any, and
        the case is judged as throttled (:func:`case_band`)."""
        return sum(1 for p in self.points if p.value is not None and p.was_throttled)

    def basis_text(self) -> str:
        """What set the band: its basis, its floors cell and, for a case judged as throttled, in how many runs."""
        return _basis_text(self.basis, self.cell, self.throttled_runs)

    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.variant, self.dtype, self.shape)


@dataclass
class History:
    caliber_id: int
    caliber: dict
    device: str | None
    metric: str
    runs: list[dict]  # id, name, started_at, suite_commit
    cases: list[CaseHistory]
    table: str  # the floors table's name (or "conservative default")
    other_calibers: list[dict] = field(default_factory=list)  # id, runs, caliber
    ordered_by: str = "run start"  # how the runs are ordered: their start, or their commits' dates (--repo)
    floors_history: str = "rerun"  # the floors history two runs of the caliber have (worker for warm workers)

    def to_json(self) -> dict:
        d = asdict(self)
        for c, case in zip(d["cases"], self.cases):
            c.pop("timing", None)
            c["flaky"] = case.flaky
            c["throttled_runs"] = case.throttled_runs
            for ch, obj in zip(c["changes"], case.changes):
                ch["evidence"] = obj.evidence()
        return d


# ---------------------------------------------------------------- reading the store


def _calibers(conn, op: str | None, device: str | None) -> list[dict]:
    """The calibers with runs (of ``op``, on ``device``): id, runs, latest start, caliber."""
    q = (sa.select(runs.c.caliber_id, sa.func.count(sa.distinct(runs.c.id)), sa.func.max(runs.c.started_at),
                   calibers.c.caliber)
         .join(calibers, calibers.c.id == runs.c.caliber_id).group_by(runs.c.caliber_id, calibers.c.caliber))
    if device is not None:
        q = q.where(runs.c.device_name == device)
    if op is not None:
        q = q.where(sa.exists().where(rows.c.run_id == runs.c.id, rows.c.op == op))
    out = [{"id": i, "runs": n, "latest": last or "", "caliber": json.loads(cal)} for i, n, last, cal in conn.execute(q)]
    return sorted(out, key=lambda c: (c["latest"], c["id"]), reverse=True)


def _basis_text(basis: str, cell: str | None, throttled: int) -> str:
    """``BASIS CELL, throttled in N runs``: what set a band, its floors cell (if any) and, where
    the case was judged as throttled, in how many runs (a case's line and its change points')."""
    thr = f", throttled in {throttled} run{'' if throttled == 1 else 's'}" if throttled else ""
    return basis + (f" {cell}" if cell else "") + thr


def _pick_caliber(cals: list[dict], want: int | None, op: str | None, device: str | None) -> dict:
    where = "".join([f" of {op}" if op else "", f" on {device!r}" if device else ""])
    if not cals:
        raise UsageError(f"the store holds no runs{where}: import screens with opscreen store add RUN_DIR..."
                         + (" (see opscreen store list for the ops and devices it has)" if where else ""))
    if want is None:
        return cals[0]
    for c in cals:
        if c["id"] == want:
            return c
    raise UsageError(f"--caliber {want}: no runs{where} of that caliber; the store has "
                     + ", ".join(f"{c['id']} ({c['runs']} runs)" for c in cals))


def _series(conn, cal_id: int, op: str | None, device: str | None, metric: str,
            order: "Callable[[list[str]], dict[str, float]] | None" = None) -> tuple[list[dict], list[CaseHistory]]:
    rq = sa.select(runs.c.id, runs.c.name, runs.c.started_at, runs.c.suite_commit, runs.c.device_name) \
        .where(runs.c.caliber_id == cal_id).order_by(runs.c.started_at, runs.c.id)
    if device is not None:
        rq = rq.where(runs.c.device_name == device)
    run_list = [dict(r._mapping) for r in conn.execute(rq)]
    if order is not None:  # by the suite commits' keys (a backfill of older commits sorts before later screens)
        keys = order(sorted({r["suite_commit"] for r in run_list if r["suite_commit"]}))
        missing = [r for r in run_list if keys.get(r["suite_commit"]) is None]
        if missing:
            r = missing[0]
            what = (f"does not know the suite commit {_short(r['suite_commit'])} of run {r['name']!r}" if r["suite_commit"]
                    else f"cannot place run {r['name']!r}, which recorded no suite commit")
            raise UsageError(f"--repo {what} ({len(missing)} of {len(run_list)} runs): give the suite's own checkout "
                             "with those commits, or leave --repo out to order the runs by their start")
        run_list.sort(key=lambda r: (keys[r["suite_commit"]], r["started_at"] or "", r["id"]))
    index = {r["id"]: i for i, r in enumerate(run_list)}
    # the rows unpacked as tuples: a Row's attributes, 14 per row, cost five times the query
    cols = [rows.c.run_id, rows.c.op, rows.c.variant, rows.c.dtype, rows.c.shape, rows.c.test, rows.c.status,
            rows.c[METRICS[metric][0]], rows.c.torch_ms, rows.c.lib_ms, rows.c.torch_timer, rows.c.lib_timer,
            rows.c.torch_noise_pct, rows.c.lib_noise_pct, rows.c.throttled]
    q = sa.select(*cols).join(runs, runs.c.id == rows.c.run_id).where(runs.c.caliber_id == cal_id)
    if device is not None:
        q = q.where(runs.c.device_name == device)
    if op is not None:
        q = q.where(rows.c.op == op)
    cases: dict[tuple, CaseHistory] = {}
    lib_only = metric == "lib_ms"
    for run_id, op_, variant, dtype, shape, test, status, v, t_ms, l_ms, t_timer, l_timer, t_noise, l_noise, thr \
            in conn.execute(q):
        key = (op_, variant or "", dtype, shape)
        case = cases.get(key)
        if case is None:
            case = cases[key] = CaseHistory(op=op_, variant=variant or "", dtype=dtype, shape=shape, test=test,
                                            points=[])
        ok = status == "ok" and isinstance(v, (int, float)) and v > 0
        noise_pct = l_noise if lib_only else _noise_pct(l_noise, t_noise)
        case.points.append(Point(index[run_id], float(v) if ok else None, status, noise_pct, thr))
        case.timing.append((t_ms, l_ms, t_timer, l_timer))
    for case in cases.values():
        case.points.sort(key=lambda p: p.run)
    return run_list, sorted(cases.values(), key=CaseHistory.key)


def _noise_pct(lib: float | None, torch: float | None) -> float | None:
    """A run's noise of the speedup, in percent: sqrt(torch² + lib²) (lib_ms takes lib's alone: _series)."""
    return math.sqrt(lib ** 2 + torch ** 2) if lib is not None and torch is not None else None


# ---------------------------------------------------------------- the noise model


def case_band(case: CaseHistory, table: "_noise.FloorsTable | None", metric: str, k: float,
              min_change: float, history: str = "rerun") -> tuple[float, str, str | None]:
    """The case's band (a fraction of ln), what set it, and its floors cell's label. ``history``:
    the floors history of two runs of the series' caliber (``worker`` for warm-worker screens).
    A case that a run with a value measured while its device throttled is judged as throttled:
    by the table's throttled cell, else the conservative default (``noise.judging``)."""
    timing = case.timing
    groups = {_noise.timer_group(tt, lt) for tt, lt in {(tt, lt) for _, _, tt, lt in timing if tt or lt}}
    group = groups.pop() if len(groups) == 1 else "mixed"
    lats = [x for t, l, _, _ in timing for x in (t, l) if isinstance(x, (int, float)) and x > 0]
    cands: list[tuple[float, str, str | None]] = [(min_change, "min-change", None)]
    if lats:
        cell, basis = _noise.judging(table, history, group, min(lats), throttled=case.throttled_runs > 0)
        if cell is not None:
            cands.append((cell.band(METRICS[metric][1]), basis, cell.label()))
    noises = [p.noise_pct for p in case.points if p.noise_pct is not None and p.value is not None]
    if noises:  # two runs' samples: k x sqrt(n_a² + n_b²), n the series' median noise
        cands.append((k * math.sqrt(2.0) * statistics.median(noises) / 100.0, "samples", None))
    return max(cands, key=lambda c: c[0])


def _no_kernel(case: CaseHistory) -> bool:
    """Every run timed the library as a graph replay of no kernel (a view: 8-19 ns a call on an
    H100, one process reading 1.7 x another): its series is the replay's overhead, so it has no
    change point. A run whose library launched a kernel reads 0.87 us or more, and the case is then
    searched as any other."""
    libs = [(lib, lt) for _, lib, _, lt in case.timing if isinstance(lib, (int, float)) and lib > 0]
    return bool(libs) and all(no_kernel(lib, lt) for lib, lt in libs)


# ---------------------------------------------------------------- change points


def _level(ys: list[float]) -> float:
    return statistics.median(ys)


#: the bare package over asv's folder that _step_detect loads asv's step_detect.py into
_ASV = "_opscreen_asv"


def _step_detect() -> types.ModuleType:
    """asv's ``step_detect``. ``import asv.step_detect`` runs asv's ``__init__`` first, which
    loads asv's plugin manager and every plugin: 0.4 s, as long as the rest of ``history OP``
    on a store of 500 screens (bench/store_scale.py). step_detect needs only the standard
    library and its C helper (``_rangemedian``), so its file is loaded as a module of a bare
    package over asv's folder; asv itself is used when it is loaded already, or when that
    fails (or leaves the C helper out)."""
    mod = sys.modules.get("asv.step_detect") or sys.modules.get(f"{_ASV}.step_detect")
    if mod is not None:
        return mod
    try:
        where = list(importlib.util.find_spec("asv").submodule_search_locations)
        pkg = types.ModuleType(_ASV)
        pkg.__path__ = where
        spec = importlib.util.spec_from_file_location(f"{_ASV}.step_detect", os.path.join(where[0], "step_detect.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[_ASV], sys.modules[spec.name] = pkg, mod
        spec.loader.exec_module(mod)
        if getattr(mod, "_rangemedian", None) is not None:
            return mod
    except Exception:  # noqa: BLE001  (any failure: asv's own import, which says what is wrong)
        pass
    for name in (f"{_ASV}.step_detect", f"{_ASV}._rangemedian", _ASV):
        sys.modules.pop(name, None)
    import asv.step_detect

    return asv.step_detect


def _segments(ys: list[float], band: float, min_size: int) -> list[list[int]]:
    """asv's segments of ``ys`` (positions into it), in order: its Potts fit (a piecewise-constant
    fit, L1 cost plus ``gamma`` per jump) with ``gamma = min_size x band``. A level that stays
    beyond the band for ``min_size`` runs pays for its jump; noise within the band does not.
    asv's own default (``detect_steps``) picks gamma by an information criterion made for long
    series and no noise model: on 12 runs it took a 4-run step of 8 % (20 times the noise) for
    correlated noise."""
    right, _values, _dists = _step_detect().solve_potts_approx(ys, [1.0] * len(ys), gamma=max(band, 1e-9) * min_size)
    out, left = [], 0
    for r in right:
        out.append(list(range(left, r)))
        left = r
    return out


def _merge_once(segs: list[list[int]], ys: list[float], band: float, min_size: int) -> bool:
    """Merge the boundary least worth keeping: a step within the band (the smallest first),
    else an inner segment shorter than ``min_size`` into its closer neighbour (the first and
    the last are kept: detect marks their change points early and pending)."""
    levels = [_level([ys[i] for i in s]) for s in segs]
    steps = [(abs(levels[j + 1] - levels[j]), j) for j in range(len(segs) - 1)]
    small = [(d, j) for d, j in steps if d <= band]
    if small:
        _, j = min(small)
    else:
        short = [j for j in range(1, len(segs) - 1) if len(segs[j]) < min_size]
        if not short:
            return False
        i = short[0]
        left, right = abs(levels[i] - levels[i - 1]), abs(levels[i + 1] - levels[i])
        j = i - 1 if left <= right else i
    segs[j:j + 2] = [segs[j] + segs[j + 1]]
    return True


def detect(case: CaseHistory, runs_: list[dict], metric: str, band: float, basis: str, cell: str | None,
           min_size: int = DEFAULT_MIN_SIZE) -> list[ChangePoint]:
    """The change points of one case's series (see the module's docstring)."""
    pts = [p for p in case.points if p.value is not None]
    if len(pts) < 2:
        return []
    ys = [math.log(p.value) for p in pts]
    if max(ys) - min(ys) <= band:  # every segment's level lies in [min, max]: every step would merge
        return []
    segs = _segments(ys, band, min_size)
    while len(segs) > 1 and _merge_once(segs, ys, band, min_size):
        pass
    out = []
    sign = METRICS[metric][2]
    for a, b in zip(segs, segs[1:]):
        la, lb = _level([ys[i] for i in a]), _level([ys[i] for i in b])
        ya, yb = [ys[i] for i in a], [ys[i] for i in b]
        sep = max(ya) < min(yb) if lb > la else min(ya) > max(yb)
        first, last = pts[b[0]], pts[a[-1]]
        out.append(ChangePoint(
            at=first.run, before_commit=runs_[last.run]["suite_commit"], after_commit=runs_[first.run]["suite_commit"],
            before=math.exp(la), after=math.exp(lb), step=math.expm1(lb - la),
            direction="faster" if (lb - la) * sign > 0 else "slower", band=band, basis=basis, cell=cell,
            n_before=len(a), n_after=len(b), separated=sep, pending=b is segs[-1] and len(b) < min_size,
            early=a is segs[0] and len(a) < min_size, throttled=case.throttled_runs))
    return out


def _moves(case: CaseHistory, band: float, metric: str) -> list[int]:
    """Per consecutive pair of runs that hold the case: +1 faster (or passing again after
    it failed), -1 slower (or failing), 0 within the band (or nothing to compare)."""
    sign = METRICS[metric][2]
    out = []
    for a, b in zip(case.points, case.points[1:]):
        if a.value is not None and b.value is not None:
            d = math.log(b.value / a.value) * sign
            out.append(1 if d > band + 1e-12 else -1 if d < -band - 1e-12 else 0)
        elif a.value is not None and b.status == "failed":
            out.append(-1)
        elif a.status == "failed" and b.value is not None:
            out.append(1)
        else:
            out.append(0)
    return out


def _flips(moves: list[int]) -> int:
    signs = [m for m in moves if m]
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


def load_history(store: Store, op: str | None, device: str | None, *, caliber: int | None = None,
                 metric: str = "speedup", k: float = DEFAULT_K, min_change: float = DEFAULT_MIN_CHANGE,
                 min_size: int = DEFAULT_MIN_SIZE, table: "_noise.FloorsTable | None | bool" = True,
                 order: "Callable[[list[str]], dict[str, float]] | None" = None, ordered_by: str = "run start") -> History:
    """The history of ``op`` (every op: None) on ``device`` (the store's latest: None), one caliber.
    ``order`` maps the runs' suite commits to sort keys (their commit dates: ``history --repo``);
    without it the runs are ordered by their start."""
    with store.read() as conn:
        cals = _calibers(conn, op, device)
        chosen = _pick_caliber(cals, caliber, op, device)
        run_list, cases = _series(conn, chosen["id"], op, device, metric, order)
    dev = device or chosen["caliber"].get("device_name")
    if table is True:
        table = _noise.find(dev)
    table = table or None
    iso = chosen["caliber"].get("isolation")
    hist = _noise.history_of(iso, iso)
    for case in cases:
        case.band, case.basis, case.cell = case_band(case, table, metric, k, min_change, hist)
        if _no_kernel(case):  # a view in every run: no kernel's time to follow (results/summary.py, NO_KERNEL_MS)
            case.basis, case.moves, case.flips, case.changes = "no-kernel", [0] * max(0, len(case.points) - 1), 0, []
            continue
        case.moves = _moves(case, case.band, metric)
        case.flips = _flips(case.moves)
        case.changes = detect(case, run_list, metric, case.band, case.basis, case.cell, min_size)
    return History(caliber_id=chosen["id"], caliber=chosen["caliber"], device=dev, metric=metric, runs=run_list,
                   cases=cases, table=table.name if table is not None else "conservative default",
                   other_calibers=[c for c in cals if c["id"] != chosen["id"]], ordered_by=ordered_by,
                   floors_history=hist)


# ---------------------------------------------------------------- text output


def _short(commit: str | None) -> str:
    return (commit or "?")[:12]


def _fmt(v: float) -> str:
    return f"{v:.4g}" if v < 1e-3 or v >= 1e4 else f"{v:.3f}" if v < 100 else f"{v:.1f}"


def series_text(case: CaseHistory, runs: int | None = None) -> str:
    """The case's values in run order: ``|`` before a change point's first run (none in a
    flaky case), ``F`` failed, ``.`` a row without a value, ``*`` after a value measured while
    the device throttled (its ``throttled`` cell); with ``runs`` (the history's run
    count) ``-`` for each run that does not hold the case, so that the values line up with
    the runs table, else those runs are left out."""
    cuts = set() if case.flaky else {c.at for c in case.changes}  # a flaky case's steps are no changes
    at = {p.run: p for p in case.points}
    out = []
    for i in range(runs) if runs is not None else (p.run for p in case.points):
        p = at.get(i)
        if p is None:
            out.append("-")
            continue
        if p.run in cuts:
            out.append("|")
        out.append(_fmt(p.value) + ("*" if p.was_throttled else "") if p.value is not None
                   else "F" if p.status == "failed" else ".")
    return " ".join(out)


def _head(h: History, op: str | None) -> list[str]:
    cal = h.caliber
    parts = ", ".join(f"{k} {cal[k]}" for k in ("timer", "level", "shape_mode", "isolation", "use_flagtune")
                      if cal.get(k) not in (None, ""))
    starts = sorted(r["started_at"] for r in h.runs if r["started_at"])
    span = f", {starts[0]} .. {starts[-1]}" if starts else ""
    metric = "speedup (torch / library: higher is faster)" if h.metric == "speedup" else "lib_ms (lower is faster)"
    L = [f"history of {op or 'every op'} on {h.device or '?'}: {len(h.runs)} runs of caliber {h.caliber_id} "
         f"({parts}){span}, ordered by {h.ordered_by}",
         f"metric {metric}; bands: floors table {h.table!r}, history {h.floors_history} (a step within a case's "
         "band is no change)"]
    if h.other_calibers:
        L.append("other calibers in the store: " + ", ".join(f"{c['id']} ({c['runs']} runs)" for c in h.other_calibers)
                 + "; pick one with --caliber ID")
    return L


def _runs_table(h: History):
    t = Grid("#>", "commit", "started", "run")
    for i, r in enumerate(h.runs):
        t.row(i, _short(r["suite_commit"]), r["started_at"] or "", r["name"])
    return t


def _changes_table(cases: list[CaseHistory]):
    t = Grid("op", "dtype", "shape", "commits", "step>", "direction", "evidence")
    for c in cases:
        for ch in c.changes:
            t.row(c.op + (f" ({c.variant})" if c.variant else ""), c.dtype, c.shape,
                  f"{_short(ch.before_commit)}..{_short(ch.after_commit)}", f"{ch.step * 100:+.1f}%",
                  ch.direction + ch.tags(), ch.evidence())
    return t


def format_history(h: History, op: str | None, *, show_all: bool = False, like=None) -> str:
    """The history as text, drawn for ``like`` (default: stdout now; :func:`opscreen.tables.to_text`):
    head, runs, series (every case with ``op`` or ``show_all``, else the cases with change points or
    flips), change points, flaky cases."""
    L: list = _head(h, op)
    L += ["", "runs (the series' values are in this order):", _runs_table(h)]
    changed = [c for c in h.cases if c.changes and not c.flaky]
    flaky = [c for c in h.cases if c.flaky]
    shown = h.cases if (op or show_all) else [c for c in h.cases if c.changes or c.flaky]
    L += ["", f"series: {len(h.cases)} cases" + ("" if shown is h.cases else
          f", {len(shown)} shown (those with change points or flaky; --all shows every case)")
          + " ('|' a change point, 'F' failed, '.' no value, '-' not in that run"
          + (", '*' measured while the device throttled" if any(c.throttled_runs for c in shown) else "") + ")"]
    t = Grid("op", "dtype", "shape", "band>", "values")
    for c in shown:
        t.row(c.op + (f" ({c.variant})" if c.variant else ""), c.dtype, c.shape, f"±{c.band * 100:.2f}%",
              series_text(c, len(h.runs)))
    if shown:
        L.append(t)
    n = sum(len(c.changes) for c in changed)
    L += ["", f"change points: {n} in {len(changed)} cases" + (":" if n else "")]
    if n:
        L.append(_changes_table(changed))
    L += ["", f"flaky: {len(flaky)} cases whose verdict between consecutive runs flips back and forth "
          f"(at least {FLAKY_FLIPS} reversals; their steps are not reported as changes)" + (":" if flaky else "")]
    if flaky:
        ft = Grid("op", "dtype", "shape", "flips>", "moves")
        for c in flaky:
            ft.row(c.op, c.dtype, c.shape, c.flips, " ".join({1: "+", -1: "-", 0: "0"}[m] for m in c.moves))
        L.append(ft)
    return grid_text(L, like=like)
