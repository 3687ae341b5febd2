"""``opscreen op OP``: run one op of a suite in its own process.

Flags win over the environment knobs of the old per-op shell driver, which keep
working when no flag is given: OP, OP_FILE, TEST_NODE, DTYPES, USE_FLAGTUNE,
USE_FLAGTUNE_COST_MODEL, SHAPE_MODE, ZL_BACKEND, FLAGGEMS_ROOT and REPLAY_FROM.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..backends import resolve, select
from ..fsio import is_storage_error, write_error
from ..errors import OpscreenError, UsageError, check_given, check_path, check_writable_dir, read_input
from ..measure import check_grace, check_timeout
from ..op.plan import TIMERS
from ..providers.flaggems import NodeSpec, Suite, parse_dtypes, safe_dir_name
from ..op.preflight import check_interpreter, collect
from ..op.repeats import validate_repeats
from ..op.run import OpRequest, StopRequest, run_op, shape_source, validate_flag01
from ._common import add_backend_arguments, add_pytest_args
from .run import choose_devices

NAME = "op"
HELP = ("run one op of the suite in its own process (exit 0 passed, 1 failed, 2 usage, 3 timeout, 4 device-fatal, "
        "5 crashed, 130 interrupted by SIGINT, SIGTERM or SIGHUP)")
ORDER = 35


def add_arguments(p) -> None:
    p.add_argument("op", nargs="?", help="op name (a pytest marker of the suite); default $OP")
    p.add_argument("--op-file", help="benchmark file that holds the op (default $OP_FILE; else found by marker scan)")
    p.add_argument("--test-node", help="a pytest node id passed through as given (default $TEST_NODE)")
    p.add_argument("--suite", help="suite root (default $FLAGGEMS_ROOT, else the bundled sample suite)")
    p.add_argument("--python", help="the suite's Python interpreter (default: this one)")
    add_backend_arguments(p)
    p.add_argument("--device", type=int, help="device index (default 0)")
    p.add_argument("--timer", choices=TIMERS, help="timer (default auto: graph where capture is possible)")
    p.add_argument("--dtypes", help="comma-separated dtypes, passed to --dtypes (default $DTYPES, else the op's own)")
    p.add_argument("--shape-mode", help="upstream (default, $SHAPE_MODE), curated, or a shape file path")
    p.add_argument("--level", help="suite level (default core)")
    p.add_argument("--use-flagtune", choices=("0", "1"), help="USE_FLAGTUNE for the child (default $USE_FLAGTUNE, else 0)")
    p.add_argument("--use-flagtune-cost-model", choices=("0", "1"), help="USE_FLAGTUNE_COST_MODEL (default env, else 0)")
    p.add_argument("--timeout", type=float, help="seconds before the whole process group is killed (default 1800)")
    p.add_argument("--grace", type=float, help="seconds between SIGTERM and SIGKILL (default 10)")
    p.add_argument("--repeats", help="processes to run the op in, each fresh; >1 records per-case medians and the "
                   "spread between processes (default 1; docs/timing.md)")
    p.add_argument("--out", help="output directory (default runs/op/<op>)")
    p.add_argument("--replay-from", help="an earlier op output dir: run again with its recorded settings (default $REPLAY_FROM)")
    add_pytest_args(p)


def _env(name: str) -> str | None:
    v = os.environ.get(name)
    return v if v not in (None, "") else None


def load_replay(path: str) -> dict:
    from .. import contracts

    p = check_path(path, "REPLAY_FROM")
    cfg = p / "child_config.json"
    if not cfg.is_file():
        raise UsageError(f"REPLAY_FROM {p}: no child_config.json there (give the output dir of an earlier 'opscreen op')")
    try:
        return contracts.upgrade(contracts.CHILD_CONFIG, json.loads(read_input(cfg, "REPLAY_FROM")), cfg)["settings"]
    except contracts.NewerVersion as exc:
        raise UsageError(f"REPLAY_FROM {p}: {exc}") from None
    except (ValueError, KeyError, TypeError, contracts.Damaged):
        raise UsageError(f"REPLAY_FROM {p}: child_config.json is unreadable or from another version") from None


def check_arguments(args) -> None:
    """An option given as '' is no silent default (``--suite ''`` must not run the
    sample suite, ``--out ''`` must not write runs/op/<op>); a path the system
    cannot look up (too long, say) is one line, not a traceback."""
    hints = {
        "op": "give an op name (a pytest marker of the suite)",
        "op_file": "give a benchmark file such as test_abs.py",
        "test_node": "give a pytest node id",
        "suite": "give the suite root (leave --suite out for $FLAGGEMS_ROOT or the bundled sample suite)",
        "python": "give the suite's interpreter (leave --python out for this one)",
        "dtypes": "give dtypes such as float16,bfloat16 (leave --dtypes out for the op's own)",
        "shape_mode": "give upstream, curated or a shape file",
        "level": "give the suite level (core or comprehensive)",
        "out": "give an output directory (leave --out out for runs/op/<op>)",
        "replay_from": "give the output dir of an earlier 'opscreen op'",
    }
    for name, hint in hints.items():
        flag = "OP" if name == "op" else "--" + name.replace("_", "-")
        check_given(getattr(args, name, None), flag, hint)
    for name in ("suite", "python", "out", "replay_from"):
        check_path(getattr(args, name, None), "--" + name.replace("_", "-"))
    if args.shape_mode is not None and args.shape_mode not in ("upstream", "curated"):
        check_path(args.shape_mode, "--shape-mode")


def build_request(args) -> OpRequest:
    """The request ``args`` describe, after every check that can be made before the
    output directory is touched: the arguments, the suite's interpreter, the
    device (enumerated as ``opscreen run`` does), the output directory, and the
    preflight collection (opscreen.op.preflight)."""
    check_arguments(args)
    replay_dir = args.replay_from or _env("REPLAY_FROM")
    rp = load_replay(replay_dir) if replay_dir else {}

    def pick(flag, env_name, replay_key, default=None):
        if flag is not None:
            return flag
        if env_name and _env(env_name) is not None:
            return _env(env_name)
        if replay_key in rp and rp[replay_key] is not None:
            return rp[replay_key]
        return default

    # backend: flag, then ZL_BACKEND, then the replayed run's, then auto-detection
    if args.backend or _env("ZL_BACKEND") or not rp:
        sel = select(args.backend, caps=args.cap)
        backend = sel.backend
    else:
        backend = resolve(rp["backend"]).with_vendor(rp.get("vendor"))
        caps = dict(rp.get("capabilities") or {})
        caps.pop("graph_api", None)
        backend = backend.with_capabilities(**caps)
        if args.cap:
            backend = select(rp["backend"], caps=args.cap).backend.with_vendor(rp.get("vendor"))

    suite = Suite.locate(
        args.suite or (None if _env("FLAGGEMS_ROOT") or not rp else rp.get("suite_root")),
        python=args.python or (rp.get("python") if rp else None),
    )
    check_interpreter(suite.python, suite.root)
    op = args.op or _env("OP")
    op_file = args.op_file or _env("OP_FILE")
    test_node = args.test_node or _env("TEST_NODE")
    if op or op_file or test_node:
        target = suite.resolve(op, op_file, test_node)
    elif rp:
        target = NodeSpec.from_dict(rp["target"])
    else:
        raise UsageError("no op given: pass OP (argument or $OP), --test-node/$TEST_NODE, or --replay-from/$REPLAY_FROM")

    dtypes = parse_dtypes(args.dtypes) if args.dtypes else parse_dtypes(_env("DTYPES")) if _env("DTYPES") else rp.get("dtypes")
    shape_mode = pick(args.shape_mode, "SHAPE_MODE", "shape_mode", "upstream")
    shape_source(suite.root, shape_mode, "SHAPE_MODE")
    timer = args.timer or rp.get("timer_requested") or "auto"
    device = args.device if args.device is not None else int(rp.get("device", 0))
    if device < 0:
        raise UsageError(f"--device {device}: give a device index >= 0")
    timeout = check_timeout(args.timeout if args.timeout is not None else rp.get("timeout", 1800.0))
    grace = check_grace(args.grace if args.grace is not None else rp.get("grace", 10.0))
    extra = list(args.pytest_args) if args.pytest_args else list(rp.get("extra_args", []))
    repeats = validate_repeats(args.repeats if args.repeats is not None else rp.get("repeats", 1))
    check_writable_dir(Path(args.out) if args.out else Path("runs") / "op" / safe_dir_name(target.op), "--out")
    # the device must exist (enumerated as `opscreen run` does) before an earlier result is replaced
    choose_devices(backend, str(device), suite.python, flag="--device")
    req = OpRequest(
        op=target.op,
        target=target,
        suite=suite,
        backend=backend,
        device=device,
        timer=timer,
        dtypes=dtypes,
        shape_mode=shape_mode,
        level=pick(args.level, None, "level", "core"),
        use_flagtune=validate_flag01(pick(args.use_flagtune, "USE_FLAGTUNE", "use_flagtune", "0"), "USE_FLAGTUNE"),
        use_flagtune_cost_model=validate_flag01(
            pick(args.use_flagtune_cost_model, "USE_FLAGTUNE_COST_MODEL", "use_flagtune_cost_model", "0"),
            "USE_FLAGTUNE_COST_MODEL",
        ),
        timeout=timeout,
        grace=grace,
        extra_args=extra,
        repeats=repeats,
        color=sys.stdout.isatty() and not _env("NO_COLOR"),
    )
    collect(req, say=lambda line: sys.stderr.write(f"opscreen op: {line}\n"))
    return req


def run(args) -> int:
    req = build_request(args)
    from ..op.plan import planned_timer

    planned_timer(req.backend, req.timer)  # usage errors before anything is written
    out = Path(args.out) if args.out else Path("runs") / "op" / safe_dir_name(req.op)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")

    quiet = []  # set once stdout is gone (a closed pipe, a hung-up terminal): run.log still gets every line

    def echo(line: str) -> None:
        if quiet:
            return
        try:
            sys.stdout.write(line)
            sys.stdout.flush()
        except (OSError, ValueError):
            quiet.append(True)

    # SIGINT, SIGTERM and SIGHUP stop the op: its group killed, result.json "interrupted", exit 130
    with StopRequest() as stop:
        try:
            outcome = run_op(req, out, stop=stop, echo=echo)
        except OSError as exc:  # a full disk or quota under --out: the child was killed
            if not is_storage_error(exc):
                raise
            raise OpscreenError(write_error(exc, out / "run.log")) from None
    echo(f"opscreen op: {req.op} {outcome.status}; results in {outcome.out_dir}\n")
    return outcome.exit_code
