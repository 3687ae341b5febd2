"""One self-contained HTML report of a run (and, with ``against``, its comparison).

Lifecycle: :func:`render_report` takes a :class:`~opscreen.results.summary.Summary`
(and optionally a :class:`~opscreen.results.compare.Comparison` against a baseline)
and returns the HTML text; :func:`write_report` writes it atomically. The page needs
no network: inline CSS, plots as inline SVG made by matplotlib's Agg/SVG backend
(imported lazily, only here), no scripts. Every piece of text that comes from logs,
identities or file names goes through :func:`html.escape`. Links to an op's run.log
are relative to the report's folder.
"""

from __future__ import annotations

import html
import io
import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..fsio import atomic_write_text
from .compare import Comparison, _moved_list, _show
from .summary import COL, Summary, mixed_rows, row_band

__all__ = ["render_report", "write_report", "speedup_plot_svg"]

MAX_OPS_ROWS = 2000
SLOWEST = 40
TOP_COMPARE = 40


def e(v: Any) -> str:
    """Escaped text of ``v`` ('' for None)."""
    return "" if v is None else html.escape(str(v), quote=True)


def _f(v: float | None, nd: int = 3) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _test_cell(test: str | None, variant: str | None) -> str:
    """The test function and the variant (op_name, #n) that tells apart its rows."""
    return " ".join(x for x in (test, variant) if x)


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.6f}" if v < 10 else f"{v:.3f}"


def _sp_class(v: float | None) -> str:
    if v is None:
        return "na"
    if v < 0.8:
        return "bad"
    if v < 0.95:
        return "warn"
    if v > 1.05:
        return "good"
    return "even"


def _chg_class(v: float | None) -> str:
    if v is None:
        return "na"
    return "bad" if v < 0 else "good"


CSS = """
:root{--fg:#1d2330;--mut:#5b6475;--bg:#fff;--alt:#f5f7fa;--line:#dde2ea;--bad:#b42318;--badbg:#fde8e7;
--warn:#9a6700;--warnbg:#fff4d6;--good:#1a7f37;--goodbg:#e3f5e8;--acc:#2f5fb3}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:18px 28px 10px;border-bottom:1px solid var(--line);background:var(--alt)}
header h1{margin:0 0 4px;font-size:21px}
header .sub{color:var(--mut);font-size:13px}
nav{padding:8px 28px;border-bottom:1px solid var(--line);font-size:13px}
nav a{margin-right:14px;color:var(--acc);text-decoration:none}
main{padding:8px 28px 40px;max-width:1340px}
section{margin-top:22px}
h2{font-size:17px;margin:0 0 8px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:14px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:12.5px}
th,td{padding:3px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--alt);font-weight:600;position:sticky;top:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.shape{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11.5px;max-width:520px;word-break:break-all}
table.kv td:first-child{color:var(--mut);white-space:nowrap}
.scroll{max-height:560px;overflow:auto;border:1px solid var(--line)}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:110px;background:var(--alt)}
.card .n{font-size:20px;font-weight:650}
.card .l{color:var(--mut);font-size:12px}
.card.bad{background:var(--badbg);border-color:#f3b6b1}.card.good{background:var(--goodbg);border-color:#a9dcb6}
.card.warn{background:var(--warnbg);border-color:#f0d58a}
.bad{color:var(--bad)}.good{color:var(--good)}.warn{color:var(--warn)}.even{color:var(--fg)}.na{color:var(--mut)}
td.bad{background:var(--badbg)}td.good{background:var(--goodbg)}td.warn{background:var(--warnbg)}
.bar{display:inline-block;height:9px;background:var(--acc);opacity:.55;vertical-align:middle}
.note{color:var(--mut);font-size:12.5px;margin:4px 0}
.alert{border:1px solid #f3b6b1;background:var(--badbg);padding:8px 12px;border-radius:6px;margin:8px 0}
.reason{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11.5px;white-space:pre-wrap;word-break:break-word;max-width:760px}
.plot svg{max-width:100%;height:auto}
footer{color:var(--mut);font-size:12px;padding:16px 28px;border-top:1px solid var(--line)}
"""


# ---------------------------------------------------------------- plots

def _svg_of(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    i = text.find("<svg")
    text = text[i:] if i >= 0 else text
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return text


def speedup_plot_svg(by_dtype: dict[str, list[float]]) -> str | None:
    """Histograms of log2(speedup) per dtype, one panel each, shared x axis; inline SVG text."""
    series = {d: [v for v in vals if v and v > 0 and math.isfinite(v)] for d, vals in by_dtype.items()}
    series = {d: v for d, v in series.items() if v}
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    with matplotlib.rc_context({"svg.hashsalt": "opscreen", "svg.fonttype": "path", "font.size": 9}):
        allv = [math.log2(v) for vals in series.values() for v in vals]
        lo, hi = min(allv), max(allv)
        lo, hi = min(lo, -0.25), max(hi, 0.25)
        span = hi - lo
        lo, hi = lo - 0.02 * span, hi + 0.02 * span
        nb = 60
        bins = [lo + (hi - lo) * i / nb for i in range(nb + 1)]
        n = len(series)
        fig, axes = plt.subplots(n, 1, figsize=(9.5, 0.35 + 1.25 * n), sharex=True, squeeze=False)
        for ax, (d, vals) in zip(axes[:, 0], sorted(series.items())):
            logs = [math.log2(v) for v in vals]
            gm = 2 ** (sum(logs) / len(logs))
            slower = [x for x in logs if x < 0]
            faster = [x for x in logs if x >= 0]
            ax.hist(slower, bins=bins, color="#d1495b", alpha=0.85)
            ax.hist(faster, bins=bins, color="#2f9e5b", alpha=0.85)
            ax.axvline(0.0, color="#333", lw=0.8)
            ax.axvline(math.log2(gm), color="#2f5fb3", lw=1.2, ls="--")
            ax.set_ylabel("cases")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: never a 2.5-case tick
            ax.text(
                0.005, 0.93, f"{d}: {len(vals)} cases, geomean {gm:.3f}, {len(faster)} ≥ 1, {len(slower)} < 1",
                transform=ax.transAxes, va="top", ha="left", fontsize=8.5,
            )  # fmt: skip
            ax.spines[["top", "right"]].set_visible(False)
        ticks = [t for t in range(math.floor(lo), math.ceil(hi) + 1)]
        if len(ticks) < 4:
            ticks = [t / 2 for t in range(math.floor(lo * 2), math.ceil(hi * 2) + 1)]
        axes[-1, 0].xaxis.set_major_locator(FixedLocator(ticks))
        axes[-1, 0].xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{2.0 ** float(x):g}×"))
        axes[-1, 0].set_xlim(lo, hi)
        axes[-1, 0].set_xlabel("speedup over torch (log scale; dashed: geometric mean)")
        fig.tight_layout()
        svg = _svg_of(fig)
        plt.close(fig)
    return svg


def _change_plot_svg(changes: list[float]) -> str | None:
    vals = [100.0 * c for c in changes if c is not None and math.isfinite(c)]
    if not vals:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    with matplotlib.rc_context({"svg.hashsalt": "opscreen", "svg.fonttype": "path", "font.size": 9}):
        lo, hi = min(vals + [-5.0]), max(vals + [5.0])
        nb = 60
        bins = [lo + (hi - lo) * i / nb for i in range(nb + 1)]
        fig, ax = plt.subplots(figsize=(9.5, 1.9))
        n1, _, _ = ax.hist([v for v in vals if v < 0], bins=bins, color="#d1495b", alpha=0.85)
        n2, _, _ = ax.hist([v for v in vals if v >= 0], bins=bins, color="#2f9e5b", alpha=0.85)
        ax.axvline(0.0, color="#333", lw=0.8)
        top = max([0.0, *n1, *n2])
        if top <= 10:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: whole numbers only
        else:
            # linear up to 10 cases, logarithmic above; ticks at 0, 10, 100, ... cases
            ax.set_yscale("symlog", linthresh=10)
            ax.yaxis.set_major_locator(FixedLocator([0] + [10**k for k in range(1, math.ceil(math.log10(top)) + 1)]))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
            ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("change of the speedup, B vs A (%)")
        ax.set_ylabel("cases")
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        svg = _svg_of(fig)
        plt.close(fig)
    return svg


# ---------------------------------------------------------------- sections

def _cards(counts: dict[str, int], kinds: dict[str, str]) -> str:
    out = ['<div class="cards">']
    for k, v in counts.items():
        out.append(f'<div class="card {kinds.get(k, "")}"><div class="n">{v}</div><div class="l">{e(k)}</div></div>')
    out.append("</div>")
    return "".join(out)


_OP_KIND = {"passed": "good", "passed_own_dtypes": "warn", "failed": "bad", "timeout": "bad", "device_fatal": "bad", "crashed": "bad",
            "incomplete": "warn", "unknown": "warn", "skipped": "warn", "dismissed": "warn"}  # fmt: skip
_ROW_KIND = {"ok": "good", "failed": "bad", "no_data": "warn"}


def _identity_section(s: Summary) -> str:
    ident = s.identity or {}
    cal = s.caliber or {}
    suite = ident.get("suite") if isinstance(ident.get("suite"), dict) else {}
    items: list[tuple[str, Any]] = [
        ("run", s.name),
        ("kind", s.kind),
        ("backend", cal.get("backend")),
        ("vendor", cal.get("vendor")),
        ("device", cal.get("device_name") or ident.get("device_name")),
        ("device count", ident.get("device_count")),
        ("timer", cal.get("timer")),
        ("use_flagtune", cal.get("use_flagtune")),
        ("use_flagtune_cost_model", cal.get("use_flagtune_cost_model")),
        ("triton_cache_autotuning", cal.get("triton_cache_autotuning")),
        ("shape mode", cal.get("shape_mode")),
        ("level", cal.get("level")),
        ("dtypes", _show(cal.get("dtypes")) if cal.get("dtypes") else "(the suite's own)"),
        ("timing", _show(cal.get("timing")) if isinstance(cal.get("timing"), dict) else cal.get("timing")),
        ("suite", suite.get("name")),
        ("suite commit", cal.get("suite_commit") or suite.get("commit")),
        ("suite dirty", suite.get("dirty")),
        ("library", " ".join(str(x) for x in (ident.get("library"), ident.get("library_version")) if x)),
        ("torch", ident.get("torch_version")),
        ("triton", ident.get("triton_version")),
        ("driver / runtime", " / ".join(str(x) for x in (ident.get("driver_version"), ident.get("runtime_version")) if x)),
        ("host", ident.get("host")),
        ("python", ident.get("python")),
        ("started", ident.get("started_at")),
        ("finished", ident.get("finished_at")),
        ("opscreen", ident.get("opscreen_version")),
    ]
    rows = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in items if v not in (None, ""))
    if not ident:
        rows += '<tr><td>note</td><td>no run_identity.json: the caliber of this run is unknown</td></tr>'
    return f'<section id="identity"><h2>Run identity</h2><table class="kv">{rows}</table></section>'


def _status_section(s: Summary) -> str:
    oc = s.op_counts()
    rc = s.row_counts()
    trunc = sum(1 for o in s.ops if o.truncated)
    g = s.geomeans()
    gm = g["overall"]
    cards_g = _cards({"overall geomean speedup": _f(gm)} if gm is not None else {}, {"overall geomean speedup": _sp_class(gm) if gm else ""})
    return (
        '<section id="status"><h2>Counts by status</h2>'
        f"<h3>Ops ({sum(oc.values())})</h3>{_cards(oc, _OP_KIND)}"
        f"<h3>Cases: (op, dtype, shape) rows ({sum(rc.values())})</h3>{_cards(rc, _ROW_KIND)}"
        + (f'<p class="note">{trunc} op(s) left a truncated log (killed, timed out or crashed): their rows may be incomplete.</p>' if trunc else "")
        + cards_g
        + "</section>"
    )


def _distribution_section(s: Summary) -> str:
    si, di, vi = COL["status"], COL["dtype"], COL["speedup"]
    by: dict[str, list[float]] = {}
    for r in s.rows:
        if r[si] == "ok" and r[vi] is not None:
            by.setdefault(r[di] or "?", []).append(r[vi])
    svg = speedup_plot_svg(by)
    g = s.geomeans()
    rows = "".join(
        f'<tr><td>{e(d)}</td><td class="num">{v["rows"]}</td><td class="num {_sp_class(v["geomean"])}">{_f(v["geomean"])}</td></tr>'
        for d, v in g["by_dtype"].items()
    )
    rows += f'<tr><th>overall</th><th class="num">{g["rows"]}</th><th class="num">{_f(g["overall"])}</th></tr>'
    plot = f'<div class="plot">{svg}</div>' if svg else '<p class="note">no measured cases to plot</p>'
    return (
        '<section id="distribution"><h2>Speedup distribution per dtype</h2>'
        '<p class="note">speedup = torch latency / library latency: above 1 the library is faster.</p>'
        f'{plot}<table><tr><th>dtype</th><th class="num">cases</th><th class="num">geomean speedup</th></tr>{rows}</table></section>'
    )


def _ops_section(s: Summary) -> str:
    si, vi, oi = COL["status"], COL["speedup"], COL["op"]
    worst: dict[str, float] = {}
    best: dict[str, float] = {}
    for r in s.rows:
        v = r[vi]
        if r[si] == "ok" and v is not None:
            op = r[oi]
            if op not in worst or v < worst[op]:
                worst[op] = v
            if op not in best or v > best[op]:
                best[op] = v
    ops = sorted(s.ops, key=lambda o: (o.geomean is None, o.geomean if o.geomean is not None else 0.0, o.op))
    gms = [o.geomean for o in ops if o.geomean]
    scale = max([abs(math.log2(g)) for g in gms] + [0.5])
    unres = s.unresolved()
    out = []
    for o in ops[:MAX_OPS_ROWS]:
        n_un = unres["by_op"].get(o.op, 0)
        bar = ""
        if o.geomean:
            w = int(60 * abs(math.log2(o.geomean)) / scale)
            color = "#d1495b" if o.geomean < 1 else "#2f9e5b"
            bar = f'<span class="bar" style="width:{w}px;background:{color}"></span>'
        out.append(
            f"<tr><td>{e(o.op)}</td><td class=\"{_OP_KIND.get(o.status, '')}\">{e(o.status)}</td>"
            f'<td class="num">{o.ok_rows}/{o.rows}</td>'
            f'<td class="num {_sp_class(o.geomean)}">{_f(o.geomean)}</td><td>{bar}</td>'
            f'<td class="num">{_f(worst.get(o.op))}</td><td class="num">{_f(best.get(o.op))}</td>'
            f"<td>{'yes' if o.truncated else ''}</td>"
            + (f'<td class="num warn">{n_un}</td>' if n_un else "<td></td>") + "</tr>"
        )
    more = f'<p class="note">{len(ops) - MAX_OPS_ROWS} more ops in summary.csv</p>' if len(ops) > MAX_OPS_ROWS else ""
    return (
        f'<section id="ops"><h2>Ops by geometric-mean speedup ({len(ops)} ops, slowest first)</h2><div class="scroll"><table>'
        '<tr><th>op</th><th>status</th><th class="num">ok/rows</th><th class="num">geomean</th><th></th>'
        '<th class="num">min</th><th class="num">max</th><th>truncated</th><th class="num">unresolved</th></tr>'
        + "".join(out)
        + f"</table></div>{more}"
        + f'<p class="note">unresolved: {unres["rows"]} ok rows whose band ({unres["k"]:g} × the recorded noise, '
        f'or the --repeats spread) is wider than ±{100 * unres["max_band"]:g}%: a change within it cannot be told '
        "from noise.</p></section>"
    )


def _noise_txt(t: Any, l: Any, repeats: Any = None, spread: Any = None) -> str:
    """Within-run noise as torch|lib %; rows merged from several processes (--repeats)
    add the speedup's spread between them."""
    f = lambda v: "-" if v is None else f"{100 * v:.2f}"  # noqa: E731
    txt = "–" if t is None and l is None else f"{f(t)}|{f(l)}"
    if repeats and spread is not None:
        txt += f"; {repeats} processes: ±{100 * spread:.1f}"
    return txt


def _timer_txt(r: list) -> str:
    """The row's timer (``torch|lib`` when they differ), with the profiler's host-inclusive
    latency (ms, torch|lib) where a side has one."""
    t, l = r[COL["torch_timer"]], r[COL["lib_timer"]]
    txt = t if t == l else f"{t or '-'}|{l or '-'}"
    th, lh = r[COL["torch_host_ms"]], r[COL["lib_host_ms"]]
    if th is not None or lh is not None:
        txt += f"; host ms {_ms(th) if th is not None else '-'}|{_ms(lh) if lh is not None else '-'}"
    return txt


def _fallback_section(s: Summary) -> str:
    """Ops the graph timer could not time (some rows): side, rows, phase, timer, why."""
    ops = [o for o in s.ops if o.fallbacks]
    if not ops:
        return ('<section id="fallback"><h2>Graph fallback</h2><p class="note">every timed row was graph-timed '
                "(or the run did not use the graph timer).</p></section>")
    out = []
    for o in ops:
        for f in o.fallbacks:
            why = f"{f['kind']}: {f['message']}" if f["kind"] else (f["message"] or "(not recorded)")
            cls = "warn" if f["timer"] != "profiler" else ""
            out.append(
                f"<tr><td>{e(o.op)}</td><td>{e(f['side'])}</td><td class=\"num\">{f['rows']}</td><td>{e(f['phase'])}</td>"
                f"<td class=\"{cls}\">{e(f['timer'])}</td><td class=\"num\">{_f(f['host_x'])}</td>"
                f"<td class=\"reason\">{e(why)}</td></tr>"
            )
    mixed = mixed_rows(s)
    note = (f'<p class="note warn">{mixed} rows compare two timers (one side graph-timed, the other not, with no '
            "like-with-like figure): their speedup mixes device and host time.</p>") if mixed else ""
    return (
        f'<section id="fallback"><h2>Graph fallback ({len(ops)} ops)</h2>'
        '<p class="note">rows the graph timer could not time, and why (the phase that failed and the first line of '
        "the error). <b>profiler</b>: the kernels' own device time per call, summed (host jitter does not reach "
        "it); host x is the host-inclusive latency over it. <b>direct</b>: host-inclusive samples, which two "
        "processes may read 25-140 % apart: trust such a row's speedup only as far as its band.</p>"
        '<div class="scroll"><table><tr><th>op</th><th>side</th><th class="num">rows</th><th>phase</th><th>timer</th>'
        '<th class="num">host x</th><th>why</th></tr>' + "".join(out) + f"</table></div>{note}</section>"
    )


def _slowest_section(s: Summary) -> str:
    si, vi = COL["status"], COL["speedup"]
    rows = [r for r in s.rows if r[si] == "ok" and r[vi] is not None]
    rows.sort(key=lambda r: (r[vi], r[0], r[1], r[2], r[3], r[4]))
    out = []
    for r in rows[:SLOWEST]:
        band = row_band(r)
        un = band is not None and band > s.max_band + 1e-12
        noise = _noise_txt(r[COL['torch_rsd']], r[COL['lib_rsd']], r[COL['repeats']], r[COL['speedup_spread']])
        noise_td = f'<td class="num warn">{e(noise)} unresolved</td>' if un else f'<td class="num">{e(noise)}</td>'
        timer = _timer_txt(r)
        out.append(
            f"<tr><td>{e(r[COL['op']])}</td><td>{e(_test_cell(r[COL['test']], r[COL['variant']]))}</td><td>{e(r[COL['dtype']])}</td>"
            f"<td class=\"shape\">{e(r[COL['shape']])}</td><td class=\"num\">{_ms(r[COL['torch_ms']])}</td>"
            f"<td class=\"num\">{_ms(r[COL['lib_ms']])}</td><td class=\"num {_sp_class(r[vi])}\">{_f(r[vi])}</td>"
            f"<td>{e(timer)}</td>{noise_td}</tr>"
        )
    return (
        f'<section id="slowest"><h2>Slowest cases (lowest speedup, {min(SLOWEST, len(rows))} of {len(rows)})</h2>'
        '<div class="scroll"><table><tr><th>op</th><th>test</th><th>dtype</th><th>shape</th><th class="num">torch ms</th>'
        '<th class="num">library ms</th><th class="num">speedup</th><th>timer</th><th class="num">noise % torch|lib</th></tr>'
        + "".join(out)
        + "</table></div></section>"
    )


def _link(run_dir: Path | None, rel: str | None, out_dir: Path) -> str:
    if not rel or run_dir is None:
        return ""
    target = (run_dir / rel).resolve()
    try:
        href = os.path.relpath(target, out_dir.resolve())
    except ValueError:  # another drive (Windows)
        href = target.as_posix()
    href = quote(href.replace(os.sep, "/"))
    return f'<a href="{e(href)}">{e(rel)}</a>'


def _failures_section(s: Summary, out_dir: Path) -> str:
    si, oi = COL["status"], COL["op"]
    failed_rows: dict[str, int] = {}
    for r in s.rows:
        if r[si] == "failed":
            failed_rows[r[oi]] = failed_rows.get(r[oi], 0) + 1
    bad = [o for o in s.ops if o.status not in ("passed",) or failed_rows.get(o.op)]
    if not bad:
        return '<section id="failures"><h2>Failures</h2><p class="note">none: every op passed.</p></section>'
    out = []
    for o in sorted(bad, key=lambda o: (o.status == "passed", o.status, o.op)):
        reasons: list[str] = []
        if o.error:
            reasons.append(o.error)
        for f in o.failures or []:
            r = f.get("reason") if isinstance(f, dict) else None
            node = f.get("node") if isinstance(f, dict) else None
            txt = f"{node}: {r}" if node and r else (r or node)
            if txt and txt not in reasons and r not in reasons:
                reasons.append(txt)
        if failed_rows.get(o.op):
            reasons.append(f"{failed_rows[o.op]} case(s) reported FAILED")
        rs = "\n".join(reasons[:6]) or "(no reason recorded)"
        out.append(
            f"<tr><td>{e(o.op)}</td><td class=\"{_OP_KIND.get(o.status, '')}\">{e(o.status)}</td>"
            f'<td class="num">{o.ok_rows}/{o.rows}</td><td class="reason">{e(rs)}</td>'
            f"<td>{_link(s.path, o.run_log, out_dir)}</td></tr>"
        )
    return (
        f'<section id="failures"><h2>Failures ({len(bad)} ops)</h2><div class="scroll"><table>'
        '<tr><th>op</th><th>status</th><th class="num">ok/rows</th><th>reason</th><th>log</th></tr>'
        + "".join(out)
        + "</table></div></section>"
    )


def _compare_rows_html(title: str, rows: list, empty: str) -> str:
    """One titled table of comparison rows (change, band, case, speedups, verdict)."""
    if not rows:
        return f"<h3>{e(title)}</h3>" + f'<p class="note">{e(empty)}</p>'
    body = []
    for r in rows:
        v = r.verdict.value
        body.append(
            f"<tr><td class=\"num {_chg_class(r.change)}\">{'–' if r.change is None else f'{100 * r.change:+.1f}%'}</td>"
            f"<td class=\"num\">{'–' if r.band is None else f'±{100 * r.band:.1f}%'}</td>"
            f"<td>{e(r.op)}</td><td>{e(_test_cell(r.test, r.variant))}</td><td>{e(r.dtype)}</td><td class=\"shape\">{e(r.shape)}</td>"
            f'<td class="num">{_f(r.a_speedup)}</td><td class="num">{_f(r.b_speedup)}</td>'
            + (f'<td class="warn">{e(v)}</td></tr>' if v == "unresolved" else f"<td>{e(v)}</td></tr>")
        )
    return (
        f"<h3>{e(title)}</h3>"
        '<div class="scroll"><table><tr><th class="num">change</th><th class="num">band</th><th>op</th><th>test</th>'
        '<th>dtype</th><th>shape</th><th class="num">A speedup</th><th class="num">B speedup</th><th>verdict</th></tr>'
        + "".join(body)
        + "</table></div>"
    )


def _compare_section(c: Comparison) -> str:
    chk = c.check
    cnt = c.counts()
    parts = [f'<section id="compare"><h2>Compared with {e(c.a.name)} (A = baseline, B = this run)</h2>']
    kv = []
    for f, v in chk.same.items():
        kv.append(f"<tr><td>{e(f)}</td><td>{e(_show(v))}</td><td>same</td></tr>")
    for f, x, y in chk.allowed:
        kv.append(f'<tr><td>{e(f)}</td><td>{e(_show(x))} → {e(_show(y))}</td><td class="warn">differs (allowed)</td></tr>')
    for f, x, y in chk.axis:
        kv.append(f"<tr><td>{e(f)}</td><td>{e(_show(x))} → {e(_show(y))}</td><td>axis</td></tr>")
    if chk.dtypes:
        kv.append(f"<tr><td>dtypes</td><td>{e(_show(chk.dtypes[0]))} → {e(_show(chk.dtypes[1]))}</td><td>rows join where both have them</td></tr>")
    for f, x, y in chk.info:
        kv.append(f"<tr><td>{e(f)}</td><td>{e(_show(x))} → {e(_show(y))}</td><td>differs</td></tr>")
    moved = c.moved_ops()
    if moved:
        kv.append(f"<tr><td>device</td><td>{len(moved)} op{'s' if len(moved) != 1 else ''} on another device in B: "
                  f"{e(_moved_list(moved))}</td>"
                  '<td class="warn">chips of one model can differ on a case by a few %</td></tr>')
    if chk.unknown:
        parts.append(f'<div class="alert">caliber unknown for {e(" and ".join(chk.unknown))}: how the runs were measured cannot be checked</div>')
    parts.append(f'<table class="kv"><tr><th>caliber</th><th>A → B</th><th></th></tr>{"".join(kv)}</table>')
    kinds = {"unresolved": "warn", "slower": "bad", "broken": "bad", "gone": "warn", "faster": "good", "fixed": "good", "same": "", "new": "", "failed": "warn"}
    order = ["slower", "broken", "unresolved", "gone", "failed", "new", "fixed", "faster", "same"]
    parts.append(_cards({k: cnt[k] for k in order}, kinds))
    g = c.geomean_ratio()
    parts.append(
        f'<p class="note">metric: {e(c.metric)}; a row is "same" when |ln(B/A)| is within max({c.k:g} × the combined noise, '
        f"{c.min_change * 100:g}%) where both rows recorded their noise, else within {c.threshold * 100:g}%"
        + ("; and at least the spread between the processes a row was merged from (--repeats)"
           if any(r.basis and r.basis.endswith("+spread") for r in c.rows) else "")
        + f"; a row whose band is wider than ±{c.max_band * 100:g}% is unresolved (neither same nor faster/slower)"
        + f". Geometric mean of B/A over the rows measured in both: {_f(g)}.</p>"
    )
    svg = _change_plot_svg([r.change for r in c.rows if r.change is not None])
    if svg:
        parts.append(f'<div class="plot">{svg}</div>')

    def rows_table(title: str, rows: list, empty: str) -> None:
        parts.append(_compare_rows_html(title, rows, empty))

    regs = c.regressions()
    rows_table(f"Regressions ({len(regs)} rows slower in B)", regs[:TOP_COMPARE], "no row is slower beyond its noise band")
    un = c.unresolved()
    if un:
        rows_table(f"Unresolved ({len(un)} rows whose band is wider than ±{c.max_band * 100:g}%, widest first)",
                   un[:TOP_COMPARE], "")
    broken = sorted(c.broken(), key=lambda r: r.key)
    if broken:
        rows_table(f"Broken in B ({len(broken)} rows measured in A, failed or missing in B)", broken[:TOP_COMPARE], "")
    ratios = c.op_ratios()
    worst = [t for t in ratios if t[3] > 0 or t[1] < 0.99][:TOP_COMPARE]
    if worst:
        body = "".join(
            f'<tr><td>{e(op)}</td><td class="num bad">{ratio:.3f}</td><td class="num">{n}</td><td class="num">{sl}</td><td class="num">{fa}</td></tr>'
            for op, ratio, n, sl, fa in worst
        )
        parts.append(
            "<h3>Ops whose geometric mean got worse (B/A)</h3><div class=\"scroll\"><table><tr><th>op</th><th class=\"num\">B/A</th>"
            f'<th class="num">rows</th><th class="num">slower</th><th class="num">faster</th></tr>{body}</table></div>'
        )
    imps = c.improvements()
    rows_table(f"Improvements ({len(imps)} rows faster in B)", imps[:TOP_COMPARE], "no row is faster beyond its noise band")
    parts.append("</section>")
    return "".join(parts)


def render_report(s: Summary, out_path: str | Path, comparison: Comparison | None = None) -> str:
    """The report's HTML text (``out_path`` only decides the relative links)."""
    out_dir = Path(out_path).parent
    nav = [("identity", "Identity"), ("status", "Status")]
    if comparison is not None:
        nav.append(("compare", "Comparison"))
    nav += [("distribution", "Speedups"), ("ops", "Ops"), ("slowest", "Slowest cases"), ("fallback", "Graph fallback"),
            ("failures", "Failures")]
    cal = s.caliber or {}
    sub = " · ".join(
        e(x) for x in (cal.get("device_name"), cal.get("backend"), f"timer {cal.get('timer')}" if cal.get("timer") else None,
                       f"{len(s.ops)} ops", f"{len(s.rows)} cases") if x  # fmt: skip
    )
    body = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>opscreen report: {e(s.name)}</title>",
        f"<style>{CSS}</style></head><body>",
        f'<header><h1>opscreen report: {e(s.name)}</h1><div class="sub">{sub}</div></header>',
        "<nav>" + "".join(f'<a href="#{k}">{e(v)}</a>' for k, v in nav) + "</nav>",
        "<main>",
        _identity_section(s),
        _status_section(s),
    ]
    if comparison is not None:
        body.append(_compare_section(comparison))
    body += [
        _distribution_section(s),
        _ops_section(s),
        _slowest_section(s),
        _fallback_section(s),
        _failures_section(s, out_dir),
        "</main>",
        f"<footer>made by opscreen {e(__version__)} from {e(s.name)}/summary.json; "
        "full data: summary.csv (one row per op, test, dtype, shape)"
        + (", compare.csv" if comparison is not None else "")
        + "</footer>",
        "</body></html>",
    ]
    return "\n".join(body) + "\n"


def write_report(s: Summary, out_path: str | Path, comparison: Comparison | None = None) -> Path:
    return atomic_write_text(out_path, render_report(s, out_path, comparison))
