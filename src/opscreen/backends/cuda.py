"""NVIDIA CUDA."""

from __future__ import annotations

from .base import Backend, Capabilities, CliSource, parse_indexed_lines

BACKEND = Backend(
    name="cuda",
    description="NVIDIA GPUs through CUDA",
    device_type="cuda",
    vendor="nvidia",
    aliases={"nvidia": None},
    visible_env=("CUDA_VISIBLE_DEVICES",),
    capabilities=Capabilities(
        graph_capture=True,
        graph_api="torch.cuda.CUDAGraph",
        device_events=True,
        l2_flush=True,
        cuda_workarounds=True,
        device_profiler=True,
    ),
    cli_sources=(
        CliSource(("nvidia-smi", "-L"), parse_indexed_lines(r"^GPU (?P<index>\d+): (?P<name>.+?)(?: \(UUID: [^)]*\))?\s*$")),
    ),
    device_nodes=("/dev/nvidia[0-9]*",),
    torch_hip=False,
)
