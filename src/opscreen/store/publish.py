"""``opscreen publish --out SITE``: a static site of the store's history (asv's ``publish``,
for an operator suite).

The site is plain files with relative links only, so it works from ``file://`` and from any
static host:

``index.html``
    the caliber, device and runs, then one row per op: its cases, the latest run's
    geometric-mean metric over its cases, its open change points (each case's latest one:
    the series still sits at the level it stepped to) with the largest step, and its flaky
    cases. A filter box (``?q=TEXT`` fills it) narrows the rows.
``ops/<op>.html``
    one page per op: its change points, then each case with a permalink
    (``ops/<op>.html#case-<id>``, the id a digest of the case's key, the same in every
    publish), its history plot (inline SVG: each run's value, the segments' levels and
    bands, the change points) and its series.
``history.json``
    the history as ``opscreen history --json`` prints it.

The site is written into a temp folder beside ``SITE`` and then put in its place, so a
failed publish leaves the previous site as it was. ``SITE`` must be empty, missing, or a
site that ``publish`` wrote (it holds ``.opscreen-site``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import statistics
import tempfile
from pathlib import Path

from jinja2 import Environment

from ..errors import UsageError, check_writable_dir
from .history import CaseHistory, History, series_text

__all__ = ["publish", "check_out", "case_id", "op_file", "svg_plot", "MARKER"]

MARKER = ".opscreen-site"
_ENV = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #ddd}
td.n,th.n{text-align:right}tr.hidden{display:none}.slower{color:#b00020}.faster{color:#00701a}
.case{margin:22px 0;border-top:1px solid #ccc;padding-top:8px}.case:target{background:#fff8d8}
a.perma{color:#999;text-decoration:none;margin-left:6px}code{font-size:12px}.series{font:12px monospace;color:#444}
.muted{color:#666}svg{background:#fafafa;border:1px solid #e3e3e3}
"""

_INDEX = _ENV.from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>opscreen history: {{ h.device }}</title>
<style>{{ css }}</style></head><body>
<h1>History of {{ h.device }}</h1>
<p>{{ head }}</p>
<p class="muted">bands: floors table {{ h.table }}; a step within a case's band is no change
(<a href="history.json">history.json</a>)</p>
<p><label>filter ops <input id="q" type="search" placeholder="op name"></label>
<span id="shown"></span></p>
<table id="ops"><thead><tr><th>op</th><th class="n">cases</th><th class="n">latest {{ metric }}</th>
<th class="n">open change points</th><th>largest open step</th><th class="n">flaky</th></tr></thead><tbody>
{% for o in ops %}
<tr data-op="{{ o.op }}"><td><a href="{{ o.href }}">{{ o.op }}</a></td><td class="n">{{ o.cases }}</td>
<td class="n">{{ o.latest }}</td><td class="n">{{ o.open }}</td>
<td>{% if o.worst %}<a class="{{ o.worst.direction }}" href="{{ o.worst.href }}">{{ o.worst.text }}</a>{% endif %}</td>
<td class="n">{{ o.flaky }}</td></tr>
{% endfor %}
</tbody></table>
<h2>Runs</h2>
<table><thead><tr><th class="n">#</th><th>commit</th><th>started</th><th>run</th></tr></thead><tbody>
{% for r in runs %}<tr><td class="n">{{ loop.index0 }}</td><td><code>{{ r.suite_commit or "?" }}</code></td>
<td>{{ r.started_at }}</td><td>{{ r.name }}</td></tr>{% endfor %}
</tbody></table>
<script>
(function () {
  var box = document.getElementById("q"), rows = document.querySelectorAll("#ops tbody tr");
  function apply() {
    var q = box.value.toLowerCase(), n = 0;
    rows.forEach(function (r) { var hide = q && r.dataset.op.toLowerCase().indexOf(q) < 0;
      r.classList.toggle("hidden", !!hide); if (!hide) n++; });
    document.getElementById("shown").textContent = n + " of " + rows.length + " ops";
  }
  box.value = new URLSearchParams(location.search).get("q") || "";
  box.addEventListener("input", apply); apply();
})();
</script></body></html>
""")

_OP = _ENV.from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ op }}: opscreen history</title>
<style>{{ css }}</style></head><body>
<p><a href="../index.html">all ops</a></p>
<h1>{{ op }}</h1>
<p>{{ head }}</p>
<h2>Change points</h2>
{% if changes %}
<table><thead><tr><th>case</th><th>commits</th><th class="n">step</th><th>direction</th><th>evidence</th></tr></thead>
<tbody>{% for c in changes %}<tr><td><a href="#{{ c.id }}">{{ c.case }}</a></td><td><code>{{ c.commits }}</code></td>
<td class="n {{ c.direction }}">{{ c.step }}</td><td>{{ c.direction }}{{ c.pending }}</td><td>{{ c.evidence }}</td></tr>
{% endfor %}</tbody></table>
{% else %}<p>none</p>{% endif %}
{% if flaky %}<p>flaky: {% for f in flaky %}<a href="#{{ f.id }}">{{ f.case }}</a>{% if not loop.last %}, {% endif %}
{% endfor %}</p>{% endif %}
<h2>Cases</h2>
{% for c in cases %}
<div class="case" id="{{ c.id }}"><h3>{{ c.case }}<a class="perma" href="#{{ c.id }}" title="permalink">#</a></h3>
<p class="muted">band ±{{ c.band }} ({{ c.basis_text }}){% if c.flaky %};
<b>flaky</b> ({{ c.flips }} reversals){% endif %}</p>
{{ c.svg }}
<p class="series">{{ c.series }}</p></div>
{% endfor %}
</body></html>
""")


def case_id(case: CaseHistory) -> str:
    """The case's anchor: a digest of its key, the same in every publish."""
    key = json.dumps([case.op, case.variant, case.dtype, case.shape], separators=(",", ":"))
    return "case-" + hashlib.sha1(key.encode()).hexdigest()[:12]


def op_file(op: str) -> str:
    return "ops/" + re.sub(r"[^A-Za-z0-9_.-]", "_", op) + ".html"


def _label(case: CaseHistory) -> str:
    return " ".join(x for x in (case.op, f"({case.variant})" if case.variant else "", case.dtype, case.shape) if x)


def _head(h: History) -> str:
    cal = h.caliber
    parts = ", ".join(f"{k} {cal[k]}" for k in ("timer", "level", "shape_mode", "isolation", "use_flagtune")
                      if cal.get(k) not in (None, ""))
    span = f", {h.runs[0]['started_at']} to {h.runs[-1]['started_at']}" if h.runs else ""
    return f"{len(h.runs)} runs of caliber {h.caliber_id} ({parts}){span}; metric {h.metric}"


# ---------------------------------------------------------------- the plot

_W, _H, _PAD = 760, 190, 34


def _shown_changes(case: CaseHistory) -> list:
    return [] if case.flaky else case.changes  # a flaky case's steps are no changes


def _segments(case: CaseHistory) -> list[list]:
    """The case's measured points split at its change points."""
    cuts = sorted(ch.at for ch in _shown_changes(case))
    segs: list[list] = [[]]
    for p in (p for p in case.points if p.value is not None):
        while cuts and p.run >= cuts[0]:
            cuts.pop(0)
            if segs[-1]:
                segs.append([])
        segs[-1].append(p)
    return [s for s in segs if s]


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def svg_plot(case: CaseHistory, runs: list[dict]) -> str:
    """An inline SVG of the case's series: one dot per run (its commit and value on hover),
    each segment's level with its band, a dashed line at each change point, a red cross
    for a failed row."""
    vals = [p.value for p in case.points if p.value is not None]
    if not vals:
        return "<p class='muted'>no measured value</p>"
    lo = math.log(min(vals)) - case.band * 1.5
    hi = math.log(max(vals)) + case.band * 1.5
    span = max(hi - lo, 1e-9)
    n = max(1, len(runs) - 1)

    def x(i: float) -> float:
        return _PAD + (i / n) * (_W - 2 * _PAD)

    def y(v: float) -> float:
        return _H - _PAD + 10 - (math.log(v) - lo) / span * (_H - 2 * _PAD)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
           f'role="img" aria-label="{_esc(_label(case))}">']
    for seg in _segments(case):
        level = statistics.median(p.value for p in seg)
        x0, x1 = x(seg[0].run) - 4, x(seg[-1].run) + 4
        top, bottom = y(level * math.exp(case.band)), y(level * math.exp(-case.band))
        out.append(f'<rect x="{x0:.1f}" y="{top:.1f}" width="{x1 - x0:.1f}" height="{bottom - top:.1f}" '
                   'fill="#4a7bd0" fill-opacity="0.12"/>')
        out.append(f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y(level):.1f}" y2="{y(level):.1f}" stroke="#4a7bd0"/>')
    for ch in _shown_changes(case):
        prev = max((p.run for p in case.points if p.run < ch.at and p.value is not None), default=ch.at)
        cx = (x(prev) + x(ch.at)) / 2
        colour = "#b00020" if ch.direction == "slower" else "#00701a"
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="8" y2="{_H - _PAD + 10}" stroke="{colour}" '
                   f'stroke-dasharray="4 3"><title>{_esc(f"{ch.step * 100:+.1f}% {ch.direction}: {ch.evidence()}")}'
                   '</title></line>')
    for p in case.points:
        commit = (runs[p.run]["suite_commit"] or "?")[:12]
        if p.value is None:
            if p.status == "failed":
                out.append(f'<text x="{x(p.run):.1f}" y="{_H - _PAD + 6}" fill="#b00020" text-anchor="middle">×'
                           f'<title>{commit}: failed</title></text>')
            continue
        out.append(f'<circle cx="{x(p.run):.1f}" cy="{y(p.value):.1f}" r="3" fill="#222">'
                   f'<title>{commit}: {p.value:.4g}</title></circle>')
    first, last = (runs[0]["suite_commit"] or "?")[:10], (runs[-1]["suite_commit"] or "?")[:10]
    out.append(f'<text x="{_PAD}" y="{_H - 6}" font-size="11" fill="#666">{_esc(first)}</text>')
    out.append(f'<text x="{_W - _PAD}" y="{_H - 6}" font-size="11" fill="#666" text-anchor="end">{_esc(last)}</text>')
    ticks = [min(vals)] + ([max(vals)] if y(min(vals)) - y(max(vals)) > 14 else [])  # two labels that do not collide
    for v in ticks:
        out.append(f'<text x="2" y="{y(v) + 4:.1f}" font-size="11" fill="#666">{v:.3g}</text>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- the pages


def _change_rows(cases: list[CaseHistory]) -> list[dict]:
    out = []
    for c in cases:
        if c.flaky:
            continue
        for ch in c.changes:
            out.append({"id": case_id(c), "case": _label(c), "step": f"{ch.step * 100:+.1f}%",
                        "commits": f"{(ch.before_commit or '?')[:12]}..{(ch.after_commit or '?')[:12]}",
                        "direction": ch.direction, "pending": ch.tags(),
                        "evidence": ch.evidence()})
    return out


def _op_page(op: str, cases: list[CaseHistory], h: History) -> str:
    from markupsafe import Markup

    items = [{"id": case_id(c), "case": _label(c), "band": f"{c.band * 100:.2f}%", "basis_text": c.basis_text(),
              "flaky": c.flaky, "flips": c.flips, "series": series_text(c), "svg": Markup(svg_plot(c, h.runs))}
             for c in cases]
    flaky = [{"id": case_id(c), "case": _label(c)} for c in cases if c.flaky]
    return _OP.render(op=op, head=_head(h), css=_CSS, changes=_change_rows(cases), flaky=flaky, cases=items)


def _latest(cases: list[CaseHistory]) -> str:
    """The geometric mean of the cases' values in the latest run that holds any of them."""
    last = max((p.run for c in cases for p in c.points if p.value is not None), default=None)
    vals = [p.value for c in cases for p in c.points if p.run == last and p.value is not None]
    return f"{math.exp(statistics.fmean(math.log(v) for v in vals)):.3f}" if vals else "-"


def _op_row(op: str, cases: list[CaseHistory]) -> dict:
    open_ = [(c, c.changes[-1]) for c in cases if c.changes and not c.flaky]
    worst = max(open_, key=lambda cc: abs(math.log1p(cc[1].step)), default=None)
    w = None
    if worst is not None:
        c, ch = worst
        w = {"direction": ch.direction, "href": f"{op_file(op)}#{case_id(c)}",
             "text": f"{ch.step * 100:+.1f}% {c.dtype} {c.shape[:40]} at {(ch.after_commit or '?')[:12]}"}
    return {"op": op, "href": op_file(op), "cases": len(cases), "latest": _latest(cases), "open": len(open_),
            "worst": w, "flaky": sum(1 for c in cases if c.flaky)}


def _by_op(h: History) -> dict[str, list[CaseHistory]]:
    out: dict[str, list[CaseHistory]] = {}
    for c in h.cases:
        out.setdefault(c.op, []).append(c)
    return out


def check_out(out: Path) -> None:
    """SITE is missing, empty, or a site of publish's; a one-line UsageError otherwise."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: give the folder to write the site in")
    check_writable_dir(out, "--out")  # a folder above it that is a file, a read-only place
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UsageError(f"--out {out} holds files that opscreen publish did not write: give an empty or new folder")
    if not os.access(out.parent if not out.exists() else out, os.W_OK):
        raise UsageError(f"--out {out}: cannot write there; choose another --out")


def publish(h: History, out: str | Path) -> dict:
    """Write the site of ``h`` to ``out`` (see the module's docstring); returns its counts."""
    out = Path(out).expanduser().absolute()
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "ops").mkdir()
        by_op = _by_op(h)
        rows = [_op_row(op, cases) for op, cases in sorted(by_op.items())]
        for op, cases in by_op.items():
            (tmp / op_file(op)).write_text(_op_page(op, cases, h), encoding="utf-8")
        (tmp / "index.html").write_text(_INDEX.render(h=h, head=_head(h), css=_CSS, ops=rows, runs=h.runs,
                                                      metric=h.metric), encoding="utf-8")
        (tmp / "history.json").write_text(json.dumps(h.to_json(), separators=(",", ":"), default=str), encoding="utf-8")
        (tmp / MARKER).write_text("written by opscreen publish; the folder is replaced whole on the next one\n")
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
        tmp.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"ops": len(by_op), "cases": len(h.cases), "open": sum(r["open"] for r in rows), "runs": len(h.runs)}
