"""A device's peaks: the spec peak the harness computes from what NVML and torch report, and the
achievable peak ``opscreen devices --peaks`` measures (:mod:`opscreen.child.peaks`), kept side
by side in one peaks file per device (contract ``peaks``, docs/peaks.md).

Spec memory bandwidth (bytes/s) = max memory clock (Hz) x DDR factor x bus width (bits) / 8.
The DDR factor is 2: HBM (HBM2e, HBM3, HBM3e) and GDDR6 transfer data on both edges of the
clock NVML reports as ``NVML_CLOCK_MEM`` (an H100 SXM reports 2619 MHz on a 5120-bit bus:
2619e6 x 2 x 640 B = 3.35 TB/s, its datasheet figure). GDDR6X/GDDR7 signal PAM4/PAM3 and
their NVML clock relates to the data rate differently: those parts are not computed here.

Spec FLOPs (per dtype) = SMs x max SM clock x dense FLOPs per SM per clock of the compute
capability (:data:`FLOPS_PER_SM_CLOCK`). Dense, never the 2:4 structured-sparse figures that
datasheets print beside them (twice as high). One FMA counts as two FLOPs. The max SM clock is
the boost ceiling: NVIDIA's datasheets quote tensor throughput at a lower clock (H100 SXM:
989.4 TFLOPS fp16 = 132 x 4096 x 1830 MHz), so this spec is an upper bound of theirs.

Where NVML, the SM count or the table does not apply (the CPU, AMD, other vendors, an
unlisted capability), the figure is ``None`` with ``why``; nothing is guessed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import contracts
from .. import settings
from .devmon import Unavailable, _call, open_monitor

__all__ = ["FLOPS_PER_SM_CLOCK", "DDR_FACTOR", "spec_bandwidth", "spec_flops", "nvml_memory", "spec_peaks",
           "measure_device", "peaks_record",
           "peaks_dir", "peaks_key", "save", "find", "ROW_DTYPES"]

#: bits moved per pin per memory clock for the memory types this formula covers (HBM, GDDR6)
DDR_FACTOR = 2

#: dense FLOPs per SM per clock, by compute capability, per dtype (tensor cores for tf32,
#: float16, bfloat16; the FP32 units for float32). Sources, each checked as
#: SMs x boost clock x value = the datasheet's dense figure:
#: - 9.0 (Hopper): NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 SXM5:
#:   132 SMs, fp16/bf16 dense 989.4 TFLOPS at 1830 MHz -> 4096; tf32 494.7 -> 2048; fp32
#:   66.9 TFLOPS at 1980 MHz with 128 FP32 lanes -> 256.
#: - 8.0 (Ampere GA100): NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs at
#:   1410 MHz, fp16/bf16 dense 312 TFLOPS -> 2048; tf32 156 -> 1024; fp32 19.5 (64 lanes) -> 128.
#: - 8.9 (Ada): NVIDIA Ada GPU Architecture whitepaper (2023) and the L40S datasheet: 142 SMs at
#:   2520 MHz, fp16/bf16 dense with fp32 accumulate 362 TFLOPS -> 1024; tf32 183 -> 512; fp32
#:   91.6 -> 256. GeForce Ada parts accumulate fp16 in fp32 at half that rate (512): for them
#:   the table's figure is twice too high, and the peaks file says which part it assumed.
#: Blackwell (sm_100, sm_120) is not listed: no per-SM dense figure could be checked against a
#: datasheet here, so its spec FLOPs are unknown.
FLOPS_PER_SM_CLOCK: dict[str, dict[str, int]] = {
    "9.0": {"float32": 256, "tf32": 2048, "float16": 4096, "bfloat16": 4096},
    "8.0": {"float32": 128, "tf32": 1024, "float16": 2048, "bfloat16": 2048},
    "8.9": {"float32": 256, "tf32": 512, "float16": 1024, "bfloat16": 1024},
}
TABLE_NOTES = {"8.9": "Ada data-center parts (L40S); GeForce Ada halves float16/bfloat16 with fp32 accumulate"}

#: a summary row's dtype -> the matmul peak it is held against (float32 rows: IEEE fp32, TF32 off)
ROW_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def spec_bandwidth(mem_clock_mhz: float | None, bus_width_bits: int | None) -> dict:
    """The spec memory bandwidth in GB/s (1e9 B/s) from NVML's max memory clock and bus width."""
    if not mem_clock_mhz or not bus_width_bits:
        return {"gbps": None, "why": "NVML reported no memory clock or bus width"}
    gbps = mem_clock_mhz * 1e6 * DDR_FACTOR * bus_width_bits / 8 / 1e9
    return {"gbps": round(gbps, 1), "mem_clock_mhz": mem_clock_mhz, "bus_width_bits": bus_width_bits,
            "ddr_factor": DDR_FACTOR, "formula": "mem_clock x 2 (double data rate) x bus_width / 8"}


def spec_flops(sm_count: int | None, sm_clock_mhz: float | None, capability: str | None) -> dict:
    """The spec dense TFLOPS per dtype from the SM count, max SM clock and compute capability."""
    per_sm = FLOPS_PER_SM_CLOCK.get(capability or "")
    if per_sm is None:
        return {"tflops": None, "why": f"compute capability {capability} is not in opscreen's table "
                                       f"({', '.join(sorted(FLOPS_PER_SM_CLOCK))})"}
    if not sm_count or not sm_clock_mhz:
        return {"tflops": None, "why": "no SM count (torch) or max SM clock (NVML)"}
    tflops = {d: round(sm_count * sm_clock_mhz * 1e6 * v / 1e12, 1) for d, v in per_sm.items()}
    return {"tflops": tflops, "sm_count": sm_count, "sm_clock_mhz": sm_clock_mhz, "capability": capability,
            "per_sm_clock": dict(per_sm), "convention": "dense (no 2:4 sparsity), FMA = 2 FLOPs, max SM clock",
            "note": TABLE_NOTES.get(capability or "")}


def nvml_memory(uuid: str | None, index: int | None) -> dict:
    """NVML's max memory clock, bus width and max SM clock of a CUDA device, or ``{"why": ...}``."""
    try:
        mon = open_monitor("cuda", uuid, index)
    except Unavailable as exc:
        return {"why": str(exc)}
    nv, h = mon.nv, mon.handle
    return {"mem_clock_mhz": _call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
            "bus_width_bits": _call(getattr(nv, "nvmlDeviceGetMemoryBusWidth", None) or (lambda _h: None), h),
            "sm_clock_mhz": _call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM), "found_by": mon.found_by}


def _unknown(why: str) -> dict:
    """A spec peak that cannot be computed, and why (on the whole and on each part)."""
    return {"source": "unknown", "why": why, "bandwidth": {"gbps": None, "why": why},
            "flops": {"tflops": None, "why": why}}


def spec_peaks(backend: str, facts: dict) -> dict:
    """The spec peak of a device whose torch facts (:func:`opscreen.child.peaks.device_facts`) are
    ``facts``: bandwidth and FLOPs with the figures they came from, or why not."""
    if backend != "cuda":
        return _unknown(f"the {backend} backend has no spec peak in opscreen: NVML (NVIDIA) reports the memory "
                        "clock and bus width, and the FLOPs table covers NVIDIA compute capabilities only")
    nv = nvml_memory(facts.get("uuid"), facts.get("index") if facts.get("index") is not None else 0)
    if "why" in nv:
        return _unknown(nv["why"])
    return {"source": "nvml+table", "bandwidth": spec_bandwidth(nv["mem_clock_mhz"], nv["bus_width_bits"]),
            "flops": spec_flops(facts.get("sm_count"), nv["sm_clock_mhz"], facts.get("compute_capability")),
            "found_by": nv["found_by"]}


# -- where peaks files live ----------------------------------------------------------------

def peaks_dir(environ=None) -> Path:
    """:func:`opscreen.settings.peaks_dir` of ``environ`` (default this process's)."""
    return Path(settings.peaks_dir(os.environ if environ is None else environ))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text.strip()).strip("-") or "device"


def peaks_key(uuid: str | None, name: str | None) -> list[str]:
    """The file names a device's peaks are kept under, most specific first: its UUID, its model."""
    keys = [f"uuid-{_slug(uuid.removeprefix('GPU-'))}"] if uuid else []
    return keys + ([f"name-{_slug(name)}"] if name else [])


def save(obj: dict, directory: Path | None = None) -> list[Path]:
    """Write the peaks file under every key of its device, ``<dir>/<key>/peaks.json`` (the model's
    file holds the latest device of that model measured)."""
    d = directory or peaks_dir()
    dev = obj.get("device") or {}
    out = []
    for key in peaks_key(dev.get("uuid"), dev.get("name")):
        out.append(Path(d) / key / contracts.PEAKS.filename)
        out[-1].parent.mkdir(parents=True, exist_ok=True)
        contracts.write(contracts.PEAKS, out[-1], obj)
    return out


def find(uuid: str | None, name: str | None, directory: Path | None = None) -> dict | None:
    """The peaks of the device with ``uuid``, else of the last device of model ``name``; None when
    none was measured (a damaged file counts as none)."""
    d = Path(directory or peaks_dir())
    for key in peaks_key(uuid, name):
        obj = contracts.read(contracts.PEAKS, d / key / contracts.PEAKS.filename)
        if obj is not None:
            return {**obj, "found_by": key.split("-", 1)[0]}
    return None


# -- measuring: the child in the suite's interpreter ----------------------------------------

#: what one measurement moves and multiplies, by whether the backend is the host (slots) or an accelerator
#: (reps: the fewest timed calls; budget_s: the least time of timed calls; warmup_s: untimed calls first)
SIZES = {"device": {"copy_bytes": 2 << 30, "matmul_n": 8192, "reps": 20, "budget_s": 2.0, "warmup_s": 1.0},
         "host": {"copy_bytes": 64 << 20, "matmul_n": 512, "reps": 10, "budget_s": 0.5, "warmup_s": 0.1}}


def _shim(folder: Path) -> Path:
    """A folder holding only a link to the ``opscreen`` package, for the child's PYTHONPATH."""
    pkg = Path(__file__).resolve().parent.parent
    (folder / "opscreen").symlink_to(pkg, target_is_directory=True)
    return folder


def measure_device(backend, python: str | None, device: int, *, timeout: float = 600.0, sizes: dict | None = None) -> dict:
    """Run :mod:`opscreen.child.peaks` for ``device`` of ``backend`` in ``python`` (the suite's
    interpreter) and return its JSON, or ``{"error": ...}``. An accelerator is made the child's
    only visible device (as a run's child sees it); the CPU's slot runs on one thread, as a
    run's slot does (OMP_NUM_THREADS=1 unless the caller set it)."""
    import json
    import sys
    import tempfile

    from ..procgroup import run_capture
    from . import all_visible_keys

    host = backend.capabilities.slots
    size = {**SIZES["host" if host else "device"], **(sizes or {})}
    env = dict(os.environ)
    for k, v in backend.visible_devices_env([device], all_visible_keys()).items():
        env.pop(k, None) if v is None else env.__setitem__(k, v)
    if host:
        env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="opscreen-peaks-") as tmp:
        env["PYTHONPATH"] = os.pathsep.join([str(_shim(Path(tmp)))] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        argv = [python or sys.executable, "-m", "opscreen.child.peaks", "--device-type", backend.device_type,
                "--index", "0" if not host else str(device), "--modules", ",".join(backend.torch_modules),
                *(f"--{k.replace('_', '-')}={v}" for k, v in size.items())]
        res = run_capture(argv, timeout=timeout, env=env)
    if res.timed_out:
        return {"error": f"the measurement timed out after {timeout:g} s"}
    lines = [ln for ln in (res.stdout or "").strip().splitlines() if ln.startswith("{")]
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        tail = (res.error or (res.stderr or "").strip().splitlines()[-1:] or [f"exit status {res.returncode}"])
        return {"error": f"the measurement printed no result: {tail if isinstance(tail, str) else tail[0]}"}
    if host:
        out["device"]["index"] = device  # the slot (the child's torch has one cpu device)
    return {**out, "sizes": size}


def peaks_record(backend, device: int, measured: dict, device_name: str | None = None) -> dict:
    """The peaks file's object: the device, its spec peak and what was measured, side by side."""
    from ..fsio import utcnow

    facts = dict(measured.get("device") or {})
    facts["name"] = facts.get("name") or device_name
    spec = spec_peaks(backend.name, {**facts, "index": device})
    copy = measured.get("copy") or {}
    achieved = {"bandwidth_gbps": (copy.get("gbps") or {}).get("median"),
                "tflops": {d: (m.get("tflops") or {}).get("median") for d, m in (measured.get("matmul") or {}).items()}}
    spec_t = (spec.get("flops") or {}).get("tflops") or {}
    bw = (spec.get("bandwidth") or {}).get("gbps")
    ratio = {"bandwidth": round(achieved["bandwidth_gbps"] / bw, 4) if bw and achieved["bandwidth_gbps"] else None,
             "tflops": {d: (round(v / spec_t[d], 4) if v and spec_t.get(d) else None) for d, v in achieved["tflops"].items()}}
    return {"backend": backend.name, "vendor": backend.vendor, "device": {**facts, "index": device},
            "measured_at": utcnow(), "achievable": achieved, "spec": spec, "of_spec": ratio,
            "measurement": {k: measured.get(k) for k in ("timer", "threads", "copy", "matmul", "sizes")}}
