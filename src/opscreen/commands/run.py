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

from ..errors import UsageError, check_given, check_path, check_writable_dir, os_error, read_input
from ..measure import check_grace, check_timeout
from ..op.plan import TIMERS, planned_timer
from ..op.repeats import validate_repeats
from ._common import add_backend_arguments, add_pytest_args

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

DEFAULTS = {
    "timer": "auto",
    "dtypes": None,
    "shape_mode": "upstream",
    "level": "core",
    "use_flagtune": "0",
    "use_flagtune_cost_model": "0",
    "timeout": 1800.0,
    "grace": 10.0,
    "retries": 2,
    "steal": True,
    "fatal_threshold": 3,
    "extra_args": [],
    "repeats": 1,
}
CPU_ALL_SLOTS = 2


def add_arguments(p) -> None:
    add_backend_arguments(p)
    p.add_argument(
        "--devices",
        "--gpus",
        dest="devices",
        help="devices to use: 0,1,4-7 or 'all' (default all: the devices the backend enumerates; "
        f"on cpu, slots 0..min({CPU_ALL_SLOTS},cores)-1)",
    )
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--ops", help="comma-separated ops (markers) to run (default: every op of the suite)")
    sel.add_argument("--ops-file", help="file with one op per line ('#' comments, blank lines ignored)")
    sel.add_argument("--inventory", help="take the op list from an inventory file (opscreen inventory)")
    p.add_argument("--suite", help="suite root (default $FLAGGEMS_ROOT, else the bundled sample suite)")
    p.add_argument("--python", help="the suite's Python interpreter (default: this one)")
    p.add_argument("--out", help="run directory (default runs/run-<UTC time>); an existing one is resumed")
    p.add_argument("--timeout", type=float, help="seconds per op attempt before its process group is killed (default 1800)")
    p.add_argument("--grace", type=float, help="seconds between SIGTERM and SIGKILL of a child group (default 10)")
    p.add_argument("--repeats", help="processes per op, each fresh; >1 records per-case medians and the spread "
                   "between processes (default 1; docs/timing.md)")
    p.add_argument("--retries", type=int, help="extra attempts for a failed op, in fresh processes (default 2)")
    p.add_argument("--fatal-threshold", type=int, help="device-fatal exits in a row (distinct ops) that mark a device bad (default 3; 0: never)")
    p.add_argument("--dtypes", help="comma-separated dtypes passed to the suite (default: each op's own)")
    p.add_argument("--timer", choices=TIMERS, help="timer (default auto)")
    p.add_argument("--shape-mode", help="upstream (default), curated, or a shape file path")
    p.add_argument("--level", help="suite level (default core)")
    p.add_argument("--use-flagtune", choices=("0", "1"), help="USE_FLAGTUNE for the children (default 0)")
    p.add_argument("--use-flagtune-cost-model", choices=("0", "1"), help="USE_FLAGTUNE_COST_MODEL (default 0)")
    p.add_argument("--replay-from", help="an earlier RUN_DIR: run its ops that did not pass (or --ops) with its recorded settings")
    p.add_argument("--shard", help="I/N: run only the ops whose stable hash falls in shard I of N (0 <= I < N)")
    p.add_argument("--steal", dest="steal", action="store_true", default=None, help="idle devices take queued ops from the busiest (default)")
    p.add_argument("--no-steal", dest="steal", action="store_false", help="keep every op on its hashed device")
    p.add_argument("--resume", dest="resume", action="store_true", default=None, help="resume RUN_DIR (default when it exists)")
    p.add_argument("--no-resume", dest="resume", action="store_false", help="refuse to reuse an existing RUN_DIR")
    p.add_argument("--dismiss", help="dismiss list (ops not to run, with reasons); 'none' disables the default list")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal (no live view)")
    add_pytest_args(p)


# -- op lists ------------------------------------------------------------------------


def read_ops_file(path: str) -> list[str]:
    text = read_input(path, "--ops-file")
    ops: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and line not in ops:
            ops.append(line)
    return ops


def split_ops(value: str) -> list[str]:
    """``--ops a,b``: comma-separated names. A line break is no separator (a pasted
    list or a shell variable holding lines): a one-line UsageError."""
    if "\n" in value or "\r" in value:
        raise UsageError("--ops: a line break is not a separator; separate ops with commas, "
                         "or give a file with one op per line to --ops-file")
    return list(dict.fromkeys(o.strip() for o in value.split(",") if o.strip()))


def resolve_targets(suite, ops: list[str]) -> dict:
    """op -> NodeSpec; every unknown op reported at once (UsageError, exit 2)."""
    targets: dict = {}
    errors: list[str] = []
    for op in ops:
        try:
            targets[op] = suite.resolve(op)
        except UsageError as exc:
            errors.append(str(exc))
    if errors:
        head = f"{len(errors)} of {len(ops)} ops cannot be run; nothing was started:"
        raise UsageError(head + "\n  " + "\n  ".join(errors))
    return targets


def op_dtype_lists(suite) -> dict[str, list[str]]:
    """op -> the dtypes its tests' ``dtypes=`` expressions name (for level 2)."""
    from ..batch.retry import dtypes_from_expr

    out: dict[str, list[str]] = {}
    try:
        files = suite.files
    except Exception:  # noqa: BLE001 - level 2 then has only the requested dtypes
        return out
    for f in files:
        for t in f.tests:
            names = dtypes_from_expr(getattr(t, "dtypes_expr", None))
            for m in t.markers:
                lst = out.setdefault(m, [])
                lst.extend(n for n in names if n not in lst)
    return out


def load_dismissed(path: str | None, known: list[str]) -> dict[str, str]:
    """op -> reason from the dismiss list (``opscreen.assets.dismiss``).

    An explicit ``--dismiss FILE`` is checked strictly (an op the suite does not
    have is an error); the default list shipped with the package applies to
    the ops of this suite that it lists. ``--dismiss none``: nothing dismissed.
    """
    if path is not None and path.strip().lower() == "none":
        return {}
    try:
        from ..assets.dismiss import load_dismiss
    except ImportError:
        if path:
            raise UsageError("--dismiss: this opscreen has no dismiss-list support (opscreen.assets.dismiss)") from None
        return {}
    if path is not None:
        return normalise_dismissed(load_dismiss(Path(path).expanduser(), set(known)))
    from ..assets import DATA_DIR, default_asset

    default = default_asset("dismiss.yaml")
    if default is None:
        print(f"opscreen: no default dismiss list ({DATA_DIR / 'dismiss.yaml'} is missing): no op dismissed", file=sys.stderr)
        return {}
    known_set = set(known)
    return {op: why for op, why in normalise_dismissed(load_dismiss(default, None)).items() if op in known_set}


def normalise_dismissed(loaded) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(loaded, dict):
        items = loaded.items()
    else:
        items = ((getattr(e, "op", None), e) for e in loaded or [])
    for op, entry in items:
        if op is None:
            continue
        if isinstance(entry, str):
            reason = entry
        elif isinstance(entry, dict):
            reason = entry.get("reason") or ""
        else:
            reason = getattr(entry, "reason", "") or ""
        out[str(op)] = str(reason) or "dismissed"
    return out


def replay_ops(run_dir: Path) -> list[str]:
    from ..batch.journal import STATUS_CSV, read_status_csv

    rows = read_status_csv(run_dir / STATUS_CSV)
    return [r["op"] for r in rows if r.get("status") not in ("passed", "skipped", "dismissed")]


# -- devices ---------------------------------------------------------------------------


def cpu_slots() -> int:
    """CPU slots there are: one per core (a slot beyond the cores is not a lane)."""
    return max(1, os.cpu_count() or 1)


def choose_devices(backend, spec: str | None, python: str | None, flag: str = "--devices") -> list[int]:
    """The device indices to run on, from ``spec`` (``0,1,4-7``, ``all`` or None: all).

    On cpu the indices are slots, 0..cores-1 (``all``: the first
    min(CPU_ALL_SLOTS, cores)). On an accelerator they are checked against what
    ``backend.enumerate`` finds; when it finds nothing, that is an error too,
    unless a source timed out (then explicit indices are used as given, with a
    printed line). ``opscreen op`` checks its ``--device`` here as well."""
    from ..batch.scheduling import parse_devices

    wanted = parse_devices(spec, flag)
    if backend.capabilities.slots:
        slots = cpu_slots()
        if wanted is None:
            return list(range(min(CPU_ALL_SLOTS, slots)))
        beyond = [d for d in wanted if d >= slots]
        if beyond:
            raise UsageError(
                f"{flag} {spec}: {backend.name} slots are 0..{slots - 1} on this machine ({slots} cores), "
                f"not {', '.join(map(str, beyond))}"
            )
        return wanted
    en = backend.enumerate(python)
    found = [d.index for d in en.devices]
    if not found:
        notes = "; ".join(en.messages) or "no source listed a device"
        if wanted is not None and any("timed out" in m for m in en.messages):
            sys.stderr.write(f"opscreen: {flag} {spec}: could not confirm the {backend.name} devices ({notes}); "
                             "using them as given\n")
            return wanted
        what = f"{flag} {spec}" if wanted is not None else f"{flag} all"
        raise UsageError(
            f"{what}: backend {backend.name} found no devices ({notes}); "
            f"check 'opscreen devices --backend {backend.name}' or choose another --backend"
        )
    if wanted is None:
        return found
    missing = [d for d in wanted if d not in found]
    if missing:
        raise UsageError(
            f"{flag}: {', '.join(map(str, missing))} not among the {backend.name} devices found "
            f"({', '.join(map(str, found))})"
        )
    return wanted


def check_arguments(args) -> None:
    """What is wrong with the arguments themselves, before anything is looked up:
    an option given as '' is no silent default (``--suite ''`` must not screen the
    sample suite, ``--out ''`` must not make runs/run-<time>), and a path the
    system cannot look up (too long, say) is one line here, not a traceback later."""
    hints = {
        "suite": "give the suite root (leave --suite out for $FLAGGEMS_ROOT or the bundled sample suite)",
        "out": "give a run directory (leave --out out for runs/run-<time>)",
        "python": "give the suite's interpreter (leave --python out for this one)",
        "ops": "give comma-separated op names (leave --ops out for every op)",
        "ops_file": "give a file with one op per line",
        "inventory": "give an inventory file",
        "dismiss": "give a dismiss file, or 'none'",
        "replay_from": "give an earlier run directory",
        "shape_mode": "give upstream, curated or a shape file",
        "level": "give the suite level (core or comprehensive)",
        "dtypes": "give dtypes such as float16,bfloat16 (leave --dtypes out for each op's own)",
        "shard": "give I/N (leave --shard out for every op)",
    }
    for name, hint in hints.items():
        check_given(getattr(args, name, None), "--" + name.replace("_", "-"), hint)
    for name in ("suite", "out", "python", "ops_file", "inventory", "replay_from"):
        check_path(getattr(args, name, None), "--" + name.replace("_", "-"))
    if args.dismiss is not None and args.dismiss.strip().lower() != "none":
        check_path(args.dismiss, "--dismiss")
    if args.shape_mode is not None and args.shape_mode not in ("upstream", "curated"):
        check_path(args.shape_mode, "--shape-mode")


# -- settings ----------------------------------------------------------------------------


def _explicit(args) -> dict:
    from ..providers.flaggems import parse_dtypes

    def env(name: str):
        value = os.environ.get(name)
        return value if value not in (None, "") else None

    # Flags win; the environment knobs of `opscreen op` count as given when no flag is.
    ex: dict = {}
    if args.timer is not None:
        ex["timer"] = args.timer
    if args.dtypes is not None:
        ex["dtypes"] = parse_dtypes(args.dtypes)
    elif env("DTYPES"):
        ex["dtypes"] = parse_dtypes(env("DTYPES"))
    if args.shape_mode is not None:
        ex["shape_mode"] = args.shape_mode
    elif env("SHAPE_MODE"):
        ex["shape_mode"] = env("SHAPE_MODE")
    if args.level is not None:
        ex["level"] = args.level
    if args.use_flagtune is not None:
        ex["use_flagtune"] = args.use_flagtune
    elif env("USE_FLAGTUNE"):
        ex["use_flagtune"] = env("USE_FLAGTUNE")
    if args.use_flagtune_cost_model is not None:
        ex["use_flagtune_cost_model"] = args.use_flagtune_cost_model
    elif env("USE_FLAGTUNE_COST_MODEL"):
        ex["use_flagtune_cost_model"] = env("USE_FLAGTUNE_COST_MODEL")
    if args.timeout is not None:
        ex["timeout"] = check_timeout(args.timeout)
    if args.grace is not None:
        ex["grace"] = check_grace(args.grace)
    if args.repeats is not None:
        ex["repeats"] = validate_repeats(args.repeats)
    if args.retries is not None:
        if args.retries < 0:
            raise UsageError("--retries must be >= 0")
        ex["retries"] = args.retries
    if args.fatal_threshold is not None:
        if args.fatal_threshold < 0:
            raise UsageError("--fatal-threshold must be >= 0")
        ex["fatal_threshold"] = args.fatal_threshold
    if args.steal is not None:
        ex["steal"] = args.steal
    if args.pytest_args:
        ex["extra_args"] = list(args.pytest_args)
    return ex


def _load_settings(run_dir: Path, what: str) -> dict:
    from .. import contracts
    from ..batch.journal import IDENTITY, json_problem

    ident = contracts.read(contracts.RUN_IDENTITY, run_dir / IDENTITY)  # a newer one: one line, exit 2
    problem = json_problem(run_dir / IDENTITY)
    if problem not in (None, "missing"):
        raise UsageError(f"{what} {run_dir}: its run_identity.json is damaged ({problem}); the run's settings cannot be read")
    if not ident or ident.get("kind") != "run" or not isinstance(ident.get("settings"), dict):
        raise UsageError(f"{what} {run_dir}: no batch run_identity.json there (give the RUN_DIR of an earlier 'opscreen run')")
    return ident


def _backend_from(settings: dict):
    from ..backends import resolve

    b = resolve(settings["backend"]).with_vendor(settings.get("vendor"))
    caps = dict(settings.get("capabilities") or {})
    caps.pop("graph_api", None)
    return b.with_capabilities(**caps) if caps else b


def _refuse_other_timing(out: Path, recorded: dict, backend, planned: str) -> None:
    """A resume measures the rest of the ops as the run's first session did: the same
    timing knobs (``OPSCREEN_*``) and, when the ``planned`` timer is graph, the same
    timing method, else a usage error."""
    from ..child.config import TIMING_METHOD
    from ..op.run import planned_timing

    clash = []
    had, now = recorded.get("timing") or {}, planned_timing(backend)
    if had != now:
        clash.append(f"timing knobs (OPSCREEN_* variables): recorded {had or 'defaults'}, now {now or 'defaults'}")
    method = recorded.get("timing_method") or 1
    if planned == "graph" and method != TIMING_METHOD:
        clash.append(f"timing method: recorded {method}, this opscreen measures with {TIMING_METHOD} (docs/timing.md)")
    if clash:
        raise UsageError(f"{out} was measured with other settings; resuming would mix measurements "
                         "(use another --out):\n  " + "\n  ".join(clash))


def run(args) -> int:
    from ..backends import select
    from ..batch.journal import Journal
    from ..batch.progress import make_progress
    from ..batch.session import CALIBER_SETTINGS, BatchConfig, BatchRunner
    from ..batch.scheduling import parse_shard, shard_ops
    from ..op.preflight import check_interpreter, collect
    from ..providers.flaggems import Suite
    from ..op.run import shape_source, validate_flag01

    check_arguments(args)
    explicit = _explicit(args)
    shard = parse_shard(args.shard)

    replay_dir = Path(args.replay_from).expanduser().absolute() if args.replay_from else None
    replay_ident = _load_settings(replay_dir, "--replay-from") if replay_dir else None

    if args.out:
        out = Path(args.out).expanduser().absolute()
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        out = Path("runs") / f"run-{stamp}"
        out = out.absolute()
    check_writable_dir(out, "--out")  # a read-only place: one line now, not a traceback from the lock
    journal = Journal(out)
    in_place_replay = replay_dir is not None and replay_dir.resolve() == journal.root  # one dir, however named
    existing = journal.read_identity() if out.is_dir() else None
    damaged = journal.identity_problem() if out.is_dir() else None
    if damaged and (out / "ops").is_dir() and any((out / "ops").iterdir()):
        raise UsageError(
            f"--out {out}: its run_identity.json is damaged ({damaged}); it held the run's settings (ops, devices, "
            "how they were measured), so this run dir cannot be resumed: start again with another --out "
            f"(the op results under {out / 'ops'} are left as they are)"
        )
    if out.is_dir() and not existing and (out / "ops").is_dir() and any((out / "ops").iterdir()):
        raise UsageError(f"--out {out} holds op results but no run_identity.json: not a run dir of 'opscreen run'")
    resuming = existing is not None and not in_place_replay
    if resuming and args.resume is False:
        raise UsageError(f"--no-resume: {out} already holds a run; choose another --out")
    if existing is not None and existing.get("kind") != "run":
        raise UsageError(f"--out {out} is not a batch run dir (run_identity.json kind {existing.get('kind')!r})")

    recorded = (existing or {}).get("settings") or {} if existing else {}
    base = recorded or ((replay_ident or {}).get("settings") or {})

    # caliber settings given explicitly must match the run being resumed
    if resuming:
        clash = []
        for key in CALIBER_SETTINGS:
            if key in explicit and key in recorded and explicit[key] != recorded[key]:
                clash.append(f"{key}: recorded {recorded[key]!r}, asked {explicit[key]!r}")
        if args.backend and recorded.get("backend"):
            want = select(args.backend, caps=args.cap).backend
            if want.name != recorded["backend"] or want.vendor != recorded.get("vendor"):
                clash.append(f"backend: recorded {recorded['backend']}/{recorded.get('vendor')}, asked {want.name}/{want.vendor}")
        if args.suite and recorded.get("suite_root") and str(Path(args.suite).expanduser().resolve()) != recorded["suite_root"]:
            clash.append(f"suite: recorded {recorded['suite_root']}, asked {Path(args.suite).resolve()}")
        if clash:
            raise UsageError(
                f"{out} was measured with other settings; resuming would mix measurements "
                "(use another --out):\n  " + "\n  ".join(clash)
            )

    def pick(key):
        if key in explicit:
            return explicit[key]
        if key in base and (base[key] is not None or key == "dtypes"):
            return base[key]
        return DEFAULTS[key]

    # backend
    if args.backend or not base.get("backend"):
        backend = select(args.backend, caps=args.cap).backend
    else:
        backend = _backend_from(base)
        if args.cap:
            from ..backends import parse_cap_overrides

            over = {}
            for spec in args.cap:
                over.update(parse_cap_overrides(spec, origin="--cap"))
            backend = backend.with_capabilities(**over)
    timer = pick("timer")
    planned = planned_timer(backend, timer)  # usage errors before anything is written

    if resuming:
        _refuse_other_timing(out, (existing or {}).get("caliber") or {}, backend, planned)

    suite = Suite.locate(args.suite or base.get("suite_root"), python=args.python or base.get("python"))
    check_interpreter(suite.python, suite.root)
    if resuming:
        rec_commit = ((existing or {}).get("caliber") or {}).get("suite_commit")
        now_commit = (suite.git or {}).get("commit")
        if rec_commit and now_commit and rec_commit != now_commit:
            raise UsageError(
                f"{out}: the suite moved from commit {rec_commit[:12]} to {now_commit[:12]} since this run started; "
                "resuming would mix measurements (use another --out)"
            )

    # ops
    if args.ops is not None:
        ops, source = split_ops(args.ops), "--ops"
    elif args.ops_file is not None:
        ops, source = read_ops_file(args.ops_file), f"--ops-file {args.ops_file}"
    elif args.inventory is not None:
        from ..assets.inventory import load_inventory

        ops, source = load_inventory(args.inventory), f"--inventory {args.inventory}"
    elif replay_dir is not None and not resuming:
        ops, source = replay_ops(replay_dir), f"--replay-from {replay_dir} (ops that did not pass)"
    elif resuming and recorded.get("ops") is not None:
        ops, source = list(recorded["ops"]) + list((recorded.get("dismissed") or {}).keys()), recorded.get("ops_source", "recorded")
    else:
        ops, source = suite.ops(), "suite"
    if not ops and source.startswith("--ops"):
        raise UsageError(f"{source}: no ops given")
    targets = resolve_targets(suite, ops)
    if shard is not None:
        ops = shard_ops(ops, shard)
    dismissed = load_dismissed(args.dismiss, list(suite.ops()))
    dismissed = {op: why for op, why in dismissed.items() if op in targets and op in ops}
    run_ops = [op for op in ops if op not in dismissed]

    shape_mode = pick("shape_mode")
    shape_source(suite.root, shape_mode)
    devices = choose_devices(backend, args.devices if args.devices is not None else _devices_spec(base, resuming), suite.python)

    cfg = BatchConfig(
        suite=suite,
        backend=backend,
        devices=devices,
        ops=run_ops,
        targets=targets,
        dismissed=dismissed,
        op_dtypes=op_dtype_lists(suite),
        timer=timer,
        dtypes=pick("dtypes"),
        shape_mode=shape_mode,
        level=pick("level"),
        use_flagtune=validate_flag01(pick("use_flagtune"), "USE_FLAGTUNE"),
        use_flagtune_cost_model=validate_flag01(pick("use_flagtune_cost_model"), "USE_FLAGTUNE_COST_MODEL"),
        timeout=pick("timeout"),
        grace=pick("grace"),
        retries=int(pick("retries")),
        steal=bool(pick("steal")),
        fatal_threshold=int(pick("fatal_threshold")),
        extra_args=list(pick("extra_args") or []),
        repeats=int(pick("repeats")),
        shard=shard,
        ops_source=source,
        replay_of=str(replay_dir) if replay_dir else None,
        rerun=[op for op in run_ops if in_place_replay],
        all_ops=(list(recorded.get("ops") or []) if in_place_replay else None),
        argv=list(sys.argv),
    )
    live = False if args.plain else None
    runner = BatchRunner(cfg, journal, progress=make_progress(sys.stdout, live))
    # preflight: one collection of the first op still to run, as its child would run
    # it (the first lane's device); a usage error stops the run before anything is written
    first = next((op for op in run_ops if in_place_replay or not journal.is_complete(op)), None)
    if first is not None:
        collect(runner.request_factory(first, devices[0], cfg.dtypes), say=_say)
    try:
        journal.lock()
    except OSError as exc:
        raise os_error(exc, "--out", out) from None
    try:
        summary = runner.run()
    finally:
        journal.unlock()
    return summary.exit_code


def _say(line: str) -> None:
    sys.stderr.write(f"opscreen run: {line}\n")
    sys.stderr.flush()


def _devices_spec(base: dict, resuming: bool) -> str | None:
    if resuming and base.get("devices"):
        return ",".join(str(d) for d in base["devices"])
    return None
