"""Moore Threads MUSA (torch_musa)."""

from __future__ import annotations

from .base import Backend, Capabilities, CliSource, parse_indexed_lines

BACKEND = Backend(
    name="musa",
    description="Moore Threads GPUs through MUSA (torch_musa)",
    device_type="musa",
    vendor="mthreads",
    aliases={"mthreads": None, "moore": None, "mt": None},
    visible_env=("MUSA_VISIBLE_DEVICES",),
    capabilities=Capabilities(graph_capture=False, graph_api="torch.musa.MUSAGraph", device_events=True),
    # ``GPU 0 : MTT S4000 (UUID : ...)``: spaces around both colons (docs/backends.md)
    cli_sources=(
        CliSource(("mthreads-gmi", "-L"),
                  parse_indexed_lines(r"^\s*GPU\s*(?P<index>\d+)\s*:\s*(?P<name>.+?)(?:\s*\(UUID\s*:[^)]*\))?\s*$")),
    ),
    torch_modules=("torch_musa",),
    device_nodes=("/dev/mtgpu*", "/dev/musa*"),
)
