"""How ops are measured: the settings one op (``runner.OpRequest``) and a batch
(``batch.runner.BatchConfig``) share, declared once. Standard library only."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields

from .errors import UsageError


def check_timeout(value: float | None) -> float | None:
    """``--timeout``: a finite number of seconds > 0 (None: no limit), else a one-line UsageError."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"--timeout {value}: give a positive number of seconds")
    return value


def check_grace(value: float) -> float:
    """``--grace``: a finite number of seconds >= 0, else a one-line UsageError."""
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"--grace {value}: give a number of seconds >= 0")
    return value


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
