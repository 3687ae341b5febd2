"""``opscreen op OP``: run one op of a suite in its own process.

Flags win over the environment knobs of the old per-op shell driver, which keep
working when no flag is given: OP, OP_FILE, TEST_NODE, DTYPES, USE_FLAGTUNE,
USE_FLAGTUNE_COST_MODEL, TRITON_CACHE_AUTOTUNING, SHAPE_MODE, ZL_BACKEND, FLAGGEMS_ROOT and
REPLAY_FROM.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .. import settings as S
from ..backends import cpusets, select
from ..batch.devices import choose_devices
from ..batch.journal import run_dir_holding
from ..errors import OpscreenError, UsageError, check_path, check_writable_dir, read_input
from ..fsio import is_storage_error, write_error
from ..op.lane import LaneRunner, close_parked, worker_bounds
from ..op.preflight import check_interpreter, collect
from ..op.request import OpRequest, StopRequest
from ..op.run import shape_source
from ..providers.flaggems import NodeSpec, Suite, safe_dir_name
from ._common import recorded_backend, warn_suite_budgets

NAME = "op"
HELP = ("run one op of the suite in its own process (exit 0 passed, 1 failed, 2 usage, 3 timeout, 4 device-fatal, "
        "5 crashed, 130 interrupted by SIGINT, SIGTERM or SIGHUP)")
ORDER = 35


def add_arguments(p) -> None:
    S.add_arguments(p, S.OP)


def load_replay(path: str) -> dict:
    from .. import contracts

    what = S.BY_NAME["replay_from"].env
    p = check_path(path, what)
    cfg = p / "child_config.json"
    if not cfg.is_file():
        raise UsageError(f"{what} {p}: no child_config.json there (give the output dir of an earlier 'opscreen op')")
    try:
        return contracts.upgrade(contracts.CHILD_CONFIG, json.loads(read_input(cfg, what)), cfg)["settings"]
    except contracts.NewerVersion as exc:
        raise UsageError(f"{what} {p}: {exc}") from None
    except (ValueError, KeyError, TypeError, contracts.Damaged):
        raise UsageError(f"{what} {p}: child_config.json is unreadable or from another version") from None


def _backend(args, rp: dict):
    """backend: flag, then ZL_BACKEND, then the replayed run's, then auto-detection"""
    if args.backend or S.env_value(S.BY_NAME["backend"], S.OP, os.environ) or not rp:
        return select(args.backend, caps=args.cap).backend
    if args.cap:
        return select(rp["backend"], caps=args.cap).backend.with_vendor(rp.get("vendor"))
    return recorded_backend(rp)


def _target(suite, resolved: S.Resolved, rp: dict):
    op, op_file, test_node = resolved["op"], resolved["op_file"], resolved["test_node"]
    if op or op_file or test_node:
        return suite.resolve(op, op_file, test_node)
    if rp:
        return NodeSpec.from_dict(rp["target"])
    raise UsageError("no op given: pass OP (argument or $OP), --test-node/$TEST_NODE, or --replay-from/$REPLAY_FROM")


def out_dir(args, op: str) -> Path:
    return Path(args.out) if args.out else Path("runs") / "op" / safe_dir_name(op)


def refuse_run_dir(out: Path) -> None:
    """An ``--out`` that is a screen's run dir (or one of its op dirs) is refused: the op's
    files would replace the run's ``run_identity.json`` (or an op's result) and the screen
    could not be resumed."""
    run_dir = run_dir_holding(out)
    if run_dir is None:
        return
    where = "is the run dir" if run_dir == out.expanduser().absolute() else f"lies in the op dirs of the run dir {run_dir}"
    raise UsageError(f"--out {out} {where} of an 'opscreen run'; writing there would break that screen "
                     f"(resume it with: opscreen run --out {run_dir}); choose another --out")


def build_request(args) -> OpRequest:
    """The request ``args`` describe, after every check that can be made before the
    output directory is touched: the arguments, the suite's interpreter, the
    device (enumerated as ``opscreen run`` does), the output directory, and the
    preflight collection (opscreen.op.preflight)."""
    S.check_given_values(args, S.OP)
    given = S.resolve(S.OP, args, os.environ)
    worker_bounds()  # the warm worker's recycle bounds (--repeats with --isolation worker): a bad one is one line
    S.enumeration_timeouts(os.environ)  # the device enumeration's timeouts
    S.checked_cache_root(os.environ)  # the caches' root
    rp = load_replay(given["replay_from"]) if given["replay_from"] else {}
    resolved = given.over(rp)
    backend = _backend(args, rp)
    from_env = S.env_value(S.BY_NAME["suite"], S.OP, os.environ)
    suite = Suite.locate(args.suite or (None if from_env or not rp else rp.get("suite_root")),
                         python=args.python or (rp.get("python") if rp else None))
    check_interpreter(suite.python, suite.root)
    target = _target(suite, resolved, rp)
    shape_source(suite.root, resolved["shape_mode"], S.BY_NAME["shape_mode"].env)
    check_writable_dir(out_dir(args, target.op), "--out")
    refuse_run_dir(out_dir(args, target.op))
    # the device must exist (enumerated as `opscreen run` does) before an earlier result is replaced
    choose_devices(backend, str(resolved["device"]), suite.python, flag="--device")
    req = OpRequest(
        op=target.op, target=target, suite=suite, backend=backend, device=resolved["device"],
        **{n: resolved[n] for n in S.MEASURE},
        color=sys.stdout.isatty() and not os.environ.get("NO_COLOR"),
        provenance=resolved.provenance(),
        cpuset=cpusets.plan(backend, [resolved["device"]], resolved["cpu_pinning"]).get(resolved["device"]),
    )
    # --repeats N in a warm worker: the collection runs in the worker that then runs them
    collect(req, say=lambda line: sys.stderr.write(f"opscreen op: {line}\n"), warm=int(req.repeats or 1) > 1)
    return req


def run(args) -> int:
    req = build_request(args)  # usage errors (an --out that is no directory too) before anything is written
    out = out_dir(args, req.op)
    warn_suite_budgets(req.extra_args, req.planned_timer, "opscreen op")

    quiet = []  # set once stdout is gone (a closed pipe, a hung-up terminal): run.log still gets every line
    stop = StopRequest()
    held = []  # once the user stopped the op: the child's last words (its stacks at the kill) go to run.log only

    def echo(line: str) -> None:
        if quiet:
            return
        if stop.is_set() and not line.startswith(("[opscreen]", "opscreen op:")):
            if held:
                return
            held.append(True)
            line = "opscreen op: the child's output from the stop on (where it was at the kill) goes to run.log only\n"
        try:
            sys.stdout.write(line)
            sys.stdout.flush()
        except (OSError, ValueError):
            quiet.append(True)

    # SIGINT, SIGTERM and SIGHUP stop the op: its group killed, result.json "interrupted", exit 130
    with stop:
        lane = LaneRunner()  # --isolation worker with --repeats: the repeats share one warm worker
        try:
            outcome = lane.run(req, out, stop=stop, echo=echo)
        except OSError as exc:  # a full disk or quota under --out: the child was killed
            if not is_storage_error(exc):
                raise
            raise OpscreenError(write_error(exc, out / "run.log")) from None
        finally:
            lane.close()
            close_parked()
    echo(f"opscreen op: {req.op} {outcome.status}; results in {outcome.out_dir}\n")
    return outcome.exit_code
