"""Cambricon MLUs (torch_mlu). Added as one module, like any further backend."""

from __future__ import annotations

from .base import Backend, Capabilities, CliSource, parse_indexed_lines

BACKEND = Backend(
    name="mlu",
    description="Cambricon MLUs through torch_mlu",
    device_type="mlu",
    vendor="cambricon",
    aliases={"cambricon": None},
    visible_env=("MLU_VISIBLE_DEVICES",),
    # torch_mlu has torch.mlu.MLUGraph (torch_mlu/mlu/graphs.py); capture is off until tried on hardware
    capabilities=Capabilities(graph_capture=False, graph_api="torch.mlu.MLUGraph", device_events=True),
    # ``Card 0: MLU370-X8 (UUID: ...)``, one line per card (the layout is assumed: docs/backends.md)
    cli_sources=(CliSource(("cnmon", "-l"),
                           parse_indexed_lines(r"^\s*Card\s*(?P<index>\d+)\s*:\s*(?P<name>.+?)(?:\s*\(UUID\s*:[^)]*\))?\s*$")),),
    torch_modules=("torch_mlu",),
    device_nodes=("/dev/cambricon_dev*",),
)
