"""``opscreen run``: screen every chosen op of a suite across the devices of this machine.

One child process per op attempt, one op at a time per device, ops placed by a
stable hash of their name (idle devices steal), failures retried in fresh
processes until they prove deterministic, dtype failures retried with the op's
own dtypes and then one dtype at a time. The run directory is a journal: run the
same command again (or with ``--resume``) after a kill and only the ops without a
``.complete`` marker run. See docs/batch.md.

Exit status (of the whole run dir): 0 every op passed (or was skipped/dismissed), 1 some op did not pass,
2 usage error, 3 ops left unrun (every device went bad), 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .. import settings as S
from ..errors import UsageError, check_out_file, check_writable_dir, os_error
from ..providers.changes import NothingSelected
from ._common import recorded_backend, warn_suite_budgets

NAME = "run"
HELP = "screen many ops (default: all) across devices; resumable run directory"
DESCRIPTION = (
    "Screen every chosen op of a suite across the devices of this machine: one child process per "
    "op attempt, one op at a time per device, placed by a stable hash of the op name (idle devices "
    "steal). The run directory is a journal: run the same command again after a kill and only the "
    "ops without a .complete marker run. Exit status: 0 every op passed, 1 some op did not pass, "
    "2 usage error, 3 ops left unrun (no healthy device), 130 interrupted. See docs/batch.md."
)
ORDER = 34


def add_arguments(p) -> None:
    S.add_arguments(p, S.RUN)


def _out_dir(flag: str | None) -> Path:
    if flag:
        return Path(flag).expanduser().absolute()
    return (Path("runs") / f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}").absolute()


def _backend(args, base: dict):
    """``--backend`` (with ``--cap``), else the recorded run's (``--cap`` on top), else auto-detected."""
    from ..backends import parse_cap_overrides, select

    if args.backend or not base.get("backend"):
        return select(args.backend, caps=args.cap).backend
    backend = recorded_backend(base)
    over: dict = {}
    for spec in args.cap or []:
        over.update(parse_cap_overrides(spec, origin="--cap"))
    return backend.with_capabilities(**over) if over else backend


def build_config(args, out: Path, journal, replay_dir: Path | None, replay_ident: dict | None, given: S.Resolved):
    """The BatchConfig ``args`` describe, after every check that can be made before the run dir is written."""
    from ..backends import select
    from ..batch.config import BatchConfig
    from ..batch.devices import choose_devices, recorded_devices
    from ..batch.oplist import choose_ops, load_dismissed, op_dtype_lists, resolve_targets
    from ..batch.resume import open_run_dir, refuse_clashes, refuse_moved_suite, refuse_other_timing
    from ..batch.scheduling import parse_shard, shard_ops
    from ..op.plan import planned_timer
    from ..op.preflight import check_interpreter
    from ..op.run import shape_source
    from ..providers.flaggems import Suite

    shard = parse_shard(args.shard)
    in_place_replay = replay_dir is not None and replay_dir.resolve() == journal.root  # one dir, however named
    existing, resuming = open_run_dir(out, journal, args.resume, in_place_replay)
    recorded = (existing or {}).get("settings") or {} if existing else {}
    base = recorded or ((replay_ident or {}).get("settings") or {})
    resolved = given.over(base)
    if resuming:  # caliber settings given explicitly must match the run being resumed
        refuse_clashes(out, resolved, recorded, select(args.backend, caps=args.cap).backend if args.backend else None,
                       args.suite)
    backend = _backend(args, base)
    planned = planned_timer(backend, resolved["timer"])  # usage errors before anything is written
    if resuming:
        refuse_other_timing(out, (existing or {}).get("caliber") or {}, backend, planned)
    suite = Suite.locate(args.suite or base.get("suite_root"), python=args.python or base.get("python"))
    check_interpreter(suite.python, suite.root)
    if resuming:
        refuse_moved_suite(out, existing, suite)
    ops, source = choose_ops(args, suite, replay_dir, resuming, recorded)
    targets = resolve_targets(suite, ops)
    if shard is not None:
        ops = shard_ops(ops, shard)
    dismissed = load_dismissed(args.dismiss, list(suite.ops()))
    dismissed = {op: why for op, why in dismissed.items() if op in targets and op in ops}
    run_ops = [op for op in ops if op not in dismissed]
    shape_source(suite.root, resolved["shape_mode"])
    executor = None
    if resolved["executor"] == "ray":  # the lanes of a Ray cluster; a resume takes the cluster as it is now
        executor, devices = _ray_lanes(backend, resolved, args.devices, suite.python)
    else:
        _refuse_ray_options(resolved)
        spec = args.devices if args.devices is not None else recorded_devices(base, resuming)
        devices = choose_devices(backend, spec, suite.python)
    cfg = BatchConfig(
        suite=suite, backend=backend, devices=devices, ops=run_ops, targets=targets, dismissed=dismissed,
        op_dtypes=op_dtype_lists(suite), **{n: resolved[n] for n in S.MEASURE},
        retries=resolved["retries"], steal=resolved["steal"], placement_shift=resolved["placement_shift"],
        fatal_threshold=resolved["fatal_threshold"],
        shard=shard, ops_source=source, replay_of=str(replay_dir) if replay_dir else None,
        rerun=[op for op in run_ops if in_place_replay],
        all_ops=(list(recorded.get("ops") or []) if in_place_replay else None),
        executor=resolved["executor"], address=resolved["address"], ray_env=resolved["ray_env"],
        argv=list(sys.argv), provenance=resolved.provenance(),
    )
    if args.write_ops:  # written once the preflight passed: a refused run writes nothing
        check_out_file(args.write_ops, "--write-ops", "ops.txt")
    return cfg, executor, (ops, source)


def _refuse_ray_options(resolved: S.Resolved) -> None:
    for name in ("address", "ray_env"):
        if resolved.sources.get(name) == "flag":
            raise UsageError(f"{S.BY_NAME[name].display} is for --executor ray (this run's executor is local)")


def _ray_lanes(backend, resolved: S.Resolved, spec: str | None, python: str):
    """The Ray executor (joined to its cluster, its lanes' workers started) and the lanes to run on."""
    from ..batch.devices import choose_devices
    from ..batch.ray_executor import RayExecutor
    from ..batch.scheduling import parse_devices

    ex = RayExecutor(backend, address=resolved["address"], env_names=resolved["ray_env"],
                     local_count=lambda: len(choose_devices(backend, None, python)))
    wanted = parse_devices(spec, "--devices")
    missing = [d for d in wanted or [] if d not in ex.plan]
    if missing:
        ex.close()
        raise UsageError(f"--devices: {', '.join(map(str, missing))} not among the Ray lanes ({ex.describe(ex.lanes)})")
    lanes = wanted if wanted is not None else ex.lanes
    ex.start(lanes)
    for lane, why in sorted(ex.failed.items()):
        _say(f"Ray lane {lane} left out: {why}")
    lanes = [d for d in lanes if d not in ex.failed]
    _say(ex.describe(lanes))
    return ex, lanes


def run(args) -> int:
    from ..batch.executor import reap_leftovers
    from ..batch.journal import Journal
    from ..batch.progress import make_progress
    from ..batch.resume import load_settings
    from ..batch.session import BatchRunner
    from ..op import scratch
    from ..op.lane import close_parked, worker_bounds

    S.check_given_values(args, S.RUN)
    given = S.resolve(S.RUN, args, os.environ)  # flags and environment, validated before anything is looked up
    worker_bounds()  # the warm workers' recycle bounds from the environment: a bad one is one line now
    S.enumeration_timeouts(os.environ)  # and the device enumeration's timeouts
    S.checked_cache_root(os.environ)  # and the caches' root
    replay_dir = Path(args.replay_from).expanduser().absolute() if args.replay_from else None
    replay_ident = load_settings(replay_dir, "--replay-from") if replay_dir else None
    out = _out_dir(args.out)
    check_writable_dir(out, "--out")  # a read-only place: one line now, not a traceback from the lock
    journal = Journal(out)
    # the lock first: a second runner on a live run dir is refused before it starts
    # anything, and what a killed runner left running is killed before the checks and
    # the preflight use the devices (a refused run then leaves the dir as it was)
    try:
        journal.lock()
    except OSError as exc:
        raise os_error(exc, "--out", out) from None
    started = False
    try:
        reap_leftovers(str(journal.root))
        scratch.remove_leftovers(journal.root)  # the temp dirs of a killed runner's workers and preflight
        try:
            cfg, executor, listed = build_config(args, out, journal, replay_dir, replay_ident, given)
        except NothingSelected as exc:  # --changed-since: no op touched; nothing written but --write-ops
            return _nothing_selected(args, str(exc))
        runner = BatchRunner(cfg, journal, executor=executor,
                             progress=make_progress(sys.stdout, False if args.plain else None))
        _preflight(runner, cfg, journal, executor)
        if args.write_ops:
            from ..batch.oplist import write_ops

            write_ops(args.write_ops, *listed)
        warn_suite_budgets(cfg.extra_args, cfg.planned_timer, "opscreen run")  # once the arguments proved usable
        started = True
        return runner.run().exit_code
    finally:
        journal.unlock(undo=not started)
        close_parked()


def _nothing_selected(args, message: str) -> int:
    if args.write_ops:
        check_out_file(args.write_ops, "--write-ops", "ops.txt")
        from ..batch.oplist import write_ops

        write_ops(args.write_ops, [], f"--changed-since {args.changed_since}: no op selected")
    _say(message)
    return 0


def _preflight(runner, cfg, journal, executor) -> None:
    """One collection of the first op still to run, as its child would run it (the first
    lane's device; with Ray, here on the driver, device 0); a usage error stops the run
    before anything is written (with warm workers on this machine, in the worker that then
    runs the lane's first op, the other lanes' workers importing meanwhile)."""
    from ..op.lane import prestart
    from ..op.preflight import collect

    todo = [op for op in cfg.ops if cfg.rerun or not journal.is_complete(op)]
    if not todo:
        return
    first = todo[0]
    if executor is None:
        for device in cfg.devices[1:len(todo)]:
            prestart(runner.request_factory(first, device, cfg.dtypes))
    collect(runner.request_factory(first, cfg.devices[0] if executor is None else 0, cfg.dtypes), say=_say,
            warm=executor is None)


def _say(line: str) -> None:
    sys.stderr.write(f"opscreen run: {line}\n")
    sys.stderr.flush()
