"""Compare two runs' summaries, case by case, after checking they were measured alike.

Lifecycle: :func:`check_caliber` compares the two runs' ``caliber`` blocks (from
``run_identity.json``, kept in ``summary.json``) and says which fields differ;
:func:`compare_summaries` joins the rows on (op, variant, dtype, shape) and gives each
a :class:`Verdict`; the :class:`Comparison` it returns writes ``compare.csv`` and
the text report.

Caliber fields (docs/contracts.md, "Identity"):

- must match (:data:`MUST_MATCH`): ``timer``, ``use_flagtune``,
  ``use_flagtune_cost_model`` (the autotune mode), ``triton_cache_autotuning``
  (plain ``@triton.autotune`` winners reused from earlier processes, or benchmarked
  again in each; a run of an opscreen that did not record it is not refused for it,
  :data:`RECORDED_LATER`), ``shape_mode``, ``level``,
  ``isolation`` (fresh processes or warm workers: on an H200 a worker reads small kernels
  further from a fresh process than two workers read from each other). A
  difference refuses the comparison unless each differing field is named in
  ``allow`` (``--allow-mismatch``); an allowed difference becomes part of the axis.
- may differ (:data:`AXIS_FIELDS`): ``suite_commit``, ``device_name``, ``backend``,
  ``vendor``: printed as the axis of the comparison.
- ``dtypes``: reported; rows only join where both runs have them.
- ``timing``: reported when it differs.

Verdict of a row measured in both runs (``d = ln(metric_B / metric_A)``; for the
default metric ``speedup`` a positive change means B is faster relative to torch;
docs/results.md has the rule with a row checked by hand):

- each judged quantity has a *band*, the widest of: ``samples`` (``k`` x the two runs'
  combined noise of the samples, :data:`DEFAULT_K`; ``threshold`` for rows without noise), or,
  with ``--repeats`` on both runs, the test over processes instead (``repeats``: Welch's t on
  each run's per-process range; the per-process medians are then the samples), the
  row's cell of the device's floors table (``floors``, or ``floors-default`` from the
  conservative table; :mod:`opscreen.results.noise`) and an A/A floor (``aa``, ``--aa FILE``);
- on one device model each side is judged on its own band (``side``): the library
  moved alone -> ``faster``/``slower``; torch moved alone -> ``unresolved``, basis
  ``baseline``; both -> the speedup's band decides; neither -> ``same`` when the
  library's change +- its band lies within ``max_band`` (the equivalence margin,
  ``--margin``), else ``unresolved``. Elsewhere the speedup (or ``lib_ms``) is judged alone;
- "moved" is ``|d| > band`` and ``|d| >= min_change`` (:data:`DEFAULT_MIN_CHANGE`, the
  minimum practical change); a moved row of an op whose autotune picks differ between A
  and B is ``pick``, not faster/slower;
- a row that would be called faster, slower or pick while its judged side's own samples (a
  device timer's: :data:`opscreen.results.summary.NOISY_TIMERS`) spread past ``max_noise`` in A
  or B (:data:`opscreen.results.summary.NOISY`, 10 %, ``--max-noise``) is ``unresolved``, basis
  ``noisy``: that reading was disturbed, and its median says little;
- a row whose library both runs read as a graph replay of no kernel (under
  :data:`opscreen.results.summary.NO_KERNEL_MS` a call: a view) is ``same``, basis ``no-kernel``;
- ``--fail-on`` fails on ``slower`` rows past its percent and ``broken`` rows, and on
  ``unresolved`` and ``pick`` rows only with ``unresolved="fail"``.

Rows not measured in both: ``new`` (only in B), ``gone`` (only in A, the op did not
fail in B), ``broken`` (measured in A; failed in B, or its op failed/timed out in
B), ``fixed`` (failed in A, measured in B), ``failed`` (failed in both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable

from ..errors import UsageError, read_input
from ..fsio import atomic_write_text
from . import noise as _noise
from . import throttle as _throttle
from ._io import csv_text
from ..tables import first, table, to_text
from .summary import COL, DEFAULT_MAX_BAND, NOISE_K, NOISY, UNFINISHED, Summary, lib_no_kernel, noisy, noise as _side_noise

__all__ = [
    "MUST_MATCH",
    "AXIS_FIELDS",
    "DEFAULT_K",
    "DEFAULT_THRESHOLD",
    "DEFAULT_MIN_CHANGE",
    "DEFAULT_MAX_BAND",
    "DEFAULT_MAX_NOISE",
    "UNRESOLVED_POLICIES",
    "Verdict",
    "CaliberCheck",
    "CompareRow",
    "Comparison",
    "check_caliber",
    "compare_summaries",
    "parse_allow",
]

MUST_MATCH = ("timer", "use_flagtune", "use_flagtune_cost_model", "triton_cache_autotuning", "shape_mode", "level",
              "isolation")
#: Must-match fields an older opscreen did not record: a run without one is not refused
#: for it (what it ran with is unknown); the report says so under "also differs".
RECORDED_LATER = ("triton_cache_autotuning",)
AXIS_FIELDS = ("suite_commit", "device_name", "backend", "vendor")
INFO_FIELDS = ("dtypes", "timing", "repeats")
DEFAULT_K = NOISE_K
UNRESOLVED_POLICIES = ("fail", "ignore")
DEFAULT_THRESHOLD = 0.03
#: the minimum practical change (asv's factor, criterion's noise threshold): a row is never
#: called faster or slower by less than this, however narrow its band
DEFAULT_MIN_CHANGE = 0.01
#: the equivalence margin: a row is "same" only when its change's interval, change ± band,
#: lies within ± this (``--margin``; ``--max-band`` is its older name)
DEFAULT_MARGIN = DEFAULT_MAX_BAND
DEFAULT_ALPHA = _noise.DEFAULT_ALPHA
DEFAULT_MAX_NOISE = NOISY
# the sample-range estimator's divisor d2(N): E[range of N normal values] / sigma (SPC tables)
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}
#: A graph row whose faster side (in A) is under this is a small kernel: two processes of
#: one setup read it further apart than the samples of one run show (H200: p90 1.6-3.4 %
#: against about 0.2 % at 100 us and more; bench/results/2026-12-02-h200-autotune-placement.md)
SMALL_KERNEL_MS = 0.010


class Verdict(str, Enum):
    """What happened to one case from run A to run B."""

    SLOWER = "slower"
    FASTER = "faster"
    SAME = "same"
    UNRESOLVED = "unresolved"
    PICK = "pick"  # beyond its band, but A's and B's autotuners chose different configs for the op
    BROKEN = "broken"
    FIXED = "fixed"
    GONE = "gone"
    NEW = "new"
    FAILED = "failed"


_SEVERITY = {v: i for i, v in enumerate(
    [Verdict.BROKEN, Verdict.SLOWER, Verdict.PICK, Verdict.UNRESOLVED, Verdict.GONE, Verdict.FAILED, Verdict.NEW, Verdict.FIXED, Verdict.FASTER, Verdict.SAME]
)}  # fmt: skip


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(int(v)) if float(v).is_integer() else str(v)
    if isinstance(v, list):
        return sorted(str(x) for x in v)
    return v


@dataclass
class CaliberCheck:
    """The caliber comparison: what must match, what differs, what was allowed."""

    refused: list[tuple[str, Any, Any]] = field(default_factory=list)  # must-match fields that differ, not allowed
    allowed: list[tuple[str, Any, Any]] = field(default_factory=list)  # must-match fields that differ, allowed
    axis: list[tuple[str, Any, Any]] = field(default_factory=list)  # may-differ fields that differ
    same: dict[str, Any] = field(default_factory=dict)  # must-match fields that agree
    dtypes: tuple[Any, Any] | None = None  # (A, B) when they differ
    info: list[tuple[str, Any, Any]] = field(default_factory=list)  # other differences (timing, ...)
    unknown: list[str] = field(default_factory=list)  # "A" / "B" when a run has no caliber

    @property
    def ok(self) -> bool:
        return not self.refused

    def refusal_text(self) -> str:
        """One line: what differs, and the flags that compare anyway."""
        what = "; ".join(f"{f}: A {_show(a)}, B {_show(b)}" for f, a, b in self.refused)
        names = " ".join(f"--allow-mismatch {f}" for f, _, _ in self.refused)
        return (f"the runs were measured differently ({what}); refusing to compare them: pass {names} to compare "
                "them anyway (the difference becomes the axis of the comparison)")


def _show(v: Any) -> str:
    if v is None:
        return "(unknown)"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v) or "(none)"
    if isinstance(v, dict):
        return ", ".join(f"{k}={v[k]}" for k in sorted(v))
    return str(v)


def parse_allow(values: Iterable[str] | None) -> set[str]:
    """``--allow-mismatch`` values (repeatable, comma-separated) -> field names; UsageError on unknown ones."""
    out: set[str] = set()
    for v in values or ():
        for name in str(v).split(","):
            name = name.strip()
            if not name:
                continue
            if name == "all":
                out.update(MUST_MATCH)
                continue
            if name not in MUST_MATCH:
                raise UsageError(
                    f"--allow-mismatch {name}: not a field that must match (choose from {', '.join(MUST_MATCH)}, or all)"
                )
            out.add(name)
    return out


def check_caliber(a: dict | None, b: dict | None, allow: Iterable[str] = ()) -> CaliberCheck:
    """Compare two caliber blocks; see the module docstring for the field classes."""
    a = a or {}
    b = b or {}
    allow = set(allow)
    chk = CaliberCheck()
    if not a:
        chk.unknown.append("A")
    if not b:
        chk.unknown.append("B")
    for f in MUST_MATCH:
        va, vb = _norm(a.get(f)), _norm(b.get(f))
        if f in RECORDED_LATER and (a and f not in a or b and f not in b) and va != vb:
            chk.info.append((f, a.get(f), b.get(f)))
            continue
        if va == vb:
            chk.same[f] = va
        elif f in allow:
            chk.allowed.append((f, va, vb))
        else:
            chk.refused.append((f, va, vb))
    for f in AXIS_FIELDS:
        va, vb = a.get(f), b.get(f)
        if _norm(va) != _norm(vb):
            chk.axis.append((f, va, vb))
    da, db = _norm(a.get("dtypes")), _norm(b.get("dtypes"))
    if da != db:
        chk.dtypes = (a.get("dtypes"), b.get("dtypes"))
    for f in sorted(set(a) | set(b)):
        if f in MUST_MATCH or f in AXIS_FIELDS or f == "dtypes":
            continue
        if _norm(a.get(f)) != _norm(b.get(f)):
            chk.info.append((f, a.get(f), b.get(f)))
    return chk


@dataclass(slots=True)
class CompareRow:
    """One (op, variant, dtype, shape) of the join; ``test`` (the test function, B's
    where B names it) is not part of the key: a test renamed between the runs, or a run
    whose logs name no test, still joins."""

    op: str
    test: str
    variant: str
    dtype: str
    shape: str
    verdict: Verdict
    change: float | None = None  # metric_B / metric_A - 1 (+: B faster)
    band: float | None = None  # the row's band: the widest of its sources, as |ln ratio|
    band_same: float | None = None  # the same at the equivalence test's level (eq_alpha): what `same` needs
    basis: str | None = None  # the source that set the band: samples | threshold | floors | floors-default | repeats | aa; or no-kernel, pick, baseline
    floors: str | None = None  # the floors cell the row was looked up in (history/timer/latency bin)
    side: str | None = None  # what was judged: lib or torch (each side on its own, one device model) or speedup
    judged: float | None = None  # that quantity's change, + when it got faster (lib_A/lib_B - 1, torch_A/torch_B - 1)
    a_speedup: float | None = None
    b_speedup: float | None = None
    a_lib_ms: float | None = None
    b_lib_ms: float | None = None
    a_torch_ms: float | None = None
    b_torch_ms: float | None = None
    a_noise: float | None = None
    b_noise: float | None = None
    a_status: str | None = None
    b_status: str | None = None
    a_timer: str | None = None
    b_timer: str | None = None
    # the side(s) whose op was measured while the device throttled (A, B, A+B; opscreen.results.throttle)
    throttled: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.variant, self.dtype, self.shape)

    @property
    def ratio(self) -> float | None:
        return None if self.change is None else 1.0 + self.change


CSV_COLUMNS = [
    "op", "test", "variant", "dtype", "shape", "verdict", "change_pct", "band_pct", "basis",
    "a_speedup", "b_speedup", "a_lib_ms", "b_lib_ms", "a_torch_ms", "b_torch_ms",
    "a_noise_pct", "b_noise_pct", "a_status", "b_status", "a_timer", "b_timer", "side", "judged_pct", "floors", "pick",
    "throttled", "same_band_pct",
]  # fmt: skip


def _pct(v: float | None) -> float | None:
    return None if v is None else round(v * 100.0, 4)


@dataclass
class Comparison:
    """Two summaries joined; built by :func:`compare_summaries`."""

    a: Summary
    b: Summary
    check: CaliberCheck
    rows: list[CompareRow]
    metric: str = "speedup"
    k: float = DEFAULT_K
    threshold: float = DEFAULT_THRESHOLD
    min_change: float = DEFAULT_MIN_CHANGE
    floors: dict[str, float] = field(default_factory=dict)  # op -> A/A floor (|ln ratio|)
    max_band: float = DEFAULT_MARGIN  # the equivalence margin (the name is older than the rule)
    table: "_noise.FloorsTable | None" = None  # the floors table the bands were widened to
    alpha: float = DEFAULT_ALPHA
    eq_alpha: float = _noise.EQ_ALPHA  # the equivalence test's level: same needs the 1 - eq_alpha interval in the margin
    picks: dict[str, list[dict]] = field(default_factory=dict)  # op -> winners A and B chose differently
    history: str = "rerun"
    use_floors: bool = True  # False: --no-floors (no floors band at all)
    max_noise: float = DEFAULT_MAX_NOISE  # a row noisier than this in A or B is never called (basis noisy)

    @property
    def margin(self) -> float:
        return self.max_band

    def expected_false_calls(self) -> tuple[float, int]:
        """(alpha x rows measured in both whose band came from a floors table or the
        repeats test, those rows): what a rerun of the same setup should call changed."""
        n = sum(1 for r in self.rows if r.change is not None and r.basis in ("floors", "floors-default", "repeats"))
        return self.alpha * n, n

    def moved_ops(self) -> dict[str, tuple[str, str]]:
        """Ops measured in both runs on another device in B than in A: op -> (A's, B's).
        Two chips of one model can differ on a case by a few percent, per case and
        stable over processes (``bench/results/2026-11-29-h200x2-processes.md``), a
        difference neither run's noise nor spread shows. The devices' UUIDs decide
        where both runs recorded them (another host's GPU 0 is another device; it is
        then shown as ``index:UUID prefix``), else their indices."""
        idev, iop, ist = COL["device"], COL["op"], COL["status"]

        def devices(s: Summary) -> dict[str, tuple[str, str | None]]:
            uuids = {o.op: o.device_uuid for o in s.ops}
            out: dict[str, tuple[str, str | None]] = {}
            for r in s.rows:
                if r[ist] == "ok" and r[idev] not in (None, ""):
                    out.setdefault(r[iop], (str(r[idev]), uuids.get(r[iop])))
            return out

        da, db = devices(self.a), devices(self.b)
        out = {}
        for op in sorted(da.keys() & db.keys()):
            (ia, ua), (ib, ub) = da[op], db[op]
            if ua and ub and ua != ub:
                out[op] = (f"{ia}:{ua[:12]}", f"{ib}:{ub[:12]}") if ia == ib else (ia, ib)
            elif not (ua and ub) and ia != ib:
                out[op] = (ia, ib)
        return out

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for r in self.rows:
            out[r.verdict.value] += 1
        return out

    def small_kernel_calls(self) -> tuple[int, int]:
        """(graph rows under :data:`SMALL_KERNEL_MS` called faster or slower on their
        samples' noise alone, all rows called faster or slower): the first are the calls
        an A/A between processes makes most often."""
        called = [r for r in self.rows if r.verdict in (Verdict.FASTER, Verdict.SLOWER)]
        small = [r for r in called if r.a_timer == r.b_timer == "graph" and r.basis == "samples"
                 and r.a_torch_ms and r.a_lib_ms and min(r.a_torch_ms, r.a_lib_ms) < SMALL_KERNEL_MS]
        return len(small), len(called)

    def regressions(self, n: int | None = None) -> list[CompareRow]:
        rows = [r for r in self.rows if r.verdict == Verdict.SLOWER]
        rows.sort(key=lambda r: (r.change, r.key))
        return rows[:n] if n is not None else rows

    def improvements(self, n: int | None = None) -> list[CompareRow]:
        rows = [r for r in self.rows if r.verdict == Verdict.FASTER]
        rows.sort(key=lambda r: (-r.change, r.key))
        return rows[:n] if n is not None else rows

    def unresolved(self) -> list[CompareRow]:
        """Rows whose combined band is wider than :attr:`max_band`, widest band first."""
        rows = [r for r in self.rows if r.verdict == Verdict.UNRESOLVED]
        rows.sort(key=lambda r: (-(r.band or 0.0), r.key))
        return rows

    def broken(self) -> list[CompareRow]:
        return [r for r in self.rows if r.verdict == Verdict.BROKEN]

    def op_ratios(self) -> list[tuple[str, float, int, int, int]]:
        """Per op: (op, geometric mean of B/A over rows measured in both, rows, slower, faster), worst first."""
        acc: dict[str, list] = {}
        for r in self.rows:
            if r.change is None:
                continue
            e = acc.setdefault(r.op, [0.0, 0, 0, 0])
            e[0] += math.log(1.0 + r.change)
            e[1] += 1
            e[2] += r.verdict == Verdict.SLOWER
            e[3] += r.verdict == Verdict.FASTER
        out = [(op, math.exp(s / n), n, sl, fa) for op, (s, n, sl, fa) in acc.items() if n]
        out.sort(key=lambda t: (t[1], t[0]))
        return out

    def geomean_ratio(self) -> float | None:
        logs = [math.log(1.0 + r.change) for r in self.rows if r.change is not None]
        return math.exp(math.fsum(logs) / len(logs)) if logs else None

    def failing(self, fail_on_pct: float | None, unresolved: str = "fail") -> list[CompareRow]:
        """Rows that fail ``--fail-on PCT``: slower by at least PCT %, broken, or
        unresolved (unless ``unresolved`` is ``"ignore"``)."""
        if fail_on_pct is None:
            return []
        lim = -abs(fail_on_pct) / 100.0
        return [
            r for r in self.rows
            if r.verdict == Verdict.BROKEN or (r.verdict == Verdict.SLOWER and r.change is not None and r.change <= lim)
            or (r.verdict in (Verdict.UNRESOLVED, Verdict.PICK) and unresolved != "ignore")
        ]  # fmt: skip

    def sorted_rows(self) -> list[CompareRow]:
        return sorted(
            self.rows,
            key=lambda r: (_SEVERITY[r.verdict], r.change if r.change is not None else 0.0, r.key),
        )

    def to_csv_text(self) -> str:
        def cells(r: CompareRow):
            return [
                r.op, r.test, r.variant, r.dtype, r.shape, r.verdict.value, _pct(r.change), _pct(r.band), r.basis,
                r.a_speedup, r.b_speedup, r.a_lib_ms, r.b_lib_ms, r.a_torch_ms, r.b_torch_ms,
                _pct(r.a_noise), _pct(r.b_noise), r.a_status, r.b_status, r.a_timer, r.b_timer, r.side, _pct(r.judged), r.floors,
                _pick_text(self.picks.get(r.op)) if r.verdict == Verdict.PICK else None, r.throttled, _pct(r.band_same),
            ]  # fmt: skip

        return csv_text(CSV_COLUMNS, (cells(r) for r in self.sorted_rows()), bool_columns=())

    def write_csv(self, path: str | Path) -> Path:
        return atomic_write_text(path, self.to_csv_text())


def _noise_of(r: list, metric: str) -> float | None:
    """A summary row's noise for ``metric`` (a fraction): the library's for lib_ms, else
    sqrt(torch^2 + lib^2) of its sides' (compare.csv's ``a_noise_pct``, in percent)."""
    t, l = _side_noise(r, "torch"), _side_noise(r, "lib")
    if metric == "lib_ms":
        return l
    if t is None or l is None:
        return None
    return math.sqrt(t ** 2 + l ** 2)


def _timer(r: list) -> str | None:
    t, l = r[COL["torch_timer"]], r[COL["lib_timer"]]
    if t is None and l is None:
        return None
    return t if t == l else f"{t or '-'}|{l or '-'}"


AA_SCHEMA = "opscreen.bench.timing_aa/1"


def aa_floors(paths: Iterable[str | Path]) -> dict[str, float]:
    """op -> the largest |Δ speedup| (a fraction) between identical runs in the given
    A/A reports (``bench/timing_aa.py --out``); several files: the largest of all."""
    import json

    floors: dict[str, float] = {}
    for p in paths:
        try:
            data = json.loads(read_input(p, "A/A report"))
        except ValueError as exc:
            raise UsageError(f"--aa {p}: not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("schema") != AA_SCHEMA:
            raise UsageError(f"--aa {p}: not an A/A report of bench/timing_aa.py (schema {AA_SCHEMA})")
        for op, entry in (data.get("ops") or {}).items():
            worst = ((entry or {}).get("speedup_delta") or {}).get("max")
            if isinstance(worst, (int, float)) and worst >= 0:
                floors[op] = max(floors.get(op, 0.0), math.log1p(worst))
    return floors


def _pick_text(diffs: list[dict] | None, n: int = 2) -> str | None:
    """``kernel key: A cfg | B cfg; ...`` for the first ``n`` winners A and B chose differently."""
    if not diffs:
        return None
    return first((f"{d['kernel'].rsplit('.', 1)[-1]} {d['key']}: A {d['a']} | B {d['b']}" for d in diffs), n, "; ")


def _repeats(r: list) -> int:
    n = r[COL["repeats"]]
    return int(n) if isinstance(n, (int, float)) and n >= 1 else 1


_SPREAD_COL = {"speedup": "speedup_spread", "lib": "lib_spread", "torch": "torch_spread"}


def _process_test_band(ra: list, rb: list, q: str, alpha: float) -> float | None:
    """A test over processes (``--repeats`` on both sides) for quantity ``q`` (speedup,
    lib or torch): the per-process spread of each run (max / min - 1 over its N processes)
    gives sigma = ln(1 + spread) / d2(N) (the sample range's estimator); the band is
    Welch's t(df, 1 - alpha/2) x sqrt(sA^2/NA + sB^2/NB)."""
    col = COL[_SPREAD_COL[q]]
    na, nb = _repeats(ra), _repeats(rb)
    sa, sb = ra[col], rb[col]
    if na < 2 or nb < 2 or sa is None or sb is None or sa < 0 or sb < 0:
        return None
    va = (math.log1p(sa) / _D2.get(na, 3.078)) ** 2 / na
    vb = (math.log1p(sb) / _D2.get(nb, 3.078)) ** 2 / nb
    se2 = va + vb
    if se2 <= 0:
        return 0.0
    df = se2 ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    return _noise.t_critical(df, alpha) * math.sqrt(se2)


def _floors_cell(cr: CompareRow, ra: list, rb: list, table, history: str):
    """The row's floors cell (of ``table``, else of the conservative default) and the basis it names."""
    ga = _noise.timer_group(ra[COL["torch_timer"]], ra[COL["lib_timer"]])
    gb = _noise.timer_group(rb[COL["torch_timer"]], rb[COL["lib_timer"]])
    group = ga if ga == gb else "mixed"
    lats = [v for v in (cr.a_torch_ms, cr.a_lib_ms, cr.b_torch_ms, cr.b_lib_ms) if isinstance(v, (int, float)) and v > 0]
    if not lats:
        return None, None
    # without chip (worker) cells, its rerun (cross) cells judge those rows; a throttled row, a throttled cell
    return _noise.judging(table, history, group, min(lats), cr.throttled is not None)


def _samples_noise(ra: list, rb: list, q: str, metric: str) -> float | None:
    """The combined noise of quantity ``q`` from both runs' samples (their noise), None if a run has none."""
    if q == "speedup":
        na, nb = _noise_of(ra, metric), _noise_of(rb, metric)
    else:
        na, nb = _side_noise(ra, q), _side_noise(rb, q)
    if na is None or nb is None:
        return None
    return math.sqrt(float(na) ** 2 + float(nb) ** 2)


def _band(q: str, cr: CompareRow, ra: list, rb: list, metric: str, ctx: dict,
          alpha: float | None = None) -> tuple[float, str, str | None]:
    """Quantity ``q``'s band (|ln ratio|), the source that set it, and the floors cell: the
    widest of its floors cell, an A/A floor (--aa, speedup only) and, with --repeats on both
    sides, the test over processes, else its samples' noise (else the threshold). With
    repeats the per-process medians are the samples (asv, pyperf): their spread already
    holds each median's own sampling error, so the noise of one process's samples, which
    no number of processes narrows, does not set the band twice."""
    alpha = ctx["alpha"] if alpha is None else alpha
    pt = _process_test_band(ra, rb, "lib" if metric == "lib_ms" else q, alpha)
    if pt is not None:
        cands = [(pt, "repeats")]
    else:
        noise = _samples_noise(ra, rb, q, metric)
        cands = [(ctx["k"] * noise, "samples")] if noise is not None else [(ctx["threshold"], "threshold")]
    label = None
    if ctx["use_floors"]:
        cell, basis = ctx["cell"]  # the row's floors cell, looked up once for all its quantities
        if cell is not None:
            scale = "lib" if metric == "lib_ms" and q == "speedup" else q
            cands.append((cell.band(scale, _repeats(ra), _repeats(rb), alpha), basis))
            label = cell.label()
    aa = (ctx["floors"] or {}).get(cr.op) if q == "speedup" else None
    if aa is not None:
        cands.append((aa, "aa"))
    band, basis = max(cands, key=lambda c: c[0])
    return band, basis, label


def _moved(d: float, band: float, min_change: float) -> bool:
    return abs(d) > band + 1e-12 and abs(d) >= min_change - 1e-12


def _verdict(lr: float, band: float, min_change: float, margin: float, picked: bool, band_same: float) -> Verdict:
    """Three verdicts on one quantity: faster/slower beyond the band and the minimum practical
    change (or ``pick`` when the op's autotuners chose differently); same when change ±
    ``band_same`` (the equivalence test's band) lies within ± margin; unresolved otherwise."""
    if _moved(lr, band, min_change):
        if picked:
            return Verdict.PICK
        return Verdict.FASTER if lr > 0 else Verdict.SLOWER
    if abs(lr) + band_same <= margin + 1e-12:
        return Verdict.SAME
    return Verdict.UNRESOLVED


def _judge_sides(cr: CompareRow, ra: list, rb: list, lr: float, ctx: dict) -> None:
    """A speedup row of two runs on one device model: each side against its own band. The
    library moved alone: faster/slower (or pick); torch moved alone: unresolved, basis
    ``baseline`` (the library did not change, its reference did); both: the speedup's own
    band decides (a drift of the whole process cancels in it); neither: same when the
    library's change ± its band lies within the margin, else unresolved."""
    dl = math.log(cr.b_lib_ms / cr.a_lib_ms)
    dt = math.log(cr.b_torch_ms / cr.a_torch_ms)
    bl, basis_l, label = _band("lib", cr, ra, rb, "speedup", ctx)
    bt, _, _ = _band("torch", cr, ra, rb, "speedup", ctx)
    bs, basis_s, _ = _band("speedup", cr, ra, rb, "speedup", ctx)
    lib_moved, torch_moved = _moved(dl, bl, ctx["min_change"]), _moved(dt, bt, ctx["min_change"])
    cr.floors = label
    cr.judged = math.expm1(-dl)
    eq = ctx["eq_alpha"]
    if lib_moved and not torch_moved:
        cr.band, cr.basis, cr.side = bl, basis_l, "lib"
        cr.band_same = _band("lib", cr, ra, rb, "speedup", ctx, eq)[0]
        cr.verdict = _verdict(-dl, bl, ctx["min_change"], ctx["margin"], cr.op in ctx["picks"], cr.band_same)
    elif torch_moved and not lib_moved:
        cr.band, cr.basis, cr.side, cr.verdict = bt, "baseline", "torch", Verdict.UNRESOLVED
        cr.judged = math.expm1(-dt)
    elif lib_moved:  # both moved (a drift common to the process cancels in the speedup)
        cr.band, cr.basis, cr.side, cr.judged = bs, basis_s, "speedup", math.expm1(lr)
        cr.band_same = _band("speedup", cr, ra, rb, "speedup", ctx, eq)[0]
        cr.verdict = _verdict(lr, bs, ctx["min_change"], ctx["margin"], cr.op in ctx["picks"], cr.band_same)
    else:  # neither: the library is the same if its change's interval lies within the margin
        cr.band, cr.basis, cr.side = bl, basis_l, "lib"
        cr.band_same = _band("lib", cr, ra, rb, "speedup", ctx, eq)[0]
        cr.verdict = _verdict(-dl, bl, ctx["min_change"], ctx["margin"], cr.op in ctx["picks"], cr.band_same)


def _too_noisy(ra: list, rb: list, side: str | None, limit: float) -> bool:
    """Whether the judged side (``lib``, ``torch``; the speedup: both) spread past ``limit`` in A or B."""
    sides = ("lib", "torch") if side == "speedup" else (side or "lib",)
    return noisy(ra, sides, limit) or noisy(rb, sides, limit)


def _lib_idle(ra: list, rb: list) -> bool:
    """Both runs read the library as a graph replay that timed no kernel (a view such as
    ``expand_``: 8-19 ns a call, the replay's own overhead; :data:`opscreen.results.summary.NO_KERNEL_MS`).
    Its ratio is no kernel's change, so the row is ``same``, basis ``no-kernel``; one that
    launches a kernel in B reads 0.87 us or more there and is judged as any other row."""
    return lib_no_kernel(ra) and lib_no_kernel(rb)


def device_of(s: Summary) -> str | None:
    """The device model a run measured on: its caliber's, else its first op's that names one."""
    name = (s.caliber or {}).get("device_name")
    return name or next((o.device_name for o in s.ops if o.device_name), None)


def _join_measured(cr: CompareRow, ra: list, rb: list, vi: int, metric: str, ctx: dict) -> None:
    """Fill the change, band, basis and verdict of a row in both runs."""
    a_ok = ra[COL["status"]] == "ok" and ra[vi] is not None and ra[vi] > 0
    b_ok = rb[COL["status"]] == "ok" and rb[vi] is not None and rb[vi] > 0
    if a_ok and b_ok:
        if ctx["use_floors"]:
            (ua, ub), op = ctx["uuids"], cr.op
            history = _noise.row_history(ctx["history"], ua.get(op), ub.get(op))
            ctx = {**ctx, "cell": _floors_cell(cr, ra, rb, ctx["table"], history)}
        ratio = rb[vi] / ra[vi] if metric == "speedup" else ra[vi] / rb[vi]
        cr.change = ratio - 1.0
        lr = math.log(ratio)
        sides = (cr.a_lib_ms, cr.b_lib_ms, cr.a_torch_ms, cr.b_torch_ms)
        if _lib_idle(ra, rb):  # the library launched no kernel in either run: nothing on the device to compare
            cr.band, cr.basis, cr.floors = _band("speedup", cr, ra, rb, metric, ctx)
            cr.side, cr.judged, cr.basis, cr.verdict = "lib", None, "no-kernel", Verdict.SAME
        elif metric == "speedup" and ctx["one_device"] and all(isinstance(v, (int, float)) and v > 0 for v in sides):
            _judge_sides(cr, ra, rb, lr, ctx)
        else:
            cr.band, cr.basis, cr.floors = _band("speedup", cr, ra, rb, metric, ctx)
            cr.side, cr.judged = ("lib" if metric == "lib_ms" else "speedup"), cr.change
            cr.band_same = _band("speedup", cr, ra, rb, metric, ctx, ctx["eq_alpha"])[0]
            cr.verdict = _verdict(lr, cr.band, ctx["min_change"], ctx["margin"], cr.op in ctx["picks"], cr.band_same)
        if cr.verdict in (Verdict.FASTER, Verdict.SLOWER, Verdict.PICK) and _too_noisy(ra, rb, cr.side, ctx["max_noise"]):
            cr.verdict, cr.basis = Verdict.UNRESOLVED, "noisy"
        elif cr.verdict == Verdict.PICK:
            cr.basis = "pick"
    elif a_ok:
        cr.verdict = Verdict.BROKEN
    elif b_ok:
        cr.verdict = Verdict.FIXED
    else:
        cr.verdict = Verdict.FAILED


def compare_summaries(
    a: Summary,
    b: Summary,
    *,
    allow: Iterable[str] = (),
    metric: str = "speedup",
    k: float = DEFAULT_K,
    threshold: float = DEFAULT_THRESHOLD,
    min_change: float = DEFAULT_MIN_CHANGE,
    check: CaliberCheck | None = None,
    floors: dict[str, float] | None = None,
    max_band: float = DEFAULT_MARGIN,
    table: "_noise.FloorsTable | None | bool" = True,
    alpha: float = DEFAULT_ALPHA,
    eq_alpha: float = _noise.EQ_ALPHA,
    max_noise: float = DEFAULT_MAX_NOISE,
) -> Comparison:
    """Join two summaries row by row (the caliber check is the caller's to act on).
    ``table``: the floors table (True: the one :func:`opscreen.results.noise.find` finds for
    B's device, else the conservative default; None or False: no floors band at all)."""
    if metric not in ("speedup", "lib_ms"):
        raise UsageError(f"--metric {metric}: choose speedup or lib_ms")
    chk = check if check is not None else check_caliber(a.caliber, b.caliber, allow)
    if table is True:
        table = _noise.find(device_of(b)) or _noise.find(device_of(a))
        use_floors = True
    else:
        use_floors = bool(table)
        table = table or None
    iop, itest, ivar, idt, ish, ist = COL["op"], COL["test"], COL["variant"], COL["dtype"], COL["shape"], COL["status"]
    isp, ilib, itor = COL["speedup"], COL["lib_ms"], COL["torch_ms"]
    a_rows = {(r[iop], r[ivar] or "", r[idt], r[ish]): r for r in a.rows}
    b_status = {o.op: o.status for o in b.ops}
    picks = _noise.op_picks(a, b)
    history = _noise.history_of((a.caliber or {}).get("isolation"), (b.caliber or {}).get("isolation"))
    ctx = {"k": k, "threshold": threshold, "floors": floors, "table": table, "history": history, "alpha": alpha, "eq_alpha": eq_alpha,
           "min_change": min_change, "margin": max_band, "picks": picks, "max_noise": max_noise}
    ctx["use_floors"] = use_floors
    ctx["uuids"] = (_noise.device_uuids(a), _noise.device_uuids(b))
    da, db = device_of(a), device_of(b)
    ctx["one_device"] = bool(da) and da == db and (a.caliber or {}).get("backend") == (b.caliber or {}).get("backend")
    out: list[CompareRow] = []
    seen = set()
    vi = isp if metric == "speedup" else ilib
    for rb in b.rows:
        key = (rb[iop], rb[ivar] or "", rb[idt], rb[ish])
        ra = a_rows.get(key)
        test = rb[itest] or (ra[itest] if ra is not None else "") or ""
        cr = CompareRow(key[0], test, *key[1:], verdict=Verdict.NEW)
        cr.b_speedup, cr.b_lib_ms, cr.b_torch_ms, cr.b_status = rb[isp], rb[ilib], rb[itor], rb[ist]
        cr.b_noise = _noise_of(rb, metric)
        cr.b_timer = _timer(rb)
        if ra is not None:
            seen.add(key)
            cr.a_speedup, cr.a_lib_ms, cr.a_torch_ms, cr.a_status = ra[isp], ra[ilib], ra[itor], ra[ist]
            cr.a_noise = _noise_of(ra, metric)
            cr.a_timer = _timer(ra)
            cr.throttled = _noise.throttled_side(ra, rb)
            _join_measured(cr, ra, rb, vi, metric, ctx)
        out.append(cr)
    for ra in a.rows:
        key = (ra[iop], ra[ivar] or "", ra[idt], ra[ish])
        if key in seen:
            continue
        cr = CompareRow(key[0], ra[itest] or "", *key[1:], verdict=Verdict.GONE)
        cr.a_speedup, cr.a_lib_ms, cr.a_torch_ms, cr.a_status = ra[isp], ra[ilib], ra[itor], ra[ist]
        cr.a_noise = _noise_of(ra, metric)
        cr.a_timer = _timer(ra)
        st = b_status.get(ra[iop])
        if ra[ist] == "ok" and st is not None and st not in ("passed",):
            cr.verdict = Verdict.BROKEN  # the op failed, timed out or was not run in B
        out.append(cr)
    return Comparison(a=a, b=b, check=chk, rows=out, metric=metric, k=k, threshold=threshold, min_change=min_change,
                      floors=dict(floors or {}), max_band=max_band, table=table if use_floors else None, alpha=alpha, eq_alpha=eq_alpha,
                      picks=picks, history=history, use_floors=use_floors, max_noise=max_noise)


# ---------------------------------------------------------------- text report

def _f3(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _chg(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def _moved_list(moved: dict[str, tuple[str, str]], n: int = 8) -> str:
    """``op A -> B, ...`` for the first ``n`` moved ops, then how many more."""
    return first((f"{op} {x} -> {y}" for op, (x, y) in moved.items()), n)


def _short_shape(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def format_comparison(c: Comparison, *, top: int = 10, ops_top: int = 10) -> str:
    L = [f"A: {c.a.name}   B: {c.b.name}"]
    L += _caliber_lines(c)
    L += _verdict_lines(c)
    ms = c.metric == "speedup"
    L += _rows_table(f"top regressions (B slower than A), {len(c.regressions())} in all:", c.regressions(top), ms)
    L += _rows_table(f"top improvements (B faster than A), {len(c.improvements())} in all:", c.improvements(top), ms)
    picked = [r for r in c.rows if r.verdict == Verdict.PICK]
    if picked:
        L += _rows_table(f"pick ({len(picked)} rows beyond their band in ops whose autotune picks differ):",
                         sorted(picked, key=lambda r: (r.change or 0.0, r.key))[:top], ms)
    L += _broken_table(c, top)
    L += _unresolved_table(c, top)
    L += _op_ratios_table(c, ops_top)
    return to_text(L)


def _caliber_lines(c: Comparison) -> list:
    """How A and B were measured: what is the same, the axis, what else differs."""
    chk = c.check
    L: list = []
    if chk.unknown:
        L.append(f"caliber unknown for {' and '.join(chk.unknown)} (no run_identity.json): cannot check how they were measured")
    if chk.same:
        L.append("same caliber: " + ", ".join(f"{f} {_show(v)}" for f, v in chk.same.items()))
    axis = chk.axis + chk.allowed
    if axis:
        L.append("axis (A -> B): " + "; ".join(f"{f} {_show(x)} -> {_show(y)}" for f, x, y in axis))
        for f, _, _ in chk.allowed:
            L.append(f"  note: {f} differs (allowed by --allow-mismatch)")
    else:
        L.append("axis: none of suite_commit, device_name, backend, vendor differs (a rerun of the same setup)")
    if chk.dtypes:
        L.append(f"dtypes differ: A {_show(chk.dtypes[0])}, B {_show(chk.dtypes[1])} (rows only join where both have them)")
    for f, x, y in chk.info:
        L.append(f"also differs: {f}: A {_show(x)}, B {_show(y)}")
    for f, x, y in _throttle.state_diffs([o.device_state for o in c.a.ops], [o.device_state for o in c.b.ops]):
        L.append(f"also differs: device state {f}: A {_show(x)}, B {_show(y)}")
    moved = c.moved_ops()
    if moved:
        L.append(f"devices: {len(moved)} op{'s' if len(moved) != 1 else ''} ran on another device in B ({_moved_list(moved)}); "
                 + _chip_note(c))
    return L


def _chip_note(c: Comparison) -> str:
    """What judged the rows of ops that ran on another chip: the table's chip cells, its
    rerun cells (a table made on one GPU), or nothing but the runs' own noise."""
    chip = [r for r in c.rows if (r.floors or "").startswith("chip/")]
    if chip and c.table is None:
        return (f"chips of one model differ on a case by a few %: {len(chip)} rows were judged by the conservative "
                "default's chip cells (no floors table for this device)")
    if chip:
        return (f"chips of one model differ on a case by a few %: {len(chip)} rows were judged by the floors "
                "table's chip cells (two chips of one model)")
    if c.table is not None and c.history == "rerun" and any((r.floors or "").startswith("rerun/") for r in c.rows):
        if any(cell.history == "chip" for cell in c.table.cells):
            return ("chips of one model differ on a case by a few %, and these runs did not record the devices' "
                    "UUIDs that tell two chips apart: those rows were judged by the floors table's rerun cells, which "
                    "under-cover them")
        return ("chips of one model differ on a case by a few %, and this floors table has no chip cells (made on "
                "one device): those rows were judged by its rerun cells, which under-cover them; `opscreen calibrate` "
                "on two or more devices measures them")
    return "devices of one model can differ on a case by a few %, which no band here covers"


def _floors_lines(c: Comparison) -> list:
    """Which floors table the bands were widened to, and where it came from."""
    t = c.table
    used = {r.basis for r in c.rows}
    if not c.use_floors:
        return ["floors: none (--no-floors): bands from the runs' own samples and repeats only"]
    if t is None:
        dev = device_of(c.b) or "this device"
        if "floors-default" not in used:
            return [f"floors: no table for {dev}; the conservative default set no row's band here "
                    "(`opscreen calibrate` measures this device's table)"]
        return [f"floors: no table for {dev}: a conservative default decided (rows with basis floors-default); "
                "`opscreen calibrate` measures this device's table"]
    p = t.provenance or {}
    shipped = t.path and Path(t.path).resolve().parent == _noise.floors_dirs()[-1].resolve()
    src = "shipped with opscreen" if shipped else (t.path or "given")
    return [f"floors: {t.name} ({src}): {p.get('device_name')}, driver {p.get('driver_version') or '?'}, torch "
            f"{p.get('torch_version') or '?'}, triton {p.get('triton_version') or '?'}, suite {str(p.get('suite_commit') or '?')[:10]}, "
            f"{len(p.get('ops') or [])} ops, {_seeds_text(p)}, made {str(p.get('made', '?'))[:10]}; "
            f"history {_histories(c)}"]


def _seeds_text(p: dict) -> str:
    """A table's draw seeds as its provenance gives them: one seed, or one per draw."""
    draws = p.get("draws") or []
    if draws:
        return f"{len(draws)} draws, seeds " + ",".join(str(d.get("seed")) for d in draws)
    return f"seed {p.get('seed')}"


def _histories(c: Comparison) -> str:
    """The pair's history, and how many rows each cell history judged when they differ."""
    n: dict[str, int] = {}
    for r in c.rows:
        if r.floors:
            h = r.floors.split("/", 1)[0]
            n[h] = n.get(h, 0) + 1
    if set(n) <= {c.history}:
        return c.history
    out = c.history + " (" + ", ".join(f"{h} cells {k} rows" for h, k in sorted(n.items())) + ")"
    if c.history == "worker" and "worker" not in n and "cross" in n:
        out += ("; this table has no worker cells (made before they were measured apart): its cross cells, the "
                "only ones that saw a warm worker's spread, judged the worker rerun")
    return out


def _unfinished_lines(c: Comparison) -> list:
    """A side whose screen stopped before some of its ops ran: their rows count as ``broken`` (a
    gate must not pass an unfinished screen), and the line says that resuming it settles them."""
    L = []
    for side, s, as_ in (("A", c.a, Verdict.NEW), ("B", c.b, Verdict.BROKEN)):
        stopped = {o.op for o in s.ops if o.status in UNFINISHED}
        if not stopped:
            continue
        left = sorted(stopped)
        rows = sum(1 for r in c.rows if r.op in stopped and r.verdict == as_)
        where = str(s.path) if s.path else s.name
        L.append(f"unfinished: {side} stopped before {len(left)} op{'s' if len(left) != 1 else ''} ran "
                 f"({', '.join(left[:4])}{', ...' if len(left) > 4 else ''}; {rows} rows counted {as_.value} "
                 f"for that); `opscreen run --out {where}` resumes it")
    return L


def _verdict_lines(c: Comparison) -> list:
    """The row counts per verdict, the rule that decided them, and the geometric means."""
    cnt = c.counts()
    both = cnt["slower"] + cnt["faster"] + cnt["same"] + cnt["unresolved"] + cnt["pick"]
    L: list = [
        f"rows: {len(c.rows)}; measured in both {both}: slower {cnt['slower']}, faster {cnt['faster']}, "
        f"same {cnt['same']}, unresolved {cnt['unresolved']}, pick {cnt['pick']}; "
        f"broken {cnt['broken']}, fixed {cnt['fixed']}, gone {cnt['gone']}, new {cnt['new']}, failed in both {cnt['failed']}"
    ]
    L += _unfinished_lines(c)
    L += _floors_lines(c)
    L.append(
        f"verdict rule ({c.metric}, d = ln(B/A)): band = the widest of samples ({c.k:g} x combined noise; rows without "
        f"noise: {c.threshold * 100:g}%), floors (the wider of t(ops-1) x rms and the op-weighted 1-alpha/2 quantile of the row's floors cell, alpha {c.alpha:g}; "
        "/sqrt of the processes with --repeats), repeats (Welch t over processes, in place of samples when both runs "
        "have --repeats)"
        + (f", aa (the A/A drift of {len(c.floors)} ops, --aa)" if c.floors else "")
        + f"; faster/slower when |d| > band and |d| >= {c.min_change * 100:g}% (pick when the op's autotune picks "
        f"differ); same when |d| + band' <= {c.margin * 100:g}% (--margin; band' the same band at alpha {c.eq_alpha:g}: "
        f"the change's {100 * (1 - c.eq_alpha):g}% interval inside the margin, two one-sided tests); else unresolved; "
        f"never faster/slower/pick when a run's own samples of the judged side spread past {c.max_noise * 100:g}% "
        "(noisy, --max-noise)"
    )
    basis = {}
    for r in c.rows:
        if r.basis:
            basis[r.basis] = basis.get(r.basis, 0) + 1
    if basis:
        L.append("bands set by: " + ", ".join(f"{k} {v}" for k, v in sorted(basis.items(), key=lambda kv: -kv[1])))
    L += _throttled_lines(c)
    if basis.get("noisy"):
        noisy_ops = sorted({r.op for r in c.rows if r.basis == "noisy"})
        L.append(f"noisy: {basis['noisy']} rows moved past their band, but a run's own samples of them spread past "
                 f"{c.max_noise * 100:g}% (rsd; a graph replay's is about 0.05%): the reading was disturbed, so they "
                 f"are unresolved, not called; rerun those ops on an idle device ({first(noisy_ops, 6)})")
    small, called = c.small_kernel_calls()
    if small:
        L.append(f"small kernels: {small} of the {called} rows called faster or slower are graph rows under "
                 f"{SMALL_KERNEL_MS * 1000:g} us, which two processes of one setup read further apart than one run's "
                 "samples show (an H200 rerun called 19 of 64 such rows changed); widen their bands with a floors "
                 "table (drop --no-floors; opscreen calibrate) or --repeats 3 (docs/results.md)")
    exp, n = c.expected_false_calls()
    if n:
        L.append(f"expected false calls on a rerun of the same setup: about {exp:.1f} of these {n} rows "
                 f"(alpha {c.alpha:g} per row, where the floors table holds for these ops)")
    if c.picks:
        L.append(f"autotune picks differ in {len(c.picks)} op(s) (rows beyond their band there are 'pick', not "
                 "faster/slower; TRITON_CACHE_AUTOTUNING=1 with a shared cache dir pins plain @triton.autotune "
                 "winners between processes):")
        for op, diffs in sorted(c.picks.items())[:10]:
            L.append(f"  {op}: {_pick_text(diffs)}")
    g = c.geomean_ratio()
    ma, mb = c.a.geomeans(), c.b.geomeans()
    joined = sum(1 for r in c.rows if r.change is not None)
    L.append(f"geometric-mean speedup: A {_f3(ma['overall'])} over its {ma['rows']} ok rows, B {_f3(mb['overall'])} "
             f"over its {mb['rows']}; B/A over the {joined} rows both measured {_f3(g)}")
    return L


def _throttled_lines(c: Comparison) -> list:
    """How the rows a side measured while its device throttled were judged (by the floors
    table's throttled cells, else the conservative default: noise.judging), and those still
    called faster or slower."""
    L = []
    thr = [r for r in c.rows if r.throttled and r.floors]
    if thr and c.use_floors:
        own = sum(1 for r in thr if r.floors.endswith("/throttled"))
        dflt = len(thr) - own
        L.append(f"throttled: {len(thr)} rows were measured while a side's device throttled; {own} were judged by the "
                 f"floors table's throttled cells, {dflt} by the conservative default (no throttled cell backed by "
                 "as many ops as the default's): a power-capped clock spreads a row further between processes")
    called = [r for r in c.rows if r.throttled and r.verdict in (Verdict.FASTER, Verdict.SLOWER, Verdict.PICK)]
    if not called:
        return L
    by = {s: sum(1 for r in called if r.throttled == s) for s in ("A", "B", "A+B")}
    return L + [f"throttled: {len(called)} rows called faster, slower or pick were measured while the device throttled "
                f"(A {by['A']}, B {by['B']}, both {by['A+B']}; summary.csv column throttled says why): their change may "
                "be the device's, not the library's; their basis names the side"]


def _basis_cell(r: CompareRow) -> str:
    """The row's basis, and the throttled side where a run's device throttled while it measured the row."""
    return (r.basis or "-") + (f", {r.throttled} throttled" if r.throttled else "")


def _rows_table(title: str, rows: list[CompareRow], ms: bool) -> list:
    L: list = ["", title]
    if not rows:
        L.append("  (none)")
        return L
    t = table("change>", "judged>", "band>", "basis", "op", "dtype", "A>", "B>", "shape")
    for r in rows:
        t.row(
            _chg(r.change), (_chg(r.judged) + f" {r.side}") if r.judged is not None and r.side != "speedup" else "",
            ("±" + format(r.band * 100, ".1f") + "%") if r.band is not None else "-", _basis_cell(r),
            r.op + (f" {r.variant}" if r.variant else ""), r.dtype,
            _f3(r.a_speedup if ms else r.a_lib_ms), _f3(r.b_speedup if ms else r.b_lib_ms), _short_shape(r.shape),
        )
    L.append(t)
    return L


def narrowing(c: Comparison) -> str:
    """What narrows the unresolved rows' bands, given how A and B were measured."""
    n = min(int((s.caliber or {}).get("repeats") or 1) for s in (c.a, c.b))
    more = (f"more processes than --repeats {n} narrow the repeats bands" if n > 1
            else "--repeats 3 on both runs tests over processes and narrows floors bands by about 1/sqrt(3)")
    return f"{more} (--write-unresolved FILE lists their ops); opscreen calibrate measures this device's floors table"


def _unresolved_table(c: Comparison, top: int) -> list:
    """Rows whose band is too wide to see a change in, widest band first."""
    un = c.unresolved()
    if not un:
        return []
    title = (f"unresolved ({len(un)} rows: a change inside its band whose interval reaches past ±{c.margin * 100:g}%, "
             f"or, basis baseline, torch's latency moved and the library's did not"
             + (f", or, basis noisy, a run's own samples spread past {c.max_noise * 100:g}%" if any(r.basis == "noisy" for r in un) else "")
             + f"; {narrowing(c)}), widest band first"
             + (f" ({top} shown, --top)" if len(un) > top else "") + ":")
    L = _rows_table(title, un[:top], c.metric == "speedup")
    thin = thin_cells(c, un)
    if thin:
        n = sum(rows for _, rows in thin.values())
        cells = "; ".join(f"{label}: {ops} op{'s' if ops != 1 else ''}, {rows} rows" for label, (ops, rows) in thin.items())
        L.insert(2, f"  {n} of them in floors cells fewer than {THIN_OPS} ops back ({cells}): t(ops-1) pays for so few; "
                    "opscreen calibrate --timers-from RUN_DIR draws more ops of those timers")
    return L


THIN_OPS = 3  # a floors cell backed by fewer ops: its band is mostly the t critical value's price


def thin_cells(c: Comparison, rows: list[CompareRow]) -> dict[str, tuple[int, int]]:
    """The floors cells (of a measured table) fewer than THIN_OPS ops back that judged ``rows``:
    label -> (ops, rows), most rows first."""
    if c.table is None or c.table.default:
        return {}
    by_label = {cell.label(): cell for cell in c.table.cells}
    out: dict[str, list[int]] = {}
    for r in rows:
        cell = by_label.get(r.floors or "")
        if cell is not None and r.basis == "floors" and cell.ops < THIN_OPS:
            out.setdefault(cell.label(), [cell.ops, 0])[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items(), key=lambda kv: -kv[1][1])}


def _broken_table(c: Comparison, top: int) -> list:
    """Ops with rows measured in A that failed or are missing in B, and why."""
    br = c.broken()
    if not br:
        return []
    L: list = ["", f"broken in B ({len(br)} rows measured in A, failed or missing in B):"]
    ops = sorted({r.op for r in br})
    bst = {o.op: o for o in c.b.ops}
    t = table("op", "rows>", "in B")
    for op in ops[:top]:
        o = bst.get(op)
        why = f"{o.status}: {o.error}" if o is not None and o.error else (o.status if o is not None else "not in B")
        t.row(op, sum(1 for r in br if r.op == op), why)
    L.append(t)
    return L


def _op_ratios_table(c: Comparison, ops_top: int) -> list:
    """Per-op geometric mean of B/A, worst first; the middle elided past 2 x ``ops_top``."""
    ratios = c.op_ratios()
    if not ratios:
        return []
    L: list = ["", f"per-op geometric mean of B/A ({len(ratios)} ops; worst first):"]
    show = ratios if len(ratios) <= 2 * ops_top else ratios[:ops_top] + [None] + ratios[-ops_top:]
    t = table("op", "B/A>", "rows>", "slower>", "faster>")
    for x in show:
        if x is None:
            t.row("...", "", "", "", "")
            continue
        op, ratio, n, sl, fa = x
        t.row(op, f"{ratio:.3f}", n, sl, fa)
    L.append(t)
    return L
