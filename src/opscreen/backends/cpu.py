"""The host CPU: device indices are parallel slots (``--devices 0,1`` = two lanes)."""

from __future__ import annotations

from .base import Backend, Capabilities

BACKEND = Backend(
    name="cpu",
    description="The host CPU; device indices are parallel slots",
    device_type="cpu",
    # FlagGems has no CPU vendor; the sample suite and any CPU run see this name.
    vendor="cpu",
    aliases={"host": None},
    visible_env=(),
    capabilities=Capabilities(graph_capture=False, graph_api=None, device_events=False, slots=True),
)
