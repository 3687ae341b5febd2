"""What moves a CUDA process's small-kernel graph replays from one device state to
another (issue 16; findings and figures: bench/results/2026-12-01-h200-settle.md).

A warm worker's canary (opscreen.child.worker.canary_us: device time per kernel of a
graph of 200 one-element additions) and its later ops read small kernels about 0.18 us
slower than a fresh process. The modes, each in fresh processes:

    python3 bench/device/canary_probe.py [--only a,b] [--chain]  # suspects: canary before/after each
    python3 bench/device/canary_probe.py --states    # one process: canary, canary behind a lead, graph timer
    python3 bench/device/canary_probe.py --wake      # idle, busy, copies: which moves the graph timer
    python3 bench/device/canary_probe.py --flip K    # launches of kind K (inplace, events, replays) until it moves
    python3 bench/device/canary_probe.py --mech      # which stream's launches, in which order
    python3 bench/device/canary_probe.py --check     # opscreen's own path (settled): canary and timer, stable?

``--json PATH`` keeps the figures. Needs a CUDA device (PYTHONPATH with src/); FlagGems
only for the ``flaggems`` and ``import_flaggems`` scenarios.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

LIMITS = {"stack": 0, "printf_fifo": 1, "malloc_heap": 2}


def limits() -> dict:
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    out = {}
    for name, code in LIMITS.items():
        v = ctypes.c_size_t()
        rc = cu.cuCtxGetLimit(ctypes.byref(v), code)
        out[name] = v.value if rc == 0 else f"rc{rc}"
    return out


def set_stack(nbytes: int) -> int:
    cu = ctypes.CDLL("libcuda.so.1")
    return int(cu.cuCtxSetLimit(LIMITS["stack"], ctypes.c_size_t(nbytes)))


def canary(torch, n=3) -> float:
    from opscreen.child.worker import canary_us

    vals = [canary_us("cuda", torch) for _ in range(n)]
    return round(statistics.median(v for v in vals if v is not None), 4)


def canary_default_stream(torch) -> float:
    """The same graph on a fresh stream each time (not the kept one), host included."""
    from opscreen.child.worker import graph_kernel_us

    return graph_kernel_us(torch, torch.cuda.Stream(), lead="none")


# ---------------------------------------------------------------- the suspects
def s_control(torch):
    time.sleep(2)


def s_alloc4g(torch):
    x = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    del x
    torch.cuda.empty_cache()


def s_randn_big(torch):
    x = torch.randn(1024**3, dtype=torch.float16, device="cuda")
    y = torch.erfc(x)
    torch.cuda.synchronize()
    del x, y
    torch.cuda.empty_cache()


def _graphs(torch, keep: bool):
    kept = []
    s = torch.cuda.Stream()
    a = torch.randn(64, 64, device="cuda")
    with torch.cuda.stream(s):
        a.add_(1)
    s.synchronize()
    for _ in range(30):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(256):
                a.mul_(1.0)
        with torch.cuda.stream(s):
            for _ in range(5):
                g.replay()
        s.synchronize()
        if keep:
            kept.append(g)
        else:
            g.reset()
    torch.cuda.synchronize()
    if not keep:
        torch.cuda.empty_cache()
    return kept


def s_graphs_kept(torch):
    globals()["_KEPT"] = _graphs(torch, True)


def s_graphs_dropped(torch):
    _graphs(torch, False)


def s_streams(torch):
    x = torch.zeros(1, device="cuda")
    for _ in range(40):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x.add_(1)
    torch.cuda.synchronize()


def s_triton(torch):
    import triton
    import triton.language as tl

    @triton.jit
    def k(X, N, C: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < N
        tl.store(X + i, tl.load(X + i, mask=m) * 1.0001 + C, mask=m)

    x = torch.randn(1 << 20, device="cuda")
    for c in range(12):
        k[(x.numel() // 1024,)](x, x.numel(), c, BLOCK=1024)
    torch.cuda.synchronize()


def s_triton_libdevice(torch):
    import triton
    import triton.language as tl

    try:
        from triton.language.extra import libdevice
    except ImportError:
        from triton.language.extra.cuda import libdevice

    @triton.jit
    def k(X, Y, N, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < N
        v = tl.load(X + i, mask=m)
        tl.store(Y + i, libdevice.erfc(v) + libdevice.expm1(v) + libdevice.pow(v, 1.7), mask=m)

    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    k[(x.numel() // 1024,)](x, y, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()


def s_profiler(torch):
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        for _ in range(10):
            x.add_(1)
        torch.cuda.synchronize()


def s_sort(torch):
    x = torch.randn(10**8, device="cuda")
    torch.sort(x)
    torch.cuda.synchronize()
    del x
    torch.cuda.empty_cache()


def s_matmul(torch):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    (a @ a).sum().item()


def s_import_flaggems(torch):
    import flag_gems  # noqa: F401


def s_flaggems(torch):
    import flag_gems

    x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    with flag_gems.use_gems():
        for fn in (torch.erfc, torch.expm1, lambda t: torch.ge(t, t), torch.erf):
            with torch.cuda.stream(s):
                fn(x)
            s.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for _ in range(32):
                    fn(x)
            with torch.cuda.stream(s):
                for _ in range(20):
                    g.replay()
            s.synchronize()
            g.reset()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def canary_lead(torch) -> float:
    """The canary on the process's side stream, the device kept busy while the host
    submits each timed replay: device time only, whatever the host's state."""
    from opscreen.child import persist
    from opscreen.child.worker import graph_kernel_us

    return graph_kernel_us(torch, persist.side_stream("cuda", torch.cuda.current_device(), torch.cuda.Stream),
                           lead="sleep")


def timer_us(torch, fn) -> float:
    """The graph timer itself (opscreen.child.graph, default settings) on ``fn``."""
    from opscreen.child.graph import TorchGraphAPI, measure_graph
    from opscreen.child.timing import Settings

    api = TorchGraphAPI("torch.cuda.CUDAGraph", device_type="cuda", capture_error_mode="thread_local",
                        device_index=torch.cuda.current_device())
    res = measure_graph(fn, Settings().normalized(), api, lambda: None)
    return round(res.stats.median * 1e3, 4)


def states() -> list:
    """One process through states a worker passes through; every reader after each."""
    import torch

    a = torch.randn(64, 64, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    read = lambda: {"canary": canary(torch), "canary_lead": canary_lead(torch),  # noqa: E731
                    "add64_us": timer_us(torch, lambda: a.add(1)), "erf64_us": timer_us(torch, lambda: torch.erf(a)),
                    "add4096_us": timer_us(torch, lambda: b.add(1))}
    steps = [("start", lambda: None), ("sleep 2 s", lambda: time.sleep(2)),
             ("cpu spin 1 s", spin),
             ("gpu burst (matmul 1 s)", lambda: s_matmul_burst(torch)), ("alloc4g", lambda: s_alloc4g(torch)),
             ("sleep 2 s", lambda: time.sleep(2)), ("profiler", lambda: s_profiler(torch)),
             ("sleep 2 s", lambda: time.sleep(2))]
    rows = []
    for name, fn in steps:
        fn()
        rows.append({"step": name, **read()})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def smi_pcie() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=pcie.link.gen.current,pcie.link.width.current,clocks.sm,pstate",
                               "--format=csv,noheader", "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        return str(exc)


def wake(plan: str) -> list:
    """A fresh process through ``plan``'s steps; the graph timer on add 64x64 after each."""
    import torch

    a = torch.randn(64, 64, device="cuda")
    host = torch.empty(256 * 2**20, dtype=torch.uint8).pin_memory()
    dev = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    t0 = time.time()

    def busy_small(seconds):
        end = time.time() + seconds
        while time.time() < end:
            for _ in range(100):
                a.add(1)
            torch.cuda.synchronize()

    def copies(seconds, h2d=True):
        end = time.time() + seconds
        while time.time() < end:
            (dev.copy_(host, non_blocking=True) if h2d else host.copy_(dev, non_blocking=True))
            torch.cuda.synchronize()

    def items(n):
        for _ in range(n):
            a[0, 0].item()

    acts = {"start": lambda: None, "sleep0.25": lambda: time.sleep(0.25), "sleep0.5": lambda: time.sleep(0.5),
            "sleep1": lambda: time.sleep(1), "sleep2": lambda: time.sleep(2), "busy5": lambda: busy_small(5),
            "h2d1": lambda: copies(1), "d2h1": lambda: copies(1, False), "h2d_once": lambda: copies(0),
            "items1000": lambda: items(1000), "burst": lambda: s_matmul_burst(torch)}
    rows = []
    for step in plan.split(","):
        acts[step]()
        rows.append({"step": step, "t_s": round(time.time() - t0, 2), "add64_us": timer_us(torch, lambda: a.add(1)),
                     "canary_lead": canary_lead(torch), "smi": smi_pcie()})
    return rows


def flip(kind: str, chunk: int = 1000, limit: int = 200_000) -> dict:
    """Launches of ``kind`` in chunks until the per-kernel device time of a graph
    (canary_lead) moves from its fresh level to the aged one; how many it took."""
    import torch

    a = torch.zeros(64, 64, device="cuda")
    g = None
    if kind == "replays":
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            a.add_(1)
        s.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            a.add_(1)
    ev = torch.cuda.Event()
    fresh = canary_lead(torch)
    n, t0, trail = 0, time.time(), []
    while n < limit:
        for _ in range(chunk):
            if kind == "inplace":
                a.add_(1)
            elif kind == "outofplace":
                a.add(1)
            elif kind == "events":
                ev.record()
            elif kind == "replays":
                g.replay()
        torch.cuda.synchronize()
        n += chunk
        now = canary_lead(torch)
        trail.append((n, now))
        if now > fresh * 1.08:
            return {"kind": kind, "fresh_us": fresh, "aged_us": now, "launches": n, "s": round(time.time() - t0, 2)}
    return {"kind": kind, "fresh_us": fresh, "aged_us": None, "launches": None, "s": round(time.time() - t0, 2),
            "last": trail[-1]}


def mech(plan: str) -> list:
    """Which launches move a process from the fresh state to the aged one: ``plan`` is
    a list of steps; after each, the graph timer on add and erf 64x64 and canary_lead."""
    import torch

    from opscreen.child import persist

    a = torch.randn(64, 64, device="cuda")
    side = persist.side_stream("cuda", torch.cuda.current_device(), torch.cuda.Stream)
    key = ("cuda", torch.cuda.current_device())
    persist._SETTLED.add(key)  # the graph timer settles nothing by itself here: the plan's "settle" step does

    def settle():
        persist._SETTLED.discard(key)
        persist.settle(torch, *key)

    def default(n):
        for _ in range(n):
            a.add_(0)
        torch.cuda.synchronize()

    def on_side(n):
        with torch.cuda.stream(side):
            default(n)

    def inputs(n):  # what a suite does between cases: new tensors on the current stream
        for _ in range(n):
            torch.randn(64, 64, device="cuda")
        torch.cuda.synchronize()

    acts = {"start": lambda: None, "settle": settle,
            "setstream": lambda: torch.cuda.set_stream(side), "d10": lambda: default(10), "d100": lambda: default(100),
            "d1000": lambda: default(1000), "d4000": lambda: default(4000), "s4000": lambda: on_side(4000),
            "in100": lambda: inputs(100), "sleep1": lambda: time.sleep(1)}
    rows = []
    for step in plan.split(","):
        acts[step]()
        rows.append({"step": step, "add64_us": timer_us(torch, lambda: a.add(1)),
                     "erf64_us": timer_us(torch, lambda: torch.erf(a)), "canary_lead": canary_lead(torch)})
    return rows


MECH_PLANS = ["start,d10,d100,d1000",                    # side stream used first, then default launches
              "settle,start,d10,d100,d1000",             # settled before the side stream is made
              "setstream,start,d1000,d4000,in100,sleep1",  # everything on the side stream
              "start,s4000,in100,d100",
              "settle,start,d1000", "settle,start,d1000", "setstream,start,d4000", "setstream,start,d4000"]


WAKE_PLANS = ["start,sleep0.25,sleep0.25,sleep0.5,sleep1,sleep2",
              "start,busy5,sleep2",
              "start,sleep2,h2d_once,h2d1,d2h1,items1000,busy5,burst,sleep0.25"]


def spin(seconds: float = 1.0) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def s_matmul_burst(torch):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t = time.time()
    while time.time() - t < 1.0:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


SCENARIOS = {n[2:]: f for n, f in list(globals().items()) if n.startswith("s_") and n != "s_matmul_burst"}


def one(name: str) -> dict:
    import torch

    torch.zeros(1, device="cuda")
    before, lim0 = canary(torch), limits()
    fresh0 = canary_default_stream(torch)
    t = time.time()
    try:
        SCENARIOS[name](torch)
        err = None
    except Exception as exc:  # noqa: BLE001
        err = f"{type(exc).__name__}: {exc}"[:200]
    took = time.time() - t
    after, lim1 = canary(torch), limits()
    fresh1 = canary_default_stream(torch)
    out = {"scenario": name, "before_us": before, "after_us": after, "rise_pct": round(100 * (after / before - 1), 2),
           "fresh_stream_before_us": fresh0, "fresh_stream_after_us": fresh1,
           "limits_before": lim0, "limits_after": lim1, "took_s": round(took, 2), "error": err}
    if lim1.get("stack") != lim0.get("stack") and isinstance(lim0.get("stack"), int):
        rc = set_stack(lim0["stack"])
        out["after_stack_reset_us"] = canary(torch)
        out["stack_reset_rc"] = rc
        out["limits_after_reset"] = limits()
    return out


def chain(names: list) -> list:
    import torch

    torch.zeros(1, device="cuda")
    lim0 = limits()
    rows = [{"step": "start", "canary_us": canary(torch), "limits": lim0}]
    for name in names:
        try:
            SCENARIOS[name](torch)
        except Exception as exc:  # noqa: BLE001
            rows.append({"step": name, "error": str(exc)[:200]})
            continue
        rows.append({"step": name, "canary_us": canary(torch), "limits": limits()})
    if isinstance(lim0.get("stack"), int):
        rc = set_stack(lim0["stack"])
        rows.append({"step": f"remedy: stack limit back to {lim0['stack']} (rc {rc})", "canary_us": canary(torch),
                     "limits": limits()})
    globals().pop("_KEPT", None)
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    rows.append({"step": "remedy: kept graphs dropped", "canary_us": canary(torch), "limits": limits()})
    return rows


def in_fresh(mode: str, arg: str):
    """``mode``'s child (``--child-<mode> arg``) in a fresh process: its JSON, or None."""
    p = subprocess.run([sys.executable, __file__, f"--child-{mode}", arg], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(f"{mode} {arg}: failed:", (p.stderr or p.stdout)[-600:], flush=True)
        return None


def plans(mode: str, plan_list: list, line) -> list:
    """Each plan in a fresh process; its steps printed with ``line(row)``."""
    out = []
    for plan in plan_list:
        rows = in_fresh(mode, plan)
        if rows is None:
            continue
        out.append({"plan": plan, "rows": rows})
        print("== plan", plan, flush=True)
        for r in rows:
            print(line(r), flush=True)
    return out


def dump(path: str, data) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(data, f, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    for flag in ("--chain", "--states", "--wake", "--mech", "--check"):
        ap.add_argument(flag, action="store_true")
    for flag in ("--only", "--json", "--flip", "--child-one", "--child-chain", "--child-wake", "--child-mech",
                 "--child-flip"):
        ap.add_argument(flag, default="")
    a = ap.parse_args()
    if a.check:  # opscreen's own path, fresh process: canary, graph timer, then a suite's default-stream work
        import torch

        from opscreen.child.worker import canary_us

        x = torch.randn(64, 64, device="cuda")
        rows = [("canary at start", canary_us("cuda", torch)),
                ("timer add 64x64", timer_us(torch, lambda: x.add(1))),
                ("timer erf 64x64", timer_us(torch, lambda: torch.erf(x)))]
        for _ in range(100):
            torch.randn(64, 64, device="cuda").add_(1)
        torch.cuda.synchronize()
        rows += [("after 100 inputs: canary", canary_us("cuda", torch)),
                 ("timer add 64x64", timer_us(torch, lambda: x.add(1))),
                 ("timer erf 64x64", timer_us(torch, lambda: torch.erf(x)))]
        for name, v in rows:
            print(f"check {name:28s} {v} us", flush=True)
        return
    if a.states:
        rows = states()
        for r in rows:
            print(f"{r['step']:24s} canary {r['canary']:.4f}  canary_lead {r['canary_lead']:.4f}  timer: add 64x64 "
                  f"{r['add64_us']:.4f} us, erf 64x64 {r['erf64_us']:.4f} us, add 4096^2 {r['add4096_us']:.3f} us")
        dump(a.json, rows)
        return
    children = {"one": one, "chain": lambda arg: chain(arg.split(",")), "mech": mech, "flip": flip, "wake": wake}
    for name, fn in children.items():
        arg = getattr(a, f"child_{name}")
        if arg:
            print(json.dumps(fn(arg)))
            return
    if a.mech:
        dump(a.json, plans("mech", MECH_PLANS, lambda r: f"  {r['step']:10s} add 64x64 {r['add64_us']:.4f} us  "
                           f"erf 64x64 {r['erf64_us']:.4f} us  canary_lead {r['canary_lead']:.4f}"))
        return
    if a.wake:
        dump(a.json, plans("wake", WAKE_PLANS, lambda r: f"  {r['step']:10s} t={r['t_s']:6.2f}s  add 64x64 "
                           f"{r['add64_us']:.4f} us  canary_lead {r['canary_lead']:.4f}  smi {r['smi']}"))
        return
    if a.flip:
        out = [in_fresh("flip", kind) or {"kind": kind, "error": "no result"} for kind in a.flip.split(",")]
        for r in out:
            print(json.dumps(r), flush=True)
        dump(a.json, out)
        return
    names = a.only.split(",") if a.only else list(SCENARIOS)
    results = {"scenarios": [], "chain": None}
    for n in names:
        r = in_fresh("one", n) or {"scenario": n, "error": "no result"}
        results["scenarios"].append(r)
        print(f"{n:16s} before {r.get('before_us')} after {r.get('after_us')} us ({r.get('rise_pct')} %)  "
              f"fresh stream {r.get('fresh_stream_before_us')} -> {r.get('fresh_stream_after_us')}  "
              f"stack {r.get('limits_before', {}).get('stack')} -> {r.get('limits_after', {}).get('stack')}"
              + (f"  stack reset -> {r['after_stack_reset_us']} us" if "after_stack_reset_us" in r else "")
              + (f"  ERROR {r['error']}" if r.get("error") else ""), flush=True)
    if a.chain:
        results["chain"] = in_fresh("chain", ",".join(n for n in names if n != "control"))
        for r in results["chain"] or []:
            print(f"chain {r['step']:40s} {r.get('canary_us')} us  stack {r.get('limits', {}).get('stack')}"
                  + (f"  ERROR {r['error']}" if r.get("error") else ""))
    dump(a.json, results)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
