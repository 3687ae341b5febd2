"""What a batch run needs, resolved: :class:`BatchConfig` (immutable, validated once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import settings as S
from ..op.request import Measurement, validated


@dataclass(frozen=True, kw_only=True)
class BatchConfig(Measurement):
    """Everything a batch run needs, resolved (no defaults left to guess).

    ``ops``: the ops to run, after ``--shard`` and the dismiss list, in order;
    ``targets``: op -> NodeSpec; ``op_dtypes``: op -> its own dtype names (level 2).
    """

    suite: Any  # opscreen.providers.flaggems.Suite
    backend: Any  # opscreen.backends.Backend
    devices: list[int]
    ops: list[str]
    targets: Mapping[str, Any]
    dismissed: Mapping[str, str] = field(default_factory=dict)
    op_dtypes: Mapping[str, list[str]] = field(default_factory=dict)
    retries: int = S.default("retries")
    steal: bool = S.default("steal")
    placement_shift: int = S.default("placement_shift")
    fatal_threshold: int = S.default("fatal_threshold")
    shard: tuple[int, int] | None = None
    executor: str = S.default("executor")  # local, or ray: every node of a Ray cluster (ray_executor.py)
    address: str | None = None  # the Ray cluster (executor ray)
    ray_env: list[str] = field(default_factory=list)  # more variables sent to the nodes (executor ray)
    ops_source: str = "suite"
    replay_of: str | None = None
    rerun: list[str] = field(default_factory=list)  # complete ops to run again (replay in place)
    all_ops: list[str] | None = None  # the run's whole op list when this session runs a part (replay in place)
    argv: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        validated(self, S.RUN)

    def settings(self) -> dict:
        """What a resume or ``--replay-from`` needs to run the same way (JSON)."""
        return {
            "backend": self.backend.name,
            "vendor": self.backend.vendor,
            "capabilities": self.backend.capabilities.as_dict(),
            "suite_root": str(self.suite.root),
            "python": self.suite.python,
            "devices": list(self.devices),
            **S.record(S.RUN, self),
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "ops_source": self.ops_source,
            "ops": list(self.all_ops if self.all_ops is not None else self.ops),
            "dismissed": dict(self.dismissed),
            **({"provenance": dict(self.provenance)} if self.provenance else {}),
        }
