"""``summary.csv`` / ``summary.json``: one row per (op, test, dtype, shape) of a run.

Lifecycle: :func:`build_summary` reads a run directory (``RUN_DIR/ops/<op>/`` per
docs/contracts.md) or a single op directory (``opscreen op --out DIR``) and returns
a :class:`Summary`; :func:`write_summary` writes ``summary.csv`` and
``summary.json`` next to it (temp file + rename, byte-identical for the same input:
no clocks, no absolute paths); :func:`load_summary` reads ``summary.json`` back and
rejects versions it does not know; :func:`ensure_summary` loads or builds.

Per op, rows come from ``record.log`` (full precision, opscreen's timer fields) and
are completed by the ``run.log`` tables (rows the record lacks, fields it lacks, the
``truncated`` flag, failure reasons). The op's status comes from ``ops_status.csv``
(batch runs) or ``result.json``; backend and device from ``run_identity.json`` and
``result.json``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable

from ..errors import UsageError
from .. import contracts
from ..fsio import atomic_write_text
from ._io import csv_text
from .records import REPEAT_DIR
from ..child.timed_value import TIMER_PARTS, TIMER_PROFILER, fallback_phase, timer_method
from ..tables import first, table, to_text
from . import throttle as _throttle
from .parse import CaseRow, ParsedLog, merge_rows, parse_record_json, parse_record_log, parse_run_log

__all__ = [
    "SUMMARY_VERSION",
    "COLUMNS",
    "RowStatus",
    "OpSummary",
    "Summary",
    "build_summary",
    "write_summary",
    "load_summary",
    "ensure_summary",
    "load_or_build",
    "summary_is_stale",
    "format_summary",
    "geomean",
    "resolve_run",
    "row_band",
    "NOISE_K",
    "DEFAULT_MAX_BAND",
    "PROCESS_FIELDS",
    "op_identity",
    "with_process_fields",
]

# 2: ``test`` holds the test function, ``variant`` what version 1 held in ``test``
# (the migration from 1: opscreen.contracts.summary_update_to_2)
# 3: ``"schema": "opscreen.summary/3"`` (no ``version``, no ``kind``); noise in percent
# (``*_noise_pct``, was ``*_rsd``), the median's interval (``*_ci_ms``), the run on each
# row (``run``, ``run_started_at``, ``suite_commit``): opscreen.contracts.summary_update_to_3
# 4: ``throttled`` on every row, ``telemetry``, ``device_state`` and ``throttled`` on every op
# (the device's state while the op measured): opscreen.contracts.summary_update_to_4
# 5: the %-of-peak columns (``peak_basis``, ``torch_pct_peak``, ``lib_pct_peak``, ``torch_pct_spec``,
# ``lib_pct_spec``) and ``peaks`` in the head (docs/peaks.md): opscreen.contracts.summary_update_to_5
SUMMARY_VERSION = contracts.SUMMARY.version
SUMMARY_KIND = "opscreen.summary"  # what version 1 and 2 said in ``kind``; 3 says it in ``schema``

# version 5's columns (opscreen.contracts holds them: its migration to 5 gives these); a
# version 6 that changes them writes its own list there and its update_to_6
COLUMNS = list(contracts.SUMMARY_5_COLUMNS)
#: the columns that say which run a row is of: the same on every row of a summary, so that
#: the summary.csv files of many runs concatenate into one table without a join
RUN_COLUMNS = ("run", "run_started_at", "suite_commit")
COL = {name: i for i, name in enumerate(COLUMNS)}
# A row whose processes (--repeats) disagree by more than this cannot be reproduced to
# within 3 % by another run of as many processes (bench/results/2026-11-29-h200x2-processes.md).
UNSTABLE_SPREAD = 0.03
SPREAD_WORST = 5
# A row's band is NOISE_K x its recorded noise (sqrt(torch^2 + lib^2) of its sides' noise), at least its
# spread between processes (--repeats); wider than DEFAULT_MAX_BAND, a change inside it
# cannot be told from noise: the row is "unresolved" (docs/results.md, "Unresolved rows").
NOISE_K = 2.0
DEFAULT_MAX_BAND = 0.05
#: A graph-replayed latency under this (ms) per call timed no kernel: the op launched nothing on the
#: device (a view such as ``expand_`` or ``flatten``) and the figure is the replay's own overhead spread
#: over its calls (8-19 ns on an H100, in one process 1.7 x the other's). The smallest kernel any H200
#: or H100 screen read took 0.87 us. Such a row is not "unresolved" (no number of processes would
#: resolve it); compare calls it ``same``, basis ``no-kernel``, and a floors fit leaves it out.
NO_KERNEL_MS = 0.0002

_OP_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class RowStatus(str, Enum):
    """Status of one case row."""

    OK = "ok"  # measured: a speedup (or both latencies) is known
    FAILED = "failed"  # the suite printed/recorded FAILED for the case
    NO_DATA = "no_data"  # SUCCESS but no latency/speedup to read


@dataclass
class OpSummary:
    """One op directory (or an ops_status.csv line without one), as the summary saw it."""

    op: str
    status: str
    rows: int = 0
    ok_rows: int = 0
    geomean: float | None = None
    error: str | None = None
    failures: list[dict] = field(default_factory=list)
    truncated: bool = False
    run_log: str | None = None  # relative to the summary's folder
    duration_s: float | None = None
    attempts: int | None = None
    backend: str | None = None
    device: str | None = None
    device_name: str | None = None
    timer: str | None = None
    sources: list[str] = field(default_factory=list)
    device_uuid: str | None = None  # from the op's identity (tells two hosts' GPU 0 apart)
    phases: dict | None = None  # result.json ``phases``: where the op's (last) process spent its time
    # why the graph timer could not time some rows (op_fallbacks): side, phase, timer, kind, message, rows, host_x
    fallbacks: list[dict] = field(default_factory=list)
    # result.json ``capture_aborts``: the tests whose graph capture killed a run of the op
    capture_aborts: list[str] = field(default_factory=list)
    # the op identity's ``autotune``: which config each autotuned kernel chose (child/autotune.py);
    # with --repeats, one record per process (``autotune_processes``)
    autotune: dict | None = None
    autotune_processes: list[dict] = field(default_factory=list)
    # result.json ``telemetry`` (op/telemetry.py; with --repeats, one block per process under
    # ``processes``), the identity's ``device_state``, and what opscreen.results.throttle reads of them
    telemetry: dict | None = None
    device_state: dict | None = None
    throttled: str | None = None


@dataclass
class Summary:
    """A run's summary: identity, ops, rows (tuples in :data:`COLUMNS` order)."""

    kind: str  # "run" | "op"
    name: str
    identity: dict
    caliber: dict
    ops: list[OpSummary]
    rows: list[list]
    version: int = SUMMARY_VERSION
    path: Path | None = None  # folder the summary belongs to (not written)
    max_band: float = DEFAULT_MAX_BAND  # rows with a wider band are "unresolved" (written in the head)
    noise_k: float = NOISE_K  # a row's band is noise_k x its recorded noise (--noise-k)
    peaks: dict | None = None  # the device's peaks the %-of-peak columns are of (results/peaks.py)

    # ------------------------------------------------------------ derived figures
    def row_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        si = COL["status"]
        for r in self.rows:
            out[r[si]] = out.get(r[si], 0) + 1
        return dict(sorted(out.items()))

    def op_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.ops:
            out[o.status] = out.get(o.status, 0) + 1
        return dict(sorted(out.items()))

    def geomeans(self) -> dict:
        si, di, vi = COL["status"], COL["dtype"], COL["speedup"]
        logs: dict[str, list[float]] = {}
        allv: list[float] = []
        for r in self.rows:
            v = r[vi]
            if r[si] == "ok" and v is not None and v > 0:
                lv = math.log(v)
                logs.setdefault(r[di], []).append(lv)
                allv.append(lv)
        by = {d: {"geomean": _exp_mean(v), "rows": len(v)} for d, v in sorted(logs.items())}
        return {"overall": _exp_mean(allv), "rows": len(allv), "by_dtype": by}

    def spread_stats(self) -> dict | None:
        """How far the processes of ``--repeats`` rows disagreed (``speedup_spread``):
        rows, median / p90 / max, rows over :data:`UNSTABLE_SPREAD` and the worst rows;
        None where no row merged two or more processes."""
        ri, si, ssi = COL["repeats"], COL["status"], COL["speedup_spread"]
        rows = [r for r in self.rows if r[si] == "ok" and (r[ri] or 0) >= 2 and r[ssi] is not None]
        if not rows:
            return None
        xs = [r[ssi] for r in rows]
        worst = sorted(rows, key=lambda r: -r[ssi])[:SPREAD_WORST]
        return {
            "rows": len(xs), "median": percentile(xs, 50), "p90": percentile(xs, 90), "max": max(xs),
            "over": sum(1 for x in xs if x > UNSTABLE_SPREAD), "over_limit": UNSTABLE_SPREAD,
            "worst": [{k: r[COL[k]] for k in ("op", "dtype", "shape", "repeats", "speedup_spread")} for r in worst],
        }

    def unresolved(self, max_band: float | None = None) -> dict:
        """Ok rows whose own band (:func:`row_band`) is wider than ``max_band`` (default
        :attr:`max_band`): ``{"max_band", "k", "rows", "by_op": {op: n}, "no_kernel": {"rows",
        "by_op"}}``; rows whose library timed no kernel (:func:`lib_no_kernel`, a view) are
        counted under ``no_kernel`` instead, whatever their band."""
        mb = self.max_band if max_band is None else max_band
        by_op: dict[str, int] = {}
        idle: dict[str, int] = {}
        for r in self.rows:
            if r[COL["status"]] != "ok":
                continue
            b = row_band(r, self.noise_k)
            if lib_no_kernel(r):
                idle[r[COL["op"]]] = idle.get(r[COL["op"]], 0) + 1
            elif b is not None and b > mb + 1e-12:
                by_op[r[COL["op"]]] = by_op.get(r[COL["op"]], 0) + 1
        return {"max_band": mb, "k": self.noise_k, "rows": sum(by_op.values()), "by_op": dict(sorted(by_op.items())),
                "no_kernel": {"rows": sum(idle.values()), "by_op": dict(sorted(idle.items()))}}

    def autotune_flips(self) -> list[dict]:
        """The autotuned kernels whose pick differs between an op's processes (``--repeats``):
        ``[{"op", "kernel", "key", "configs": [one per process]}]``; a finding for the
        library team (which configs are within noise of each other), and what compare's
        ``pick`` verdict is about between runs."""
        from ..child.autotune import differing

        out = []
        for o in self.ops:
            procs = o.autotune_processes
            seen = set()
            for k in range(1, len(procs)):
                for d in differing(procs[0], procs[k]):
                    if (d["kernel"], d["key"]) in seen:
                        continue
                    seen.add((d["kernel"], d["key"]))
                    cfgs = [((p.get("kernels") or {}).get(d["kernel"]) or {}).get("picks", {}).get(d["key"]) for p in procs]
                    out.append({"op": o.op, "kernel": d["kernel"], "key": d["key"], "configs": cfgs})
        return out

    def to_json_text(self) -> str:
        head = {
            contracts.SUMMARY.field: contracts.SUMMARY.tag(self.version),
            "summary_of": self.kind,
            "name": self.name,
            "identity": self.identity,
            "caliber": self.caliber,
            "counts": {"rows": self.row_counts(), "ops": self.op_counts()},
            "geomean": self.geomeans(),
            "spread": self.spread_stats(),
            "unresolved": self.unresolved(),
            "autotune_flips": self.autotune_flips(),
            "time": time_stats(self.ops),
            "peaks": self.peaks,
            "ops": [asdict(o) for o in self.ops],
            "columns": COLUMNS,
        }
        text = json.dumps(head, indent=1, sort_keys=False, allow_nan=False)
        enc = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
        rows = ",\n".join(["  " + enc(r) for r in self.rows])
        return text[:-2] + ',\n "rows": [\n' + rows + ("\n" if rows else "") + " ]\n}\n"

    def to_csv_text(self) -> str:
        return csv_text(COLUMNS, self.rows, bool_columns=(COL["truncated"],))

    def row_dicts(self) -> Iterable[dict]:
        for r in self.rows:
            yield dict(zip(COLUMNS, r))


def noise(r: list, side: str) -> float | None:
    """A summary row's noise of one side (``torch`` or ``lib``) as a fraction: its
    ``<side>_noise_pct`` / 100 (the bands are computed in fractions of ln)."""
    v = r[COL[f"{side}_noise_pct"]]
    return None if v is None else float(v) / 100.0


def no_kernel(ms: Any, timer: Any) -> bool:
    """Whether a reading is a graph replay that timed no kernel (:data:`NO_KERNEL_MS`)."""
    return bool(timer) and timer_method(timer) == "graph" and isinstance(ms, (int, float)) and 0 < ms < NO_KERNEL_MS


#: A row whose own samples spread past this in either run (the library's or torch's rsd, a
#: fraction, of a side that a device timer measured: :data:`NOISY_TIMERS`) is *noisy*: its
#: reading was disturbed while it measured, so its median says little about the kernel.
#: ``compare`` calls no such row faster, slower or pick (``unresolved``, basis ``noisy``),
#: ``noise.fit`` leaves such rows out of a floors table, so that one disturbed op does not widen
#: its cell for every other op, and the summary's text names their ops. A graph replay's rsd is
#: about 0.05 %; no row of the H200's 20 fitted screens passed 7.6 %, nor one of the first H100
#: host's 4.0 %, but one H100 host's warm workers read 1-1.3 us kernels at 5-49 %
#: (normal_tensor_float's medians 3.3-20.9 us where every other process read 3.0 us:
#: bench/results/2026-12-07-h100-worker-picks.md). nvbench's compare prints each result's noise
#: beside its verdict for the same reason.
NOISY = 0.10
#: The timers whose samples are steady enough for :data:`NOISY` to mean a disturbance: the device's
#: own clock over a replay or a trace. The host-timed ``direct`` and ``wallclock`` rows vary by
#: 10-100 % on a shared CPU and ~15 % on an H200 (graph-fallback) as a matter of course; their
#: samples band (``k`` x that noise) already holds them, so the rule leaves them alone.
NOISY_TIMERS = ("graph", "profiler")


def noisy(r: list, sides: Iterable[str] = ("lib", "torch"), limit: float = NOISY) -> bool:
    """Whether summary row ``r``'s own samples spread past ``limit`` on one of ``sides`` that a
    device timer measured (:data:`NOISY_TIMERS`) as a kernel's (a replay of no kernel, a view,
    reads its own overhead, 8-19 ns at 38-185 %: ``no_kernel``)."""
    for side in sides:
        v, timer = r[COL[f"{side}_noise_pct"]], r[COL[f"{side}_timer"]]
        if (isinstance(v, (int, float)) and v / 100.0 > limit and timer_method(timer) in NOISY_TIMERS
                and not no_kernel(r[COL[f"{side}_ms"]], timer)):  # a replay of no kernel is its own overhead's noise
            return True
    return False


def lib_no_kernel(r: list) -> bool:
    """The summary row's library side timed no kernel (:func:`no_kernel`)."""
    return no_kernel(r[COL["lib_ms"]], r[COL["lib_timer"]])


def row_band(r: list, k: float = NOISE_K) -> float | None:
    """One summary row's own band (|ln ratio|): ``k * sqrt(torch^2 + lib^2)`` of the noise
    both sides recorded (fractions), at least ``ln(1 + speedup_spread)`` (--repeats); None
    where the row recorded neither."""
    t, l, sp = noise(r, "torch"), noise(r, "lib"), r[COL["speedup_spread"]]
    band = k * math.sqrt(t ** 2 + l ** 2) if t is not None and l is not None else None
    if sp is not None and sp >= 0:
        band = max(band or 0.0, math.log1p(sp))
    return band


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """Linearly interpolated percentile of the finite values, q in [0, 100]; None for none."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _exp_mean(logs: list[float]) -> float | None:
    if not logs:
        return None
    return round(math.exp(math.fsum(logs) / len(logs)), 6)


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive finite values, None when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return _exp_mean(logs)


# ---------------------------------------------------------------- locating inputs

def resolve_run(path: str | Path) -> tuple[str, Path, list[tuple[str, Path]]]:
    """``(kind, root, [(op, op_dir)])`` for a run dir or a single op dir; UsageError otherwise."""
    root = Path(path)
    if not root.exists():
        raise UsageError(f"{root} does not exist: give a run directory (opscreen run --out) or an op directory (opscreen op --out)")
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory: give a run directory (opscreen run --out) or an op directory (opscreen op --out)")
    ops_dir = root / "ops"
    if ops_dir.is_dir() or (root / "ops_status.csv").is_file():
        ops = []
        if ops_dir.is_dir():
            for entry in sorted(os.scandir(ops_dir), key=lambda e: e.name):
                if entry.is_dir() and _OP_NAME.match(entry.name) and entry.name not in (".", ".."):
                    ops.append((entry.name, Path(entry.path)))
        return "run", root, ops
    if any((root / n).is_file() for n in ("run.log", "result.json", "record.log", "run_identity.json")):
        res = contracts.read(contracts.RESULT, root / "result.json") or {}
        cfg = contracts.read(contracts.CHILD_CONFIG, root / "child_config.json") or {}
        op = res.get("op") or cfg.get("op") or root.resolve().name
        return "op", root, [(str(op), root)]
    raise UsageError(
        f"{root} holds no ops/ folder and no run.log: give the --out directory of 'opscreen run' or 'opscreen op'"
    )


def _read_ops_status(root: Path) -> dict[str, dict]:
    p = root / "ops_status.csv"
    out: dict[str, dict] = {}
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            for rec in csv.DictReader(fh):
                if rec.get("op"):
                    out[rec["op"]] = rec
    except OSError:
        pass
    except (UnicodeDecodeError, csv.Error) as exc:  # damaged: one line, and how to get it back
        why = (f"not UTF-8 text (byte 0x{exc.object[exc.start:exc.start + 1].hex()} at offset {exc.start})"
               if isinstance(exc, UnicodeDecodeError) else f"not CSV ({exc})")
        raise UsageError(f"{p} is damaged: {why}; a resume rewrites it from the op dirs: opscreen run --out {root}") from None
    return out


DAMAGED = "damaged"  # an op whose record (result.json) is there, or should be, and cannot be read
#: op statuses of a screen that stopped before the op finished (a resume of the run finishes it):
#: the journal's not_run and interrupted (batch/journal.py UNFINISHED), and incomplete (read here:
#: an op dir without its record, as a hard kill leaves it)
UNFINISHED = ("not_run", "interrupted", "incomplete")


def json_damage(path: Path, contract: contracts.Contract, need_status: bool = False) -> str | None:
    """Why the record ``path`` cannot be read although it is there (None: it reads, or there is none)."""
    name = path.name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{name} is unreadable ({exc.strerror or exc})"
    if not data.strip():
        return f"{name} is empty"
    try:
        obj = contracts.upgrade(contract, json.loads(data.decode("utf-8")), name)
    except ValueError:  # UnicodeDecodeError too
        return f"{name} is truncated or not JSON ({len(data)} bytes)"
    except contracts.Damaged as exc:
        return str(exc)
    if need_status and not (isinstance(obj.get("status"), str) and obj["status"]):
        return f"{name} holds no status"
    return None


def _record_damage(op_dir: Path) -> str | None:
    """Why an op's result is lost: its result.json is damaged, or missing beside the batch
    runner's ``.complete`` marker; None when it reads (or the op never finished)."""
    p = op_dir / "result.json"
    if not os.path.lexists(p):
        why = "result.json is missing beside its .complete marker" if (op_dir / ".complete").exists() else None
    else:
        why = json_damage(p, contracts.RESULT, need_status=True)
    return f"{why}: the op's record is damaged, run it again (a resume of its run does)" if why else None


def _f(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _i(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _s(v: Any) -> str | None:
    if v is None or v == "":
        return None
    return str(v)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


# ---------------------------------------------------------------- per op

def _op_rows(op_dir: Path) -> tuple[list[CaseRow], ParsedLog | None, list[str]]:
    rec = None
    sources = []
    rl = op_dir / "record.log"
    if rl.is_file():
        rec = parse_record_log(rl)
    else:
        for name in ("record.json", "result_record.json"):
            if (op_dir / name).is_file():
                rec = parse_record_json(op_dir / name)
                break
    rows: list[CaseRow] = []
    if rec is not None and rec.rows:
        sources.append(rec.source)
        rows = rec.rows
    log = None
    if (op_dir / REPEAT_DIR).is_dir():
        # --repeats: the record log holds the merged rows; failures and truncation
        # come from each repeat's own run.log (the op's run.log is the harness's account)
        return rows, _repeats_log(op_dir / REPEAT_DIR, rec), sources
    if (op_dir / "run.log").is_file():
        # fast path: the record log has every row with opscreen's fields; read only
        # what surrounds the tables (truncation, failures) unless run.log has more tables
        complete = bool(rows) and all(r.lib_timer is not None and r.lib_rsd is not None for r in rows)
        log = parse_run_log(op_dir / "run.log", rows=not complete)
        if complete and log.tables > rec.tables:
            log = parse_run_log(op_dir / "run.log")
        if log.rows:
            sources.append(log.source)
            rows = merge_rows(rows, log.rows)
    if rec is not None and rec.truncated and log is None:
        log = rec
    return rows, log, sources


def _repeats_log(folder: Path, rec: ParsedLog | None) -> ParsedLog:
    """What the repeats' run logs say around their tables, as one log: failures (each
    once), a fatal error, truncated when any repeat's log or the merged record was cut."""
    out = ParsedLog(source=REPEAT_DIR, truncated=bool(rec and rec.truncated), tables=rec.tables if rec else 0)
    seen = set()
    subdirs = sorted((d for d in folder.iterdir() if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name))
    for d in subdirs:
        if not (d / "run.log").is_file():
            continue
        log = parse_run_log(d / "run.log", rows=False)
        out.truncated = out.truncated or log.truncated
        out.fatal = out.fatal or log.fatal
        for f in log.failures:
            if (f.node, f.kind, f.reason) not in seen:
                seen.add((f.node, f.kind, f.reason))
                out.failures.append(f)
    return out


def _summarize_op(
    op: str,
    op_dir: Path | None,
    base: Path,
    status_line: dict | None,
    run_identity: dict,
) -> tuple[OpSummary, list[list]]:
    result = _read_obj(contracts.RESULT, op_dir, "result.json")
    ident = _read_obj(contracts.RUN_IDENTITY, op_dir, "run_identity.json")
    line = status_line or {}
    status = _s(line.get("status")) or _s(result.get("status")) or ("incomplete" if op_dir is not None else "unknown")
    damage = _record_damage(op_dir) if op_dir is not None else None
    status = DAMAGED if damage else status
    cal = ident.get("caliber") or {}
    rcal = run_identity.get("caliber") or {}
    backend = _s(result.get("backend")) or _s(line.get("backend")) or _s(cal.get("backend")) or _s(rcal.get("backend"))
    device = _s(result.get("device")) if result.get("device") is not None else _s(line.get("device"))
    if device is None and ident.get("device_index") is not None:
        device = str(ident.get("device_index"))
    device_name = _s(ident.get("device_name")) or _s(cal.get("device_name")) or _s(rcal.get("device_name"))
    timer = _s(result.get("timer")) or _s(line.get("timer")) or _s(cal.get("timer"))
    info = OpSummary(
        op=op,
        status=status,
        error=damage or _s(line.get("error")) or _s(result.get("error")),
        duration_s=_f(line.get("duration_s")) if line.get("duration_s") not in (None, "") else _f(result.get("duration_s")),
        attempts=_i(line.get("attempts")) if line.get("attempts") not in (None, "") else _i(result.get("attempts")),
        backend=backend,
        device=device,
        device_name=device_name,
        timer=timer,
        device_uuid=_s(ident.get("device_uuid")),
        phases=_phases(result.get("phases")),
        capture_aborts=[a["test"] for a in result.get("capture_aborts") or ()
                        if isinstance(a, dict) and isinstance(a.get("test"), str)],
        autotune=ident.get("autotune") if isinstance(ident.get("autotune"), dict) else None,
        autotune_processes=_repeat_autotune(op_dir) if op_dir is not None else [],
        device_state=ident.get("device_state") if isinstance(ident.get("device_state"), dict) else None,
    )
    if op_dir is None:
        return info, []
    info.telemetry, info.throttled = op_telemetry(op_dir, result)
    rows, log, sources = _op_rows(op_dir)
    info.sources = sources
    if (op_dir / "run.log").is_file():
        info.run_log = os.path.relpath(op_dir / "run.log", base).replace(os.sep, "/")
    truncated = bool(log.truncated) if log is not None else False
    info.truncated = truncated
    if log is not None:
        info.failures = [{"node": f.node, "kind": f.kind, "reason": f.reason} for f in log.failures]
    out = []
    logs = []
    ok = 0
    for r in rows:
        speedup = r.speedup
        if speedup is None and r.torch_ms is not None and r.lib_ms:
            speedup = r.torch_ms / r.lib_ms
        if r.status == "FAILED":
            st = RowStatus.FAILED.value
        elif speedup is not None or (r.torch_ms is not None and r.lib_ms is not None):
            st = RowStatus.OK.value
            ok += 1
            if speedup is not None and speedup > 0:
                logs.append(math.log(speedup))
        else:
            st = RowStatus.NO_DATA.value
        out.append(_row(op, r, st, speedup, (status, backend, device, device_name, truncated), info.throttled))
    info.fallbacks = op_fallbacks(out)
    info.rows = len(out)
    info.ok_rows = ok
    info.geomean = _exp_mean(logs)
    return info, out


def _row(op: str, r: CaseRow, st: str, speedup: float | None, of_op: tuple, throttled: str | None = None) -> list:
    """One summary row (:data:`COLUMNS`) of the case ``r`` of ``op``: ``st`` its status,
    ``of_op`` the op's (status, backend, device, device_name, truncated), ``throttled`` the
    op's telemetry verdict (opscreen.results.throttle); the run's columns are left empty
    (:func:`build_summary` fills them in)."""
    variant = r.op if r.op != op else ""
    if r.occurrence > 1:
        variant = f"{variant}#{r.occurrence}"
    return [
        op, test_name(r.test_case), variant, r.dtype, r.shape, st,
        _clean(r.torch_ms), _clean(r.lib_ms), _clean(speedup), _clean(r.tflops), _clean(r.torch_gbps), _clean(r.lib_gbps),
        r.torch_timer, r.lib_timer, r.torch_samples, r.lib_samples,
        contracts.noise_pct(_clean(r.torch_rsd)), contracts.noise_pct(_clean(r.lib_rsd)),
        _ci_ms(r.torch_ci, r.torch_ms), _ci_ms(r.lib_ci, r.lib_ms),
        *of_op, r.source,
        r.repeats, _clean(r.torch_spread), _clean(r.lib_spread), _clean(r.speedup_spread),
        _clean(r.torch_host_ms), _clean(r.lib_host_ms), r.torch_fallback, r.lib_fallback,
        None, None, None, throttled,
        None, None, None, None, None,
    ]  # fmt: skip


def op_telemetry(op_dir: Path, result: dict) -> tuple[dict | None, str | None]:
    """An op's telemetry block and its ``throttled`` cell: its result.json's, else (``--repeats``)
    each process's under ``repeats/<k>/``, as ``{"processes": [...]}``."""
    tel = result.get("telemetry") if isinstance(result.get("telemetry"), dict) else None
    if tel is not None:
        return tel, _throttle.throttled(tel)
    rep = op_dir / REPEAT_DIR
    if not rep.is_dir():
        return None, None
    blocks = []
    for d in sorted((p for p in rep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        t = _read_obj(contracts.RESULT, d, "result.json").get("telemetry")
        blocks.append(t if isinstance(t, dict) else None)
    if not any(blocks):
        return None, None
    return {"processes": blocks}, _throttle.combine([_throttle.throttled(b) for b in blocks])


def _ci_ms(ci: float | None, ms: float | None) -> float | None:
    """The half width of a side's 95 % interval in ms: the record's ``ci`` (relative to the
    latency) times the latency; None where either is unknown."""
    ci, ms = _clean(ci), _clean(ms)
    return None if ci is None or ms is None else ci * ms


def _read_obj(contract, op_dir: Path | None, name: str) -> dict:
    """The contract file ``name`` of an op dir as a dict; {} when absent or damaged."""
    obj = contracts.read(contract, op_dir / name) if op_dir is not None else None
    return obj if isinstance(obj, dict) else {}


def _repeat_autotune(op_dir: Path) -> list[dict]:
    """The autotune records of an op's ``--repeats`` processes (``repeats/<k>/run_identity.json``), in order."""
    out = []
    rep = op_dir / REPEAT_DIR
    if not rep.is_dir():
        return out
    for d in sorted((p for p in rep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        ident = contracts.read(contracts.RUN_IDENTITY, d / "run_identity.json")
        if isinstance(ident, dict) and isinstance(ident.get("autotune"), dict):
            out.append(ident["autotune"])
    return out


_SIDES = (("torch", "torch_timer", "torch_fallback", "torch_ms", "torch_host_ms"),
          ("lib", "lib_timer", "lib_fallback", "lib_ms", "lib_host_ms"))


def split_fallback(text: str | None) -> tuple[str | None, str | None]:
    """``"capture: capture-unsupported: CUDA error: ..."`` -> (kind, the error's line)."""
    if not text:
        return None, None
    parts = text.split(": ", 2)
    return (parts[1], parts[2]) if len(parts) == 3 else (None, text)


def op_fallbacks(rows: list[list]) -> list[dict]:
    """Why the graph timer could not time some of one op's rows: one entry per side,
    phase, timer and reason, with its rows and, for the profiler, the median ratio of
    the host-inclusive latency to the device figure (``host_x``)."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        for side, tcol, fcol, mcol, hcol in _SIDES:
            phase = fallback_phase(r[COL[tcol]])
            if phase is None:
                continue
            kind, message = split_fallback(r[COL[fcol]])
            key = (side, phase, timer_method(r[COL[tcol]]), kind, message)
            g = groups.setdefault(key, {"rows": 0, "ratios": []})
            g["rows"] += 1
            ms, host = r[COL[mcol]], r[COL[hcol]]
            if key[2] == TIMER_PROFILER and ms and host:
                g["ratios"].append(host / ms)
    out = []
    for (side, phase, timer, kind, message), g in sorted(groups.items(), key=lambda kv: (-kv[1]["rows"], str(kv[0]))):
        host_x = round(statistics.median(g["ratios"]), 3) if g["ratios"] else None
        out.append({"side": side, "phase": phase, "timer": timer, "kind": kind, "message": message, "rows": g["rows"],
                    "host_x": host_x})
    return out


PHASES = (("start_imports_s", "start+imports"), ("collection_s", "collection"), ("measurement_s", "measurement"),
          ("teardown_s", "teardown"))
SLOWEST = 5


def _phases(v: Any) -> dict | None:
    if not isinstance(v, dict):
        return None
    out: dict = {k: _f(v.get(k)) for k, _ in PHASES}
    out["mode"] = v.get("mode") if isinstance(v.get("mode"), str) else None
    w = v.get("worker")
    if isinstance(w, dict):
        out["worker_pid"] = w.get("pid")
        out["worker_imports_s"] = _f(w.get("imports_s"))
        rep = w.get("replaces")
        out["worker_replaces"] = rep.get("why") if isinstance(rep, dict) and isinstance(rep.get("why"), str) else None
    out["worker_attempt"] = v.get("worker_attempt", {}).get("status") if isinstance(v.get("worker_attempt"), dict) else None
    t = v.get("timer")
    if isinstance(t, dict):
        out["timer"] = {k: _f(t.get(k)) for k in TIMER_KEYS}
    return out


#: What ``phases.timer`` holds: opscreen's timers' share of an op's measurement phase.
TIMER_KEYS = ("timer_s", *TIMER_PARTS, "other_s", "measurements")


def timer_stats(timed: list) -> dict | None:
    """Of the measurement phase of the ops that report ``phases.timer``: what opscreen's
    timers took (warm-up, the graph's capture, samples, the rest) and what the suite's
    own code between measurements took (inputs, references, its loops); None when no op
    reports it."""
    ph = [o.phases for o in timed if o.phases and o.phases.get("timer") and o.phases.get("measurement_s") is not None]
    if not ph:
        return None
    sums = {k: round(sum(p["timer"].get(k) or 0.0 for p in ph), 3) for k in TIMER_KEYS}
    measurement = round(sum(p["measurement_s"] for p in ph), 3)
    return {"ops": len(ph), "measurement_s": measurement, **sums,
            "suite_s": round(max(0.0, measurement - sums["timer_s"]), 3)}


def isolation_stats(timed: list) -> dict:
    """How the ops ran: in warm workers (how many workers, their start and imports, paid
    once each and shared by the ops after each worker's first) or in fresh processes, and
    how many ops a worker failed and a fresh process ran again."""
    ph = [o.phases or {} for o in timed]
    in_workers = [p for p in ph if p.get("mode") == "worker" and p.get("worker_pid")]
    workers = {p["worker_pid"]: p.get("worker_imports_s") or 0.0 for p in in_workers}
    # each worker once (its ops all say why it replaced the one before)
    replaced = Counter(why for why in {p["worker_pid"]: p.get("worker_replaces") for p in in_workers}.values() if why)
    return {"in_workers": sum(1 for p in ph if p.get("mode") == "worker"),
            "in_processes": sum(1 for p in ph if p.get("mode") == "process"),
            "workers": len(workers), "worker_imports_s": round(sum(workers.values()), 3),
            "fresh_reruns": sum(1 for p in ph if p.get("worker_attempt")),
            "replaced": dict(sorted(replaced.items()))}


def time_stats(ops: list[OpSummary]) -> dict | None:
    """Where the screen's time went: the sum of the ops' walls (every attempt), the sum
    over ops of each phase of their (last) process with its share of that wall, the rest
    (``other``: interpreter exit, harness, earlier attempts) and the slowest ops; None
    without an op wall."""
    timed = [o for o in ops if o.duration_s is not None]
    if not timed:
        return None
    total = round(sum(o.duration_s for o in timed), 3)  # type: ignore[misc]
    sums = {k: round(sum((o.phases or {}).get(k) or 0.0 for o in timed), 3) for k, _ in PHASES}
    share = (lambda v: round(v / total, 4) if total > 0 else None)
    phases = {k: {"s": v, "share": share(v)} for k, v in sums.items()}
    other = round(max(0.0, total - sum(sums.values())), 3)
    phases["other"] = {"s": other, "share": share(other)}
    slowest = sorted(timed, key=lambda o: (-(o.duration_s or 0.0), o.op))[:SLOWEST]
    return {"ops": len(timed), "with_phases": sum(1 for o in timed if o.phases), "wall_s": total, "phases": phases,
            "isolation": isolation_stats(timed), "timers": timer_stats(timed),
            "capture_aborts": {o.op: o.capture_aborts for o in timed if o.capture_aborts},
            "slowest": [{"op": o.op, "wall_s": o.duration_s, "status": o.status, **(o.phases or {})} for o in slowest]}


def format_time_stats(t: dict) -> list:
    """The "where the time went" block of :func:`format_summary`."""
    lines: list = [f"where the time went: {t['ops']} ops, {t['wall_s']:.1f} s of op wall"
                   + (f" ({t['ops'] - t['with_phases']} without phases)" if t["with_phases"] < t["ops"] else "")]
    tab = table("phase", "s>", "share>")
    for key, label in (*PHASES, ("other", "other (exit, harness, retries)")):
        p = t["phases"][key]
        tab.row(label, f"{p['s']:.1f}", _pct(p["share"]))
    lines.append(tab)
    tm = t.get("timers")
    if tm and tm["measurement_s"] > 0:
        pct = (lambda v: f"{100 * v / tm['measurement_s']:.0f} %")
        told = sum(tm[p] for p in TIMER_PARTS)
        host = f", the profiler's host latency {tm['host_s']:.1f} s" if tm["host_s"] > 0 else ""
        first_calls = f"first calls {tm['first_s']:.1f} s (compile, autotune, load), " if tm["first_s"] > 0 else ""
        parts = (f": {first_calls}warm-up {tm['warmup_s']:.1f} s, graph capture {tm['capture_s']:.1f} s, samples "
                 f"{tm['samples_s']:.1f} s{host}, other {tm['other_s']:.1f} s" if told > 0 else "")
        lines.append(f"of the measurement ({tm['ops']} ops, {tm['measurement_s']:.1f} s): opscreen's timers "
                     f"{tm['timer_s']:.1f} s ({pct(tm['timer_s'])}; {int(tm['measurements'])} measurements{parts}), "
                     f"the suite's own code {tm['suite_s']:.1f} s ({pct(tm['suite_s'])}: inputs, references, its loops)")
    iso = t.get("isolation") or {}
    if iso.get("in_workers"):
        lines.append(f"{iso['in_workers']} ops ran in {iso['workers']} warm workers (their start and imports, "
                     f"{iso['worker_imports_s']:.1f} s, count in each worker's first op), {iso['in_processes']} in fresh "
                     f"processes; {iso['fresh_reruns']} ran again fresh after they did not pass in a worker")
        if iso.get("replaced"):
            lines.append("workers replaced by their lane: " + ", ".join(
                f"{n} for {why}" for why, n in iso["replaced"].items()) + " (phases.worker.replaces in result.json)")
    aborts = t.get("capture_aborts") or {}
    if aborts:
        lines.append(f"{len(aborts)} op{'s' if len(aborts) != 1 else ''} ran again after a process died inside a "
                     "graph capture, those tests timed "
                     "without capture (result.json capture_aborts): " + ", ".join(sorted(aborts)))
    lines.append("slowest ops: " + ", ".join(f"{o['op']} {o['wall_s']:.1f} s" for o in t["slowest"]))
    return lines


def test_name(node: str | None) -> str:
    """``benchmark/test_abs.py::test_abs`` -> ``test_abs`` (with pytest's parameter id,
    if any); "" when the logs do not say which test measured the row."""
    return node.rsplit("::", 1)[-1] if node else ""


def build_summary(path: str | Path, peaks_dir: str | Path | None = None) -> Summary:
    """Read a run directory or an op directory into a :class:`Summary`; its rows' %-of-peak cells
    are of the device's peaks file in ``peaks_dir`` (default: opscreen.backends.peaks.peaks_dir)."""
    kind, root, op_dirs = resolve_run(path)
    why = json_damage(root / "run_identity.json", contracts.RUN_IDENTITY) if kind == "run" else None
    if why:  # as `opscreen run` refuses to resume it
        raise UsageError(f"{root}: {why}; it held the run's settings and caliber, so the run cannot be summarised "
                         f"as measured (each op dir still can: opscreen summary {root / 'ops' / 'OP'})")
    run_identity = contracts.read(contracts.RUN_IDENTITY, root / "run_identity.json")
    run_identity = run_identity if isinstance(run_identity, dict) else {}
    status_lines = _read_ops_status(root) if kind == "run" else {}
    ops: list[OpSummary] = []
    rows: list[list] = []
    have = {op for op, _ in op_dirs}
    entries: list[tuple[str, Path | None]] = list(op_dirs) + [(op, None) for op in status_lines if op not in have]
    entries.sort(key=lambda e: e[0])
    first_op_identity: dict = {}
    for op, d in entries:
        if d is not None and not first_op_identity and not run_identity:
            ident = contracts.read(contracts.RUN_IDENTITY, d / "run_identity.json")
            if isinstance(ident, dict):
                first_op_identity = ident
        info, r = _summarize_op(op, d, root, status_lines.get(op), run_identity)
        ops.append(info)
        rows.extend(r)
    identity = run_identity or first_op_identity
    caliber = caliber_of(identity)
    if caliber and not caliber.get("device_name"):
        for o in ops:
            if o.device_name:
                caliber["device_name"] = o.device_name
                break
    name = root.resolve().name
    run_cells = run_columns(name, identity, caliber)
    at = COL[RUN_COLUMNS[0]]
    for r in rows:
        r[at:at + len(RUN_COLUMNS)] = run_cells
    recorded = _recorded_peaks(op_dirs[0][1]) if op_dirs else None
    peaks = fill_peaks(rows, ops, caliber, peaks_dir, recorded)
    return Summary(kind=kind, name=name, identity=identity, caliber=caliber, ops=ops, rows=rows, path=root,
                   peaks=peaks)


def _recorded_peaks(op_dir: Path | None) -> dict | None:
    """The peaks an op's identity recorded when it ran (its ``peaks`` block, source peaks_file), or None."""
    ident = contracts.read(contracts.RUN_IDENTITY, op_dir / "run_identity.json") if op_dir is not None else None
    pk = ident.get("peaks") if isinstance(ident, dict) else None
    if isinstance(pk, dict) and pk.get("source") == "peaks_file" and pk.get("achievable"):
        return {**pk, "found_by": "identity"}
    return None


def fill_peaks(rows: list[list], ops: list[OpSummary], caliber: dict, peaks_dir=None,
               recorded: dict | None = None) -> dict | None:
    """Fill the rows' %-of-peak cells from the peaks the run recorded (``recorded``: its first op's
    identity), else from the peaks file of the run's device (found by the ops' device UUID, else
    the device name); the summary's ``peaks`` block, None where there are none."""
    from ..backends import peaks as _bpeaks
    from . import peaks as _rpeaks

    uuid = next((o.device_uuid for o in ops if o.device_uuid), None)
    name = (caliber or {}).get("device_name") or next((o.device_name for o in ops if o.device_name), None)
    found = recorded or _bpeaks.find(uuid, name, Path(peaks_dir) if peaks_dir is not None else None)
    if found is None:
        return None
    at = COL[contracts.PEAK_COLUMNS[0]]
    named = []
    for r in rows:
        d = dict(zip(COLUMNS, r))
        cells = _rpeaks.row_cells(d, found)
        r[at:at + len(contracts.PEAK_COLUMNS)] = cells
        d.update(zip(contracts.PEAK_COLUMNS, cells))
        named.append(d)
    return _rpeaks.summary_peaks(found, _rpeaks.furthest(named))


def run_columns(name: str, identity: dict, caliber: dict) -> list:
    """The cells of :data:`RUN_COLUMNS`: the run's (or op dir's) name, when it started
    (its identity's ``started_at``, ISO 8601 UTC) and the suite's commit (the caliber's;
    empty where the suite was no git checkout of its own)."""
    commit = caliber.get("suite_commit") if caliber else None
    if commit is None:
        commit = (identity.get("suite") or {}).get("commit") if isinstance(identity.get("suite"), dict) else None
    return [name, _s(identity.get("started_at")), _s(commit)]


def write_summary(summary: Summary, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Write summary.csv and summary.json (atomically) into ``out_dir`` (default: the run dir)."""
    out = Path(out_dir) if out_dir is not None else summary.path
    if out is None:
        raise UsageError("no output folder for the summary: pass --out DIR")
    c = atomic_write_text(out / "summary.csv", summary.to_csv_text())
    j = atomic_write_text(out / "summary.json", summary.to_json_text())
    return c, j


def load_summary(path: str | Path) -> Summary:
    """Read ``summary.json`` (a file, or a folder holding one); reject unknown versions."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    try:
        with open(p, encoding="utf-8") as fh:
            obj = json.load(fh)
    except OSError:
        raise UsageError(f"{p} is missing: run 'opscreen summary {p.parent}' first") from None
    except ValueError as exc:
        raise UsageError(f"{p} is not valid JSON ({exc}): re-run 'opscreen summary {p.parent}'") from None
    if not _is_summary(obj):
        raise UsageError(f"{p} is not an opscreen summary")
    if contracts.SUMMARY.field not in obj and "version" not in obj:
        obj = {**obj, "version": None}  # a summary always says its version: no version is a damaged one
    try:  # version 1 -> 2 -> 3: contracts.summary_update_to_2, summary_update_to_3
        obj = contracts.upgrade(contracts.SUMMARY, obj, p)
    except contracts.NewerVersion as exc:
        raise UsageError(str(exc)) from None
    except contracts.Damaged as exc:
        raise UsageError(f"{exc}: re-run 'opscreen summary {p.parent}'") from None
    cols = list(obj.get("columns") or COLUMNS)
    rows = obj.get("rows") or []
    if cols != COLUMNS:
        idx = [cols.index(c) if c in cols else None for c in COLUMNS]
        rows = [[(r[i] if i is not None else None) for i in idx] for r in rows]
    known = set(OpSummary.__dataclass_fields__)
    ops = [OpSummary(**{k: v for k, v in o.items() if k in known}) for o in obj.get("ops") or []]
    return Summary(
        kind=obj.get("summary_of", "run"),
        name=obj.get("name", p.parent.name),
        identity=obj.get("identity") or {},
        caliber=caliber_of(obj.get("identity") or {}, obj.get("caliber")),
        ops=ops,
        rows=rows,
        path=p.parent,
        peaks=obj.get("peaks") if isinstance(obj.get("peaks"), dict) else None,
    )


def _is_summary(obj: Any) -> bool:
    """A summary.json says so: ``"schema": "opscreen.summary/N"`` (3 on), or ``kind``
    ``opscreen.summary`` beside a ``version`` (1 and 2: a summary always said its version)."""
    if not isinstance(obj, dict):
        return False
    tag = obj.get(contracts.SUMMARY.field)
    if isinstance(tag, str) and tag.startswith(contracts.SUMMARY.prefix):
        return True
    return obj.get("kind") == SUMMARY_KIND and contracts.SUMMARY.field not in obj


def caliber_of(identity: dict, caliber: dict | None = None) -> dict:
    """The caliber block of a run or op (``caliber``, else its identity's), with its
    ``isolation`` filled in where an identity written before the block held it does not say
    it: the mode its settings asked (a run), the mode its op ran in (an op dir), else ``op``
    (the only mode before warm workers); its ``input_seed`` where the block does not hold it:
    ``off``, what every run made before the setting ran with; and its ``triton_cache_autotuning`` where the block
    does not hold it but the op's identity recorded what its child found at start
    (``tuning_caches_at_start``; a run identity of that time does not say, and stays without)."""
    cal = dict(caliber if caliber is not None else identity.get("caliber") or {})
    if cal and not cal.get("isolation"):
        cal["isolation"] = (identity.get("settings") or {}).get("isolation") or identity.get("isolation") or "op"
    if cal and "input_seed" not in cal:
        cal["input_seed"] = "off"  # opscreen seeded nothing before the setting (opscreen.child.inputs)
    seen = (identity.get("tuning_caches_at_start") or {}).get("triton_cache_autotuning")
    if cal and "triton_cache_autotuning" not in cal and isinstance(seen, bool):
        cal["triton_cache_autotuning"] = "1" if seen else "0"
    return cal


def summary_is_stale(d: Path) -> bool:
    """A run/op dir's ``summary.json`` is older than what it summarises: an op finished,
    was resumed, retried or cleared after it was written (``ops_status.csv``, an op's
    ``result.json`` or ``record.log`` is newer)."""
    try:
        made = (d / "summary.json").stat().st_mtime_ns
    except OSError:
        return True
    sources = [d / "ops_status.csv", d / "result.json", d / "record.log"]
    ops = d / "ops"
    if ops.is_dir():
        for op in ops.iterdir():
            sources += [op / "result.json", op / "record.log"]
    for f in sources:
        try:
            if f.stat().st_mtime_ns > made:
                return True
        except OSError:
            continue
    return False


def load_or_build(path: str | Path, *, rebuild: bool = False) -> tuple[Summary, bool]:
    """Load ``summary.json`` from a run/op dir (or a summary.json path), else build the
    summary; writes nothing. A ``summary.json`` older than the run it summarises (a
    resume finished more ops since) is built again. Returns ``(summary, built)``:
    ``built`` says it is not on disk yet (:func:`write_summary` it once the caller has
    decided to go on)."""
    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        return load_summary(p), False
    if not rebuild and (p / "summary.json").is_file() and not summary_is_stale(p):
        return load_summary(p), False
    return build_summary(p), True


def ensure_summary(path: str | Path, *, rebuild: bool = False) -> Summary:
    """Load ``summary.json`` from a run/op dir (or a summary.json path); build and write it when missing."""
    s, built = load_or_build(path, rebuild=rebuild)
    if built:
        write_summary(s)
    return s


# ---------------------------------------------------------------- text output

def _fmt(v: float | None, nd: int = 3) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def format_summary(s: Summary) -> str:
    cal = s.caliber or {}
    ident = s.identity or {}
    parts = []
    for k in ("backend", "device_name", "timer", "level", "shape_mode", "use_flagtune", "isolation"):
        v = cal.get(k) if cal.get(k) is not None else ident.get(k)
        if v is not None and v != "":
            parts.append(f"{k} {v}")
    lines = [f"{s.kind} {s.name}" + (f"  ({', '.join(parts)})" if parts else "")]
    oc = s.op_counts()
    lines.append(f"ops:  {sum(oc.values())}  " + ", ".join(f"{k} {v}" for k, v in oc.items()))
    rc = s.row_counts()
    trunc = sum(1 for o in s.ops if o.truncated)
    lines.append(
        f"rows: {sum(rc.values())}  " + ", ".join(f"{k} {v}" for k, v in rc.items())
        + (f"  (ops with a truncated log: {trunc})" if trunc else "")
    )
    g = s.geomeans()
    lines.append("geometric-mean speedup (ok rows; >1: the library is faster than torch)")
    t = table("dtype", "geomean>", "rows>")
    for d, v in g["by_dtype"].items():
        t.row(d or "?", _fmt(v["geomean"]), v["rows"])
    t.row("overall", _fmt(g["overall"]), g["rows"])
    lines.append(t)
    sp = s.spread_stats()
    if sp:
        lines.append(
            f"between processes (--repeats; speedup max/min - 1 per row): {sp['rows']} rows, median "
            f"{_pct(sp['median'])}, p90 {_pct(sp['p90'])}, max {_pct(sp['max'])}; "
            f"{sp['over']} over {_pct(sp['over_limit'], 0)} (a rerun may differ by as much)"
        )
        worst = table("spread>", "op", "dtype", "shape", "processes>")
        for w in sp["worst"]:
            if w["speedup_spread"] > sp["over_limit"]:
                worst.row(_pct(w["speedup_spread"]), w["op"], w["dtype"] or "?", w["shape"], w["repeats"])
        if len(worst):
            lines.append(worst)
    lines += _unresolved_lines(s)
    lines += _noisy_lines(s)
    lines += _autotune_lines(s)
    lines += fallback_lines(s)
    lines += telemetry_lines(s)
    lines += peak_lines(s)
    ts = time_stats(s.ops)
    if ts:
        lines.extend(format_time_stats(ts))
    return to_text(lines)


def first_telemetry(o: OpSummary) -> dict:
    """An op's telemetry block: its own, or (--repeats) its first process's; {} where none."""
    tel = o.telemetry or {}
    if "processes" in tel:
        tel = next((t for t in tel["processes"] if isinstance(t, dict)), {})
    return tel


def telemetry_sources(ops: list[OpSummary]) -> tuple[str, str | None]:
    """``nvml 8 ops, unknown 2 ops``: where the ops' telemetry came from; and the most common
    reason of those without it (None where every op had it)."""
    sources: dict[str, int] = {}
    whys: dict[str, int] = {}
    for o in ops:
        tel = first_telemetry(o)
        src = tel.get("source") or "not recorded"
        sources[src] = sources.get(src, 0) + 1
        if tel.get("why") and src in ("unknown", "off"):
            whys[tel["why"]] = whys.get(tel["why"], 0) + 1
    why = max(whys.items(), key=lambda kv: kv[1])[0] if whys else None
    return ", ".join(f"{k} {v} ops" for k, v in sorted(sources.items())), why


def telemetry_lines(s: Summary, n: int = 10) -> list:
    """Where the device's telemetry came from, and the ops measured while it throttled
    (opscreen.results.throttle): summary.csv's ``throttled`` column."""
    ops = [o for o in s.ops if o.rows]
    if not ops:
        return []
    text, why = telemetry_sources(ops)
    head = f"telemetry: {text}" + (f" ({why})" if why else "")
    bad = [o for o in ops if _throttle.is_throttled(o.throttled)]
    checked = sum(1 for o in ops if o.throttled is not None)
    lines: list = ["", head]
    if checked:
        lines.append(f"throttled: {len(bad)} of {checked} ops measured while the device throttled for power, heat or a "
                     f"hardware slowdown, or its busy SM clock sat below {100 * _throttle.CLOCK_THRESHOLD:g}% of its "
                     "maximum (summary.csv column throttled; compare names such rows' side)")
        t = table("op", "rows>", "throttled")
        for o in bad[:n]:
            t.row(o.op, o.rows, o.throttled)
        if bad:
            lines.append(t)
    return lines


def peak_lines(s: Summary) -> list:
    """Which peaks the %-of-peak columns are of, and the ops furthest from them."""
    pk = s.peaks
    if not pk:
        carry = any(r[COL["lib_gbps"]] is not None or r[COL["tflops"]] for r in s.rows)
        return ["", "peaks: none measured for this device, so the %-of-peak columns are empty (opscreen devices "
                    "--peaks measures them)"] if carry else []
    dev, ach, spec = pk.get("device") or {}, pk.get("achievable") or {}, pk.get("spec") or {}
    flops = ", ".join(f"{d} {v:g}" for d, v in (ach.get("tflops") or {}).items() if v is not None)
    stf = spec.get("tflops") or {}
    sp = (f"spec {_fmt(spec.get('bandwidth_gbps'), 0)} GB/s, " + ", ".join(f"{d} {v:g}" for d, v in stf.items())
          + " TFLOPS") if spec.get("bandwidth_gbps") or stf else f"spec unknown ({spec.get('why')})"
    lines: list = ["", f"peaks of {dev.get('name') or '?'} (by {pk.get('found_by')}, measured {pk.get('measured_at')}): "
                       f"copy {_fmt(ach.get('bandwidth_gbps'), 1)} GB/s, matmul {flops} TFLOPS; {sp}"]
    far = pk.get("furthest") or []
    rows = sum(1 for r in s.rows if r[COL["lib_pct_peak"]] is not None)
    lines.append(f"furthest from peak: {rows} rows carry GB/s or TFLOPS (summary.csv lib_pct_peak, torch_pct_peak: "
                 "percent of the measured peak; *_pct_spec: of the spec)")
    from . import peaks as _rpeaks

    heads = {"bandwidth": "held against the copy's bandwidth (GB/s rows):",
             "flops": "held against the matmul peak of their dtype (TFLOPS rows; FlagGems gives elementwise ops "
                      "TFLOPS and no GB/s, so they sit far below it by nature):"}
    for kind, head in heads.items():
        of = [o for o in far if _rpeaks.bound(o["basis"].split(", ")[0]) == kind]
        if not of:
            continue
        t = table("op", "rows>", "peak", "lib % of peak>", "torch % of peak>", "speedup>")
        for o in of:
            t.row(o["op"], o["rows"], o["basis"], _fmt(o["lib_pct_peak"], 1), _fmt(o["torch_pct_peak"], 1),
                  _fmt(o["speedup"]))
        lines += [f"  {head}", t]
    return lines


def _autotune_lines(s: Summary, n: int = 8) -> list:
    """The kernels whose autotune pick differs between an op's processes (--repeats)."""
    flips = s.autotune_flips()
    if not flips:
        return []
    L = ["", f"autotune picks that differ between an op's processes ({len(flips)} kernel keys; compare calls rows "
             "there 'pick'; TRITON_CACHE_AUTOTUNING=1 with a shared cache dir pins plain @triton.autotune winners):"]
    for f in flips[:n]:
        L.append(f"  {f['op']}: {f['kernel'].rsplit('.', 1)[-1]} {f['key']}: " + " | ".join(str(c) for c in f["configs"]))
    if len(flips) > n:
        L.append(f"  ... and {len(flips) - n} more (summary.json autotune_flips)")
    return L


def noisy_rows(s: "Summary") -> dict[str, int]:
    """op -> its ok rows whose own samples spread past :data:`NOISY` on a device timer (:func:`noisy`)."""
    out: dict[str, int] = {}
    for r in s.rows:
        if r[COL["status"]] == "ok" and noisy(r):
            out[r[COL["op"]]] = out.get(r[COL["op"]], 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _noisy_lines(s: Summary, n: int = 8) -> list:
    """The ops whose readings were disturbed: rows whose own samples spread past NOISY."""
    by_op = noisy_rows(s)
    if not by_op:
        return []
    ops = first((f"{op} {k}" for op, k in by_op.items()), n)
    return [f"noisy: {sum(by_op.values())} ok rows whose own samples spread past {NOISY * 100:g}% on the device's timer "
            f"(a graph replay's is about 0.05%): the device was disturbed while they measured, and compare calls none "
            f"of them; rerun those ops on an idle device ({ops})"]


def _unresolved_lines(s: Summary) -> list:
    """The total of unresolved rows and the ops that have them, most first."""
    u = s.unresolved()
    lines: list = [
        f"unresolved: {u['rows']} ok rows whose band ({u['k']:g} x recorded noise, or the --repeats spread) "
        f"is wider than ±{100 * u['max_band']:g}%: a change within it cannot be told from noise"
    ]
    if u["rows"]:
        t = table("op", "unresolved>", "ok rows>")
        ok = {o.op: o.ok_rows for o in s.ops}
        for op, n in sorted(u["by_op"].items(), key=lambda kv: (-kv[1], kv[0])):
            t.row(op, n, ok.get(op, "-"))
        lines.append(t)
    idle = u["no_kernel"]
    if idle["rows"]:
        ops = ", ".join(f"{op} {n}" for op, n in sorted(idle["by_op"].items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"no kernel: {idle['rows']} ok rows whose library the graph replay timed under "
                     f"{NO_KERNEL_MS * 1e6:g} ns a call, so it launched no kernel (a view): not unresolved, "
                     f"nothing on the device to time ({ops})")
    return lines


#: What an op's own identity records of its process that a run's identity does not (it is the
#: harness's, which imports no torch): read from the first op that passed.
PROCESS_FIELDS = ("driver_version", "runtime_version", "torch_version", "triton_version", "library",
                  "library_version", "python")


def op_identity(s: "Summary") -> dict:
    """The identity of the first op of ``s`` that passed and recorded its device; the run's own
    identity where none did (or ``s`` is no run dir on disk)."""
    for o in s.ops:
        if s.path is not None and o.status == "passed" and s.kind == "run":
            ident = contracts.read(contracts.RUN_IDENTITY, Path(s.path) / "ops" / o.op / "run_identity.json")
            if isinstance(ident, dict) and ident.get("device_name"):
                return ident
    return s.identity or {}


def with_process_fields(s: "Summary") -> dict:
    """``s``'s identity, with the fields only its ops' processes record (:data:`PROCESS_FIELDS`)
    filled in from :func:`op_identity` where the run's own identity lacks them."""
    ident = dict(s.identity or {})
    missing = [k for k in PROCESS_FIELDS if ident.get(k) in (None, "")]
    if missing:
        op = op_identity(s)
        ident.update({k: op[k] for k in missing if op.get(k) not in (None, "")})
    return ident


def mixed_rows(s: Summary) -> int:
    """Ok rows whose two sides were timed by different methods (their speedup compares
    unlike figures: the other side could not be timed again like with like)."""
    return sum(1 for r in s.rows if r[COL["status"]] == "ok" and r[COL["torch_timer"]] and r[COL["lib_timer"]]
               and timer_method(r[COL["torch_timer"]]) != timer_method(r[COL["lib_timer"]]))


def fallback_lines(s: Summary) -> list:
    """The rows the graph timer could not time, per op: phase, timer, rows, why."""
    ops = [o for o in s.ops if o.fallbacks]
    if not ops:
        return []
    n = sum(f["rows"] for o in ops for f in o.fallbacks)
    lines: list = [
        f"graph fallback: {n} row sides of {len(ops)} ops could not be graph-timed (timer profiler: the kernels' "
        "device time, host x = host-inclusive latency / device time; direct: host-inclusive samples, noisy)"
    ]
    t = table("op", "side", "rows>", "phase", "timer", "host x>", "why")
    for o in ops:
        for f in o.fallbacks:
            why = f"{f['kind']}: {f['message']}" if f["kind"] else (f["message"] or "(not recorded)")
            t.row(o.op, f["side"], f["rows"], f["phase"], f["timer"], _fmt(f["host_x"], 2), why)
    lines.append(t)
    mixed = mixed_rows(s)
    if mixed:
        lines.append(f"{mixed} ok rows compare two timers (one side graph, the other not, and no like-with-like "
                     "figure): their speedup mixes device and host time")
    return lines


def _pct(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{100 * v:.{nd}f}%"
