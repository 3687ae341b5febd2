"""Benchmark classes of the sample suite (FlagGems' ``benchmark/base.py`` conventions).

Lifecycle of a ``Benchmark``: a test builds one (op name, torch op, the library's op
via ``gems_op=``, dtypes), then calls ``run()``, which reads the session ``Config``
(dtypes, metrics, shape file), loops over dtypes and shapes, times the torch op
(``latency_base``) and the library op (``latency``), prints one table per dtype and
writes one record-log line per dtype. Any exception fails the whole test.

Timing hook: kernel mode calls the module-level ``do_bench`` and cudagraph mode the
module-level ``do_bench_cudagraph``; both are looked up as globals of this module at
call time, so a pytest plugin may replace ``benchmark.base.do_bench``.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from dataclasses import asdict
from typing import Generator, List, Optional

import pytest
import torch
import yaml

import minigems

from . import consts
from .conftest import Config, emit_record_logger, update_result
from .consts import BenchmarkMetrics, BenchmarkResult, check_metric_dependencies

device = minigems.device
vendor_name = minigems.vendor_name


def _synchronize():
    """Wait for the device (``torch.<device>.synchronize``); the CPU executes synchronously."""
    if device != "cpu":
        getattr(torch, device).synchronize()


_OVERRUN = 3


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Time ``fn`` with the monotonic clock; the shape of ``triton.testing.do_bench``.

    Runs ``fn`` for about ``warmup`` ms, then times about ``rep`` ms worth of single
    calls and returns the statistic ``return_mode`` (min, max, mean, median, all) in ms.
    Each loop stops early once it has run three times its budget.
    """
    fn()
    _synchronize()
    start = time.perf_counter()
    for _ in range(5):
        fn()
    _synchronize()
    estimate_ms = max((time.perf_counter() - start) * 1e3 / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    # Unlike triton, stop a loop that overruns its budget by _OVERRUN times: on a
    # loaded CPU single calls can get far slower than the 5-call estimate.
    deadline = time.perf_counter() + _OVERRUN * warmup / 1e3
    for _ in range(n_warmup):
        fn()
        if time.perf_counter() > deadline:
            break
    times = []
    deadline = time.perf_counter() + _OVERRUN * rep / 1e3
    for _ in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        t0 = time.perf_counter()
        fn()
        _synchronize()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        if t1 > deadline:
            break
    if quantiles is not None:
        qs = torch.tensor(times, dtype=torch.float64).quantile(
            torch.tensor(quantiles, dtype=torch.float64)
        )
        values = qs.tolist()
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return times
    summarize = {
        "min": min,
        "max": max,
        "mean": statistics.fmean,
        "median": statistics.median,
    }[return_mode]
    return summarize(times)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Graph-replay timing needs a CUDA device; the CPU suite has none."""
    raise RuntimeError("cudagraph mode needs a CUDA device")


def get_iter_count(fn):
    """Warmup and repeat counts for operator/wrapper modes, from 5 timed calls."""
    _synchronize()
    start = time.perf_counter()
    for _ in range(5):
        fn()
    _synchronize()
    latency = max((time.perf_counter() - start) / 5 * 1000, 1e-6)
    return max(1, int(Config.warm_up / latency)), max(1, int(Config.repetition / latency))


def generate_tensor_input(shape, dtype, device):
    if dtype in consts.FLOAT_DTYPES or dtype in consts.COMPLEX_DTYPES:
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype in consts.INT_DTYPES:
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, shape, dtype=dtype, device=device)
    if dtype in consts.BOOL_DTYPES:
        return torch.randint(0, 2, shape, dtype=dtype, device=device)
    raise ValueError(f"no input generator for dtype {dtype}")


def unary_input_fn(shape, dtype, device):
    yield (generate_tensor_input(shape, dtype, device),)


def binary_input_fn(shape, dtype, device):
    yield generate_tensor_input(shape, dtype, device), generate_tensor_input(shape, dtype, device)


def _numel(shape):
    return math.prod(shape)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Benchmark:
    """Base class: one op, its torch baseline and the library's implementation."""

    device: str = device
    DEFAULT_METRICS = consts.DEFAULT_METRICS
    DEFAULT_DTYPES = consts.FLOAT_DTYPES
    DEFAULT_SHAPES = consts.DEFAULT_SHAPES
    DEFAULT_SHAPE_DESC = "M, N"
    DEFAULT_SHAPE_FILES = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")

    def __init__(self, op_name, torch_op, dtypes=None, is_backward=False, is_inplace=False, **kwargs):
        if is_backward:
            raise NotImplementedError("the sample suite has no backward benchmarks")
        self.op_name = op_name
        self.torch_op = torch_op
        self.gems_op = kwargs.pop("gems_op", None)
        self.is_backward = is_backward
        self.is_inplace = is_inplace
        self.dtypes = list(dtypes) if dtypes is not None else list(self.DEFAULT_DTYPES)
        self.metrics = list(self.DEFAULT_METRICS)
        self.shapes = list(self.DEFAULT_SHAPES)
        self.shape_desc = self.DEFAULT_SHAPE_DESC
        self.to_bench_dtypes = self.dtypes
        self.to_bench_metrics = self.metrics
        for key, value in kwargs.items():
            if hasattr(self, key):
                setattr(self, key, value)

    # -- configuration -----------------------------------------------------------

    def set_dtypes(self, user_desired_dtypes: Optional[List[torch.dtype]]):
        unsupported = [d for d in user_desired_dtypes or [] if d not in self.dtypes]
        if unsupported:
            names = ", ".join(str(d) for d in unsupported)
            raise ValueError(f"Given dtype(s) '{names}' can't be supported by this op '{self.op_name}'")
        self.to_bench_dtypes = list(user_desired_dtypes) if user_desired_dtypes else self.dtypes

    def set_metrics(self, user_desired_metrics: Optional[List[str]]):
        if user_desired_metrics:
            invalid = [m for m in user_desired_metrics if m not in self.metrics]
            if invalid:
                raise ValueError(f"Invalid metrics: {', '.join(invalid)} for operation: '{self.op_name}'")
            unsatisfied = check_metric_dependencies(user_desired_metrics)
            if unsatisfied:
                raise ValueError(f"Unsatisfied metric dependencies: {', '.join(unsatisfied)}")
        self.to_bench_metrics = list(user_desired_metrics or self.metrics)
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE:
            for metric in self.set_more_metrics():
                if metric not in self.to_bench_metrics:
                    self.to_bench_metrics.append(metric)

    def set_more_metrics(self) -> List[str]:
        """Extra metrics measured at the comprehensive level."""
        return []

    def set_shapes(self, shape_file_path):
        """Shapes from the YAML file: the op name's key, else the first class name of
        ``type(self).__mro__`` that is a key, else ``DEFAULT_SHAPES``."""
        if not os.path.isfile(shape_file_path):
            raise FileNotFoundError(f"Shape file '{shape_file_path}' does not exist.")
        try:
            with open(shape_file_path, encoding="utf-8") as f:
                table = yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"Shape file '{shape_file_path}' is not a valid YAML file. Error: {e}")
        keys = [self.op_name] + [cls.__name__ for cls in type(self).__mro__]
        entry = next((table[k] for k in keys if k in table), None)
        if entry is None:
            self.shapes = list(self.DEFAULT_SHAPES)
        else:
            self.shapes = entry.get("shapes", self.DEFAULT_SHAPES)
            self.shape_desc = entry.get("shape_desc", self.DEFAULT_SHAPE_DESC)
        self.shapes = [tuple(s) for s in self.shapes]
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE:
            extra = [tuple(s) for s in self.set_more_shapes() or []]
            self.shapes = list(dict.fromkeys(self.shapes + extra))

    def set_more_shapes(self) -> List[tuple]:
        """Extra shapes measured at the comprehensive level."""
        return []

    def set_gems(self, gems_op):
        self.gems_op = gems_op

    def init_user_config(self):
        self.mode = Config.mode
        self.set_dtypes(Config.user_desired_dtypes)
        self.set_metrics(Config.user_desired_metrics)
        self.set_shapes(Config.shape_file)

    # -- inputs ------------------------------------------------------------------

    def get_input_iter(self, dtype) -> Generator:
        raise NotImplementedError("Each Benchmark must implement its own input iterator.")

    def unpack_to_args_kwargs(self, inputs):
        args, kwargs = [], {}
        for item in inputs:
            if isinstance(item, dict):
                kwargs.update(item)
            else:
                args.append(item)
        return args, kwargs

    def record_shapes(self, *args, **kwargs):
        def parse(item):
            if isinstance(item, torch.Tensor):
                return item.size()
            if isinstance(item, (int, float, str, torch.dtype)):
                return item
            if isinstance(item, (list, tuple)):
                return [parse(x) for x in item]
            if isinstance(item, dict):
                return {k: parse(v) for k, v in item.items()}
            return None

        parsed_args = [parse(a) for a in args]
        parsed_kwargs = {k: parse(v) for k, v in kwargs.items()}
        if parsed_args and parsed_kwargs:
            return parsed_args, parsed_kwargs
        return parsed_args if parsed_args else parsed_kwargs

    # -- measurements ------------------------------------------------------------

    def get_latency(self, op, *args, **kwargs):
        fn = lambda: op(*args, **kwargs)  # noqa: E731
        mode = Config.mode
        if mode == consts.BenchMode.KERNEL:
            # Looked up at call time: a timing plugin may replace this module's do_bench.
            return do_bench(fn, warmup=Config.warm_up, rep=Config.repetition, return_mode="median")
        if mode == consts.BenchMode.CUDAGRAPH:
            return do_bench_cudagraph(fn, rep=Config.repetition, return_mode="median")
        if mode in (consts.BenchMode.OPERATOR, consts.BenchMode.WRAPPER):
            n_warm, n_rep = get_iter_count(fn)
            for _ in range(n_warm):
                fn()
            _synchronize()
            start = time.perf_counter()
            for _ in range(n_rep):
                fn()
            if mode == consts.BenchMode.OPERATOR:
                _synchronize()
            end = time.perf_counter()
            if mode == consts.BenchMode.WRAPPER:
                _synchronize()
            return (end - start) / n_rep * 1000
        raise ValueError("Undefined Value of Benchmark Mode.")

    def get_gbps(self, args, latency=None):
        raise NotImplementedError(f"'{self.op_name}' does not define a bandwidth formula.")

    def get_tflops(self, op, *args, **kwargs):
        """FLOP count of one call, counted by torch's FlopCounterMode."""
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            op(*args, **kwargs)
        return counter.get_total_flops()

    def _gems_op(self):
        return self.gems_op if self.gems_op is not None else minigems.get_op(self.op_name)

    def _measure(self, metric, args, kwargs):
        metrics = self.to_bench_metrics
        if "latency_base" in metrics:
            metric.latency_base = self.get_latency(self.torch_op, *args, **kwargs)
        if "latency" in metrics:
            metric.latency = self.get_latency(self._gems_op(), *args, **kwargs)
        if "speedup" in metrics:
            metric.speedup = metric.latency_base / metric.latency
        if "gbps" in metrics:
            metric.gbps_base = self.get_gbps(args, latency=metric.latency_base)
            metric.gbps = self.get_gbps(args, latency=metric.latency)
        if "tflops" in metrics:
            flops = self.get_tflops(self.torch_op, *args, **kwargs)
            metric.tflops = flops / metric.latency / 1e12 * 1e3

    def run(self):
        self.init_user_config()
        for dtype in self.to_bench_dtypes:
            metrics = []
            inputs = self.get_input_iter(dtype)
            while True:
                try:
                    case = next(inputs)
                except StopIteration:
                    break
                except Exception as e:
                    print(f"\033[31mFAILED\033[0m: Operator={self.op_name} dtype={dtype} err=<<<{e}>>>")
                    pytest.fail(str(e))
                metric = BenchmarkMetrics()
                try:
                    args, kwargs = self.unpack_to_args_kwargs(case)
                    metric.shape_detail = self.record_shapes(*args, **kwargs)
                    self._measure(metric, args, kwargs)
                except Exception as e:
                    metric.error_msg = str(e)
                    pytest.fail(str(e))
                finally:
                    metrics.append(metric)

            result = BenchmarkResult(
                level=Config.bench_level.value,
                op_name=self.op_name,
                dtype=str(dtype),
                mode=Config.mode.value,
                result=metrics,
            )
            # FlagGems collects after every case; once per dtype is enough on CPU
            # (one gc.collect() with torch loaded costs tens of ms here).
            gc.collect()
            print(result)
            update_result(self.op_name, asdict(result))
            emit_record_logger(result.to_json())


class GenericBenchmark(Benchmark):
    """Inputs from ``input_fn(shape, dtype, device)``, a generator of argument tuples."""

    def __init__(self, *args, input_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_fn = input_fn

    def set_more_shapes(self):
        return [(4096,), (1000, 1), (1000, 256), (10, 256, 10)]

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            yield from self.input_fn(shape, dtype, self.device)


class UnaryPointwiseBenchmark(Benchmark):
    """One tensor per shape; reports TFLOPS as one op per element."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]

    def set_more_shapes(self):
        return [(1024, 2**i) for i in range(0, 13, 4)] + [(16, 16, 2**i) for i in range(0, 11, 5)]

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            yield (generate_tensor_input(shape, dtype, self.device),)

    def get_tflops(self, op, *args, **kwargs):
        return args[0].numel()


class BinaryPointwiseBenchmark(Benchmark):
    """Two tensors of the same shape; TFLOPS counts both inputs' elements (as FlagGems)."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]

    def set_more_shapes(self):
        return [(1024, 2**i) for i in range(0, 13, 4)] + [(16, 16, 2**i) for i in range(0, 11, 5)]

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            yield generate_tensor_input(shape, dtype, self.device), generate_tensor_input(shape, dtype, self.device)

    def get_tflops(self, op, *args, **kwargs):
        return args[0].numel() + args[1].numel()


class UnaryReductionBenchmark(Benchmark):
    """Reduce along dim 1 (all of a 1-D input); GB/s added at the comprehensive level."""

    def set_more_metrics(self):
        return ["gbps"]

    def get_gbps(self, args, latency):
        inp = args[0]
        return 2 * _nbytes(inp) * 1e-9 / (latency * 1e-3)

    def set_more_shapes(self):
        return [(1025 * 64,)] + [(1024, 2**i) for i in range(0, 13, 4)] + [(16, 2**i, 16) for i in range(0, 11, 5)]

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            inp = generate_tensor_input(shape, dtype, self.device)
            yield (inp, 1) if inp.ndim > 1 else (inp,)


class BlasBenchmark(Benchmark):
    """Matrix products. Shapes are (B, M, N, K) rows, from the ``BlasBenchmark`` key of
    the shape file; ``input_fn(b, m, n, k, dtype, device, b_column_major)`` builds 2-D
    (mm) or 3-D (bmm) operands. A shape file without that key leaves the 1-D
    ``DEFAULT_SHAPES``, which cannot be unpacked: the test fails (FlagGems does the same)."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]
    DEFAULT_SHAPE_DESC = "B, M, N, K"

    def __init__(self, *args, input_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_fn = input_fn

    def set_more_shapes(self):
        return [(2, 512, 512, 512), (4, 1, 1024, 512), (8, 32, 4096, 128)]

    def get_input_iter(self, dtype) -> Generator:
        for b, m, n, k in self.shapes:
            yield from self.input_fn(b, m, n, k, dtype, self.device, False)
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE:
            for b, m, n, k in self.shapes:
                yield from self.input_fn(b, m, n, k, dtype, self.device, True)

    def get_tflops(self, op, *args, **kwargs):
        a, b = args[0], args[1]
        if a.dim() == 2:  # (M, K) @ (K, N)
            return 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]  # (B, M, K) @ (B, K, N)
