"""Huawei Ascend NPUs (torch_npu)."""

from __future__ import annotations

import re

from .base import Backend, Capabilities, CliSource


def parse_npu_smi_info(text: str) -> list[tuple[int, str]]:
    """``npu-smi info``: the first row of each NPU block reads ``| 0  910B3  | OK ...``."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*(\d+)\s+([A-Za-z0-9][\w.-]*)\s*\|\s*(OK|Warning|Alarm|Critical|\w+)\s*\|", line)
        if m and int(m.group(1)) not in found:
            found[int(m.group(1))] = f"Ascend {m.group(2)}"
    return sorted(found.items())


BACKEND = Backend(
    name="ascend",
    description="Huawei Ascend NPUs through CANN (torch_npu)",
    device_type="npu",
    vendor="ascend",
    aliases={"npu": None, "huawei": None},
    visible_env=("ASCEND_RT_VISIBLE_DEVICES",),
    capabilities=Capabilities(graph_capture=False, graph_api="torch_npu.npu.NPUGraph", device_events=True),
    cli_sources=(CliSource(("npu-smi", "info"), parse_npu_smi_info),),
    torch_modules=("torch_npu",),
    device_nodes=("/dev/davinci[0-9]*",),
)
