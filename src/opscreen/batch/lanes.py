"""What one lane runs its ops with (a *lane runner*), and the news that a lane is gone.

A lane (one device) runs one op at a time. Its :class:`LaneRunner` is made once per
lane by a factory (``factory(lane)``) and then runs each op the lane is given::

    runner = factory(lane)
    outcome = runner.run(request, out_dir, stop=stop, echo=None)  # an OpOutcome
    ...
    runner.close()                                                # when the lane ends

:func:`run_op_runner` is the default factory: its runner (:mod:`opscreen.op.lane`)
runs each op in a fresh child process group (``--isolation op``) or in the lane's warm
worker (``--isolation worker``), which it keeps between ops. The local executor
(:mod:`.executor`) runs one per lane thread; the Ray executor (:mod:`.ray_executor`)
builds one per lane on the node that holds the lane's accelerator.

:class:`LaneLost` is what an executor hands back (as ``Done.exc``) when a lane's
worker is gone with the op it ran (its node died, its process was killed): the
session takes the lane out of the run and runs the op again on another lane; the
lost attempt is not recorded (:meth:`opscreen.batch.session.BatchRunner._lane_lost`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Protocol


class LaneRunner(Protocol):
    def run(self, request: Any, out_dir: Path, *, stop: threading.Event | None = None, echo=None) -> Any: ...

    def close(self) -> None: ...


RunnerFactory = Callable[[int], LaneRunner]


def run_op_runner(lane: int) -> LaneRunner:
    """The default :data:`RunnerFactory`: :class:`opscreen.op.lane.LaneRunner`, which runs
    each op as its request asks (``request.isolation``: a fresh process per op, or the
    lane's warm worker). A runner made this way shares nothing with other lanes' (the
    local executor's :func:`opscreen.op.lane.lane_factory` shares which ops run fresh only)."""
    from ..op.lane import LaneRunner as OpLaneRunner

    return OpLaneRunner()


class LaneLost(RuntimeError):
    """A lane's worker is gone, with the op it ran (``Done.exc``): the lane leaves the run."""
