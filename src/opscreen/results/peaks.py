"""How far each summary row is from its device's peak (summary 5's ``peak_basis``,
``torch_pct_peak``, ``lib_pct_peak``, ``torch_pct_spec``, ``lib_pct_spec``; docs/peaks.md).

- A row with GB/s (FlagGems' ``Torch GBPS`` and ``Gems GBPS``) is held against the device's
  memory bandwidth: the copy's achievable GB/s, and the spec.
- A row with TFLOPS (FlagGems' ``TFLOPS``, the library's: the case's FLOPs over the library's
  latency) is held against the matmul peak of the row's dtype. Torch's TFLOPS is the same FLOPs
  over torch's latency: ``tflops x lib_ms / torch_ms``; no FLOPs are counted here.
- A row with both is held against the one its library side is closer to (the roofline's
  binding bound); ``peak_basis`` says which.
- A row with neither, a dtype without a matmul peak (int32, float64, ...), or a device whose
  peaks were never measured: the cells stay empty. Nothing is estimated.
"""

from __future__ import annotations

import statistics

from ..backends.peaks import ROW_DTYPES

__all__ = ["row_cells", "summary_peaks", "furthest", "bound", "FURTHEST"]

FURTHEST = 10


def _pct(v, peak) -> float | None:
    """``v`` in percent of ``peak``, to four significant digits (a 0.0005 % row keeps its figure)."""
    return float(f"{100.0 * v / peak:.4g}") if v is not None and peak else None


def _flops_peaks(peaks: dict, dtype: str | None) -> tuple[float | None, float | None]:
    key = ROW_DTYPES.get(dtype or "")
    if key is None:
        return None, None
    ach = ((peaks.get("achievable") or {}).get("tflops") or {}).get(key)
    spec = (((peaks.get("spec") or {}).get("flops") or {}).get("tflops") or {}).get(key)
    return ach, spec


def row_cells(row: dict, peaks: dict | None) -> list:
    """The five peak cells of one row (a dict of summary columns) against ``peaks`` (a peaks file)."""
    empty = [None] * 5
    if not peaks or row.get("status") != "ok":
        return empty
    options = []
    bw_a = (peaks.get("achievable") or {}).get("bandwidth_gbps")
    bw_s = ((peaks.get("spec") or {}).get("bandwidth") or {}).get("gbps")
    if row.get("lib_gbps") is not None or row.get("torch_gbps") is not None:
        t, l = row.get("torch_gbps"), row.get("lib_gbps")
        options.append(["bandwidth", _pct(t, bw_a), _pct(l, bw_a), _pct(t, bw_s), _pct(l, bw_s)])
    if row.get("tflops"):
        fa, fs = _flops_peaks(peaks, row.get("dtype"))
        lib = row["tflops"]
        tms, lms = row.get("torch_ms"), row.get("lib_ms")
        torch = lib * lms / tms if tms and lms else None
        if fa or fs:
            options.append([f"flops {ROW_DTYPES[row['dtype']]}", _pct(torch, fa), _pct(lib, fa), _pct(torch, fs),
                            _pct(lib, fs)])
    options = [o for o in options if any(v is not None for v in o[1:])]
    if not options:
        return empty
    return max(options, key=lambda o: (o[2] if o[2] is not None else -1.0, o[4] if o[4] is not None else -1.0))


def summary_peaks(peaks: dict | None, furthest_ops: list[dict]) -> dict | None:
    """What summary.json's head keeps of the peaks file: its device, how it was found and its figures."""
    if not peaks:
        return None
    spec = peaks.get("spec") or {}
    return {"found_by": peaks.get("found_by", "name"), "device": peaks.get("device") or {},
            "measured_at": peaks.get("measured_at", ""), "achievable": peaks.get("achievable") or {},
            "spec": {"bandwidth_gbps": (spec.get("bandwidth") or {}).get("gbps"),
                     "tflops": (spec.get("flops") or {}).get("tflops"), "why": spec.get("why")},
            "furthest": furthest_ops}


def bound(basis: str) -> str:
    """A row's peak basis as the kind of bound it is held against: ``bandwidth`` or ``flops``."""
    return "bandwidth" if basis == "bandwidth" else "flops"


def furthest(rows: list[dict], n: int = FURTHEST) -> list[dict]:
    """The ops furthest from peak, ranked apart for each kind of bound (``bandwidth`` first, then
    ``flops``): per op and kind, the median library %-of-achievable-peak over its rows held against
    that kind (and torch's, and the geometric-mean speedup of those rows), the ``n`` lowest of each.
    The kinds are not ranked together: FlagGems gives elementwise ops TFLOPS and no GB/s, so their
    rows sit far below a matmul peak by nature and would crowd out every bandwidth-bound op."""
    by: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("lib_pct_peak") is not None:
            by.setdefault((bound(r["peak_basis"]), r["op"]), []).append(r)
    out: dict[str, list[dict]] = {"bandwidth": [], "flops": []}
    for (kind, op), rs in by.items():
        torch = [r["torch_pct_peak"] for r in rs if r.get("torch_pct_peak") is not None]
        sp = [r["speedup"] for r in rs if r.get("speedup")]
        bases = sorted({r["peak_basis"] for r in rs})
        out[kind].append({"op": op, "bound": kind, "rows": len(rs), "basis": ", ".join(bases),
                          "lib_pct_peak": float(f"{statistics.median(r['lib_pct_peak'] for r in rs):.4g}"),
                          "torch_pct_peak": float(f"{statistics.median(torch):.4g}") if torch else None,
                          "speedup": round(statistics.geometric_mean(sp), 4) if sp else None})
    for v in out.values():
        v.sort(key=lambda o: (o["lib_pct_peak"], o["op"]))
    return out["bandwidth"][:n] + out["flops"][:n]
