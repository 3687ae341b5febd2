"""What one lane runs its ops with (a *lane runner*), and the news that a lane is gone.

A lane (one device) runs one op at a time. Its :class:`LaneRunner` is made once per
lane by a factory (``factory(lane)``) and then runs each op the lane is given::

    runner = factory(lane)
    outcome = runner.run(request, out_dir, stop=stop, echo=None)  # an OpOutcome
    ...
    runner.close()                                                # when the lane ends

:func:`run_op_runner` is the default factory: its runner calls
:func:`opscreen.op.run.run_op` for each op (a fresh child process group every time)
and holds nothing between ops. A runner that keeps a warm worker process between
the ops of its lane plugs in through the same factory; the Ray executor
(:mod:`.ray_executor`) builds one runner per lane on the node that holds the lane's
accelerator.

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


class RunOpRunner:
    """The default lane runner: every op is one :func:`~opscreen.op.run.run_op` call."""

    def __init__(self, lane: int):
        self.lane = lane

    def run(self, request: Any, out_dir: Path, *, stop: threading.Event | None = None, echo=None) -> Any:
        from ..op.run import run_op

        return run_op(request, out_dir, stop=stop, echo=echo)

    def close(self) -> None:
        pass


def run_op_runner(lane: int) -> RunOpRunner:
    """The default :data:`RunnerFactory`."""
    return RunOpRunner(lane)


class LaneLost(RuntimeError):
    """A lane's worker is gone, with the op it ran (``Done.exc``): the lane leaves the run."""
