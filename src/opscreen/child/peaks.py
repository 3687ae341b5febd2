"""The achievable peaks of one device, measured in the suite's interpreter (``opscreen devices
--peaks`` runs ``python -m opscreen.child.peaks``): a device-to-device copy and a large matmul
per dtype, timed with torch, each repeated and reduced to its median and best.

- copy: ``dst.copy_(src)`` of one large tensor; each copy reads and writes every byte, so it
  counts ``2 x nbytes`` (the convention of STREAM's Copy and of nvbench's ``BWUtil``).
- matmul: ``a @ b`` of square ``n x n`` matrices, ``2 n^3`` floating-point operations (one
  multiply and one add per term). float32 is measured with TF32 off (IEEE fp32) and, on
  CUDA/ROCm, again as ``tf32`` with TF32 on; float16 and bfloat16 as they are.

The device's own figures the harness needs for the spec peak (SM count, compute capability,
UUID) are reported beside them. It prints one JSON object on its last line. Standard
library, torch and nothing else of opscreen (the child layer's rule).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

MATMUL_DTYPES = ("float32", "tf32", "float16", "bfloat16")


def _timer(torch, device):
    """A function that times ``fn()`` once, in seconds: device events where the device has them,
    else the host clock around a synchronised call."""
    if device.type in ("cuda",) and hasattr(torch.cuda, "Event"):
        def once(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        return once
    sync = getattr(getattr(torch, device.type, None), "synchronize", None) if device.type != "cpu" else None

    def once_host(fn):
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        return time.perf_counter() - t0
    return once_host


def _repeat(once, fn, reps: int, budget_s: float, warmup_s: float = 0.0, max_reps: int = 100_000) -> list[float]:
    """Untimed calls for ``warmup_s`` (at least 2), then timed ones until at least ``reps`` of
    them ran *and* ``budget_s`` of timed calls has passed (at most ``max_reps``).

    The warm-up is by time, not by count: a tensor-core matmul of 8192 takes about 1.5 ms on an
    H200, so 2 calls and 20 timed ones (30 ms) measured the clock's ramp, and two processes
    read 2.6-4.3 % apart. A second of calls before the timing lets clocks and power settle."""
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < warmup_s:
        once(fn)
        n += 1
    times: list[float] = []
    while len(times) < max_reps and (len(times) < reps or sum(times) < budget_s):
        times.append(once(fn))
    return times


def _reduce(times: list[float], work: float, unit: float) -> dict:
    """``work`` per call over each time, in ``unit``: median and best, and the spread."""
    rates = [work / t / unit for t in times if t > 0]
    med = statistics.median(rates)
    sig = (lambda x: float(f"{x:.5g}"))  # five significant digits: a CPU's 0.0012 TFLOPS as well as an H200's 700
    return {"median": sig(med), "best": sig(max(rates)), "reps": len(rates),
            "spread": round(max(rates) / min(rates) - 1.0, 4)}


def measure_copy(torch, device, nbytes: int, reps: int, budget_s: float, warmup_s: float = 0.0) -> dict:
    """GB/s (1e9 bytes per second) of a device-to-device copy of ``nbytes``, read + write."""
    n = max(1, nbytes // 4)
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    once = _timer(torch, device)
    times = _repeat(once, lambda: dst.copy_(src), reps, budget_s, warmup_s)
    moved = 2 * n * 4
    out = {"bytes": n * 4, "counted_bytes": moved, "gbps": _reduce(times, moved, 1e9)}
    del src, dst
    return out


def measure_matmul(torch, device, dtype_name: str, n: int, reps: int, budget_s: float, warmup_s: float = 0.0) -> dict:
    """TFLOPS (1e12 per second) of an ``n x n`` matmul in ``dtype_name`` (``tf32``: float32
    with TF32 allowed; ``float32``: with it off)."""
    dtype = getattr(torch, "float32" if dtype_name == "tf32" else dtype_name)
    cuda_like = device.type == "cuda"
    if dtype_name == "tf32" and not cuda_like:
        return {"n": n, "why": f"TF32 is a CUDA/ROCm matmul mode; the {device.type} device has none"}
    prev = torch.backends.cuda.matmul.allow_tf32 if cuda_like else None
    try:
        if cuda_like:
            torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        once = _timer(torch, device)
        times = _repeat(once, lambda: torch.matmul(a, b), reps, budget_s, warmup_s)
    except Exception as exc:  # noqa: BLE001 - a dtype the device cannot multiply: say so, measure the rest
        return {"n": n, "why": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    finally:
        if cuda_like:
            torch.backends.cuda.matmul.allow_tf32 = prev
    return {"n": n, "flops": 2 * n ** 3, "tflops": _reduce(times, 2.0 * n ** 3, 1e12)}


def device_facts(torch, device) -> dict:
    """What torch says of the device: name, UUID, SM count, compute capability (None elsewhere)."""
    facts = {"type": device.type, "index": device.index, "torch": torch.__version__, "name": None, "uuid": None,
             "sm_count": None, "compute_capability": None, "hip": getattr(torch.version, "hip", None)}
    mod = getattr(torch, device.type, None)
    if device.type == "cpu" or mod is None:
        return facts
    props = mod.get_device_properties(device)
    facts["name"] = getattr(props, "name", None)
    facts["sm_count"] = getattr(props, "multi_processor_count", None)
    if getattr(props, "major", None) is not None:
        facts["compute_capability"] = f"{props.major}.{props.minor}"
    uuid = getattr(props, "uuid", None)
    facts["uuid"] = str(uuid) if uuid is not None else None
    return facts


def measure(torch, device_type: str, index: int, *, copy_bytes: int, matmul_n: int, reps: int,
            budget_s: float, warmup_s: float = 0.0, dtypes=MATMUL_DTYPES) -> dict:
    """Every measurement of one device, as a dict (the harness writes it into the peaks file)."""
    device = torch.device(device_type, index) if device_type != "cpu" else torch.device("cpu")
    if device_type != "cpu":
        getattr(torch, device_type).set_device(device)
    torch.manual_seed(0)
    out = {"device": device_facts(torch, device), "timer": "events" if device.type == "cuda" else "host",
           "threads": torch.get_num_threads(), "copy": measure_copy(torch, device, copy_bytes, reps, budget_s, warmup_s)}
    out["matmul"] = {d: measure_matmul(torch, device, d, matmul_n, reps, budget_s, warmup_s) for d in dtypes}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m opscreen.child.peaks")
    p.add_argument("--device-type", default="cpu")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--copy-bytes", type=int, required=True)
    p.add_argument("--matmul-n", type=int, required=True)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--budget-s", type=float, default=1.0)
    p.add_argument("--warmup-s", type=float, default=0.0)
    p.add_argument("--modules", default="", help="torch extensions to import first, comma-separated")
    a = p.parse_args(argv)
    try:
        import importlib

        import torch

        for m in filter(None, a.modules.split(",")):
            importlib.import_module(m)
        out = measure(torch, a.device_type, a.index, copy_bytes=a.copy_bytes, matmul_n=a.matmul_n, reps=a.reps,
                      budget_s=a.budget_s, warmup_s=a.warmup_s)
    except Exception as exc:  # noqa: BLE001 - one line for the harness, whatever failed
        out = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    print(json.dumps(out))
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main())
