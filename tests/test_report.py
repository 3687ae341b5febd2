"""opscreen report: one self-contained page that leads with the verdict.

The pages are parsed (html.parser, into a small tree) and checked for what a reader
sees: the order of the sections, the cards, the cases table row by row, the marks on
partial rows, the chart's colours and the room between its labels.
"""

from __future__ import annotations

import json
import math
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from opscreen.cli import main
from opscreen.results.compare import CompareRow, Verdict, compare_summaries
from opscreen.results.report import change_figure, render_report, speedup_figure
from opscreen.results.summary import COL, build_summary
from synth import make_run

EVIL = "<script>alert('x')</script> & \"quoted\""
VOID = {"meta", "br", "wbr", "input", "img", "hr", "link", "col", "source", "area", "base", "embed"}


# ---------------------------------------------------------------- a small HTML tree

class Node:
    def __init__(self, tag: str, attrs: dict, parent: "Node | None"):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list["Node"]:
        out = []
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            if cls and cls not in (n.attrs.get("class") or "").split():
                continue
            if any(n.attrs.get(k.rstrip("_")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def one(self, tag: str | None = None, **kw) -> "Node":
        found = self.all(tag, **kw)
        assert len(found) == 1, (tag, kw, len(found))
        return found[0]

    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class _Tree(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        n = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(html: str) -> Node:
    t = _Tree()
    t.feed(html)
    t.close()
    return t.root


def table_rows(table: Node) -> tuple[list[str], list[Node]]:
    """(header labels, body rows) of a table."""
    head = [th.text().strip() for th in table.one("thead").all("th")]
    return head, table.one("tbody").all("tr")


def cells(tr: Node, head: list[str]) -> dict[str, Node]:
    return dict(zip(head, tr.all("td")))


def top_sections(doc: Node) -> list[str]:
    """The ids of main's own sections, in page order."""
    main_ = doc.one("main")
    return [c.attrs.get("id") for c in main_.children if isinstance(c, Node) and c.tag == "section"]


# ---------------------------------------------------------------- runs

@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    make_run(d, n_ops=8, seed=3, statuses={"op0001": "failed", "op0002": "timeout", **{f"op{i:04d}": "passed" for i in (0, 3, 4, 5, 6, 7)}})
    # markup in a failure reason (result.json) and in the log's own failure lines
    res = json.loads((d / "ops/op0001/result.json").read_text())
    res["error"] = EVIL
    (d / "ops/op0001/result.json").write_text(json.dumps(res))
    log = (d / "ops/op0001/run.log").read_text().replace("E   RuntimeError", "E   RuntimeError <b>bold</b>")
    (d / "ops/op0001/run.log").write_text(log)
    text = (d / "ops_status.csv").read_text()
    (d / "ops_status.csv").write_text("\n".join(l for l in text.splitlines() if not l.startswith("op0001,")) + "\n")
    return d


def _pair(tmp_path, n_ops=6, seed=9):
    a, b = tmp_path / "a", tmp_path / "b"
    st = {f"op{i:04d}": "passed" for i in range(n_ops)}
    make_run(a, n_ops=n_ops, seed=seed, statuses=st)

    def perturb(op, dtype, si, lib_ms):
        return lib_ms * (1.3 if op == "op0001" else 0.7 if op == "op0004" else 1.0)

    make_run(b, n_ops=n_ops, seed=seed, statuses=st, perturb=perturb, caliber={"suite_commit": "cafe"})
    return a, b


def _links(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", html, flags=re.I)


# ---------------------------------------------------------------- the page

def test_report_is_self_contained_and_leads_with_the_verdict(run_dir, capsys):
    assert main(["report", str(run_dir)]) == 0
    out = run_dir / "report.html"
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text()
    assert html.startswith("<!doctype html>")
    for link in _links(html):
        assert not re.match(r"^(https?:)?//", link), link
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|<iframe|@import|url\(\s*['\"]?https?:", html, flags=re.I)
    doc = parse(html)
    scripts = doc.all("script")
    assert len(scripts) == 1 and "sortable" in scripts[0].text()  # the one inline script: sorting, filtering
    order = top_sections(doc)
    assert order == ["status", "device", "failures", "distribution", "ops", "slowest", "cases", "per-op", "fallback", "identity"]
    # the identity is folded, at the end
    ident = doc.one("section", id="identity")
    det = ident.one("details")
    assert "open" not in det.attrs and "NVIDIA H200" in det.text() and "graph" in det.text()
    assert "<svg" in html and 'id="compare"' not in html
    assert (run_dir / "summary.json").is_file()  # made on the way
    # no scroll boxes, and every column has a header
    assert "max-height" not in html and 'class="scroll"' not in html
    for table in doc.all("table"):
        ths = table.all("th")
        assert ths and all(th.text().strip() for th in ths), [th.text() for th in ths]


def test_the_top_counts_ops_that_did_not_pass_and_leaves_their_rows_out(run_dir):
    assert main(["report", str(run_dir)]) == 0
    doc = parse((run_dir / "report.html").read_text())
    status = doc.one("section", id="status")
    head = status.one("h2").text()
    assert "6 of 8 ops passed, 2 did not (1 failed, 1 timeout)" in head
    cards = {c.one("div", cls="l").text(): (c.one("div", cls="n").text(), c.classes()) for c in status.all("div", cls="card")}
    assert cards["passed ops"] == ("6", {"card", "good"})
    assert cards["timeout op"][1] == {"card", "bad"} and cards["failed op"][1] == {"card", "bad"}
    # the geometric mean on top is over the cases of the ops that passed
    s = build_summary(run_dir)
    passed = {o.op for o in s.ops if o.status == "passed"}
    sp = [r[COL["speedup"]] for r in s.rows if r[COL["op"]] in passed and r[COL["status"]] == "ok"]
    gm = math.exp(sum(math.log(v) for v in sp) / len(sp))
    label = next(k for k in cards if k.startswith("geometric-mean speedup"))
    assert cards[label][0] == f"{gm:.3f}" and f"over {len(sp)} cases" in label
    partial = [r for r in s.rows if r[COL["op"]] not in passed and r[COL["status"]] == "ok"]
    assert partial and cards["partial cases"][0] == str(len(partial))
    alert = status.one("div", cls="alert").text()
    assert "op0001" in alert and "op0002" in alert and f"{len(partial)} measured cases are partial" in alert


def test_a_screen_where_every_op_timed_out_shows_nothing_ok(tmp_path):
    d = tmp_path / "run"
    make_run(d, n_ops=3, seed=5, shapes=(4, 4), statuses={f"op{i:04d}": "timeout" for i in range(3)})
    assert main(["report", str(d)]) == 0
    doc = parse((d / "report.html").read_text())
    status = doc.one("section", id="status")
    assert "0 of 3 ops passed, 3 did not (3 timeout)" in status.one("h2").text()
    for card in status.all("div", cls="card"):
        assert "good" not in card.classes(), card.text()  # no green card at all
    cards = {c.one("div", cls="l").text(): c.one("div", cls="n").text() for c in status.all("div", cls="card")}
    assert cards["timeout ops"] == "3" and cards["measured cases"] == "0"
    assert int(cards["partial cases"]) > 0
    assert cards[next(k for k in cards if k.startswith("geometric-mean"))] == "–"  # no mean from killed ops
    head, rows = table_rows(doc.one("table", id="cases-table"))
    assert rows
    for tr in rows:
        assert "partial" in tr.classes() and tr.attrs["data-status"] == "partial"
        assert cells(tr, head)["status"].text() == "partial: op timeout"
    for tr in table_rows(doc.one("table", id="ops-table"))[1]:
        assert "partial" in tr.classes() and "partial" in tr.all("td")[3].text()
    assert "no measured cases to plot" in doc.one("section", id="distribution").text()


def test_the_cases_table_has_every_case(run_dir):
    assert main(["report", str(run_dir)]) == 0
    doc = parse((run_dir / "report.html").read_text())
    head, rows = table_rows(doc.one("table", id="cases-table"))
    assert head[:4] == ["op", "test", "dtype", "shape"]
    for col in ("torch ms", "library ms", "speedup", "noise %", "TFLOPS", "status"):
        assert col in head
    s = build_summary(run_dir)
    seen = sorted((cells(tr, head)["op"].text(), cells(tr, head)["dtype"].text(), cells(tr, head)["shape"].text()) for tr in rows)
    assert seen == sorted((r[COL["op"]], r[COL["dtype"]], r[COL["shape"]]) for r in s.rows)
    by_key = {(r[COL["op"]], r[COL["dtype"]], r[COL["shape"]]): r for r in s.rows}
    for tr in rows:
        c = cells(tr, head)
        r = by_key[(c["op"].text(), c["dtype"].text(), c["shape"].text())]
        assert tr.attrs["data-op"] == r[COL["op"]] and tr.attrs["data-dtype"] == r[COL["dtype"]]
        if r[COL["speedup"]] is not None:
            assert float(c["speedup"].text()) == pytest.approx(r[COL["speedup"]], abs=6e-4)
        noise = math.hypot(r[COL["torch_noise_pct"]], r[COL["lib_noise_pct"]])
        assert float(c["noise %"].text()) == pytest.approx(noise, abs=6e-3)  # one name, in percent
        assert c["op"].one("a").attrs["href"] == f"#op-{r[COL['op']]}"
    # one section per op, and every op link lands on one
    ids = {n.attrs.get("id") for n in doc.iter()}
    for o in s.ops:
        sec = doc.one("section", id=f"op-{o.op}")
        assert o.status in sec.one("h3").text()
    for a in doc.all("a"):
        href = a.attrs.get("href", "")
        if href.startswith("#"):
            assert href[1:] in ids, href
    # the filters offer what the rows carry
    form = doc.one("form", id="case-filter")
    sel = {s_.attrs["name"]: [o.text() for o in s_.all("option")][1:] for s_ in form.all("select")}
    assert set(sel) == {"op", "dtype", "status"}
    assert set(sel["status"]) == {tr.attrs["data-status"] for tr in rows} >= {"ok", "partial"}


def test_lowest_speedups_are_named_for_what_they_are(run_dir):
    assert main(["report", str(run_dir)]) == 0
    doc = parse((run_dir / "report.html").read_text())
    sec = doc.one("section", id="slowest")
    assert sec.one("h2").text().startswith("Lowest speedups: the 20 cases where the library is furthest behind torch")
    assert "Slowest" not in doc.text()
    head, rows = table_rows(sec.one("table"))
    sp = [float(cells(tr, head)["speedup"].text()) for tr in rows]
    assert len(sp) == 20 and sp == sorted(sp)


def test_text_from_logs_is_escaped(run_dir):
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text()
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    doc = parse(html)
    assert len(doc.all("script")) == 1 and all("bold" not in b.text() for b in doc.all("b"))
    fail = doc.one("section", id="failures").text()
    assert EVIL in fail and "RuntimeError <b>bold</b>" in fail  # shown as the text it is


def test_failures_link_to_their_run_log(run_dir, tmp_path):
    for target in (run_dir / "report.html", tmp_path / "elsewhere" / "deep" / "r.html"):
        assert main(["report", str(run_dir), "--out", str(target)]) == 0
        doc = parse(target.read_text())
        fail = doc.one("section", id="failures")
        text = fail.text()
        assert "op0001" in text and "op0002" in text and "timeout" in text
        links = [a.attrs["href"] for a in fail.all("a") if a.attrs["href"].endswith("run.log")]
        assert len(links) == 2
        for l in links:
            assert (target.parent / unquote(l)).resolve().is_file(), l
            assert not l.startswith("/")


# ---------------------------------------------------------------- --against

def test_against_leads_with_the_comparison_regressions_first(tmp_path):
    a, b = _pair(tmp_path)
    status = b / "ops_status.csv"  # op0002 measured on device 7 in B (2 in A)
    lines = [line.split(",") for line in status.read_text().splitlines()]
    dev = lines[0].index("device")
    for f in lines:
        if f[0] == "op0002":
            f[dev] = "7"
    status.write_text("\n".join(",".join(f) for f in lines) + "\n")
    res = b / "ops" / "op0002" / "result.json"
    res.write_text(json.dumps(dict(json.loads(res.read_text()), device=7)))
    assert main(["report", str(b), "--against", str(a)]) == 0
    html = (b / "report.html").read_text()
    doc = parse(html)
    assert top_sections(doc)[:2] == ["compare", "status"] and top_sections(doc)[-1] == "identity"
    comp = doc.one("section", id="compare")
    h3 = [h.text() for h in comp.all("h3")]
    reg = next(i for i, t in enumerate(h3) if t.startswith("Regressions"))
    imp = next(i for i, t in enumerate(h3) if t.startswith("Improvements"))
    assert reg < imp < next(i for i, t in enumerate(h3) if t.startswith("Per-op geometric mean of B/A"))
    head, rows = table_rows(doc.one("table", id="regressions-table"))
    assert rows and {cells(tr, head)["op"].text() for tr in rows} == {"op0001"}
    for col in ("A torch ms", "A library ms", "B torch ms", "B library ms", "A speedup", "B speedup", "A noise %",
                "B noise %", "change", "judged", "band", "verdict"):
        assert col in head
    text = comp.text()
    assert "suite_commit" in text and "cafe" in text
    assert "1 op on another device in B: op0002 2 -> 7" in text
    # the report says what compare says of them: runs without device UUIDs fall to the table's rerun cells
    assert "did not record the devices' UUIDs that tell two chips apart" in text
    # every verdict of compare has its card, in compare's own words
    labels = [c.one("div", cls="l").text() for c in comp.all("div", cls="cards")[0].all("div", cls="card")]
    assert labels == sorted(labels, key=labels.index) and set(labels) == {v.value for v in Verdict}
    for link in _links(html):
        assert not re.match(r"^(https?:)?//", link), link


def test_against_cases_table_joins_both_runs_and_agrees_with_the_counts(tmp_path):
    a, b = _pair(tmp_path)
    assert main(["report", str(b), "--against", str(a)]) == 0
    doc = parse((b / "report.html").read_text())
    head, rows = table_rows(doc.one("table", id="cases-table"))
    c = compare_summaries(build_summary(a), build_summary(b))
    assert len(rows) == len(c.rows)
    counts = c.counts()
    seen: dict[str, int] = {}
    for tr in rows:
        v = cells(tr, head)["verdict"].text()
        assert tr.attrs["data-verdict"] == v
        seen[v] = seen.get(v, 0) + 1
        judged = cells(tr, head)["judged"]
        assert not cells(tr, head)["change"].classes() & {"bad", "good"}  # the speedup's change: no verdict of its own
        if v not in ("slower", "faster"):  # only a called row is painted as a change
            assert not judged.classes() & {"bad", "good"}, (v, judged.text())
        else:  # and the change it shows goes the way its verdict says
            assert judged.classes() & {"bad", "good"} == {"bad" if v == "slower" else "good"}
            assert judged.text()[0] == ("-" if v == "slower" else "+"), judged.text()
    assert seen == {k: n for k, n in counts.items() if n}
    comp = doc.one("section", id="compare")
    reg_h = next(h.text() for h in comp.all("h3") if h.text().startswith("Regressions"))
    assert reg_h == f"Regressions ({counts['slower']} rows slower in B)"
    # the per-op geometric means agree with the rows: red only with slower rows, green only with faster ones
    assert "got worse" not in comp.text()
    head, rows = table_rows(doc.one("table", id="op-ratios"))
    for tr in rows:
        cc = cells(tr, head)
        kind = cc["B/A"].classes() & {"bad", "good"}
        slower = int(cc["slower"].text() or 0) if "slower" in cc else 0
        faster = int(cc["faster"].text() or 0) if "faster" in cc else 0
        if "bad" in kind:
            assert slower and not faster
        if "good" in kind:
            assert faster and not slower
        if slower and not faster:
            assert "bad" in kind


def test_unresolved_rows_come_with_what_to_do(tmp_path):
    a, b = _pair(tmp_path)
    sa, sb = build_summary(a), build_summary(b)
    for s in (sa, sb):  # op0003's rows scatter: their samples band is far wider than the margin
        for r in s.rows:
            if r[COL["op"]] == "op0003":
                r[COL["torch_noise_pct"]] = r[COL["lib_noise_pct"]] = 6.0
    c = compare_summaries(sa, sb, table=False)
    un = c.unresolved()
    assert un and {r.op for r in un} == {"op0003"}
    doc = parse(render_report(sb, tmp_path / "r.html", c))
    comp = doc.one("section", id="compare")
    heading = next(h for h in comp.all("h3") if h.text().startswith("Unresolved"))
    assert heading.text().startswith(f"Unresolved ({len(un)} rows")
    advice = comp.one("table", cls="advice")
    head, rows = table_rows(advice)
    assert head == ["band from", "rows", "ops", "what to do"]
    assert sum(int(cells(tr, head)["rows"].text()) for tr in rows) == len(un)
    for tr in rows:
        todo = cells(tr, head)["what to do"].text()
        assert "--repeats 3" in todo and "opscreen run --repeats 3 --ops op0003" in todo
    # the run's own unresolved cases, on top, with the command that narrows them
    status = doc.one("section", id="status").text()
    n = sum(1 for r in sb.rows if r[COL["op"]] == "op0003" and r[COL["status"]] == "ok")
    assert f"unresolved: {n} ok rows" in status and "opscreen run --repeats 3 --ops op0003" in status


def test_against_refuses_a_different_caliber(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    make_run(a, n_ops=3, seed=1)
    make_run(b, n_ops=3, seed=1, caliber={"timer": "direct"})
    assert main(["report", str(b), "--against", str(a)]) == 2
    assert "timer" in capsys.readouterr().err
    assert not (b / "report.html").exists()
    assert main(["report", str(b), "--against", str(a), "--allow-mismatch", "timer"]) == 0


def test_report_of_a_bare_op_dir_without_identity(tmp_path):
    d = tmp_path / "op"
    d.mkdir()
    src = Path(__file__).parent / "fixtures" / "flaggems-h200" / "cudagraph-survey" / "nonzero_cudagraph.out"
    (d / "run.log").write_text(src.read_text())
    assert main(["report", str(d)]) == 0
    html = (d / "report.html").read_text()
    assert "no run_identity.json" in html and "no measured cases to plot" in html
    assert "CUDA error" in html


def test_matplotlib_and_jinja_are_imported_lazily():
    # importing the results package (as the CLI does) pulls in neither
    import subprocess

    code = ("import sys, opscreen.results.report, opscreen.commands.report; "
            "print('matplotlib' in sys.modules, 'jinja2' in sys.modules)")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})  # fmt: skip
    assert p.stdout.strip() == "False False", p.stderr


# ---------------------------------------------------------------- charts

def _y_tick_labels(html: str) -> list[str]:
    """The y tick labels of every plot in the page (the SVG keeps each label's text in a
    comment before its glyphs)."""
    out = []
    for part in html.split('<g id="ytick_')[1:]:
        m = re.search(r"<!-- (.*?) -->", part)
        out.append(m.group(1) if m else "")
    return out


def test_histogram_counts_have_whole_number_ticks(tmp_path):
    # few cases per bar: matplotlib's default ticks were 0, 0.5, 1.0, ... (2.5 cases)
    kw = dict(n_ops=2, seed=4, dtypes=("float16", "float32"), shapes=(2, 3), statuses={"op0000": "passed", "op0001": "passed"})
    make_run(tmp_path / "a", **kw)
    make_run(tmp_path / "b", perturb=lambda op, dt, si, ms: ms * (1.0 + 0.1 * si), **kw)
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "b"), "--against", str(tmp_path / "a"), "--out", str(out)]) == 0
    html = out.read_text()
    assert html.count("<svg") == 2  # the distribution per dtype and the change of B vs A
    labels = _y_tick_labels(html)
    assert len(labels) >= 4, labels
    for label in labels:
        assert re.fullmatch(r"\d+", label), labels
    # many cases per bar: the counts turn logarithmic above 10 cases; still whole numbers
    from opscreen.results.report import change_plot_svg, speedup_plot_svg

    many = [change_plot_svg([0.0005 * i for i in range(-400, 600)]), speedup_plot_svg({"float16": [1 + i / 1000 for i in range(999)]})]
    labels = _y_tick_labels("".join(many))
    assert "10" in labels and all(re.fullmatch(r"\d+", x) for x in labels), labels


def test_charts_take_the_page_width(run_dir):
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text()
    svg = re.search(r"<svg\b[^>]*>", html).group(0)
    assert 'class="chart"' in svg and "viewBox=" in svg
    assert not re.search(r"\s(width|height)=", svg), svg  # no fixed size: the page's CSS gives it 100 %
    assert re.search(r"\.plot svg\.chart\{width:100%", html)


def _texts(fig) -> list:
    """The boxes (display units) of every piece of text the figure draws."""
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    fb = fig.bbox
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        b = t.get_window_extent(r)
        if b.width > 0 and b.x1 > fb.x0 and b.x0 < fb.x1 and b.y1 > fb.y0 and b.y0 < fb.y1:
            out.append((t.get_text(), b))
    return out


def _assert_clear(fig) -> None:
    texts = _texts(fig)
    assert len(texts) > 8
    for i, (ta, ba) in enumerate(texts):
        for tb, bb in texts[i + 1 :]:
            if ba.bounds == bb.bounds and ta == tb:
                continue  # one label drawn twice at one place
            ov_w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            ov_h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            assert ov_w <= 0.5 or ov_h <= 0.5, f"{ta!r} overlaps {tb!r}"


def test_chart_labels_stay_clear_of_each_other():
    import matplotlib.pyplot as plt

    # five dtypes over a speedup span of 2^-9 .. 2^9: panel titles, tick labels, axis labels
    by = {d: [2.0 ** (((i * 37) % 181 - 90) / 10) for i in range(200)] for d in ("bfloat16", "float16", "float32", "int8", "int32")}
    fig = speedup_figure(by)
    _assert_clear(fig)
    xt = [t.get_text() for t in fig.axes[-1].get_xticklabels() if t.get_text()]
    assert 4 <= len(xt) <= 17, xt
    plt.close(fig)
    rows = [CompareRow("op", "t", "", "float16", str(i), v, change=c)
            for i, (v, c) in enumerate([(Verdict.SLOWER, -0.2)] * 5 + [(Verdict.FASTER, 0.3)] * 4 + [(Verdict.SAME, 0.001)] * 40
                                       + [(Verdict.UNRESOLVED, -0.03)] * 7 + [(Verdict.UNRESOLVED, 0.04)] * 3)]  # fmt: skip
    fig = change_figure(rows)
    _assert_clear(fig)
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert legend.y0 >= ax.get_window_extent().y1 - 1  # the legend sits above the bars
    plt.close(fig)


def test_change_histogram_paints_only_called_rows():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    rows = [CompareRow("op", "t", "", "float16", str(i), v, change=c)
            for i, (v, c) in enumerate([(Verdict.SLOWER, -0.2)] * 5 + [(Verdict.FASTER, 0.3)] * 4
                                       + [(Verdict.UNRESOLVED, -0.15)] * 7 + [(Verdict.UNRESOLVED, 0.12)] * 3
                                       + [(Verdict.SAME, 0.0)] * 10)]  # fmt: skip
    fig = change_figure(rows)
    ax = fig.axes[0]
    colour, count = {}, {}
    for cont in ax.containers:
        name = cont.patches[0].get_label().split(" (")[0]  # hist labels a dataset's first bar
        colour[name] = {to_hex(p.get_facecolor(), keep_alpha=False) for p in cont.patches if p.get_height() > 0}
        count[name] = sum(p.get_height() for p in cont.patches)
    assert count == {"slower": 5, "faster": 4, "unresolved": 10, "same": 10}
    red, green = colour["slower"], colour["faster"]
    assert len(red) == len(green) == 1 and red != green
    for name in ("unresolved", "same"):  # negative and positive changes alike: neither red nor green
        assert not colour[name] & (red | green), name
    plt.close(fig)


def test_advice_names_the_remedy_of_each_band_source():
    from opscreen.results.report import COMMAND_OPS, basis_advice, rerun_command

    assert "--repeats 3" in basis_advice("samples") and "opscreen calibrate" in basis_advice("floors-default")
    assert "autotune" in basis_advice("pick")
    assert basis_advice("samples+spread") != basis_advice("made-up-source")  # known parts decide
    unknown = basis_advice("made-up-source")  # a source compare names later: both remedies
    assert "--repeats 3" in unknown and "opscreen calibrate" in unknown
    ops = [f"op{i}" for i in range(COMMAND_OPS + 5)]
    cmd = rerun_command(ops)
    assert cmd.startswith("opscreen run --repeats 3 --ops op0,op1,") and f"first {COMMAND_OPS} of {len(ops)} ops" in cmd
    assert f"op{COMMAND_OPS}," not in cmd and rerun_command([]) == ""
    # for a run: its backend, and its suite and Python where it did not take the defaults; a band
    # no floors table set is narrowed by calibrating, not by more processes
    from opscreen.results.summary import Summary

    st = {"backend": "cuda", "suite_root": "/x/FlagGems", "python": "/x/gems/bin/python",
          "provenance": {"suite": "flag", "python": "default"}}
    s = Summary(kind="run", name="r", identity={"settings": st}, caliber={}, ops=[], rows=[])
    assert rerun_command(["abs"], s, "samples") == "opscreen run --backend cuda --suite /x/FlagGems --repeats 3 --ops abs --out RUN_DIR"
    assert rerun_command(["abs"], s, "floors-default") == "opscreen calibrate --backend cuda --suite /x/FlagGems --sample 30"
    assert rerun_command(["abs"], s, "samples+floors-default").startswith("opscreen calibrate")


def test_against_marks_the_rows_of_ops_that_did_not_pass_on_either_side(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_run(a, n_ops=4, seed=2, statuses={"op0000": "timeout", "op0001": "passed", "op0002": "passed", "op0003": "passed"})
    make_run(b, n_ops=4, seed=2, statuses={"op0000": "passed", "op0001": "crashed", "op0002": "passed", "op0003": "passed"})
    assert main(["report", str(b), "--against", str(a)]) == 0
    doc = parse((b / "report.html").read_text())
    head, rows = table_rows(doc.one("table", id="cases-table"))
    for tr in rows:
        op, st = tr.attrs["data-op"], cells(tr, head)["status"].text()
        in_both = cells(tr, head)["A speedup"].text() != "–" and cells(tr, head)["B speedup"].text() != "–"
        if op == "op0001" and cells(tr, head)["B speedup"].text() != "–":
            assert st == "partial: op crashed" and "partial" in tr.classes()
        elif op == "op0000" and in_both:
            assert st == "ok; A partial: op timeout" and "partial" in tr.classes()
        elif op in ("op0002", "op0003"):
            assert st == "ok" and "partial" not in tr.classes()
    assert {tr.attrs["data-status"] for tr in rows} >= {"partial", "partial in A", "ok"}
    # B's crashed op is not passed anywhere on the page
    status = doc.one("section", id="status")
    assert "3 of 4 ops passed, 1 did not (1 crashed)" in status.one("h2").text()
    assert "op0001" in status.one("div", cls="alert").text()


def test_figures_read_plainly():
    from opscreen.results.report import _chg, _ms

    assert [_chg(x) for x in (-0.00001, -0.0006, 0.25, None)] == ["+0.0%", "-0.1%", "+25.0%", "–"]
    assert [_ms(x) for x in (0.001234567, 5.10918, 1765.4, 0.0)] == ["0.001235", "5.109", "1765", "0"]


def test_against_never_shows_a_case_of_an_op_that_did_not_pass_in_b_as_ok(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_run(a, n_ops=3, seed=4)
    make_run(b, n_ops=3, seed=4, statuses={"op0000": "passed", "op0001": "timeout", "op0002": "passed"})
    assert main(["report", str(b), "--against", str(a)]) == 0
    doc = parse((b / "report.html").read_text())
    head, rows = table_rows(doc.one("table", id="cases-table"))
    only_a = [tr for tr in rows if tr.attrs["data-op"] == "op0001" and cells(tr, head)["B speedup"].text() == "–"]
    assert only_a, "the synthetic timeout left no case to B alone"
    for tr in rows:
        if tr.attrs["data-op"] != "op0001":
            continue
        st = cells(tr, head)["status"]
        assert not st.text().startswith("ok") and tr.attrs["data-status"] not in ("ok", "unresolved"), st.text()
        assert "bad" in st.classes()
    for tr in only_a:
        assert cells(tr, head)["status"].text() == "op timeout in B"
        assert tr.attrs["data-status"] == "not measured in B"
    # the comparison's verdict says at once that B's op did not pass, before its cards
    comp = doc.one("section", id="compare")
    alert = comp.one("div", id="b-not-passed")
    assert "In B, 2 of 3 ops passed, 1 did not (1 timeout)" in alert.text() and "op0001" in alert.text()
    kids = [c for c in comp.children if isinstance(c, Node)]
    assert kids.index(alert) < kids.index(comp.all("div", cls="cards")[0])


def test_the_did_not_pass_alert_reads_as_sentences(run_dir):
    assert main(["report", str(run_dir)]) == 0
    alert = parse((run_dir / "report.html").read_text()).one("section", id="status").one("div", cls="alert")
    text = " ".join(alert.text().split())
    assert "Why they did not pass." in text and not re.search(r"[.)]Why", text), text


def test_regressions_and_improvements_lead_with_the_largest_judged_change():
    from opscreen.results.report import _largest_first

    def row(i: int, change: float, judged: float | None, v: Verdict) -> CompareRow:
        return CompareRow(op=f"op{i}", test="t", variant="", dtype="float16", shape=f"[{i}]", verdict=v, change=change,
                          band=0.02, basis="samples", side="lib", judged=judged)  # fmt: skip

    # the library's own change decided; the speedup's change does not follow it (torch moved too)
    slow = [row(0, -0.40, -0.10, Verdict.SLOWER), row(1, -0.05, -0.50, Verdict.SLOWER), row(2, -0.20, -0.20, Verdict.SLOWER)]
    assert [r.op for r in _largest_first(slow, -1)] == ["op1", "op2", "op0"]
    fast = [row(3, 0.30, 0.05, Verdict.FASTER), row(4, 0.02, 0.40, Verdict.FASTER)]
    assert [r.op for r in _largest_first(fast, +1)] == ["op4", "op3"]


def test_count_ticks_of_low_panels_stay_clear_of_each_other():
    import matplotlib.pyplot as plt

    # ten dtypes (an H200 screen: bfloat16 .. uint8) make low panels; a bar of 7 cases in each
    # had its y ticks 0, 1, ..., 7 drawn into each other
    by = {f"dtype{k}": [1.0] * 7 + [2.0 ** (i / 4 - 2) for i in range(12)] for k in range(10)}
    fig = speedup_figure(by)
    _assert_clear(fig)
    for ax in fig.axes:
        shown = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert 2 <= len(shown) <= 5 and all(float(t).is_integer() for t in shown), shown
    plt.close(fig)


def test_the_identity_and_device_sections_read_versions_from_the_ops_own_identity(tmp_path):
    """A run's identity is the harness's, which imports no torch: the report takes torch,
    Triton, driver and runtime from the first passed op's identity (a real H200 run)."""
    import tarfile

    from opscreen.results.report import device_ctx, identity_items
    from opscreen.results.summary import op_identity

    tgz = Path(__file__).resolve().parent.parent / "bench" / "results" / "2026-12-03-h200-telemetry-runs.tgz"
    with tarfile.open(tgz) as tf:
        tf.extractall(tmp_path, members=[m for m in tf.getmembers() if m.name.startswith("./on/")],
                      filter=lambda m, p: None if m.issym() or m.islnk() else tarfile.data_filter(m, p))
    s = build_summary(tmp_path / "on")
    assert "torch_version" not in s.identity and "driver_version" not in s.identity
    assert op_identity(s)["device_name"] == "NVIDIA H200"
    items = dict(identity_items(s))
    assert items["torch"] == "2.11.0+cu130" and items["triton"] == "3.6.0"
    assert items["driver / runtime"] == "580.159.04 / 13.0"
    dev = device_ctx(s)
    text = json.dumps(dev, default=str)
    assert "580.159.04 / 13.0" in text
    # an op dir has no ops of its own: its identity stands
    one = build_summary(tmp_path / "on" / "ops" / "var")
    assert dict(identity_items(one))["torch"] == "2.11.0+cu130"


def test_the_fallback_note_names_the_timers_a_run_used(tmp_path):
    """No row fell back: a graph-timed run says so, a host-timed (CPU) run names its timer
    instead of claiming its rows were graph-timed."""
    make_run(tmp_path / "r", n_ops=2, seed=1, fail_rate=0, timeout_rate=0, fatal_rate=0)
    s = build_summary(tmp_path / "r")
    for o in s.ops:
        o.fallbacks = []  # the synthetic run's fallback rows aside: no row fell back
    for r in s.rows:
        r[COL["torch_timer"]] = r[COL["lib_timer"]] = "graph"
    assert "every timed row was graph-timed." in render_report(s, tmp_path / "a.html")
    for r in s.rows:
        r[COL["torch_timer"]] = r[COL["lib_timer"]] = "wallclock"
    html = render_report(s, tmp_path / "b.html")
    assert "rows were timed with wallclock." in html and "graph-timed" not in html
