"""Constants and result records of the sample suite.

The names and the printed/JSON formats follow FlagGems' ``benchmark/consts.py`` so
that tools written for FlagGems' output read this suite's output unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any, List, Optional

import torch

# float16 matmul/pointwise work on the CPU build of torch at these sizes; keep the
# FlagGems list (and order) so that the first table reads dtype=torch.float16.
FLOAT_DTYPES = [torch.float16, torch.float32, torch.bfloat16]
INT_DTYPES = [torch.int16, torch.int32]
BOOL_DTYPES = [torch.bool]
COMPLEX_DTYPES = [torch.complex64]
FP16_BF16_DTYPES = [torch.float16, torch.bfloat16]

# Milliseconds. FlagGems uses 1000 / 100; these keep one op to about a second on CPU.
DEFAULT_WARMUP_TIME = 5
DEFAULT_ITER_TIME = 10

# Used when neither the op name nor any class name of the benchmark is a key of
# the shape file. As in FlagGems the first entry is 1-D: a BLAS benchmark that
# falls back here cannot unpack (B, M, N, K) and fails.
DEFAULT_SHAPES = [
    (1048576,),
    (64, 64),
    (512, 512),
    (16, 128, 128),
]


class BenchMode(Enum):
    KERNEL = "kernel"
    OPERATOR = "operator"
    WRAPPER = "wrapper"
    CUDAGRAPH = "cudagraph"


class BenchLevel(Enum):
    COMPREHENSIVE = "comprehensive"
    CORE = "core"


@dataclass
class BenchmarkMetrics:
    """One measured case (one shape of one dtype); field names as in FlagGems."""

    legacy_shape: Optional[int] = None
    shape_detail: Optional[Any] = None
    latency_base: Optional[float] = None  # torch, ms
    latency: Optional[float] = None  # library under test, ms
    gbps_base: Optional[float] = None
    gbps: Optional[float] = None
    speedup: Optional[float] = None  # latency_base / latency
    accuracy: Optional[float] = None
    tflops: Optional[float] = None
    utilization: Optional[float] = None
    compared_speedup: Optional[float] = None
    error_msg: Optional[str] = None


ALL_AVAILABLE_METRICS = {f.name for f in fields(BenchmarkMetrics)} - {
    "legacy_shape",
    "shape_detail",
}

DEFAULT_METRICS = ["latency_base", "latency", "speedup"]

_METRIC_DEPENDENCIES = {
    "speedup": ("latency", "latency_base"),
    "utilization": ("latency", "tflops"),
}


def check_metric_dependencies(requested: Optional[List[str]]) -> List[str]:
    """Return the requested metrics whose prerequisites are not requested before them."""
    missing: List[str] = []
    seen = set()
    for metric in requested or []:
        needs = _METRIC_DEPENDENCIES.get(metric, ())
        if all(n in seen for n in needs):
            seen.add(metric)
        else:
            missing.append(metric)
    return missing


def _json_default(obj):
    if isinstance(obj, torch.dtype):
        return str(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _num(value, fmt):
    return "N/A" if value is None else format(value, fmt)


@dataclass
class BenchmarkResult:
    """All cases of one op for one dtype: printed as a table, logged as one JSON line."""

    op_name: str
    dtype: str
    mode: str
    level: str
    result: List[BenchmarkMetrics]

    def _has_tflops(self) -> bool:
        return bool(self.result and self.result[0].tflops)

    def _has_gbps(self) -> bool:
        return bool(self.result) and self.result[0].gbps is not None

    def __str__(self) -> str:
        title = (
            f"\nOperator: {self.op_name}  Performance Test "
            f"(dtype={self.dtype}, mode={self.mode},level={self.level})\n"
        )
        columns = ["Status".ljust(10)]
        columns += [
            name.rjust(20)
            for name in ("Torch Latency (ms)", "Gems Latency (ms)", "Gems Speedup")
        ]
        if self._has_tflops():
            columns.append("TFLOPS".rjust(20))
        if self._has_gbps():
            columns += ["Torch GBPS ".rjust(20), "Gems GBPS ".rjust(20)]
        columns.append("Size Detail".rjust(20) + "\n")
        column_line = " ".join(columns)
        rule = "-" * len(column_line) + "\n"
        return title + column_line + rule + "".join(self._row(m) for m in self.result)

    def _row(self, m: BenchmarkMetrics) -> str:
        status = "SUCCESS" if m.error_msg is None else "FAILED"
        cells = [
            _num(m.latency_base, ".6f"),
            _num(m.latency, ".6f"),
            _num(m.speedup, ".3f"),
        ]
        if m.tflops:
            cells.append(_num(m.tflops, ".3f"))
        if m.gbps is not None:
            cells += [_num(m.gbps_base, ".3f"), _num(m.gbps, ".3f")]
        detail = "N/A" if m.shape_detail is None else m.shape_detail
        return status.ljust(10) + "".join(c.rjust(20) for c in cells) + " " * 10 + f"{detail}\n"

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=_json_default)

    def to_dict(self) -> dict:
        return self.__dict__
