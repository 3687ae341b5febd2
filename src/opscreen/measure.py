"""How ops are measured: the settings one op (``runner.OpRequest``) and a batch
(``batch.runner.BatchConfig``) share, declared once. Standard library only."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields


@dataclass(kw_only=True)
class MeasureSettings:
    timer: str = "auto"
    dtypes: list[str] | None = None
    shape_mode: str = "upstream"
    level: str = "core"
    use_flagtune: str = "0"
    use_flagtune_cost_model: str = "0"
    timeout: float | None = 1800.0
    grace: float = 10.0
    extra_args: list[str] = field(default_factory=list)
    repeats: int = 1  # processes per op; >1 merges their medians (repeats.py)

    def measure_settings(self) -> dict:
        """These settings as a dict of copies (JSON-ready: strings, numbers, lists)."""
        return {f.name: copy.copy(getattr(self, f.name)) for f in fields(MeasureSettings)}
