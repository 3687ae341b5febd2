"""bench/aa_spread.py: a pair of runs read as far apart as the reference pair holds 0 in its
interval; a pair five times wider does not. The op is what the bootstrap resamples."""

from __future__ import annotations

import math
import random

from benchload import load_bench
from synth import make_run


def _runs(tmp_path, sds):
    """Run dirs of the same 12 ops whose library latency is scattered by each sd (log scale)."""
    out = []
    for k, sd in enumerate(sds):
        rng = random.Random(k)
        d = tmp_path / f"r{k}"
        make_run(d, n_ops=12, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0,
                 perturb=lambda op, dt, si, lib, rng=rng, sd=sd: lib * math.exp(rng.gauss(0, sd)))
        out.append(d.name)
    return out


def test_a_wider_pair_is_told_apart_and_a_like_one_is_not(tmp_path, capsys):
    aa = load_bench("aa_spread")
    a, b, c, d, e = _runs(tmp_path, (0.003, 0.003, 0.003, 0.003, 0.015))
    assert aa.main([str(tmp_path), f"{a}:{b}", f"{c}:{d}", f"{a}:{e}", "--boot", "800"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("(reference)") and "graph rows of 12 ops" in out[0]
    assert out[1].endswith("(holds 0)")  # the same noise: no evidence of a difference
    assert "holds 0" not in out[2] and "p90 minus the reference's +" in out[2]  # five times wider


def test_p90_difference_resamples_ops():
    aa = load_bench("aa_spread")
    ref = {f"op{k}": [0.001 * (k + 1)] * 5 for k in range(6)}
    assert aa.p90_difference(ref, ref, boot=200) == (0.0, 0.0, 0.0)
    d, lo, hi = aa.p90_difference(ref, {o: [x * 3 for x in v] for o, v in ref.items()}, boot=200)
    assert d > 0 and 0 < lo <= d <= hi
