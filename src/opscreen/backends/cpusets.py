"""CPU sets for the per-op children: each lane on CPUs of its own, near its device.

Two lanes of a batch (two GPUs, or two CPU slots) whose children float over the same
cores compete for them: a host-bound op's latency then depends on what the other
lane runs. With ``--cpu-pinning auto`` (the default) the harness plans, once per
run, a CPU set per lane and starts each child on it (``os.sched_setaffinity`` right
after the spawn, :func:`opscreen.procgroup.popen_group`), with its thread pools
capped to the set's size (:func:`thread_env`):

* an accelerator lane gets CPUs of the NUMA node its device hangs off
  (``/sys/bus/pci/devices/<bus id>/numa_node``; the bus ids from ``nvidia-smi``,
  behind a timeout); lanes on one node split that node's CPUs into disjoint,
  contiguous chunks;
* a lane whose node is unknown (no sysfs entry, no bus id, the CPU backend's
  slots) shares the CPUs no known node claimed, split the same way;
* only CPUs this process may use count (``os.sched_getaffinity``). With fewer CPUs
  than lanes, lanes share (round robin): the sets are then not disjoint.

``off`` leaves the children where the harness runs (and their threads uncapped).
The child records the set it got (``/proc/self/status`` ``Cpus_allowed_list``) in
its identity; the plan is in ``child_config.json`` (``cpuset``). Linux only; on
other systems nothing is pinned.

Pure planning (:func:`plan_sets`) is separate from reading the machine
(:func:`node_cpus`, :func:`pci_numa_node`, :func:`gpu_bus_ids`), which take the
sysfs root as an argument so tests can give them a folder of their own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..procgroup import run_capture

SYSFS = "/sys"
PINNING = ("auto", "off")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SMI_TIMEOUT = 5.0


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (sysfs and /proc syntax)."""
    out: set[int] = set()
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return sorted(out)


def format_cpulist(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``."""
    xs = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class CpuSet:
    """One lane's plan: its CPUs, the NUMA node they were taken from (None: unknown)
    and how they were chosen (``numa``, ``host``: a share of the host's CPUs)."""

    cpus: tuple[int, ...]
    node: int | None = None
    how: str = "host"

    def as_dict(self) -> dict:
        return {"pinning": "auto", "cpus": format_cpulist(self.cpus), "count": len(self.cpus), "numa_node": self.node,
                "how": self.how}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def node_cpus(sysfs: str = SYSFS) -> dict[int, list[int]]:
    """NUMA node -> its CPUs (``<sysfs>/devices/system/node/node<N>/cpulist``)."""
    root = os.path.join(sysfs, "devices", "system", "node")
    out: dict[int, list[int]] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for name in names:
        if name.startswith("node") and name[4:].isdigit():
            text = _read(os.path.join(root, name, "cpulist"))
            if text is not None:
                try:
                    out[int(name[4:])] = parse_cpulist(text)
                except ValueError:
                    continue
    return out


def normalize_bus_id(bus: str) -> str:
    """``00000000:18:00.0`` (nvidia-smi) -> ``0000:18:00.0`` (sysfs), lower case."""
    bus = bus.strip().lower()
    domain, _, rest = bus.partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest and all(c in "0123456789abcdef" for c in domain) else bus


def pci_numa_node(bus: str, sysfs: str = SYSFS) -> int | None:
    """The NUMA node of PCI device ``bus`` (None: unknown, or -1 in sysfs)."""
    text = _read(os.path.join(sysfs, "bus", "pci", "devices", normalize_bus_id(bus), "numa_node"))
    try:
        node = int(text) if text is not None else -1
    except ValueError:
        return None
    return node if node >= 0 else None


def gpu_bus_ids(backend, timeout: float = SMI_TIMEOUT) -> dict[int, str]:
    """Device index -> PCI bus id, from the vendor CLI (CUDA: nvidia-smi); {} elsewhere
    or when it fails or times out. nvidia-smi numbers devices in PCI order, as CUDA
    does with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (and, on a machine of identical GPUs,
    by default)."""
    if getattr(backend, "name", None) != "cuda":
        return {}
    res = run_capture(["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"], timeout=timeout)
    out: dict[int, str] = {}
    if not res.ok:
        return out
    for line in res.stdout.splitlines():
        idx, _, bus = line.partition(",")
        if idx.strip().isdigit() and bus.strip():
            out[int(idx)] = bus.strip()
    return out


def split(pool: Sequence[int], k: int) -> list[tuple[int, ...]]:
    """``k`` chunks of the sorted ``pool``: contiguous, disjoint and near-equal when the
    pool has at least ``k`` CPUs; else round robin (chunks then share CPUs)."""
    xs = sorted(pool)
    if k <= 0 or not xs:
        return [tuple(xs)] * max(k, 0)
    if len(xs) < k:
        return [(xs[i % len(xs)],) for i in range(k)]
    size, extra = divmod(len(xs), k)
    out, at = [], 0
    for i in range(k):
        n = size + (1 if i < extra else 0)
        out.append(tuple(xs[at: at + n]))
        at += n
    return out


def plan_sets(lanes: Sequence[int], available: Iterable[int], lane_node: Mapping[int, int | None],
              nodes: Mapping[int, Sequence[int]]) -> dict[int, CpuSet]:
    """Each lane's CPU set (see the module docstring): lanes of a known node split that
    node's available CPUs; the others split what no known node claimed."""
    avail = sorted(set(available))
    by_node: dict[int | None, list[int]] = {}
    for lane in sorted(set(lanes)):
        node = lane_node.get(lane)
        pool = [c for c in nodes.get(node, ()) if c in set(avail)] if node is not None else []
        by_node.setdefault(node if pool else None, []).append(lane)
    out: dict[int, CpuSet] = {}
    claimed: set[int] = set()
    for node in sorted(n for n in by_node if n is not None):
        pool = [c for c in nodes[node] if c in set(avail)]
        claimed.update(pool)
        for lane, chunk in zip(by_node[node], split(pool, len(by_node[node]))):
            out[lane] = CpuSet(chunk, node, "numa")
    rest = by_node.get(None, [])
    if rest:
        pool = [c for c in avail if c not in claimed] or avail
        for lane, chunk in zip(rest, split(pool, len(rest))):
            out[lane] = CpuSet(chunk, None, "host")
    return out


def available_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return []


def plan(backend, lanes: Sequence[int], pinning: str = "auto", sysfs: str = SYSFS,
         available: Iterable[int] | None = None, bus_ids: Mapping[int, str] | None = None) -> dict[int, CpuSet]:
    """The CPU set of each lane for ``backend`` (``{}`` with ``off`` or where the
    process cannot pin). ``available`` and ``bus_ids`` default to this machine's."""
    if pinning == "off":
        return {}
    avail = list(available) if available is not None else available_cpus()
    if not avail or not hasattr(os, "sched_setaffinity"):
        return {}
    slots = bool(getattr(getattr(backend, "capabilities", None), "slots", False))
    nodes = node_cpus(sysfs) if not slots else {}
    lane_node: dict[int, int | None] = {}
    if nodes and not slots:
        buses = gpu_bus_ids(backend) if bus_ids is None else bus_ids
        lane_node = {lane: pci_numa_node(buses[lane], sysfs) if lane in buses else None for lane in lanes}
    return plan_sets(lanes, avail, lane_node, nodes)


def thread_env(cpus: Sequence[int] | None, environ: Mapping[str, str]) -> dict[str, str]:
    """Thread-pool caps for a child pinned to ``cpus``: each of :data:`THREAD_VARS` the
    environment does not set gets ``OMP_NUM_THREADS`` (when set) or the set's size."""
    if not cpus:
        return {}
    n = environ.get("OMP_NUM_THREADS") or str(len(cpus))
    return {k: n for k in THREAD_VARS if not environ.get(k)}

