"""opscreen report: one self-contained, escaped HTML page."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from opscreen.cli import main
from synth import make_run

EVIL = "<script>alert('x')</script> & \"quoted\""


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


def _links(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", html, flags=re.I)


def test_report_is_self_contained(run_dir, capsys):
    assert main(["report", str(run_dir)]) == 0
    out = run_dir / "report.html"
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text()
    assert html.startswith("<!doctype html>")
    for link in _links(html):
        assert not re.match(r"^(https?:)?//", link), link
    assert not re.search(r"<script|<link\b|<iframe|@import|url\(\s*['\"]?https?:", html, flags=re.I)
    for sec in ("identity", "status", "distribution", "ops", "slowest", "failures"):
        assert f'<section id="{sec}">' in html
    assert "<svg" in html  # the speedup distribution, inline
    assert 'id="compare"' not in html
    assert "Run identity" in html and "NVIDIA H200" in html and "graph" in html
    assert "Speedup distribution per dtype" in html and "geomean speedup" in html
    assert "Ops by geometric-mean speedup" in html and "Slowest cases" in html
    assert (run_dir / "summary.json").is_file()  # made on the way


def test_text_from_logs_is_escaped(run_dir):
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text()
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html


def test_failures_link_to_their_run_log(run_dir, tmp_path):
    for target in (run_dir / "report.html", tmp_path / "elsewhere" / "deep" / "r.html"):
        assert main(["report", str(run_dir), "--out", str(target)]) == 0
        html = target.read_text()
        fail = html[html.index('<section id="failures">') :]
        assert "op0001" in fail and "op0002" in fail and "timeout" in fail
        links = [l for l in _links(fail) if l.endswith("run.log")]
        assert len(links) == 2
        for l in links:
            assert (target.parent / unquote(l)).resolve().is_file(), l
            assert not l.startswith("/")


def test_against_shows_the_comparison_regressions_first(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = {f"op{i:04d}": "passed" for i in range(6)}
    make_run(a, n_ops=6, seed=9, statuses=st)

    def perturb(op, dtype, si, lib_ms):
        return lib_ms * (1.3 if op == "op0001" else 0.7 if op == "op0004" else 1.0)

    make_run(b, n_ops=6, seed=9, statuses=st, perturb=perturb, caliber={"suite_commit": "cafe"})
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
    comp = html[html.index('<section id="compare">') :]
    comp = comp[: comp.index("</section>")]
    assert "Regressions" in comp and "Improvements" in comp
    assert comp.index("Regressions") < comp.index("Improvements")
    assert "op0001" in comp[comp.index("Regressions") : comp.index("Improvements")]
    assert "cafe" in comp and "axis" in comp
    assert "1 op on another device in B: op0002 2 -&gt; 7" in comp
    assert html.index('id="compare"') < html.index('id="distribution"')
    for link in _links(html):
        assert not re.match(r"^(https?:)?//", link), link


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


def test_matplotlib_is_imported_lazily():
    # importing the results package (as the CLI does) must not pull in matplotlib
    import subprocess

    code = "import sys, opscreen.results.report, opscreen.commands.report; print('matplotlib' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})  # fmt: skip
    assert p.stdout.strip() == "False", p.stderr


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
    # many cases per bar: the change plot turns logarithmic above 10 cases; still whole numbers
    from opscreen.results.report import _change_plot_svg, speedup_plot_svg

    many = [_change_plot_svg([0.0005 * i for i in range(-400, 600)]), speedup_plot_svg({"float16": [1 + i / 1000 for i in range(999)]})]
    labels = _y_tick_labels("".join(many))
    assert "10" in labels and all(re.fullmatch(r"\d+", x) for x in labels), labels
