"""Synthetic run directories that follow docs/contracts.md, for tests and benchmarks.

:func:`make_run` writes ``RUN_DIR/run_identity.json``, ``RUN_DIR/ops_status.csv`` and
per op ``ops/<op>/{child_config.json, run.log, record.log, result.json,
run_identity.json, .complete}``: run.log in opscreen's table format (Timer, Samples,
Noise(%) columns, a "Same in every row" legend for folded scalar inputs) wrapped in
pytest noise, record.log as ``[INFO] {json}`` lines with opscreen's extra fields.
Everything is deterministic for a given seed. Nothing here is used by a real run.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["SynthOp", "make_run", "DEFAULT_CALIBER"]

DEFAULT_CALIBER = {
    "timer": "graph",
    "use_flagtune": "0",
    "use_flagtune_cost_model": "0",
    "triton_cache_autotuning": "0",
    "shape_mode": "upstream",
    "level": "core",
    "dtypes": None,
    "backend": "cuda",
    "vendor": "nvidia",
    "device_name": "NVIDIA H200",
    "suite_commit": "ed2508bcb5a03000e9774734201d840ba362cd11",
    "timing": {"target_rsd": 0.005, "min_samples": 10, "max_samples": 1000, "max_time_s": 2.0,
               "warmup_calls": 3, "warmup_ms": 25, "l2_flush": False},
    "isolation": "op",
}  # fmt: skip

_UNARY = [(1073741824,), (64, 64), (4096, 4096), (64, 512, 512), (1024, 1024, 1024), (1024, 65536),
          (8, 1024), (256, 256), (32, 4096), (2048, 2048), (16, 16, 16), (7, 13, 1029)]  # fmt: skip
_MM = [(384, 384), (1024, 1024), (2048, 2048), (4096, 4096), (512, 8192), (8192, 512), (16, 4096),
       (4096, 16), (1, 4096), (3072, 768), (768, 3072), (128, 128)]  # fmt: skip


@dataclass
class SynthOp:
    """What :func:`make_run` decided for one op (returned so tests can check against it)."""

    name: str
    kind: str  # unary | scalar | mm
    status: str
    dtypes: list[str]
    shapes: int
    rows: list[dict] = field(default_factory=list)  # {dtype, shape_repr, torch_ms, lib_ms, ...}


def _size(t: tuple) -> str:
    return f"torch.Size([{', '.join(str(x) for x in t)}])"


def _detail(kind: str, shape: tuple, dtype: str) -> tuple[str, str, list]:
    """(printed repr, repr with positions 2 and 3 folded, record JSON object) of a shape detail."""
    if kind == "unary":
        r = f"[{_size(shape)}]"
        return r, r, [list(shape)]
    if kind == "scalar":  # add(x, y, alpha=...) style: tensor, tensor, int, dtype
        return (
            f"[{_size(shape)}, {_size(shape)}, 1, torch.{dtype}]",
            f"[{_size(shape)}, {_size(shape)}]",
            [list(shape), list(shape), 1, f"torch.{dtype}"],
        )
    m, n = shape
    r = f"[{_size((m, n))}, {_size((n, m))}]"
    return r, r, [[m, n], [n, m]]


def make_run(
    root: str | Path,
    *,
    n_ops: int = 1000,
    seed: int = 0,
    dtypes: tuple[str, ...] = ("float16", "float32", "bfloat16"),
    shapes: tuple[int, int] = (5, 12),
    caliber: dict | None = None,
    perturb: Callable[[str, str, int, float], float] | None = None,
    statuses: dict[str, str] | None = None,
    fail_rate: float = 0.03,
    timeout_rate: float = 0.01,
    fatal_rate: float = 0.005,
    with_record: bool = True,
    legend: bool = True,
    op_names: list[str] | None = None,
) -> list[SynthOp]:
    """Write a synthetic run directory; return what each op got.

    ``perturb(op, dtype, shape_index, lib_ms) -> lib_ms`` changes the library's
    latency of chosen cases (for compare tests); ``statuses`` forces op statuses
    (``passed``, ``failed``, ``timeout``, ``device_fatal``, ``crashed``, ``skipped``).
    """
    root = Path(root)
    rng = random.Random(seed)
    cal = dict(DEFAULT_CALIBER)
    cal.update(caliber or {})
    ops_dir = root / "ops"
    ops_dir.mkdir(parents=True, exist_ok=True)
    names = op_names or [f"op{i:04d}" for i in range(n_ops)]
    out: list[SynthOp] = []
    status_lines = ["op,status,attempts,dtype_level,duration_s,backend,device,timer,error,path"]
    for i, name in enumerate(names):
        orng = random.Random(f"{seed}:{name}")  # per-op stream: the same op gets the same cases in every run
        kind = ("unary", "scalar", "mm")[orng.randrange(3)]
        nshape = orng.randint(*shapes)
        base_shapes = (_MM if kind == "mm" else _UNARY)[:nshape]
        status = (statuses or {}).get(name)
        x = rng.random()  # drawn for every op, so forcing one op's status changes no other op
        if status is None:
            status = (
                "failed" if x < fail_rate
                else "timeout" if x < fail_rate + timeout_rate
                else "device_fatal" if x < fail_rate + timeout_rate + fatal_rate
                else "passed"
            )  # fmt: skip
        op = SynthOp(name=name, kind=kind, status=status, dtypes=list(dtypes), shapes=nshape)
        out.append(op)
        d = ops_dir / name
        d.mkdir(parents=True, exist_ok=True)
        device = i % 8
        log: list[str] = [
            f"== opscreen op {name}: backend {cal['backend']}, device {device}, timer {cal['timer']} ==",
            "============================= test session starts ==============================",
            "platform linux -- Python 3.12.3, pytest-8.4.1, pluggy-1.6.0",
            "rootdir: /src/FlagGems",
            "collected 3 items / 2 deselected / 1 selected",
            "",
            f"benchmark/test_{name}.py ",
        ]
        records: list[str] = ["[INFO] Benchmark record logger enabled"]
        stop_at = None
        if status in ("failed", "device_fatal"):
            stop_at = (len(dtypes) - 1, max(0, nshape // 2))
        elif status == "timeout":
            stop_at = (len(dtypes) - 1, 0)
        elif status in ("skipped", "dismissed"):
            stop_at = (0, -1)
        for di, dtype in enumerate(dtypes):
            if stop_at is not None and di > stop_at[0]:
                break
            base_ms = 0.001 * (1 + orng.random() * 3)
            table_rows = []
            rec_rows = []
            pending: list[dict] = []
            stopped = False
            for si, shp in enumerate(base_shapes):
                if stop_at is not None and di == stop_at[0] and si >= stop_at[1]:
                    stopped = True
                    break
                numel = 1
                for x in shp:
                    numel *= x
                torch_ms = base_ms + numel * (2e-9 if dtype != "float32" else 4e-9) * (1 + 0.1 * orng.random())
                speed = math.exp(orng.gauss(0.0, 0.25))
                lib_ms = torch_ms / speed
                if perturb is not None:
                    lib_ms = perturb(name, dtype, si, lib_ms)
                torch_ms = float(f"{torch_ms:.9g}")
                lib_ms = float(f"{lib_ms:.9g}")
                sp = torch_ms / lib_ms
                rsd_b = round(0.0005 + orng.random() * 0.004, 6)
                rsd_l = round(0.0005 + orng.random() * 0.004, 6)
                nb, nl = orng.randint(10, 400), orng.randint(10, 400)
                timer_b = cal["timer"]
                timer_l = cal["timer"] if orng.random() > 0.05 else f"{cal['timer']}-fallback:capture"
                tflops = numel * 1e-9 / lib_ms if kind == "mm" else None
                rep, folded, obj = _detail(kind, shp, dtype)
                if legend and kind == "scalar":
                    rep = folded
                table_rows.append((torch_ms, lib_ms, sp, tflops, timer_b, timer_l, nb, nl, rsd_b, rsd_l, rep))
                rec_rows.append({
                    "legacy_shape": None, "shape_detail": obj, "latency_base": torch_ms, "latency": lib_ms,
                    "gbps_base": None, "gbps": None, "speedup": sp, "accuracy": None, "tflops": tflops,
                    "utilization": None, "compared_speedup": None, "error_msg": None,
                    "timer_base": timer_b, "timer": timer_l, "samples_base": nb, "samples": nl,
                    "rsd_base": rsd_b, "rsd": rsd_l,
                    # the bootstrap interval's half width over the median (the child's ci), a fraction
                    "ci_base": round(rsd_b / 3, 6), "ci": round(rsd_l / 3, 6),
                })  # fmt: skip
                pending.append({"dtype": dtype, "shape_index": si, "torch_ms": torch_ms, "lib_ms": lib_ms, "speedup": sp})
            if stopped:  # FlagGems prints a dtype's table after its last shape: nothing of this one
                break
            op.rows.extend(pending)
            if not table_rows:
                continue
            log.append("")
            log.append(f"Operator: {name}  Performance Test (dtype=torch.{dtype}, mode=kernel,level={cal['level']})")
            fold = legend and kind == "scalar"
            if fold:
                log.append(f"Same in every row: [2]=1, [3]=torch.{dtype}")
            cols = ["Status    ", f"{'Torch Latency (ms)':>20}", f"{'Gems Latency (ms)':>20}", f"{'Gems Speedup':>20}"]
            if kind == "mm":
                cols.append(f"{'TFLOPS':>20}")
            cols += [f"{'Timer':>10}", f"{'Samples':>10}", f"{'Noise(%)':>10}", f"{'Size Detail':>20}"]
            header = " ".join(cols)
            log.append(header)
            log.append("-" * len(header))
            for (t, l, sp, tf, tb, tl, nb, nl, rb, rl, rep) in table_rows:
                timer = tb if tb == tl else f"{tb}|{tl}"
                line = f"{'SUCCESS':<10}{t:>20.6f}{l:>20.6f}{sp:>20.3f}"
                if kind == "mm":
                    line += f"{tf:>20.3f}"
                line += f"{timer:>12}{f'{nb}|{nl}':>11}{f'{rb * 100:.2f}|{rl * 100:.2f}':>12}          {rep}"
                log.append(line)
            log.append("")
            records.append("[INFO] " + json.dumps({"op_name": name, "dtype": f"torch.{dtype}", "mode": "kernel",
                                                   "level": cal["level"], "result": rec_rows,
                                                   "test_case": f"benchmark/test_{name}.py::test_{name}"}))  # fmt: skip
        error = None
        child_rc = 0
        exit_code = 0
        if status == "passed":
            log += [".", "", f"======================= 1 passed, 2 deselected in {20 + orng.random() * 30:.2f}s ======================="]
        elif status == "failed":
            error = f"RuntimeError: {name}: CUDA error: operation not permitted when stream is capturing <&>"
            log += ["F", "=================================== FAILURES ===================================",
                    f"_________________________________ test_{name} _________________________________", "",
                    "    def run(self):", ">       bench.run()", f"E   {error}", "",
                    "benchmark/base.py:481: Failed",
                    "=========================== short test summary info ============================",
                    f"FAILED benchmark/test_{name}.py::test_{name} - {error[:40]}...",
                    "========================= 1 failed, 2 deselected in 12.34s ========================="]  # fmt: skip
            child_rc, exit_code = 1, 1
        elif status == "device_fatal":
            error = "device-side assert: vectorized gather kernel index out of bounds"
            log += [f"OPSCREEN-FATAL: device-side assert: {error}"]
            child_rc, exit_code = 86, 4
        elif status == "timeout":
            log += ["== opscreen: timed out after 1800 s; process group killed =="]
            error = "timed out after 1800 s"
            child_rc, exit_code = -9, 3
        elif status == "crashed":
            log += ["Fatal Python error: Segmentation fault"]
            error = "killed by signal 11"
            child_rc, exit_code = -11, 5
        (d / "run.log").write_text("\n".join(log) + "\n", encoding="utf-8")
        if with_record and len(records) > 1:
            (d / "record.log").write_text("\n".join(records) + "\n", encoding="utf-8")
        node = f"benchmark/test_{name}.py::test_{name}"
        duration = round(15 + orng.random() * 40, 3)
        result = {"schema": 1, "op": name, "status": status, "exit_code": exit_code, "child_returncode": child_rc,
                  "duration_s": duration, "error": error, "node": node, "device": device,
                  "backend": cal["backend"], "timer": cal["timer"], "attempts": 1}  # fmt: skip
        (d / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        ident = {"schema": "opscreen.identity/1", "kind": "op", "caliber": cal, "op": name, "node": node,
                 "device_index": device, "device_name": cal["device_name"], "device_count": 8,
                 "torch_version": "2.11.0+cu130", "triton_version": "3.6.0", "library": "flag_gems",
                 "library_version": "4.1", "suite": {"root": "/src/FlagGems", "name": "FlagGems",
                 "commit": cal["suite_commit"], "dirty": False}, "host": "synth", "child_reported": True}  # fmt: skip
        (d / "run_identity.json").write_text(json.dumps(ident, indent=1) + "\n", encoding="utf-8")
        (d / ".complete").write_text("", encoding="utf-8")
        err_cell = "" if error is None else '"' + error.replace('"', '""') + '"'
        status_lines.append(f"{name},{status},1,,{duration},{cal['backend']},{device},{cal['timer']},{err_cell},ops/{name}")
    (root / "ops_status.csv").write_text("\n".join(status_lines) + "\n", encoding="utf-8")
    run_ident = {"schema": "opscreen.identity/1", "kind": "run", "caliber": cal, "device_name": cal["device_name"],
                 "device_count": 8, "library": "flag_gems", "suite": {"root": "/src/FlagGems", "name": "FlagGems",
                 "commit": cal["suite_commit"], "dirty": False}, "host": "synth", "opscreen_version": "0.1.0",
                 "devices": list(range(8)), "ops": len(names), "timeout": 1800, "retries": 1,
                 "started_at": f"2026-12-{1 + seed % 28:02d}T08:00:00Z"}  # fmt: skip
    (root / "run_identity.json").write_text(json.dumps(run_ident, indent=1) + "\n", encoding="utf-8")
    return out
