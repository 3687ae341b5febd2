"""One self-contained HTML report of a run (and, with ``against``, its comparison).

Lifecycle: :func:`render_report` takes a :class:`~opscreen.results.summary.Summary`
(and optionally a :class:`~opscreen.results.compare.Comparison` against a baseline),
turns it into plain data (every figure already formatted: :class:`Table`, :class:`Row`,
:class:`Cell`) and renders ``templates/report.html.j2`` with Jinja2 (autoescaped: text
from logs, identities and file names is escaped by the template, never by hand);
:func:`write_report` writes it atomically.

The page leads with the verdict: the counts, the geometric mean, the ops that did not
pass, the unresolved rows and what to do about them, and with ``against`` the
regressions and improvements; the run identity sits folded at the bottom. Every case is
in one table that a small inline script sorts and filters (``templates/report.js``); the
page needs no network: inline CSS and script, plots as inline SVG made by matplotlib's
Agg/SVG backend (imported lazily, only here, as Jinja2 is).

Ops that did not pass (failed, timeout, crashed, damaged, interrupted, not_run, ...)
never count as passed: the rows they measured before they stopped are *partial*,
marked in every table and left out of the geometric means and the distribution. A
status this module does not know counts as not passed.
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from .. import __version__
from ..fsio import atomic_write_text
from . import compare as _compare
from . import throttle as _throttle
from . import traces as _traces
from .compare import CompareRow, Comparison, Verdict, _chip_note, _moved_list, _show, _unfinished_lines
from .summary import (COL, Summary, first_telemetry, lib_no_kernel, mixed_rows, noise, row_band, telemetry_sources,
                      with_process_fields)

__all__ = ["render_report", "write_report", "speedup_plot_svg", "change_plot_svg", "PASSED", "NOT_MEASURED"]

TEMPLATES = Path(__file__).with_name("templates")
TOP_ROWS = 40  # rows per verdict table at the top (the cases table has them all)
LOWEST = 20  # cases in "Lowest speedups"

PASSED = ("passed", "passed_own_dtypes")  # the op ran to its end and passed
NOT_MEASURED = ("skipped", "dismissed")  # deliberately not measured: neither passed nor failed


def op_finished(status: str | None) -> bool:
    """The op ran to its end (its rows are whole): passed, or deliberately not measured."""
    return status in PASSED or status in NOT_MEASURED


def op_kind(status: str | None) -> str:
    """CSS class of an op status: only ``passed`` is good; anything unknown is bad."""
    if status == "passed":
        return "good"
    if status == "passed_own_dtypes":
        return "warn"
    return "" if status in NOT_MEASURED else "bad"


# ---------------------------------------------------------------- page data

@dataclass(slots=True)
class Cell:
    """One table cell, formatted: ``sort`` is its sort key where the text is not one."""

    text: str = ""
    cls: str = ""
    tip: str = ""
    href: str = ""
    sort: str = ""
    bar: int = 0  # a bar of this many px instead of text
    bar_cls: str = ""
    sub: str = ""  # a second, smaller line (what decided a band)
    wrap: bool = False  # long names: may break after _ , . (not inside a word)


@dataclass(slots=True)
class Row:
    cells: list[Cell]
    attrs: dict[str, str] = field(default_factory=dict)  # data-* for the filters
    cls: str = ""
    tip: str = ""


@dataclass(frozen=True)
class Col:
    label: str
    num: bool = False
    tip: str = ""


@dataclass
class Table:
    cols: list[Col]
    rows: list[Row]
    id: str = ""
    cls: str = ""
    total: int | None = None  # rows there are, where ``rows`` shows the first few
    empty: list[str] = field(default_factory=list)  # columns left out: no row had a figure for them

    @property
    def more(self) -> int:
        return 0 if self.total is None else max(0, self.total - len(self.rows))

    def without(self, labels: Iterable[str]) -> "Table":
        """The table less the columns named ``labels``."""
        drop = set(labels)
        keep = [i for i, c in enumerate(self.cols) if c.label not in drop]
        self.cols = [self.cols[i] for i in keep]
        for r in self.rows:
            r.cells = [r.cells[i] for i in keep]
        return self

    def without_empty(self, labels: Iterable[str]) -> "Table":
        """The table less those of the columns ``labels`` that no row fills (the suite
        reported no TFLOPS, say); their names are kept in :attr:`empty`."""
        idx = {c.label: i for i, c in enumerate(self.cols)}
        empty = [x for x in labels if x in idx and all(r.cells[idx[x]].text in ("", "–") for r in self.rows)]
        self.empty = empty
        return self.without(empty)


def _f(v: float | None, nd: int = 3) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _ms(v: float | None) -> str:
    """A latency in ms to four significant digits (the CSV keeps them all), no exponent."""
    if v is None:
        return "–"
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    return f"{v:.{max(0, 3 - math.floor(math.log10(abs(v))))}f}"


def _pct(v: float | None, nd: int = 2) -> str:
    """A fraction as percent (no sign)."""
    return "–" if v is None else f"{100 * v:.{nd}f}"


def _chg(v: float | None) -> str:
    """A change as a signed percent; one that rounds to 0 reads +0.0%, never -0.0%."""
    return "–" if v is None else f"{round(100 * v, 1) + 0.0:+.1f}%"


def _band(v: float | None) -> str:
    return "–" if v is None else f"±{100 * v:.1f}%"


def _tflops(v: float | None) -> str:
    return "–" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.1f}")


def _gbps(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


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


def _test_cell(test: str | None, variant: str | None) -> str:
    """The test function and the variant (op_name, #n) that tells apart its rows."""
    return " ".join(x for x in (test, variant) if x)


def _num(text: str, cls: str = "", tip: str = "") -> Cell:
    return Cell(text, ("num " + cls).strip(), tip)


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _link(run_dir: Path | None, rel: str | None, out_dir: Path) -> str:
    """The href of ``run_dir/rel`` relative to the report's folder ('' without one)."""
    if not rel or run_dir is None:
        return ""
    target = (run_dir / rel).resolve()
    try:
        href = os.path.relpath(target, out_dir.resolve())
    except ValueError:  # another drive (Windows)
        href = target.as_posix()
    return quote(href.replace(os.sep, "/"))


class _Page:
    """What every part of the page needs: the run, its ops, their anchors, the band limits."""

    def __init__(self, s: Summary, out_dir: Path):
        self.s = s
        self.out_dir = out_dir
        self.ops = {o.op: o for o in s.ops}
        self.slugs: dict[str, str] = {}
        self.a_page = self  # with a comparison: the baseline's (its ops' statuses)
        for o in sorted(s.ops, key=lambda o: o.op):
            slug = "op-" + re.sub(r"[^A-Za-z0-9_.-]", "_", o.op)
            while slug in self.slugs.values():
                slug += "_"
            self.slugs[o.op] = slug

    def op_status(self, op: str, row: list | None = None) -> str | None:
        o = self.ops.get(op)
        return o.status if o is not None else (row[COL["op_status"]] if row is not None else None)

    def op_cell(self, op: str) -> Cell:
        return Cell(op, href="#" + self.slugs[op] if op in self.slugs else "")

    def unresolved(self, r: list) -> bool:
        b = row_band(r, self.s.noise_k)
        return r[COL["status"]] == "ok" and not lib_no_kernel(r) and b is not None and b > self.s.max_band + 1e-12

    def finished_rows(self) -> list[list]:
        """Ok rows with a speedup of the ops that ran to their end."""
        si, vi, oi = COL["status"], COL["speedup"], COL["op"]
        return [r for r in self.s.rows if r[si] == "ok" and r[vi] is not None and op_finished(self.op_status(r[oi], r))]

    def partial_rows(self) -> list[list]:
        """Ok rows of the ops that did not run to their end (killed, failed, ...)."""
        si, oi = COL["status"], COL["op"]
        return [r for r in self.s.rows if r[si] == "ok" and not op_finished(self.op_status(r[oi], r))]


# ---------------------------------------------------------------- one case

def row_state(p: _Page, r: list, own_band: bool = True) -> tuple[str, str, str, str]:
    """(filter value, text, CSS class, tooltip) of one summary row's status: ``partial``
    for a measured row of an op that did not pass, ``unresolved`` for a row whose band
    is wider than the run's max band (``own_band``: on a comparison the verdict says it)."""
    st = r[COL["status"]]
    ost = p.op_status(r[COL["op"]], r)
    if st == "ok":
        if not op_finished(ost):
            return ("partial", f"partial: op {ost}", "bad",
                    f"the op did not pass ({ost}): this case was measured before it stopped; "
                    "it is left out of the geometric means")
        if own_band and p.unresolved(r):
            return ("unresolved", "ok, unresolved", "warn",
                    f"its band is wider than ±{100 * p.s.max_band:g}%: a change within it cannot be told from noise")
        if lib_no_kernel(r):
            return ("ok", "ok, no kernel", "", "the graph replay of the library's calls held no kernel "
                    "(under 0.2 us a call: a view); the figure is the replay's overhead, not a kernel's time")
        return ("ok", "ok", "", "")
    if st == "failed":
        return ("failed", "failed", "bad", "the suite reported FAILED for this case")
    return (st or "?", "no data" if st == "no_data" else str(st), "warn", "no latency or speedup to read")


def _noise_cell(r: list, unresolved: bool) -> Cell:
    """The row's noise in percent: sqrt(torch² + library²) of its sides' noise
    (``torch_noise_pct``, ``lib_noise_pct``: compare's per-side noise), the sides and the
    --repeats spread in the tooltip."""
    t, l = noise(r, "torch"), noise(r, "lib")
    both = math.sqrt(t**2 + l**2) if t is not None and l is not None else None
    tip = "" if t is None and l is None else f"torch {_pct(t)} %, library {_pct(l)} %"
    reps, spread = r[COL["repeats"]], r[COL["speedup_spread"]]
    if reps and spread is not None:
        tip += f"; {reps} processes: ±{100 * spread:.1f} % between them"
    return _num(_pct(both), "warn" if unresolved else "", tip)


def _timer_txt(r: list) -> str:
    """The row's timer (``torch|lib`` when they differ), with the profiler's host-inclusive
    latency (ms, torch|lib) where a side has one."""
    t, l = r[COL["torch_timer"]], r[COL["lib_timer"]]
    txt = t if t == l else f"{t or '-'}|{l or '-'}"
    th, lh = r[COL["torch_host_ms"]], r[COL["lib_host_ms"]]
    if th is not None or lh is not None:
        txt += f"; host ms {_ms(th) if th is not None else '-'}|{_ms(lh) if lh is not None else '-'}"
    return txt or ""


def _row_tip(r: list) -> str:
    parts = [f"timer {_timer_txt(r)}"] if r[COL["torch_timer"]] or r[COL["lib_timer"]] else []
    ns = (r[COL["torch_samples"]], r[COL["lib_samples"]])
    if any(x is not None for x in ns):
        parts.append("samples " + "|".join("-" if x is None else str(x) for x in ns))
    if r[COL["device"]] not in (None, ""):
        parts.append(f"device {r[COL['device']]}")
    return "; ".join(parts)


THROUGHPUT = ("TFLOPS", "GB/s")
RUN_COLS = [
    Col("op"), Col("test"), Col("dtype"), Col("shape"),
    Col("torch ms", True, "torch's latency, ms"), Col("library ms", True, "the library's latency, ms"),
    Col("speedup", True, "torch ms / library ms: above 1 the library is faster"),
    Col("noise %", True, "the spread of the case's samples: sqrt(torch² + library²) of their relative "
                        "standard deviations, in percent (hover for each side)"),
    Col("TFLOPS", True, "the library's, where the suite reports it"), Col("GB/s", True, "the library's, where the suite reports it"),
    Col("status", tip="ok; partial: measured by an op that did not pass; unresolved: band wider than the max band"),
]  # fmt: skip


def _key_cells(p: _Page, op: str, test: str | None, variant: str | None, dtype: str | None, shape: str | None) -> list[Cell]:
    op_cell = p.op_cell(op)
    op_cell.cls, op_cell.wrap = "op", True
    return [op_cell, Cell(_test_cell(test, variant), "test", wrap=True), Cell(dtype or "", "dt"),
            Cell(shape or "", "shape", wrap=True)]


def run_row(p: _Page, r: list) -> Row:
    state, text, cls, tip = row_state(p, r)
    sp = r[COL["speedup"]]
    cells = _key_cells(p, r[COL["op"]], r[COL["test"]], r[COL["variant"]], r[COL["dtype"]], r[COL["shape"]]) + [
        _num(_ms(r[COL["torch_ms"]])), _num(_ms(r[COL["lib_ms"]])), _num(_f(sp), _sp_class(sp)),
        _noise_cell(r, state == "unresolved"), _num(_tflops(r[COL["tflops"]])), _num(_gbps(r[COL["lib_gbps"]])),
        Cell(text, cls, tip),
    ]  # fmt: skip
    return Row(cells, {"op": r[COL["op"]], "dtype": r[COL["dtype"]] or "", "status": state},
               "partial" if state == "partial" else "", _row_tip(r))


CMP_COLS = [
    Col("op"), Col("test"), Col("dtype"), Col("shape"),
    Col("A torch ms", True, "torch's latency in A (the baseline), ms"), Col("A library ms", True, "the library's latency in A, ms"),
    Col("B torch ms", True, "torch's latency in B (this run), ms"), Col("B library ms", True, "the library's latency in B, ms"),
    Col("A speedup", True, "torch ms / library ms in A"), Col("B speedup", True, "torch ms / library ms in B"),
    Col("A noise %", True, "the noise of A's row, percent (compare's per-side noise)"),
    Col("B noise %", True, "the noise of B's row, percent"),
    Col("change", True, "B / A - 1 of the speedup (+: B faster relative to torch)"),
    Col("judged", True, "the change the verdict judged, and below it of what: the library's or torch's own speed "
                        "(A / B - 1) where one device model ran both, else the speedup; + faster; coloured only "
                        "where the verdict says slower or faster"),
    Col("band", True, "the band of the judged change, and below it what decided it (samples, floors, repeats, "
                      "baseline, pick, ...)"),
    Col("verdict"),
    Col("TFLOPS", True, "the library's in B"), Col("GB/s", True, "the library's in B"),
    Col("status", tip="B's row (A's where B has none): partial: measured by an op that did not pass; "
                      "op ... in B: B's op did not pass and did not measure the case"),
]  # fmt: skip

_VERDICT_KIND = {Verdict.SLOWER: "bad", Verdict.BROKEN: "bad", Verdict.FASTER: "good", Verdict.FIXED: "good",
                 Verdict.UNRESOLVED: "warn", Verdict.GONE: "warn", Verdict.FAILED: "warn", Verdict.SAME: "",
                 Verdict.NEW: ""}  # fmt: skip
_CALLED = {Verdict.SLOWER: "bad", Verdict.FASTER: "good"}  # the only verdicts that colour a change


def verdict_kind(v: Verdict) -> str:
    """CSS class of a verdict; a verdict this module does not know is neutral."""
    return _VERDICT_KIND.get(v, "other")


def verdict_order() -> list[Verdict]:
    """Every verdict, most severe first (compare's own order; new ones last, in enum order)."""
    rank = getattr(_compare, "_SEVERITY", {})
    return sorted(Verdict, key=lambda v: (rank.get(v, len(rank)), list(Verdict).index(v)))


_SIDE = {"lib": "library", "torch": "torch", "speedup": "speedup"}


def judged_change(cr: CompareRow) -> tuple[float | None, str | None]:
    """(the change the row's verdict judged, + faster; what it is the change of): compare's
    ``judged`` and ``side`` where it records them, else the change of the metric."""
    judged = getattr(cr, "judged", None)
    if judged is None and getattr(cr, "side", None) is None:  # nothing judged on its own side
        judged = cr.change
    side = getattr(cr, "side", None) or ("speedup" if judged is not None else None)
    return judged, side


def _side_status(p: _Page, r: list | None, gone_in: str = "") -> tuple[str, str, str, str]:
    if r is None:
        return ("none", "–", "na", "")
    state, text, cls, tip = row_state(p, r, own_band=False)
    return (state, text + gone_in, cls, tip)


def cmp_row(p: _Page, cr: CompareRow, rb: list | None, ra: list | None) -> Row:
    """One joined case: A's and B's figures, the change, its band and verdict; B's status
    (A's for a row only A has, but ``op STATUS in B`` where B's op did not pass: such a
    row never reads ok), and where B's row is whole but A's op did not pass, that A's row
    is partial."""
    own = rb if rb is not None else ra
    state, text, cls, tip = _side_status(p if rb is not None else p.a_page, own, "" if rb is not None else " (in A)")
    b_st = p.op_status(cr.op)
    if rb is None and ra is not None and b_st is not None and not op_finished(b_st):
        # B's op stopped before this case: never "ok", whatever A's row was
        tip = f"B's op did not pass ({b_st}) and did not measure this case; A's row: {text.removesuffix(' (in A)')}"
        state, text, cls = "not measured in B", f"op {b_st} in B", "bad"
    a_st = p.a_page.op_status(cr.op, ra) if ra is not None else None
    if rb is not None and ra is not None and state == "ok" and ra[COL["status"]] == "ok" and not op_finished(a_st):
        state, text, cls = "partial in A", f"ok; A partial: op {a_st}", "warn"
        tip = f"A's op did not pass ({a_st}): its row was measured before it stopped"
    chg_cls = _CALLED.get(cr.verdict, "")
    basis = cr.basis or ""
    judged, side = judged_change(cr)
    cells = _key_cells(p, cr.op, cr.test, cr.variant, cr.dtype, cr.shape) + [
        _num(_ms(cr.a_torch_ms)), _num(_ms(cr.a_lib_ms)), _num(_ms(cr.b_torch_ms)), _num(_ms(cr.b_lib_ms)),
        _num(_f(cr.a_speedup)), _num(_f(cr.b_speedup)),  # uncoloured: in a comparison only a verdict colours
        _num(_pct(cr.a_noise)), _num(_pct(cr.b_noise)),
        _num(_chg(cr.change)), Cell(_chg(judged), "num sub " + chg_cls, sub=_SIDE.get(side, side or "")),
        Cell(_band(cr.band), "num sub" + (" warn" if cr.verdict == Verdict.UNRESOLVED else ""), sub=basis),
        Cell(cr.verdict.value, "verdict " + verdict_kind(cr.verdict)),
        _num(_tflops(rb[COL["tflops"]] if rb is not None else None)),
        _num(_gbps(rb[COL["lib_gbps"]] if rb is not None else None)), Cell(text, cls, tip),
    ]  # fmt: skip
    attrs = {"op": cr.op, "dtype": cr.dtype or "", "status": state, "verdict": cr.verdict.value}
    return Row(cells, attrs, "partial" if state.startswith("partial") else "", _row_tip(own) if own is not None else "")


def _key(r: list) -> tuple:
    return (r[COL["op"]], r[COL["variant"]] or "", r[COL["dtype"]], r[COL["shape"]])


class _Joined:
    """The comparison's rows as table rows (B's and A's summary rows joined by key)."""

    def __init__(self, p: _Page, c: Comparison):
        self.p, self.c = p, c
        p.a_page = _Page(c.a, p.out_dir)
        p.a_page.slugs = p.slugs  # one set of anchors: the page's ops
        self.b = {_key(r): r for r in c.b.rows}
        self.a = {_key(r): r for r in c.a.rows}

    def row(self, cr: CompareRow) -> Row:
        return cmp_row(self.p, cr, self.b.get(cr.key), self.a.get(cr.key))

    def table(self, rows: list[CompareRow], n: int | None = TOP_ROWS, id: str = "") -> Table:
        """The first ``n`` rows (all: None); a short table leaves out the library's
        throughput (the cases table has it)."""
        shown = rows if n is None else rows[:n]
        t = Table(list(CMP_COLS), [self.row(r) for r in shown], id=id, total=len(rows))
        return t.without_empty(THROUGHPUT) if n is None else t.without(THROUGHPUT)


# ---------------------------------------------------------------- plots

def _svg_closing(fig) -> str | None:
    """The figure (None: no figure) as inline SVG (:func:`_svg_of`), the figure closed."""
    if fig is None:
        return None
    _, plt = _pyplot()
    svg = _svg_of(fig)
    plt.close(fig)
    return svg


def _svg_of(fig) -> str:
    """The figure as inline SVG that takes its container's width (viewBox kept)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    i = text.find("<svg")
    text = text[i:] if i >= 0 else text
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    head_end = text.find(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", text[:head_end])
    return head + ' class="chart" preserveAspectRatio="xMinYMin meet"' + text[head_end:]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return matplotlib, plt


PLOT_RC = {"svg.hashsalt": "opscreen", "svg.fonttype": "path", "font.size": 10}
PLOT_WIDTH_IN = 14.0  # about the page's width at 1400 px: the text is drawn at its own size


def _log2_ticks(lo: float, hi: float, most: int = 17) -> list[float]:
    """Ticks at powers of two (halves where the span is short), at most about ``most``."""
    ticks: list[float] = list(range(math.floor(lo), math.ceil(hi) + 1))
    if len(ticks) < 4:
        return [t / 2 for t in range(math.floor(lo * 2), math.ceil(hi * 2) + 1)]
    step = math.ceil(len(ticks) / most)
    return [t for t in ticks if t % step == 0] if step > 1 else ticks


def _count_axis(ax, top: float) -> None:
    """Whole-number count ticks: linear up to 10, symmetric-log above (0, 10, 100, ...);
    a low panel (many dtypes) gets fewer linear ticks (0, 2, 4, ...), so that its labels
    do not run into each other."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    if top <= 10:
        fig = ax.get_figure()
        inches = ax.get_position().height * fig.get_figheight()  # before tight_layout: about the panel
        ax.yaxis.set_major_locator(MaxNLocator(nbins=max(2, min(10, int(inches / 0.22))), integer=True))
        ax.set_ylim(0, max(top, 1) * 1.15)  # headroom: the top label stays off the panel above
        return
    ax.set_yscale("symlog", linthresh=10)
    ax.yaxis.set_major_locator(FixedLocator([0] + [10**k for k in range(1, math.ceil(math.log10(top)) + 1)]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
    ax.yaxis.set_minor_locator(NullLocator())


def speedup_figure(by_dtype: dict[str, list[float]]):
    """Histograms of log2(speedup), one panel per dtype (its name and figures in the
    panel's title, above the bars), a shared x axis; None without a positive value."""
    series = {d: [v for v in vals if v and v > 0 and math.isfinite(v)] for d, vals in by_dtype.items()}
    series = {d: v for d, v in sorted(series.items()) if v}
    if not series:
        return None
    matplotlib, plt = _pyplot()
    from matplotlib.ticker import FixedLocator, FuncFormatter

    with matplotlib.rc_context(PLOT_RC):
        allv = [math.log2(v) for vals in series.values() for v in vals]
        lo, hi = min(min(allv), -0.25), max(max(allv), 0.25)
        lo, hi = lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo)
        bins = [lo + (hi - lo) * i / 80 for i in range(81)]
        panel = 1.6 if len(series) <= 3 else 1.15  # inches a dtype: many dtypes, lower panels
        fig, axes = plt.subplots(len(series), 1, figsize=(PLOT_WIDTH_IN, 0.6 + panel * len(series)), sharex=True,
                                 squeeze=False)  # fmt: skip
        for ax, (d, vals) in zip(axes[:, 0], series.items()):
            logs = [math.log2(v) for v in vals]
            gm = 2 ** (sum(logs) / len(logs))
            n1, _, _ = ax.hist([x for x in logs if x < 0], bins=bins, color="#d1495b", alpha=0.85)
            n2, _, _ = ax.hist([x for x in logs if x >= 0], bins=bins, color="#2f9e5b", alpha=0.85)
            ax.axvline(0.0, color="#333", lw=0.8)
            ax.axvline(math.log2(gm), color="#2f5fb3", lw=1.2, ls="--")
            ax.set_ylabel("cases")
            _count_axis(ax, max([0.0, *n1, *n2]))
            faster = sum(1 for x in logs if x >= 0)
            ax.set_title(f"{d}: {len(vals)} cases, geometric mean {gm:.3f}, {faster} ≥ 1, {len(vals) - faster} < 1",
                         loc="left", fontsize=10)  # fmt: skip
            ax.spines[["top", "right"]].set_visible(False)
        axes[-1, 0].xaxis.set_major_locator(FixedLocator(_log2_ticks(lo, hi)))
        axes[-1, 0].xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{2.0 ** float(x):g}×"))
        axes[-1, 0].set_xlim(lo, hi)
        axes[-1, 0].set_xlabel("speedup over torch (log scale; red: the library is slower; dashed: geometric mean)")
        fig.tight_layout()
    return fig


def speedup_plot_svg(by_dtype: dict[str, list[float]]) -> str | None:
    """:func:`speedup_figure` as inline SVG text."""
    return _svg_closing(speedup_figure(by_dtype))


_VERDICT_COLOR = {Verdict.SLOWER: "#d1495b", Verdict.FASTER: "#2f9e5b", Verdict.SAME: "#9aa3b2",
                  Verdict.UNRESOLVED: "#e0a526"}  # fmt: skip
_OTHER_COLORS = ("#6f5fb3", "#3a8fb7", "#b36f9e", "#8a6d3b")


def change_figure(rows_or_changes: Iterable[Any]):
    """Histogram of the change each row's verdict judged (:func:`judged_change`), B vs A, in
    percent, stacked by verdict (only slower rows red and faster rows green: an unresolved
    or same row is never painted as a change),
    the legend above the bars; the range clipped to the 0.5th and 99.5th percentile (rows
    beyond it sit in the edge bars). Takes compare rows, or bare changes (fractions)."""
    groups: dict[Any, list[float]] = {}
    for x in rows_or_changes:
        v, c = (x.verdict, judged_change(x)[0]) if isinstance(x, CompareRow) else (None, x)
        if c is not None and math.isfinite(c):
            groups.setdefault(v, []).append(100.0 * c)
    if not groups:
        return None
    matplotlib, plt = _pyplot()
    with matplotlib.rc_context(PLOT_RC):
        allv = sorted(v for vals in groups.values() for v in vals)
        q = lambda f: allv[min(len(allv) - 1, max(0, round(f * (len(allv) - 1))))]  # noqa: E731
        lo, hi = min(q(0.005), -5.0), max(q(0.995), 5.0)
        bins = [lo + (hi - lo) * i / 80 for i in range(81)]
        order = [v for v in verdict_order() if v in groups] + ([None] if None in groups else [])
        others = iter(_OTHER_COLORS * 4)
        colors = [_VERDICT_COLOR.get(v) or (next(others) if v is not None else "#5b6475") for v in order]
        data = [[min(max(x, lo), hi) for x in groups[v]] for v in order]
        labels = [f"{v.value if v is not None else 'rows'} ({len(groups[v])})" for v in order]
        fig, ax = plt.subplots(figsize=(PLOT_WIDTH_IN, 2.6))
        n, _, _ = ax.hist(data, bins=bins, stacked=True, color=colors, label=labels, alpha=0.9)
        ax.axvline(0.0, color="#333", lw=0.8)
        tops = n[-1] if len(order) > 1 else n
        _count_axis(ax, max([0.0, *tops]))
        ax.set_xlim(lo, hi)
        ax.set_xlabel("the change each verdict judged, B vs A (%, + faster: the library's or torch's own speed on one "
                      "device model, else the speedup; beyond the axis: in the edge bars)")
        ax.set_ylabel("cases")
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=min(len(order), 8), frameon=False, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
    return fig


def change_plot_svg(rows_or_changes: Iterable[Any]) -> str | None:
    return _svg_closing(change_figure(rows_or_changes))


_change_plot_svg = change_plot_svg  # the name before the stacked verdicts

PEAK_LABELS = 14  # ops named on the %-of-peak plot: those with the most points


def peak_points(rows: list[list]) -> list[tuple[str, float, float, str]]:
    """(op, speedup, library %-of-peak, basis) of every ok row that has both (summary 5's columns)."""
    out = []
    for r in rows:
        pct, sp = r[COL["lib_pct_peak"]], r[COL["speedup"]]
        if r[COL["status"]] == "ok" and pct is not None and pct > 0 and sp and sp > 0 and math.isfinite(sp):
            out.append((r[COL["op"]], float(sp), float(pct), (r[COL["peak_basis"]] or "").split(" ")[0]))
    return out


def peak_figure(rows: list[list]):
    """The library's %-of-peak against its speedup, one point per row (log-log; blue: GB/s rows held
    against the copy, orange: TFLOPS rows against the matmul of their dtype), each of the ops with the
    most points named at the median of its points; None without a point."""
    pts = peak_points(rows)
    if not pts:
        return None
    matplotlib, plt = _pyplot()
    with matplotlib.rc_context(PLOT_RC):
        fig, ax = plt.subplots(figsize=(PLOT_WIDTH_IN, 4.2))
        for basis, color, label in (("bandwidth", "#3a8fb7", "GB/s rows: % of the copy's bandwidth"),
                                    ("flops", "#e07b39", "TFLOPS rows: % of the matmul of their dtype")):
            xs = [p[1] for p in pts if p[3] == basis]
            ys = [p[2] for p in pts if p[3] == basis]
            if xs:
                ax.scatter(xs, ys, s=9, alpha=0.55, color=color, label=f"{label} ({len(xs)})", linewidths=0)
        from matplotlib.ticker import FixedLocator, FuncFormatter

        ax.set_xscale("log")
        ax.set_yscale("log")
        # at least 0.5x to 2x, so that a screen whose speedups all lie near 1 still reads
        # (its default log ticks left every label out but 1x), ticked at powers of two
        lo, hi = min(min(p[1] for p in pts) / 1.15, 0.5), max(max(p[1] for p in pts) * 1.15, 2.0)
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(FixedLocator([2.0 ** t for t in _log2_ticks(math.log2(lo), math.log2(hi))]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}×"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%"))
        ax.axvline(1.0, color="#333", lw=0.8)
        ax.axhline(100.0, color="#999", lw=0.8, ls="--")
        by: dict[str, list[tuple[float, float]]] = {}
        for op, x, y, _ in pts:
            by.setdefault(op, []).append((x, y))
        named = sorted(by, key=lambda op: (-len(by[op]), op))[:PEAK_LABELS]
        for op in named:
            xs, ys = sorted(x for x, _ in by[op]), sorted(y for _, y in by[op])
            ax.annotate(op, (xs[len(xs) // 2], ys[len(ys) // 2]), fontsize=8, color="#222", alpha=0.9,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("speedup over torch (log; right of the line: the library is faster)")
        ax.set_ylabel("library % of the measured peak (log)")
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2, frameon=False, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
    return fig


def peak_plot_svg(rows: list[list]) -> str | None:
    """:func:`peak_figure` as inline SVG text."""
    return _svg_closing(peak_figure(rows))


# ---------------------------------------------------------------- the run's verdict

def _geomeans(rows: list[list]) -> dict:
    """Geometric-mean speedup over ``rows`` (ok, with a speedup): overall and per dtype."""
    logs: dict[str, list[float]] = {}
    for r in rows:
        v = r[COL["speedup"]]
        if v is not None and v > 0:
            logs.setdefault(r[COL["dtype"]] or "?", []).append(math.log(v))
    gm = lambda xs: math.exp(math.fsum(xs) / len(xs)) if xs else None  # noqa: E731
    allv = [x for xs in logs.values() for x in xs]
    return {"overall": gm(allv), "rows": len(allv),
            "by_dtype": [(d, len(xs), gm(xs)) for d, xs in sorted(logs.items())]}  # fmt: skip


def _op_cards(s: Summary) -> list[tuple]:
    """(count, status, class) per op status: passed first, the others by count."""
    oc = s.op_counts()
    order = sorted(oc, key=lambda k: (k != "passed", k not in PASSED, k in NOT_MEASURED, -oc[k], k))
    return [(oc[k], k.replace("_", " "), op_kind(k)) for k in order]


def _case_cards(p: _Page) -> list[tuple]:
    """(count, label, class, tooltip) of the cases by state; a kind with no case is left out."""
    n: dict[str, int] = {}
    for r in p.s.rows:
        state = row_state(p, r)[0]
        n[state] = n.get(state, 0) + 1
    ok = n.get("ok", 0) + n.get("unresolved", 0)
    cards = [
        (ok, "measured", "good" if ok else "na", "measured by ops that passed (unresolved ones too)"),
        (n.get("partial", 0), "partial", "bad", "measured by ops that did not pass: marked, not in the geometric mean"),
        (n.get("failed", 0), "failed", "bad", "the suite reported FAILED"),
        (n.get("no_data", 0), "no data", "warn", "no latency or speedup to read"),
    ]
    return [c for c in cards if c[0] or c[1] == "measured"]


def _headline(p: _Page) -> str:
    oc = p.s.op_counts()
    total = sum(oc.values())
    passed = sum(oc.get(k, 0) for k in PASSED)
    bad = {k: v for k, v in oc.items() if not op_finished(k)}
    skip = sum(oc.get(k, 0) for k in NOT_MEASURED)
    if total and passed == total:
        txt = f"all {_plural(total, 'op')} passed"
    else:
        txt = f"{passed} of {_plural(total, 'op')} passed"
        if bad:
            txt += f", {sum(bad.values())} did not (" + ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) + ")"
        if skip:
            txt += f", {skip} not measured"
    return txt


COMMAND_OPS = 20  # ops named in a suggested command; the cases table's filters find the rest


def _where(s: Summary | None) -> str:
    """``--backend B`` and, where the run did not take the defaults, ``--suite`` and ``--python``:
    what a command for the same device and suite needs (from the run's recorded settings)."""
    st = ((s.identity or {}).get("settings") or {}) if s is not None else {}
    prov = st.get("provenance") or {}
    words = [f"--backend {st['backend']}"] if st.get("backend") else []
    for key, flag in (("suite_root", "--suite"), ("python", "--python")):
        if st.get(key) and prov.get(flag[2:], "default") != "default":
            words.append(f"{flag} {st[key]}")
    return "".join(f" {w}" for w in words)


def rerun_command(ops: list[str], s: Summary | None = None, basis: str | None = None) -> str:
    """What narrows the bands of ``ops``' unresolved rows, as a command for ``s``'s device and
    suite: ``opscreen calibrate`` where no floors table (or an A/A report) decided, else
    ``opscreen run --repeats 3`` of the first :data:`COMMAND_OPS` of ``ops`` (on each side)."""
    if not ops:
        return ""
    parts = [x.strip() for x in (basis or "").split("+") if x.strip()]
    if parts and parts[-1] in ("floors-default", "aa"):
        return f"opscreen calibrate{_where(s)} --sample 30"
    more = f"   # the first {COMMAND_OPS} of {len(ops)} ops" if len(ops) > COMMAND_OPS else ""
    return f"opscreen run{_where(s)} --repeats 3 --ops {','.join(ops[:COMMAND_OPS])} --out RUN_DIR{more}"


def _unresolved_ctx(p: _Page) -> dict:
    u = p.s.unresolved()
    ops = sorted(u["by_op"].items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "line": f"unresolved: {u['rows']} ok rows whose band ({u['k']:g} × the recorded noise, or the --repeats "
                f"spread) is wider than ±{100 * u['max_band']:g}%: a change within it cannot be told from noise",
        "rows": u["rows"], "ops": [(p.op_cell(op), n, p.ops[op].ok_rows if op in p.ops else None) for op, n in ops],
        "command": rerun_command([op for op, _ in ops], p.s),
    }  # fmt: skip


def status_ctx(p: _Page) -> dict:
    """The run's verdict: counts, the geometric mean of the ops that passed, what did not pass."""
    fin, part = p.finished_rows(), p.partial_rows()
    g = _geomeans(fin)
    not_passed = [o for o in p.s.ops if not op_finished(o.status)]
    gm = g["overall"]
    return {
        "headline": _headline(p), "op_cards": _op_cards(p.s), "case_cards": _case_cards(p),
        "geomean": gm, "geomean_txt": _f(gm), "geomean_cls": _sp_class(gm), "geomean_rows": g["rows"],
        "by_dtype": [(d, n, _f(v), _sp_class(v)) for d, n, v in g["by_dtype"]],
        "not_passed": [(p.op_cell(o.op), o.status, o.ok_rows, o.truncated) for o in not_passed],
        "partial_rows": len(part), "partial_ops": len({r[COL["op"]] for r in part}),
        "all_rows_geomean": _f(p.s.geomeans()["overall"]) if part else "",
        "truncated": sum(1 for o in p.s.ops if o.truncated), "unresolved": _unresolved_ctx(p),
    }  # fmt: skip


def failures_ctx(p: _Page) -> list[dict]:
    """The ops that did not pass, or that reported FAILED cases: status, why, their log."""
    failed_rows: dict[str, int] = {}
    for r in p.s.rows:
        if r[COL["status"]] == "failed":
            failed_rows[r[COL["op"]]] = failed_rows.get(r[COL["op"]], 0) + 1
    bad = [o for o in p.s.ops if o.status != "passed" or failed_rows.get(o.op)]
    out = []
    for o in sorted(bad, key=lambda o: (op_finished(o.status), o.status, o.op)):
        reasons: list[str] = [o.error] if o.error else []
        for f in o.failures or []:
            r = f.get("reason") if isinstance(f, dict) else None
            node = f.get("node") if isinstance(f, dict) else None
            txt = f"{node}: {r}" if node and r else (r or node)
            if txt and txt not in reasons and r not in reasons:
                reasons.append(txt)
        if failed_rows.get(o.op):
            reasons.append(f"{failed_rows[o.op]} case(s) reported FAILED")
        if o.truncated:
            reasons.append("its log is truncated (killed, timed out or crashed): its rows may be incomplete")
        out.append({"op": p.op_cell(o.op), "status": o.status, "cls": op_kind(o.status), "ok": o.ok_rows, "rows": o.rows,
                    "reason": "\n".join(reasons[:7]) or "(no reason recorded)", "log": o.run_log or "",
                    "href": _link(p.s.path, o.run_log, p.out_dir)})  # fmt: skip
    return out


# ---------------------------------------------------------------- per op

OPS_COLS = [
    Col("op"), Col("status"), Col("measured", True, "measured cases / all its cases"),
    Col("geomean speedup", True, "geometric mean of its cases' speedups (partial: an op that did not pass)"),
    Col("geomean, log scale", True, "the geometric mean as a bar: red slower than torch, green faster"),
    Col("lowest speedup", True), Col("highest speedup", True),
    Col("unresolved", True, "its ok cases whose band is wider than the max band"),
]  # fmt: skip


def _op_extremes(s: Summary) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for r in s.rows:
        v = r[COL["speedup"]]
        if r[COL["status"]] == "ok" and v is not None:
            lo, hi = out.get(r[COL["op"]], (v, v))
            out[r[COL["op"]]] = (min(lo, v), max(hi, v))
    return out


def ops_table(p: _Page) -> Table:
    """Every op by geometric-mean speedup, lowest first; an op that did not pass is marked."""
    ext = _op_extremes(p.s)
    unres = p.s.unresolved()["by_op"]
    ops = sorted(p.s.ops, key=lambda o: (o.geomean is None, o.geomean if o.geomean is not None else 0.0, o.op))
    scale = max([abs(math.log2(o.geomean)) for o in ops if o.geomean] + [0.5])
    rows = []
    for o in ops:
        gm, partial = o.geomean, not op_finished(o.status)
        lo, hi = ext.get(o.op, (None, None))
        bar = Cell(sort="" if not gm else f"{gm:.6f}", bar=int(90 * abs(math.log2(gm)) / scale) if gm else 0,
                   bar_cls="bad" if gm and gm < 1 else "good")  # fmt: skip
        gtxt = _f(gm) + (" partial" if partial and gm is not None else "")
        rows.append(Row([
            p.op_cell(o.op), Cell(o.status, op_kind(o.status)), _num(f"{o.ok_rows}/{o.rows}"),
            _num(gtxt, "partial-val" if partial else _sp_class(gm),
                 f"over the cases measured before the op stopped ({o.status})" if partial else ""),
            bar, _num(_f(lo)), _num(_f(hi)), _num(str(unres.get(o.op, "")), "warn" if unres.get(o.op) else ""),
        ], {"status": o.status}, "partial" if partial else ""))  # fmt: skip
    return Table(OPS_COLS, rows, id="ops-table")


def op_sections(p: _Page) -> list[dict]:
    """One section per op (anchor ``op-NAME``): status, cases, geometric mean, its device,
    wall and log; its cases come from the cases table (the page's script)."""
    ext = _op_extremes(p.s)
    unres = p.s.unresolved()["by_op"]
    out = []
    for o in sorted(p.s.ops, key=lambda o: o.op):
        lo, hi = ext.get(o.op, (None, None))
        facts = [f"{o.ok_rows} of {_plural(o.rows, 'case')} measured"]
        if o.geomean is not None:
            facts.append(f"geometric-mean speedup {o.geomean:.3f}" + (" (partial)" if not op_finished(o.status) else "")
                         + f", lowest {_f(lo)}, highest {_f(hi)}")
        if unres.get(o.op):
            facts.append(f"{unres[o.op]} unresolved")
        facts += [x for x in (f"device {o.device}" if o.device not in (None, "") else "",
                              f"{o.duration_s:.1f} s" if o.duration_s is not None else "",
                              _plural(o.attempts, "attempt") if o.attempts and o.attempts > 1 else "") if x]
        if o.fallbacks:
            facts.append(f"{sum(f['rows'] for f in o.fallbacks)} row sides not graph-timed (see Graph fallback)")
        device = _traces.telemetry_fact(o.telemetry, o.throttled)  # None where nothing was sampled
        facts += [device] if device else []
        out.append({"id": p.slugs[o.op], "op": o.op, "status": o.status, "cls": op_kind(o.status), "facts": facts,
                    "error": o.error or "", "rows": o.rows, "log": o.run_log or "",
                    "href": _link(p.s.path, o.run_log, p.out_dir), "trace": _traces.trace_svg(o.telemetry)})  # fmt: skip
    return out


def fallback_ctx(p: _Page) -> dict:
    """Ops the graph timer could not time (some rows): side, rows, phase, timer, why."""
    rows = []
    for o in (o for o in p.s.ops if o.fallbacks):
        for f in o.fallbacks:
            why = f"{f['kind']}: {f['message']}" if f["kind"] else (f["message"] or "(not recorded)")
            rows.append(Row([p.op_cell(o.op), Cell(f["side"]), _num(str(f["rows"])), Cell(f["phase"] or ""),
                             Cell(f["timer"] or "", "warn" if f["timer"] != "profiler" else ""), _num(_f(f["host_x"])),
                             Cell(why, "reason")]))  # fmt: skip
    cols = [Col("op"), Col("side"), Col("rows", True), Col("phase"), Col("timer"),
            Col("host x", True, "the host-inclusive latency over the device figure"), Col("why")]  # fmt: skip
    timers = sorted({str(r[COL[k]]).split(":")[0] for r in p.s.rows if r[COL["status"]] == "ok"
                     for k in ("torch_timer", "lib_timer") if r[COL[k]]})
    return {"table": Table(cols, rows) if rows else None, "ops": len({r.cells[0].text for r in rows}),
            "mixed": mixed_rows(p.s), "timers": ", ".join(timers)}


def autotune_ctx(p: _Page, comparison: Comparison | None) -> dict:
    """The autotuned kernels whose pick differs: between this run's processes of an op
    (--repeats) and, on a comparison, between A and B (compare's ``pick``)."""
    rows = [Row([p.op_cell(f["op"]), Cell(f["kernel"].rsplit(".", 1)[-1]), Cell(f["key"]), Cell("this run's processes"),
                 Cell(" | ".join(str(c) for c in f["configs"]), "reason")]) for f in p.s.autotune_flips()]
    for op, diffs in sorted((comparison.picks if comparison is not None else {}).items()):
        for d in diffs:
            rows.append(Row([p.op_cell(op), Cell(d["kernel"].rsplit(".", 1)[-1]), Cell(d["key"]), Cell("A against B"),
                             Cell(f"A {d['a']} | B {d['b']}", "reason")]))
    cols = [Col("op"), Col("kernel"), Col("key"), Col("between"), Col("configs")]
    return {"table": Table(cols, rows) if rows else None, "ops": len({r.cells[0].text for r in rows})}


def identity_items(s: Summary) -> list[tuple[str, str]]:
    ident = with_process_fields(s)
    cal = s.caliber or {}
    suite = ident.get("suite") if isinstance(ident.get("suite"), dict) else {}
    items: list[tuple[str, Any]] = [
        ("run", s.name), ("kind", s.kind), ("backend", cal.get("backend")), ("vendor", cal.get("vendor")),
        ("device", cal.get("device_name") or ident.get("device_name")), ("device count", ident.get("device_count")),
        ("timer", cal.get("timer")), ("use_flagtune", cal.get("use_flagtune")),
        ("use_flagtune_cost_model", cal.get("use_flagtune_cost_model")),
        ("triton_cache_autotuning", cal.get("triton_cache_autotuning")), ("isolation", cal.get("isolation")),
        ("input seed", cal.get("input_seed")), ("shape mode", cal.get("shape_mode")), ("level", cal.get("level")),
        ("dtypes", _show(cal.get("dtypes")) if cal.get("dtypes") else "(the suite's own)"),
        ("timing", _show(cal.get("timing")) if isinstance(cal.get("timing"), dict) else cal.get("timing")),
        ("suite", suite.get("name")), ("suite commit", cal.get("suite_commit") or suite.get("commit")),
        ("suite dirty", suite.get("dirty")),
        ("library", " ".join(str(x) for x in (ident.get("library"), ident.get("library_version")) if x)),
        ("torch", ident.get("torch_version")), ("triton", ident.get("triton_version")),
        ("driver / runtime", " / ".join(str(x) for x in (ident.get("driver_version"), ident.get("runtime_version")) if x)),
        ("host", ident.get("host")), ("python", ident.get("python")),
        ("started", ident.get("started_at")), ("finished", ident.get("finished_at")),
        ("opscreen", ident.get("opscreen_version")),
    ]  # fmt: skip
    return [(k, str(v)) for k, v in items if v not in (None, "")]


# ---------------------------------------------------------------- the comparison

_ADVICE = {
    "samples": "one process's samples scatter: `--repeats 3` on both runs (each case the median of three processes)",
    "threshold": "the rows recorded no noise, so a fixed threshold decided: rerun both with this opscreen, "
                 "which records it",
    "floors": "the noise between processes (the floors table) decided: `--repeats 3` on both runs narrows "
              "floors bands by about 1/sqrt(3)",
    "floors-default": "no floors table for this device, so a conservative default decided: `opscreen calibrate` "
                      "measures this device's own",
    "repeats": "the processes of --repeats disagree: more of them (`--repeats 5`), or the case is unstable",
    "aa": "an A/A drift (--aa) decided: `opscreen calibrate` measures a floors table in its place",
    "baseline": "torch's latency moved while the library's did not: the reference changed (clocks, placement, "
                "torch build); rerun both with `--repeats 3`",
    "no-kernel": "both runs timed a graph replay of no kernel for the library (a view): nothing on the device "
                 "to compare, so the row is same",
    "pick": "the two runs' autotuners chose different configs for the op: its change is partly the configs' "
            "(TRITON_CACHE_AUTOTUNING=1 with a shared cache dir pins plain @triton.autotune winners)",
}  # fmt: skip
_ADVICE["spread"] = _ADVICE["repeats"]  # the older name of the --repeats band
_ADVICE["noise"] = _ADVICE["samples"]  # the older name of the samples band
_ADVICE_DEFAULT = "`--repeats 3` on both runs narrows the bands; `opscreen calibrate` measures this device's floors table"


def basis_advice(basis: str | None) -> str:
    """What narrows a band that ``basis`` (compare's name for its source, parts joined by
    '+') decided; a source this module does not know gets the general remedy."""
    parts = [x.strip() for x in (basis or "").split("+") if x.strip()]
    tips = [_ADVICE[x] for x in reversed(parts) if x in _ADVICE]  # the last part widened it last
    return tips[0] if tips else _ADVICE_DEFAULT


def unresolved_groups(c: Comparison) -> list[dict]:
    """The unresolved rows by what decided their band: rows, ops, what to do."""
    groups: dict[str, list[CompareRow]] = {}
    for r in c.unresolved():
        groups.setdefault(r.basis or "(not recorded)", []).append(r)
    out = []
    for basis, rows in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n: dict[str, int] = {}
        for r in rows:
            n[r.op] = n.get(r.op, 0) + 1
        ops = sorted(n, key=lambda op: (-n[op], op))  # most rows first
        out.append({"basis": basis, "rows": len(rows), "ops": len(ops), "advice": basis_advice(basis),
                    "command": rerun_command(ops, c.b, basis)})
    return out


def caliber_rows(c: Comparison) -> list[tuple[str, str, str, str]]:
    """(field, A → B, what it means, class) of the caliber check."""
    chk = c.check
    out = [(f, _show(v), "same", "") for f, v in chk.same.items()]
    out += [(f, f"{_show(x)} → {_show(y)}", "differs (allowed)", "warn") for f, x, y in chk.allowed]
    out += [(f, f"{_show(x)} → {_show(y)}", "axis", "") for f, x, y in chk.axis]
    if chk.dtypes:
        out.append(("dtypes", f"{_show(chk.dtypes[0])} → {_show(chk.dtypes[1])}", "rows join where both have them", ""))
    out += [(f, f"{_show(x)} → {_show(y)}", "differs", "") for f, x, y in chk.info]
    return out


def _axis_lines(c: Comparison) -> list[tuple[str, str]]:
    """(text, class) of what differs between A and B, shown at the top."""
    chk = c.check
    axis = chk.axis + chk.allowed
    out = [("axis (A → B): " + "; ".join(f"{f} {_show(x)} → {_show(y)}" for f, x, y in axis), "")] if axis else [
        ("axis: none of suite_commit, device_name, backend, vendor differs (a rerun of the same setup)", "")]
    out += [(f"{f} differs (allowed by --allow-mismatch)", "warn") for f, _, _ in chk.allowed]
    moved = c.moved_ops()
    if moved:
        out.append((f"device: {_plural(len(moved), 'op')} on another device in B: {_moved_list(moved)}; "
                    + _chip_note(c), "warn"))  # fmt: skip
    out += [(line, "warn") for line in _unfinished_lines(c)]
    if chk.unknown:
        out.append((f"caliber unknown for {' and '.join(chk.unknown)}: how the runs were measured cannot be checked", "bad"))
    return out


def _margin(c: Comparison) -> float:
    return getattr(c, "margin", c.max_band)


def _rule_note(c: Comparison) -> str:
    m = _margin(c) * 100
    return (
        f"metric: {c.metric}; a row's band is the widest of its sources (named under each band): its samples "
        f"({c.k:g} × their combined noise; {c.threshold * 100:g}% for rows without noise), the floors table of the noise "
        "between processes, the test over the processes of --repeats (in place of the samples' noise when both "
        "runs have them). Faster or slower when the change is beyond "
        f"the band and at least {c.min_change * 100:g}% (pick instead when the op's autotuners chose different "
        f"configs); same when the change's {100 * (1 - c.eq_alpha):g}% interval (change ± the same band at alpha "
        f"{c.eq_alpha:g}) lies within ±{m:g}% (the margin); a row whose interval reaches "
        f"wider than ±{m:g}% is unresolved unless its change is beyond its band."
    )


OP_RATIO_COLS_HEAD = [Col("op"), Col("B/A", True, "geometric mean of B/A over the op's rows measured in both"),
                      Col("rows", True, "rows measured in both")]  # fmt: skip


def op_ratio_table(p: _Page, c: Comparison) -> Table:
    """Per op, the geometric mean of B/A over the rows measured in both and how many of
    them each verdict got; B/A is coloured only where rows were called slower (red) or
    faster (green) and not both: a geometric mean is not a verdict."""
    acc: dict[str, list] = {}
    for r in c.rows:
        if r.change is None:
            continue
        e = acc.setdefault(r.op, [0.0, 0, {}])
        e[0] += math.log1p(r.change)
        e[1] += 1
        e[2][r.verdict] = e[2].get(r.verdict, 0) + 1
    shown = [v for v in verdict_order() if any(v in e[2] for e in acc.values())]
    cols = OP_RATIO_COLS_HEAD + [Col(v.value, True, f"rows called {v.value}") for v in shown]
    rows = []
    for op, (s, n, by) in sorted(acc.items(), key=lambda kv: (kv[1][0] / kv[1][1], kv[0])):
        ratio = math.exp(s / n)
        sl, fa = by.get(Verdict.SLOWER, 0), by.get(Verdict.FASTER, 0)
        cls = "bad" if sl and not fa else "good" if fa and not sl else "warn" if sl and fa else ""
        rows.append(Row([p.op_cell(op), _num(f"{ratio:.3f}", cls), _num(str(n))]
                        + [_num(str(by.get(v, "")), verdict_kind(v) if by.get(v) and v in _CALLED else "") for v in shown]))
    return Table(cols, rows, id="op-ratios")


def _sentence(cnt: dict[str, int]) -> str:
    parts = [f"{cnt[v.value]} {v.value}" for v in verdict_order() if cnt.get(v.value)]
    return ", ".join(parts) or "no rows"


def _largest_first(rows: list[CompareRow], sign: int) -> list[CompareRow]:
    """Called rows by the change their verdict judged, largest first (``sign`` -1: the most
    negative, slower; +1: faster): the library's own change where that decided, which the
    speedup's change may not follow; the top tables show only the first TOP_ROWS."""

    def key(r: CompareRow):
        judged = judged_change(r)[0]
        return (judged is None, -sign * judged if judged is not None else 0.0, r.key)

    return sorted(rows, key=key)


def compare_ctx(p: _Page, c: Comparison) -> dict:
    """The comparison's verdict: counts per verdict, the geometric means, regressions,
    improvements, the unresolved rows and what to do, the rest by verdict."""
    j = _Joined(p, c)
    cnt = c.counts()
    a_page = p.a_page
    shown = {Verdict.SLOWER, Verdict.FASTER, Verdict.UNRESOLVED, Verdict.SAME}
    others = []
    for v in verdict_order():
        rows = sorted((r for r in c.rows if r.verdict == v), key=lambda r: r.key)
        if v not in shown and rows:
            kind = verdict_kind(v)  # a failure in B, or a verdict this page does not know: open
            others.append({"verdict": v.value, "cls": kind, "open": kind in ("bad", "other"), "table": j.table(rows)})
    ga, gb = _geomeans(a_page.finished_rows())["overall"], _geomeans(p.finished_rows())["overall"]
    g = c.geomean_ratio()
    return {
        "a": c.a.name, "b": c.b.name, "axis": _axis_lines(c), "rule": _rule_note(c), "sentence": _sentence(cnt),
        "cards": [(cnt[v.value], v.value, verdict_kind(v) if cnt[v.value] else "na") for v in verdict_order()],
        "ga": _f(ga), "gb": _f(gb), "g": _f(g), "g_rows": sum(1 for r in c.rows if r.change is not None),
        "margin": f"{_margin(c) * 100:g}",
        "regressions": j.table(_largest_first(c.regressions(), -1), id="regressions-table"),
        "improvements": j.table(_largest_first(c.improvements(), +1), id="improvements-table"),
        "unresolved": j.table(c.unresolved(), id="unresolved-table"), "unresolved_groups": unresolved_groups(c),
        "others": others, "caliber": caliber_rows(c), "op_ratios": op_ratio_table(p, c),
        "chart": change_plot_svg(c.rows), "cases": j.table(c.sorted_rows(), n=None, id="cases-table"),
    }  # fmt: skip


# ---------------------------------------------------------------- the page

def _filters(table: Table, compare: bool) -> dict:
    """The options of the cases table's filters (the values its rows carry)."""
    vals = lambda k: sorted({r.attrs.get(k, "") for r in table.rows} - {""})  # noqa: E731
    out = {"op": vals("op"), "dtype": vals("dtype"), "status": vals("status")}
    if compare:
        present = set(vals("verdict"))
        out["verdict"] = [v.value for v in verdict_order() if v.value in present]
    return out


def _nav(compare: bool, st: dict, fb: dict, fails: list, at: dict | None = None,
         peaks: bool = False, device: bool = False) -> list[tuple[str, str]]:
    nav = [("compare", "Comparison"), ("status", "This run")] if compare else [("status", "Verdict")]
    if device:
        nav.append(("device", "Device"))
    if fails:
        nav.append(("failures", "Did not pass"))
    nav += [("distribution", "Speedups"), *([("peaks", "Peaks")] if peaks else []), ("ops", "Ops"), ("slowest", "Lowest speedups"), ("cases", "All cases"),
            ("per-op", "Per op")]  # fmt: skip
    if fb["table"] is not None:
        nav.append(("fallback", "Graph fallback"))
    if at and at["table"] is not None:
        nav.append(("autotune", "Autotune picks"))
    return nav + [("identity", "Identity")]


def page_ctx(s: Summary, out_path: str | Path, comparison: Comparison | None = None) -> dict:
    """Everything the template shows, formatted."""
    p = _Page(s, Path(out_path).parent)
    st, fails, fb = status_ctx(p), failures_ctx(p), fallback_ctx(p)
    at = autotune_ctx(p, comparison)
    fin = p.finished_rows()
    by: dict[str, list[float]] = {}
    for r in fin:
        by.setdefault(r[COL["dtype"]] or "?", []).append(r[COL["speedup"]])
    lowest = sorted((r for r in s.rows if r[COL["status"]] == "ok" and r[COL["speedup"]] is not None),
                    key=lambda r: (r[COL["speedup"]], r[0], r[1], r[2], r[3], r[4]))  # fmt: skip
    cmp = compare_ctx(p, comparison) if comparison is not None else None
    cases = cmp["cases"] if cmp else Table(RUN_COLS, [run_row(p, r) for r in s.rows], id="cases-table").without_empty(THROUGHPUT)
    pk = peaks_ctx(s, fin)
    dev = device_ctx(s)
    cal = s.caliber or {}
    sub = [x for x in (cal.get("device_name"), cal.get("backend"), f"timer {cal['timer']}" if cal.get("timer") else None,
                       f"{len(s.ops)} ops", f"{len(s.rows)} cases", (s.identity or {}).get("started_at")) if x]  # fmt: skip
    return {
        "name": s.name, "sub": " · ".join(str(x) for x in sub), "version": __version__, "nav": _nav(cmp is not None, st, fb, fails, at, pk is not None, dev is not None),
        "status": st, "failures": fails, "fallback": fb, "autotune": at, "compare": cmp, "cases": cases,
        "filters": _filters(cases, cmp is not None), "ops_table": ops_table(p), "op_sections": op_sections(p),
        "lowest": Table(RUN_COLS, [run_row(p, r) for r in lowest[:LOWEST]], total=len(lowest)).without_empty(THROUGHPUT),
        "chart": speedup_plot_svg(by), "identity": identity_items(s), "has_identity": bool(s.identity),
        "peaks": pk, "device": dev,
    }  # fmt: skip


def _span(values: list[float], unit: str) -> str | None:
    if not values:
        return None
    lo, hi = min(values), max(values)
    return f"{lo:.4g} {unit}" if lo == hi else f"{lo:.4g} to {hi:.4g} {unit}"


def device_ctx(s: Summary) -> dict | None:
    """The device section: the model and its peaks (the summary's peaks), its state as the
    first op that recorded one saw it (the identity's ``device_state``), and what the ops'
    telemetry saw (clocks, power, temperature, throttling); None where none of it is known.
    Nothing is inferred: a field no source gave is left out, and a state no op recorded
    says so."""
    pk = s.peaks or {}
    dev = pk.get("device") or {}
    ident = with_process_fields(s)
    cal = s.caliber or {}
    items: list[tuple[str, Any]] = [
        ("model", cal.get("device_name") or dev.get("name") or ident.get("device_name")),
        ("SMs / compute units", dev.get("sm_count")),
        ("compute capability", dev.get("compute_capability") or ident.get("compute_capability")),
        ("driver / runtime", " / ".join(str(x) for x in (ident.get("driver_version"), ident.get("runtime_version")) if x)),
    ]  # fmt: skip
    ach, spec = pk.get("achievable") or {}, pk.get("spec") or {}
    bw, bw_spec = ach.get("bandwidth_gbps"), spec.get("bandwidth_gbps")
    if bw or bw_spec:
        share = f" ({100 * bw / bw_spec:.1f} % of the spec)" if bw and bw_spec else ""
        items.append(("memory bandwidth", f"measured {bw if bw else 'not measured'} GB/s (copy); spec "
                                          f"{bw_spec if bw_spec else 'unknown'} GB/s{share}"))
    for dt, v in (ach.get("tflops") or {}).items():
        sv = (spec.get("tflops") or {}).get(dt)
        items.append((f"matmul {dt}", f"measured {v:g} TFLOPS; spec {sv:g} TFLOPS (dense)" if sv else f"measured {v:g} TFLOPS"))
    if pk.get("measured_at"):
        items.append(("peaks measured", f"{pk['measured_at']} (opscreen devices --peaks; docs/peaks.md)"))
    states = [o.device_state for o in s.ops if _throttle.state_fields(o.device_state)]
    if states:
        st = states[0]
        clocks = st.get("clocks_mhz") or {}
        for name, label in (("sm", "SM clock"), ("mem", "memory clock")):
            c = clocks.get(name) or {}
            if c:
                items.append((label, ", ".join(f"{k.replace('_', ' ')} {v} MHz" for k, v in c.items() if v is not None)))
        pl = st.get("power_limit_w") or {}
        if pl:
            items.append(("power limit", ", ".join(f"{k} {v:g} W" for k, v in pl.items() if v is not None)))
        locked = st.get("clocks_locked")
        if locked is not None:
            items.append(("clocks locked", "yes" if locked else "no: the clocks boost and fall with load and heat "
                          "(docs/telemetry.md says how to lock them; throttled rows are flagged)"))
        for k, label in (("persistence_mode", "persistence mode"), ("mig_mode", "MIG mode"), ("ecc_mode", "ECC"),
                         ("compute_mode", "compute mode")):
            v = st.get(k)
            if v is not None:
                items.append((label, ("on" if v else "off") if isinstance(v, bool) else v))
        # compared as compare compares two runs' states: their settings, not the chip or the moment
        others = len({tuple(sorted(_throttle.state_fields(x).items(), key=str)) for x in states}) - 1
        items.append(("state recorded by", f"{st.get('source')}, {len(states)} of {len(s.ops)} ops"
                      + (f"; {others} other state(s) among them (run_identity.json of each op)" if others else
                         "; the same in each")))
    elif s.ops:
        src = {(o.device_state or {}).get("source") for o in s.ops} - {None}
        why = next(((o.device_state or {}).get("why") for o in s.ops if (o.device_state or {}).get("why")), None)
        items.append(("device state", f"unknown{f' ({why})' if why else ''}" if src or why else "not recorded"))
    sampled = [(o, t) for o in s.ops for t in [first_telemetry(o)] if t.get("samples")]
    if sampled:
        med = lambda key: [t[key]["median"] for _, t in sampled if isinstance(t.get(key), dict) and t[key].get("median") is not None]  # noqa: E731
        for key, label, unit in (("sm_clock_busy_mhz", "SM clock while busy (op medians)", "MHz"),
                                 ("power_w", "power (op medians)", "W"), ("temperature_c", "temperature (op medians)", "°C")):
            v = _span(med(key), unit)
            if v:
                items.append((label, v))
        bad = [o.op for o, _ in sampled if _throttle.is_throttled(o.throttled)]
        items.append(("throttled ops", (f"{len(bad)} of {len(sampled)}: " + ", ".join(bad[:12])) if bad else
                      f"none of {len(sampled)} ops with telemetry"))
    if s.ops:
        items.append(("telemetry", telemetry_sources(s.ops)[0]))  # its why is the device state's
    shown = [(k, str(v)) for k, v in items if v not in (None, "")]
    return {"fields": shown} if len(shown) > 1 else None


def peaks_ctx(s: Summary, rows: list[list]) -> dict | None:
    """The %-of-peak section: the plot, and the peaks it is of; None where no row has a %-of-peak."""
    chart = peak_plot_svg(rows)
    if chart is None:
        return None
    pk = s.peaks or {}
    ach = pk.get("achievable") or {}
    flops = ", ".join(f"{d} {v:g}" for d, v in (ach.get("tflops") or {}).items() if v is not None)
    spec = pk.get("spec") or {}
    bw = spec.get("bandwidth_gbps")
    about = (f"{(pk.get('device') or {}).get('name') or 'the device'}, measured {pk.get('measured_at')}: copy "
             f"{ach.get('bandwidth_gbps')} GB/s, matmul {flops} TFLOPS"
             + (f"; spec {bw:g} GB/s" if bw else f"; spec unknown ({spec.get('why')})" if spec.get("why") else ""))
    return {"chart": chart, "about": about, "rows": len(peak_points(rows))}


_BREAK = re.compile(r"([_,])")


def _wbr(text: Any):
    """Escaped ``text`` with a line-break opportunity (<wbr>) after each _ and ,: long
    op names and shapes wrap between their parts (the text itself, as copied or searched,
    is unchanged)."""
    from markupsafe import Markup, escape

    return Markup(_BREAK.sub(r"\1<wbr>", str(escape(text))))


def _code(text: Any):
    """Escaped ``text`` with each `quoted` part as <code>."""
    from markupsafe import Markup, escape

    parts = str(text).split("`")
    return Markup("".join(str(escape(x)) if i % 2 == 0 else f"<code>{escape(x)}</code>" for i, x in enumerate(parts)))


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)  # fmt: skip
    env.filters["wbr"] = _wbr
    env.filters["code"] = _code
    return env


def render_report(s: Summary, out_path: str | Path, comparison: Comparison | None = None) -> str:
    """The report's HTML text (``out_path`` only decides the relative links)."""
    from markupsafe import Markup as markup  # Jinja2's own dependency

    env = _environment()
    ctx = page_ctx(s, out_path, comparison)
    for holder, key in ((ctx, "chart"), (ctx["compare"] or {}, "chart"), (ctx["peaks"] or {}, "chart"), *((o, "trace") for o in ctx["op_sections"])):
        if holder.get(key):
            holder[key] = markup(holder[key])  # matplotlib's SVG and the traces' (results/traces.py), made from numbers
    ctx["css"] = markup((TEMPLATES / "report.css").read_text(encoding="utf-8"))
    ctx["js"] = markup((TEMPLATES / "report.js").read_text(encoding="utf-8"))
    return env.get_template("report.html.j2").render(ctx)


def write_report(s: Summary, out_path: str | Path, comparison: Comparison | None = None) -> Path:
    return atomic_write_text(out_path, render_report(s, out_path, comparison))
