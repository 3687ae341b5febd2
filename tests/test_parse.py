"""Parsing run.log tables (FlagGems' and opscreen's) and record logs into keyed rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opscreen.results.parse import (
    merge_rows,
    parse_file,
    parse_record_json,
    parse_record_log,
    parse_record_log_text,
    parse_run_log,
    parse_run_log_text,
)
from opscreen.results.shape_keys import key_of, parse_repr, shape_key

FIX = Path(__file__).parent / "fixtures" / "flaggems-h200"
SURVEY = FIX / "cudagraph-survey"

# file -> (rows, tables, truncated, failures)
EXPECTED = {
    "abs_cudagraph.out": (15, 3, False, 0),
    "abs_kernel_default_warm.out": (15, 3, False, 0),
    "abs_record.log": (15, 3, False, 0),
    "add_cudagraph.out": (20, 4, False, 0),
    "add_kernel_w100.out": (20, 4, False, 0),
    "add_result.json": (20, 4, False, 0),
    "mm_cudagraph.out": (15, 3, True, 0),  # rc=124: killed after the last table, before pytest's summary
    "mm_kernel_w100_timeout.out": (5, 1, True, 0),
    "cudagraph-survey/bincount_cudagraph.out": (0, 0, False, 2),
    "cudagraph-survey/dropout_cudagraph.out": (15, 3, False, 0),
    "cudagraph-survey/index_select_cudagraph.trimmed.out": (5, 1, False, 2),
    "cudagraph-survey/mode_cudagraph.out": (0, 0, False, 1),
    "cudagraph-survey/nonzero_cudagraph.out": (0, 0, False, 1),
    "cudagraph-survey/randn_cudagraph.out": (15, 3, False, 0),
    "cudagraph-survey/unique_consecutive_cudagraph.out": (0, 0, False, 1),
}


def _all_fixture_files():
    return sorted(p for p in FIX.rglob("*") if p.is_file())


def test_every_sample_is_copied():
    # ../shared beside the checkout holds the originals (CI lays it there too)
    src = Path(__file__).resolve().parents[2] / "shared" / "samples" / "flaggems-h200-2026-11-29"
    if not src.is_dir():
        pytest.skip("shared samples not on this machine")
    want = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    have = sorted(p.relative_to(FIX) for p in _all_fixture_files())
    assert want == have


@pytest.mark.parametrize("path", _all_fixture_files(), ids=lambda p: str(p.relative_to(FIX)))
def test_every_fixture_parses(path):
    res = parse_file(path)  # never raises, whatever the file
    rel = str(path.relative_to(FIX))
    if rel in EXPECTED:
        rows, tables, truncated, failures = EXPECTED[rel]
        assert len(res.rows) == rows
        assert res.tables == tables
        assert res.truncated is truncated
        assert len(res.failures) == failures
        keys = [r.key for r in res.rows]
        assert len(keys) == len(set(keys)), "row keys are unique within a file"
        for r in res.rows:
            assert r.status == "SUCCESS"
            assert r.torch_ms is not None and r.lib_ms is not None and r.speedup is not None
            assert not r.shape.startswith("?"), r.shape
            assert not r.dtype.startswith("torch.")


def _row(res, dtype, shape, test=""):
    hits = [r for r in res.rows if r.dtype == dtype and r.shape == shape and r.test == test]
    assert len(hits) == 1, (dtype, shape, [r.key for r in res.rows])
    return hits[0]


def test_abs_cudagraph_exact_values():
    res = parse_run_log(FIX / "abs_cudagraph.out")
    r = _row(res, "float16", "[[64,64]]")
    assert (r.op, r.torch_ms, r.lib_ms, r.speedup, r.tflops) == ("abs", 0.001086, 0.001053, 1.031, 0.004)
    assert r.torch_gbps is None and r.lib_gbps is None
    assert (r.mode, r.level) == ("cudagraph", "core")
    r = _row(res, "bfloat16", "[[1024,1024,1024]]")
    assert (r.torch_ms, r.lib_ms, r.speedup, r.tflops) == (0.998907, 1.061553, 0.941, 1.011)
    assert res.session_line == "1 passed, 1 deselected in 28.01s"
    assert [r.dtype for r in res.rows[::5]] == ["float16", "float32", "bfloat16"]


def test_mm_values_and_repeated_shape():
    res = parse_run_log(FIX / "mm_cudagraph.out")
    r = _row(res, "float32", "[[1024,1024],[1024,1024]]")
    assert (r.torch_ms, r.lib_ms, r.speedup, r.tflops) == (0.055403, 0.037889, 1.462, 56.678)
    # the core shapes list 4096x4096 twice: two rows, told apart by the test field
    first = _row(res, "float16", "[[4096,4096],[4096,4096]]")
    second = _row(res, "float16", "[[4096,4096],[4096,4096]]", test="#2")
    assert (first.torch_ms, second.torch_ms) == (0.213159, 0.213510)


def test_shape_details_of_other_benchmarks():
    randn = parse_run_log(SURVEY / "randn_cudagraph.out")
    r = randn.rows[1]
    assert r.shape == '{"size":[64,64],"dtype":"torch.float16","device":"cuda"}'
    assert (r.torch_ms, r.lib_ms, r.speedup, r.tflops) == (0.003669, 0.001478, 2.483, None)
    idx = parse_run_log(SURVEY / "index_select_cudagraph.trimmed.out")
    assert [r.shape for r in idx.rows][:2] == ["[[64,64],0,[6]]", "[[256,256],0,[25]]"]


def test_truncated_by_timeout():
    res = parse_run_log(FIX / "mm_kernel_w100_timeout.out")
    assert res.truncated
    assert {r.dtype for r in res.rows} == {"float16"}
    assert _row(res, "float16", "[[384,384],[384,384]]").speedup == 0.087


def test_cut_anywhere_never_crashes():
    text = (FIX / "abs_cudagraph.out").read_text()
    full = parse_run_log_text(text)
    prev = 0
    for cut in range(0, len(text), 7):
        res = parse_run_log_text(text[:cut])
        assert len(res.rows) >= prev  # rows only grow as the log grows
        prev = len(res.rows)
        assert res.truncated or cut == 0
        for r in res.rows:  # every row it gives is a whole row of the full log
            assert r in full.rows
    # a row cut inside its shape detail is dropped, not misread
    lines = text.split("\n")
    i = next(n for n, line in enumerate(lines) if "[torch.Size([64, 64])]" in line)
    cut = "\n".join(lines[:i] + [lines[i][:-6]])
    res = parse_run_log_text(cut)
    assert res.truncated and len(res.rows) == 1


def test_failures_and_reasons():
    res = parse_run_log(SURVEY / "bincount_cudagraph.out")
    assert [f.node for f in res.failures] == [
        "benchmark/test_bincount.py::test_bincount",
        "benchmark/test_bincount.py::test_bincount_weighted",
    ]
    assert res.failures[0].reason.startswith("RuntimeError: Cannot copy between CPU and CUDA tensors")
    res = parse_run_log(SURVEY / "nonzero_cudagraph.out")
    assert "CUDA error" in res.failures[0].reason
    assert res.session_line == "1 failed in 2.41s"
    res = parse_run_log(SURVEY / "index_select_cudagraph.trimmed.out")
    assert {f.kind for f in res.failures} == {"FAILED", "ERROR"}
    assert len(res.rows) == 5 and not res.truncated


def test_record_log_rows():
    res = parse_record_log(FIX / "abs_record.log")
    r = res.rows[0]
    assert (r.op, r.dtype, r.shape, r.source) == ("abs", "float16", "[[1073741824]]", "abs_record.log")
    assert r.torch_ms == 1.0043200254440308 and r.lib_ms == 1.064191997051239
    assert r.speedup == 0.9437395021076018 and r.tflops == 1.0089737819634264
    assert r.torch_timer is None and r.lib_rsd is None  # upstream record: no opscreen fields


@pytest.mark.parametrize(
    "record,log",
    [
        ("abs_record.log", "abs_kernel_default_warm.out"),
        ("add_result.json", "add_kernel_w100.out"),
        ("add_result.json", "add_cudagraph.out"),
    ],
)
def test_record_and_run_log_keys_agree(record, log):
    a = parse_file(FIX / record)
    b = parse_run_log(FIX / log)
    assert [r.key for r in a.rows] == [r.key for r in b.rows]
    assert len(a.rows) > 0


def test_record_json_node():
    res = parse_record_json(FIX / "add_result.json")
    assert res.nodes == ["benchmark/test_add.py::test_add"]
    assert {r.dtype for r in res.rows} == {"float16", "float32", "bfloat16", "complex64"}


OPSCREEN_LOG = """\
== opscreen op add: backend cpu, device 0 ==
benchmark/test_add.py::test_add
Operator: add  Performance Test (dtype=torch.float16, mode=kernel,level=core)
Same in every row: [1]=1
Status       Torch Latency (ms)    Gems Latency (ms)         Gems Speedup    Timer    Samples    Noise(%)    Size Detail
-----------------------------------------------------------------------------------------------------------------------
SUCCESS       0.012000   0.010000   1.200   graph   25|31   0.12|0.30   [torch.Size([64, 64])]
SUCCESS     0.500000   0.600000   0.833   graph|graph-fallback:capture   10|12   -   [torch.Size([128, 64])]
FAILED     N/A   N/A   N/A   -   -   -   [torch.Size([256, 64])]

Operator: add  Performance Test (dtype=torch.float32, mode=kernel,level=core)
Same in every row: [1]=1, [2]=torch.float32
Status       Torch Latency (ms)    Gems Latency (ms)         Gems Speedup     TFLOPS    Torch GBPS     Gems GBPS    Timer    Samples    Noise(%)    Size Detail
------------------------------------------------------------------------------------------------------------------------------------------------------------------
SUCCESS   0.020000   0.010000   2.000   1.500   100.000   200.000   direct   -|40   -|0.50   [torch.Size([64, 64])]
SUCCESS   0.040000   0.020000   2.000   300.000   600.000   direct   50|50   1.00|2.00   [torch.Size([64, 128])]
PASSED
============================== 1 passed in 3.21s ===============================
"""


def test_opscreen_format_with_fold_legend():
    res = parse_run_log_text(OPSCREEN_LOG)
    assert not res.truncated and res.tables == 2 and len(res.rows) == 5
    a, b, c, d, e = res.rows
    assert a.key == ("add", "", "float16", "[[64,64],1]")
    assert (a.torch_ms, a.lib_ms, a.speedup) == (0.012, 0.010, 1.2)
    assert (a.torch_timer, a.lib_timer, a.torch_samples, a.lib_samples) == ("graph", "graph", 25, 31)
    assert a.torch_rsd == pytest.approx(0.0012) and a.lib_rsd == pytest.approx(0.003)
    assert (b.torch_timer, b.lib_timer, b.torch_rsd, b.lib_rsd) == ("graph", "graph-fallback:capture", None, None)
    assert c.status == "FAILED" and c.torch_ms is None and c.speedup is None and c.shape == "[[256,64],1]"
    assert d.shape == '[[64,64],1,"torch.float32"]'
    assert (d.tflops, d.torch_gbps, d.lib_gbps) == (1.5, 100.0, 200.0)
    assert (d.torch_samples, d.lib_samples, d.torch_rsd, d.lib_rsd) == (None, 40, None, 0.005)
    # FlagGems omits a row's TFLOPS when it is 0: the GBPS values stay GBPS
    assert (e.tflops, e.torch_gbps, e.lib_gbps, e.torch_timer) == (None, 300.0, 600.0, "direct")
    assert "benchmark/test_add.py::test_add" in res.nodes


def test_opscreen_record_matches_its_run_log():
    entry = {
        "op_name": "add", "dtype": "torch.float16", "mode": "kernel", "level": "core",
        "result": [
            {"shape_detail": [[64, 64], 1], "latency_base": 0.012, "latency": 0.01, "speedup": 1.2, "error_msg": None,
             "timer_base": "graph", "timer": "graph", "samples_base": 25, "samples": 31, "rsd_base": 0.0012, "rsd": 0.003},
            {"shape_detail": [[128, 64], 1], "latency_base": 0.5, "latency": 0.6, "speedup": 0.8333, "error_msg": None,
             "timer_base": "graph", "timer": "graph-fallback:capture", "samples_base": 10, "samples": 12,
             "rsd_base": None, "rsd": None},
            {"shape_detail": [[256, 64], 1], "latency_base": None, "latency": None, "speedup": None,
             "error_msg": "boom", "timer_base": None, "timer": None},
        ],
    }  # fmt: skip
    rec = parse_record_log_text("[INFO] Benchmark record logger enabled\n[INFO] " + json.dumps(entry) + "\n")
    log = parse_run_log_text(OPSCREEN_LOG)
    assert [r.key for r in rec.rows] == [r.key for r in log.rows[:3]]
    assert rec.rows[2].status == "FAILED" and rec.rows[2].error == "boom"
    assert (rec.rows[0].lib_timer, rec.rows[0].lib_samples, rec.rows[0].lib_rsd) == ("graph", 31, 0.003)
    merged = merge_rows(rec.rows, log.rows)
    assert len(merged) == 5  # the float32 table only run.log has is appended
    assert merged[1].speedup == 0.8333  # the record's value wins


def test_merge_fills_missing_fields():
    rec = parse_record_log(FIX / "abs_record.log").rows
    log = parse_run_log_text(
        (FIX / "abs_kernel_default_warm.out").read_text().replace("TFLOPS", "TFLOPS    Timer    Samples    Noise(%)")
        .replace(" [torch.Size", " graph 10|20 0.50|0.70 [torch.Size")
    ).rows  # fmt: skip
    merged = merge_rows(rec, log)
    assert len(merged) == 15
    assert merged[0].torch_ms == 1.0043200254440308  # from the record
    assert (merged[0].lib_timer, merged[0].lib_samples, merged[0].lib_rsd) == ("graph", 20, 0.007)  # from run.log


def test_ansi_codes_and_noise_are_ignored():
    text = (FIX / "abs_cudagraph.out").read_text()
    noisy = "\x1b[32m" + text.replace("SUCCESS", "\x1b[1mSUCCESS\x1b[0m") + "\nFAILED garbage line\n"
    assert [r.key for r in parse_run_log_text(noisy).rows] == [r.key for r in parse_run_log_text(text).rows]


@pytest.mark.parametrize(
    "text,obj",
    [
        ("[torch.Size([64, 64]), 1, torch.float16]", [[64, 64], 1, "torch.float16"]),
        ("[torch.Size([])]", [[]]),
        ("([torch.Size([2, 3])], {'dim': 1, 'keepdim': True})", [[[2, 3]], {"dim": 1, "keepdim": True}]),
        ("{'size': [64, 64], 'dtype': torch.bfloat16, 'device': 'cuda'}", {"size": [64, 64], "dtype": "torch.bfloat16", "device": "cuda"}),
        ("[torch.Size([8]), 1e-05, -inf, None, False, 'it\\'s', 2.5]", [[8], 1e-05, float("-inf"), None, False, "it's", 2.5]),
        ("[(1, 2), [3, (4,)]]", [[1, 2], [3, [4]]]),
        ("N/A", None),
    ],
)  # fmt: skip
def test_shape_repr_converter(text, obj):
    assert parse_repr(text) == obj
    assert shape_key(text) == json.dumps(obj, separators=(",", ":"))
    assert shape_key(text) == key_of(obj)


def test_shape_key_keeps_unreadable_text():
    assert shape_key("[torch.Size([2, 3]) <object at 0x7f>]").startswith("?")
    assert shape_key("[torch.Size([2,") .startswith("?")


def test_record_entries_written_by_two_handlers_count_once():
    line = (FIX / "abs_record.log").read_text().splitlines()[1]
    body = line[line.index("{") :]
    text = f"{line}\nINFO     flag_gems_benchmark:conftest.py:94 {body}\n"
    res = parse_record_log_text(text)
    assert len(res.rows) == 5 and all(r.test == "" for r in res.rows)


def test_timer_cell_glued_to_the_number_before_it():
    text = OPSCREEN_LOG.replace(
        "SUCCESS     0.500000   0.600000   0.833   graph|graph-fallback:capture",
        "SUCCESS     0.500000   0.600000   0.833graph|graph-fallback:capture",
    )
    assert "0.833graph" in text
    b = parse_run_log_text(text).rows[1]
    assert (b.speedup, b.torch_timer, b.lib_timer, b.torch_samples, b.shape) == (0.833, "graph", "graph-fallback:capture", 10, "[[128,64],1]")
