"""AMD ROCm and Hygon DCU (the same HIP runtime; the alias picks the vendor)."""

from __future__ import annotations

import re

from .base import Backend, Capabilities, CliSource


def parse_rocm_smi(text: str) -> list[tuple[int, str]]:
    """``rocm-smi --showproductname`` / ``hy-smi --showproductname`` output."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:GPU|HCU|DCU)\[(\d+)\]\s*:\s*(?:Card (?:series|SKU|model)|Card Series|Device Name)\s*:\s*(.+?)\s*$", line)
        if m and int(m.group(1)) not in found:
            found[int(m.group(1))] = m.group(2)
    return sorted(found.items())


def parse_amd_smi_list(text: str) -> list[tuple[int, str]]:
    """``amd-smi list``: blocks starting with ``GPU: N``."""
    return [(int(m.group(1)), "AMD GPU") for m in re.finditer(r"^\s*GPU:\s*(\d+)\s*$", text, re.M)]


BACKEND = Backend(
    name="rocm",
    description="AMD and Hygon GPUs through ROCm/HIP (DTK on Hygon)",
    device_type="cuda",  # ROCm builds of torch expose HIP devices as 'cuda'
    vendor="amd",
    aliases={"amd": "amd", "hip": None, "hygon": "hygon", "dcu": "hygon"},
    # HIP_VISIBLE_DEVICES, not ROCR_VISIBLE_DEVICES: README ("Visible devices") says why.
    visible_env=("HIP_VISIBLE_DEVICES",),
    capabilities=Capabilities(graph_capture=False, graph_api="torch.cuda.CUDAGraph", device_events=True,
                              device_profiler=True),
    cli_sources=(
        CliSource(("rocm-smi", "--showproductname"), parse_rocm_smi),
        CliSource(("amd-smi", "list"), parse_amd_smi_list),
        CliSource(("hy-smi", "--showproductname"), parse_rocm_smi),
    ),
    device_nodes=("/dev/kfd",),
    torch_hip=True,
)
