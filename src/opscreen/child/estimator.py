"""Estimators of one latency from its samples, and a bootstrap interval for them.

The timers collect samples (ms per call); the number a row reports is one of:

``median``
    the middle sample (the suite's own ``return_mode="median"``);
``trimmed_mean``
    the mean of the samples left after cutting :data:`TRIM` of them at each end;
``mean``, ``min``
    for comparison (the mean follows a rare slow sample; the minimum follows the
    luckiest one).

Which one the direct, wallclock and profiler timers report is the ``estimator``
timing knob (default :data:`DEFAULT`, chosen from real CPU data by
``bench/estimator_choice.py``; bench/results/ holds the figures). The graph timer's
samples are replays of many calls each and keep the median.

:func:`median_halfwidth` is the median's distribution-free interval (a sort, no
resampling), the one the ``target_ci`` stopping rule tests after every batch.

:func:`bootstrap_ci` gives the 95 % interval of an estimator by resampling the
samples (seeded: the same samples give the same interval); a row records its half
width relative to the estimate (``ci``). It says how well one process pinned its own
number down, not how far another process may land (docs/timing.md).

Standard library only.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Callable, Optional, Sequence

ESTIMATORS = ("median", "trimmed_mean", "mean", "min")
DEFAULT = "median"
TRIM = 0.2  # trimmed_mean: the fraction cut at each end
BOOT_RESAMPLES = 100
BOOT_MIN_SAMPLES = 5


def trimmed_mean(values: Sequence[float], cut: float = TRIM) -> float:
    """Mean of the sorted values without ``cut`` of them at each end (at least one kept)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no samples")
    k = int(len(xs) * cut)
    if 2 * k >= len(xs):
        k = (len(xs) - 1) // 2
    return statistics.fmean(xs[k: len(xs) - k])


_FUNCS: dict[str, Callable[[Sequence[float]], float]] = {
    "median": statistics.median,
    "trimmed_mean": trimmed_mean,
    "mean": statistics.fmean,
    "min": min,
}


def check(name: str) -> str:
    """``name`` when it is an estimator; ValueError otherwise."""
    if name not in _FUNCS:
        raise ValueError(f"unknown estimator {name!r}; use one of {', '.join(ESTIMATORS)}")
    return name


def estimate(values: Sequence[float], name: str = DEFAULT) -> float:
    """The estimate ``name`` of the samples."""
    return float(_FUNCS[check(name)](list(values)))


def bootstrap_ci(values: Sequence[float], name: str = DEFAULT, resamples: int = BOOT_RESAMPLES,
                 level: float = 0.95, seed: int = 0) -> Optional[tuple[float, float]]:
    """The ``level`` percentile-bootstrap interval of estimator ``name`` (None below
    :data:`BOOT_MIN_SAMPLES` samples)."""
    xs = [float(v) for v in values]
    if len(xs) < BOOT_MIN_SAMPLES:
        return None
    fn = _FUNCS[check(name)]
    rng = random.Random(seed * 1_000_003 + len(xs))
    stats = sorted(fn(rng.choices(xs, k=len(xs))) for _ in range(max(2, resamples)))
    alpha = (1.0 - level) / 2.0
    lo = stats[max(0, int(math.floor(alpha * (len(stats) - 1))))]
    hi = stats[min(len(stats) - 1, int(math.ceil((1.0 - alpha) * (len(stats) - 1))))]
    return float(lo), float(hi)


def median_halfwidth(values: Sequence[float], level_z: float = 1.96) -> Optional[float]:
    """Half the width of the median's distribution-free interval (order statistics:
    the ranks ``n/2 -+ z sqrt(n)/2``, about 95 % at ``z`` 1.96) over the median, a
    fraction; None below :data:`BOOT_MIN_SAMPLES` samples or at a median of 0. The
    ranks are Conover's (1-based ``floor((n - z sqrt n) / 2)`` and ``ceil(1 + (n + z sqrt n) / 2)``):
    at 5 samples the interval is their whole range.

    One sort, no resampling: cheap enough to test after every batch of samples
    (``target_ci`` in opscreen.child.timing), where the bootstrap of
    :func:`relative_halfwidth` would cost more than a CPU measurement itself."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n < BOOT_MIN_SAMPLES:
        return None
    med = statistics.median(xs)
    if med == 0 or not math.isfinite(med):
        return None
    spread = level_z * math.sqrt(n)
    lo = max(0, int(math.floor((n - spread) / 2.0)) - 1)
    hi = min(n - 1, int(math.ceil((n + spread) / 2.0)))
    return (xs[hi] - xs[lo]) / 2.0 / abs(med)


def relative_halfwidth(values: Sequence[float], name: str = DEFAULT) -> Optional[float]:
    """Half the bootstrap interval's width over the estimate (a fraction; None when unknown)."""
    ci = bootstrap_ci(values, name)
    if ci is None:
        return None
    est = estimate(values, name)
    if est == 0 or not math.isfinite(est):
        return None
    return (ci[1] - ci[0]) / 2.0 / abs(est)
