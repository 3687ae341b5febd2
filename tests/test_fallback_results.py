"""Graph-fallback rows through the results tools, on the real H200 record log of ``abs``
rewritten as the child now writes such rows (issue 18): float16 rows whose library side
could not be captured and was timed by the profiler (torch's side timed again by it, like
with like), bfloat16 rows whose library side fell back to the direct timer (no profiler),
float32 rows graph-timed. The fallback reasons are the child's own tags, made from real
capture-error texts (tests/fixtures/cuda_errors/)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from opscreen.child import fatal
from opscreen.child.timing import Result, SampleStats
from opscreen.cli import main
from opscreen.results.parse import parse_record_log
from opscreen.results.records import merge_record_texts
from opscreen.results.summary import build_summary, format_summary

FIX = Path(__file__).parent / "fixtures"
REAL = FIX / "flaggems-h200" / "abs_record.log"
PROFILED = "graph-fallback:capture+profiler"


def reason(fixture: str) -> str:
    """The ``fallback`` tag the child writes for a real capture error."""
    err = RuntimeError((FIX / "cuda_errors" / fixture).read_text())
    return Result("direct", SampleStats([1.0], "direct")).as_fallback("capture", fatal.classify(err), err).fallback_text()


def _records() -> list[dict]:
    return [json.loads(line[len("[INFO] "):]) for line in REAL.read_text().splitlines() if line.startswith("[INFO] {")]


def _rewrite(rec: dict, lib_scale: float = 1.0, profiler_rsd: float = 0.003) -> dict:
    dtype = rec["dtype"].removeprefix("torch.")
    for row in rec["result"]:
        row["latency"] *= lib_scale
        row["speedup"] = row["latency_base"] / row["latency"]
        row["samples_base"] = row["samples"] = 20
        if dtype == "float16":  # library side uncapturable, the profiler timed both sides
            row["timer_base"], row["timer"] = "profiler", PROFILED
            row["rsd_base"], row["rsd"] = profiler_rsd, profiler_rsd
            row["graph_ms_base"] = row["latency_base"] * 0.97
            row["host_ms_base"], row["host_ms"] = 3 * row["latency_base"], 3 * row["latency"]
            row["fallback"] = reason("capture_unsupported_torch_main.txt")
        elif dtype == "bfloat16":  # no profiler: the library side timed directly, torch's graph-timed
            row["timer_base"], row["timer"] = "graph", "graph-fallback:capture"
            row["rsd_base"], row["rsd"] = 0.0006, 0.15
            row["fallback"] = reason("bincount_cudagraph.out")
        else:
            row["timer_base"] = row["timer"] = "graph"
            row["rsd_base"], row["rsd"] = 0.0006, 0.0019
    return rec


def _op_dir(root: Path, lib_scale: float = 1.0, profiler_rsd: float = 0.003) -> Path:
    d = root / "ops" / "abs"
    d.mkdir(parents=True)
    lines = ["[INFO] Benchmark record logger enabled"]
    lines += ["[INFO] " + json.dumps(_rewrite(rec, lib_scale, profiler_rsd)) for rec in _records()]
    (d / "record.log").write_text("\n".join(lines) + "\n")
    (d / "result.json").write_text(json.dumps({"schema": 1, "op": "abs", "status": "passed", "exit_code": 0}))
    return root


def _n(dtype: str) -> int:
    return len(next(r for r in _records() if r["dtype"] == f"torch.{dtype}")["result"])


def test_the_child_tag_names_the_phase_kind_and_the_errors_line():
    assert reason("capture_unsupported_torch_main.txt") == (
        "capture: capture-unsupported: CUDA error: operation not permitted when stream is capturing")
    assert reason("bincount_cudagraph.out").startswith(
        "capture: capture-host-copy: RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture")


def test_parse_reads_host_latency_reason_and_replaced_graph_figure(tmp_path):
    rows = parse_record_log(_op_dir(tmp_path) / "ops" / "abs" / "record.log").rows
    f16 = [r for r in rows if r.dtype == "float16"]
    assert f16 and all(r.lib_host_ms == pytest.approx(3 * r.lib_ms) and r.torch_graph_ms for r in f16)
    assert all(r.lib_fallback.startswith("capture: capture-unsupported") and r.torch_fallback is None for r in f16)


def test_summary_says_which_rows_fell_back_and_why(tmp_path):
    root = _op_dir(tmp_path)
    s = build_summary(root)
    fb = {f["timer"]: f for f in s.ops[0].fallbacks}
    assert fb["profiler"] == {"side": "lib", "phase": "capture", "timer": "profiler", "kind": "capture-unsupported",
                              "message": "CUDA error: operation not permitted when stream is capturing",
                              "rows": _n("float16"), "host_x": 3.0}
    assert fb["direct"]["rows"] == _n("bfloat16") and fb["direct"]["kind"] == "capture-host-copy"
    text = format_summary(s)
    assert f"graph fallback: {_n('float16') + _n('bfloat16')} row sides of 1 ops" in text
    assert "operation not permitted when stream is capturing" in text and "Cannot copy between CPU and CUDA" in text
    assert f"{_n('bfloat16')} ok rows compare two timers" in text
    assert main(["summary", str(root)]) == 0
    with open(root / "summary.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["dtype"] == "float16"]
    assert all(float(r["lib_host_ms"]) == pytest.approx(3 * float(r["lib_ms"])) for r in rows)
    assert {f["timer"] for f in json.loads((root / "summary.json").read_text())["ops"][0]["fallbacks"]} == {"profiler", "direct"}


def test_report_has_a_graph_fallback_section(tmp_path):
    root = _op_dir(tmp_path)
    assert main(["report", str(root)]) == 0
    html = (root / "report.html").read_text()
    assert 'id="fallback"' in html and "operation not permitted when stream is capturing" in html
    assert "host ms" in html and "compare two timers" in html


def test_profiler_rows_resolve_where_direct_fallback_rows_cannot(tmp_path, capsys):
    # B: the library 10 % slower everywhere. Profiler rows (rsd 0.3 %, the kernels' own
    # time) see it; direct-fallback rows (rsd 15 %) are unresolved, never "same".
    # (their samples' noise alone: --no-floors; these op dirs keep no device name, so the
    # conservative default table would widen every band past the 10 %)
    a, b = _op_dir(tmp_path / "a"), _op_dir(tmp_path / "b", lib_scale=1.1)
    assert main(["compare", str(a), str(b), "--no-floors"]) == 0
    with open(b / "compare.csv", newline="") as fh:
        verdict = {}
        for r in csv.DictReader(fh):
            verdict.setdefault(r["dtype"], set()).add(r["verdict"])
    assert verdict["float16"] == {"slower"} and verdict["bfloat16"] == {"unresolved"} and verdict["float32"] == {"slower"}


def test_repeats_merge_keeps_the_reason_and_the_median_host_latency(tmp_path):
    texts = []
    for scale in (1.0, 1.2, 1.1):
        lines = ["[INFO] " + json.dumps(_rewrite(rec, scale)) for rec in _records()]
        texts.append("\n".join(lines) + "\n")
    merged, counts = merge_record_texts(texts)
    (tmp_path / "record.log").write_text(merged)
    f16 = [r for r in parse_record_log(tmp_path / "record.log").rows if r.dtype == "float16"]
    assert f16 and all(r.repeats == 3 and r.lib_fallback.startswith("capture: capture-unsupported") for r in f16)
    assert all(math.isclose(r.lib_host_ms, 3 * r.lib_ms, rel_tol=1e-9) for r in f16)  # medians of the same scale


def test_report_against_takes_max_band_like_compare(tmp_path):
    a, b = _op_dir(tmp_path / "a"), _op_dir(tmp_path / "b", lib_scale=1.1)
    assert main(["report", str(b), "--against", str(a), "--no-floors"]) == 0
    html = (b / "report.html").read_text()
    assert f"Unresolved ({_n('bfloat16')} rows: a change inside its band whose interval reaches past ±5%" in html
    assert main(["report", str(b), "--against", str(a), "--no-floors", "--max-band", "200", "--out",
                 str(tmp_path / "wide.html")]) == 0
    wide = (tmp_path / "wide.html").read_text()
    assert 'id="unresolved"' not in wide  # the direct-fallback rows' 10 % +- 85 % lies within +-200 %
    assert "unresolved: 0 ok rows" in wide  # the run's own rows, against the same --max-band
