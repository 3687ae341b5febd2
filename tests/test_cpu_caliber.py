"""bench/cpu_caliber.py's reading of runs: every row's speedup from the record logs, and the
A/A spread of two runs over the rows both measured."""

from __future__ import annotations

import json

from benchload import load_bench

cal = load_bench("cpu_caliber")


def _run(root, op, rows):
    d = root / "ops" / op
    d.mkdir(parents=True)
    rec = {"op_name": op, "dtype": "torch.float32",
           "result": [{"shape_detail": [[n]], "speedup": s} for n, s in rows]}
    (d / "record.log").write_text("[INFO] Benchmark record logger enabled\n[INFO] " + json.dumps(rec) + "\n")
    return root


def test_speedups_and_spread(tmp_path):
    a = cal.speedups(_run(tmp_path / "a", "abs", [(64, 1.0), (128, 2.0), (256, None)]))
    b = cal.speedups(_run(tmp_path / "b", "abs", [(64, 1.1), (128, 2.0), (512, 3.0)]))
    assert len(a) == 2 and len(b) == 3  # a row without a speedup is not a row
    assert cal.spread(a, b) == "rows 2 median 5.00 % p90 10.00 % max 10.0 %"
    assert cal.spread(a, {}) == "no common rows"
