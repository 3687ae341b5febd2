"""An op's device trace, small, for the report: its SM clock and its power while it measured
(``result.json`` ``telemetry.trace``, op/telemetry.py), two sparklines side by side, drawn as
SVG by hand (a few dozen points need no plotting library), and the line of words beside them.
Every value written into the SVG is a number formatted here, so the markup is safe to inline."""

from __future__ import annotations

import statistics

from . import throttle as _throttle

__all__ = ["trace_svg", "telemetry_fact"]

W, H, PAD = 240.0, 46.0, 3.0  # one panel, in SVG units
MEASURED = ("nvml", "amdsmi")


def _panel(x0: float, ts: list[float], ys: list, top: float | None, label: str, unit: str, cls: str,
           stats: dict | None = None) -> str:
    """One sparkline of ``ys`` over ``ts`` in the panel at ``x0``; ``top`` (the device's maximum
    or limit) is the upper edge and a dashed line, else the highest value. The label gives the
    quantity's min / median / max over every sample (``stats``, result.json's), else the trace's."""
    pts = [(t, y) for t, y in zip(ts, ys) if isinstance(y, (int, float))]
    if not pts:
        return ""
    vmin, vmax = min(y for _, y in pts), max(y for _, y in pts)
    med = statistics.median(v for _, v in pts)
    if isinstance(stats, dict) and all(isinstance(stats.get(k), (int, float)) for k in ("min", "median", "max")):
        vmin, med, vmax = min(vmin, stats["min"]), stats["median"], max(vmax, stats["max"])
    hi = max(vmax, top) if isinstance(top, (int, float)) else vmax
    lo = min(vmin, hi * 0.5) if hi > 0 else vmin  # the lower edge at or below half the top: a dip reads as one
    span_t = (pts[-1][0] - pts[0][0]) or 1.0
    span_y = (hi - lo) or 1.0

    def x(t):
        return x0 + PAD + (W - 2 * PAD) * (t - pts[0][0]) / span_t

    def y(v):
        return PAD + 12 + (H - 2 * PAD - 12) * (1 - (v - lo) / span_y)

    line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
    out = [f'<text x="{x0 + PAD:.1f}" y="{PAD + 9:.1f}" class="trace-label">{label} {med:.0f} {unit} median, '
           f'{vmin:.0f}-{vmax:.0f}</text>',
           f'<polyline class="{cls}" fill="none" stroke-width="1.2" points="{line}"/>']
    if isinstance(top, (int, float)):
        out.append(f'<line x1="{x0 + PAD:.1f}" x2="{x0 + W - PAD:.1f}" y1="{y(top):.1f}" y2="{y(top):.1f}" '
                   'class="trace-top" stroke-dasharray="3,3" stroke-width="0.8"/>')
    return "".join(out)


def trace_svg(tel: dict | None) -> str | None:
    """The two sparklines of an op's telemetry (None where it holds no trace)."""
    tel = _first_measured(tel)
    tr = tel.get("trace") if isinstance(tel, dict) else None
    if not isinstance(tr, dict) or not tr.get("t_s"):
        return None
    ts = tr["t_s"]
    limit = (tel.get("power_limit_w") or {}).get("max")
    parts = [_panel(0.0, ts, tr.get("sm_clock_mhz") or [], tel.get("max_sm_clock_mhz"), "SM clock", "MHz", "trace-sm",
                    tel.get("sm_clock_mhz")),
             _panel(W + 10, ts, tr.get("power_w") or [], limit, "power", "W", "trace-power", tel.get("power_w"))]
    if not any(parts):
        return None
    return (f'<svg class="trace" viewBox="0 0 {2 * W + 10:.0f} {H:.0f}" role="img" '
            f'aria-label="SM clock and power over the measurement">{"".join(parts)}</svg>')


def _first_measured(tel: dict | None) -> dict | None:
    """The telemetry block to show: the op's, or (--repeats) its first process's that measured."""
    if not isinstance(tel, dict):
        return None
    if "processes" in tel:
        return next((t for t in tel["processes"] if isinstance(t, dict) and t.get("source") in MEASURED), None)
    return tel if tel.get("source") in MEASURED else None


def telemetry_fact(tel: dict | None, throttled: str | None) -> str | None:
    """The words of an op's telemetry (None where it has none measured)."""
    t = _first_measured(tel)
    if t is None:
        return None
    busy = (t.get("sm_clock_busy_mhz") or t.get("sm_clock_mhz") or {}).get("median")
    power = (t.get("power_w") or {}).get("median")
    limit = (t.get("power_limit_w") or {}).get("median")
    temp = (t.get("temperature_c") or {}).get("max")
    bits = [f"{t.get('samples', 0)} samples ({t['source']}, every {t.get('interval_ms', 0):g} ms)"]
    if isinstance(busy, (int, float)):
        bits.append(f"SM clock {busy:.0f} MHz" + (f" of {t['max_sm_clock_mhz']:.0f}" if t.get("max_sm_clock_mhz") else ""))
    if isinstance(power, (int, float)):
        bits.append(f"power {power:.0f} W" + (f" of {limit:.0f}" if isinstance(limit, (int, float)) else ""))
    if isinstance(temp, (int, float)):
        bits.append(f"up to {temp:.0f} °C")
    if _throttle.is_throttled(throttled):
        bits.append(f"throttled: {throttled}")
    return "device: " + ", ".join(bits)
