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
    capabilities=Capabilities(graph_capture=False, graph_api=None, device_events=True),
    cli_sources=(CliSource(("cnmon", "-l"), parse_indexed_lines(r"^\s*Card\s*(?P<index>\d+)\s*:\s*(?P<name>.+?)\s*$")),),
    torch_modules=("torch_mlu",),
    device_nodes=("/dev/cambricon_dev*",),
)
