"""``opscreen calibrate``: measure the noise between processes on this machine (a floors table).

Two ways in:

* ``opscreen calibrate RUN_DIR RUN_DIR ...``: fit a table from screens that already ran
  the same ops with the same settings (two or more, fresh processes and/or warm workers):
  every pair of them is compared row by row (:func:`opscreen.results.noise.fit`). An
  argument ``RUN,RUN,...`` is one *draw* (one session's screens of one sample): with
  several, runs are paired within their draw only, so that a table can pool the screens of
  several sessions, other ops on other days and chips, without pairing across them;
* ``opscreen calibrate --backend B [--sample N --seed S]``: draw a seeded random sample of
  the suite's ops (or of ``--inventory``), screen it once per history of ``--histories``
  (default ``op,worker,op,worker``: fresh processes and warm workers, interleaved as asv
  interleaves its rounds) into ``--work`` with ``opscreen run`` (each a normal, resumable
  run dir), then fit. The second fresh-process screen runs with ``--placement-shift 1``:
  on a machine with two or more devices every op then runs on another chip than in the
  first, and the pair gives the table's ``chip`` cells (the worker screens keep the
  hashed devices and give its one-chip ``rerun`` cells). ``--timers-from RUN_DIR[,...]`` tops the
  draw up from the same generator so that each timer that screen used is backed by
  ``--min-per-timer`` ops: a stratified draw where it matters, since a timer few ops use (the
  profiler, for ops the graph cannot capture: 2 of 45 random H200 ops) otherwise lands in
  cells that one op backs. With ``--sample 0`` only the top-up is screened: ops of a rare
  timer, to pool as a draw of their own with an earlier calibration's draws
  (``opscreen calibrate OLD,OLD NEW,NEW``). ``--extends FLOORS`` grows that earlier table: the
  ops it already measured are never drawn again (a second session's draw is all new ops, and a
  top-up adds ops, not repeats), they count towards ``--min-per-timer``, and the command that
  pools the new draw with the table's own draws is printed at the end.

The table is written to ``--out`` (default: the user's floors dir, named after the device,
where ``opscreen compare`` finds it by device name) and printed.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fsio import utcnow

NAME = "calibrate"
HELP = "measure this machine's noise between processes (a floors table compare widens its bands to)"
DESCRIPTION = (
    "Fit a floors table (how far two processes of one setup read each case apart, per timer and kernel "
    "latency, for fresh processes and warm workers) from RUN_DIRs that screened the same ops, or screen a "
    "seeded random sample of the suite in each of --histories first. The table goes to --out (default: the "
    "user's floors dir, where opscreen compare finds it by device name). See docs/results.md."
)
ORDER = 46
HISTORY_ISOLATION = {"op": "op", "worker": "worker"}
#: The screen mode's options and their defaults (None in the parser: given or not is known, and
#: with RUN_DIRs, where there is nothing to screen, a given one is refused rather than ignored).
SCREEN_DEFAULTS = {"suite": None, "python": None, "devices": None, "inventory": None, "sample": 30,
                   "timers_from": None, "min_per_timer": 5, "extends": None, "histories": "op,worker,op,worker",
                   "work": None, "timeout": "600"}


def add_arguments(p) -> None:
    p.add_argument("runs", nargs="*", metavar="RUN_DIR",
                   help="screens of the same ops to fit from (two or more); RUN,RUN,... is one draw, whose runs are "
                        "paired with each other only (give several draws to pool several sessions' screens)")
    p.add_argument("--backend", help="screen mode: the backend to screen on (as for opscreen run)")
    p.add_argument("--suite", help="screen mode: the suite root (default: as opscreen run)")
    p.add_argument("--python", help="screen mode: the suite's interpreter (default: as opscreen run)")
    p.add_argument("--devices", default=None, help="screen mode: devices (as for opscreen run; default all)")
    p.add_argument("--inventory", help="screen mode: draw from this inventory file instead of the suite's ops")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="screen mode: ops to draw (default 30; 0 with --timers-from: only the top-up, to add ops of a "
                        "rare timer to an earlier calibration's draws)")
    p.add_argument("--timers-from", metavar="RUN_DIR[,RUN_DIR...]",
                   help="screen mode: screens of the suite (your last full screen, or several) whose timers top the "
                        "draw up, so that each timer they used is backed by --min-per-timer ops (a rare timer, such as "
                        "ops the graph cannot capture, otherwise lands in cells one op backs)")
    p.add_argument("--min-per-timer", type=int, default=None, metavar="M",
                   help="with --timers-from: ops per timer the draw is topped up to (default 5)")
    p.add_argument("--extends", metavar="FLOORS",
                   help="screen mode: grow this earlier table (a floors file of opscreen calibrate): its ops are not "
                        "drawn again and count towards --min-per-timer; the command that pools both is printed")
    p.add_argument("--seed", default=None, metavar="S",
                   help="screen mode: the draw's seed (default: today); with RUN_DIRs: the seed their ops were drawn with "
                        "(S,S,...: one per draw), recorded in the table's provenance")
    p.add_argument("--histories", default=None,
                   help="screen mode: one screen per entry, op (fresh processes) or worker (default op,worker,op,worker)")
    p.add_argument("--work", metavar="DIR", help="screen mode: where the screens go (default runs/calibrate-SEED); resumable")
    p.add_argument("--timeout", default=None, help="screen mode: seconds per op process (default 600)")
    p.add_argument("--name", help="the table's name (default: the device name)")
    p.add_argument("--match", help="a regular expression the device names it is for must match (default: the device name)")
    p.add_argument("--out", metavar="FILE", help="where to write the table (default: the user's floors dir)")


def _seeds(text: str | None) -> list[int] | None:
    """``--seed``: one integer, or one per draw, comma-separated (None: not given)."""
    if text is None:
        return None
    try:
        return [int(x) for x in str(text).split(",")]
    except ValueError:
        raise UsageError(f"--seed {text!r}: give an integer seed, or one per draw, comma-separated") from None


def draw_groups(runs: list[str]) -> list[list[Path]]:
    """The RUN_DIR arguments as draws: ``A,B,C`` is one draw; without commas all runs are one."""
    if not any("," in r for r in runs):
        return [[Path(r) for r in runs]]
    draws = [[Path(x) for x in r.split(",") if x] for r in runs]
    short = [",".join(map(str, d)) for d in draws if len(d) < 2]
    if short:
        raise UsageError(f"draw {short[0]!r} has one run: a draw needs two or more screens of its ops, comma-separated")
    return draws


def _histories(text: str) -> list[str]:
    hs = [h.strip() for h in str(text).split(",") if h.strip()]
    bad = [h for h in hs if h not in HISTORY_ISOLATION]
    if bad or len(hs) < 2:
        raise UsageError(f"--histories {text!r}: give two or more of {', '.join(HISTORY_ISOLATION)}, comma-separated")
    return hs


def _timers_of(text: str) -> dict[str, set[str]]:
    """``--timers-from RUN_DIR[,RUN_DIR...]``: timer group -> the ops those screens measured with it
    (the union over the screens: several small screens of other ops back a rare timer as one large
    one would)."""
    from ..results import noise
    from ..results.summary import load_or_build

    by: dict[str, set[str]] = {}
    for path in [x for x in str(text).split(",") if x]:
        p = Path(path)
        if not (p / "ops_status.csv").is_file() and not (p / "summary.json").is_file() and p.suffix != ".json":
            raise UsageError(f"--timers-from {path}: not a run dir (no ops_status.csv or summary.json there)")
        for group, ops in noise.ops_by_timer(load_or_build(p)[0]).items():
            by.setdefault(group, set()).update(ops)
    if not by:
        raise UsageError(f"--timers-from {text}: the screen has no measured rows to read timers from")
    return by


def _extends(path: str | None) -> tuple[Any, set[str], dict[str, int]]:
    """``--extends FLOORS``: the table, the ops it measured (its provenance's, and its draws'),
    and for each timer the most ops one of its cells holds (what backs that timer already)."""
    if not path:
        return None, set(), {}
    from ..results import noise

    table = noise.load(path, flag="--extends")
    prov = table.provenance or {}
    ops = {str(o) for o in prov.get("ops") or []} | {str(o) for d in prov.get("draws") or [] for o in d.get("ops") or []}
    if not ops:
        raise UsageError(f"--extends {path}: its provenance names no ops (the built-in default, or a table not made "
                         "by opscreen calibrate); give the floors file a calibration wrote")
    backing: dict[str, int] = {}
    for c in table.cells:
        backing[c.timer] = max(backing.get(c.timer, 0), c.ops)
    return table, ops, backing


def _check_device(args, table) -> None:
    """``--extends``: a table of another device model is refused before anything is screened
    (its floors are that model's); a machine whose devices cannot be named is let through, and
    the end of the run warns if the screens' device does not match."""
    from ..backends import resolve

    try:
        found = resolve(args.backend).enumerate(args.python)
    except UsageError:
        return  # opscreen run says what is wrong with the backend, in its own words
    names = sorted({d.name for d in found.devices if d.name})
    if names and not any(table.matches(n) for n in names):
        raise UsageError(f"--extends {args.extends}: that table is for {table.name!r} (devices matching {table.match!r}), "
                         f"and this machine's {args.backend} devices are {', '.join(map(repr, names))}; extend a table "
                         "of this device model, or leave --extends out to start one")


def _draw(args, extends: tuple | None = None) -> tuple[list[str], int, dict]:
    """The seeded sample (``--sample`` ops of the suite or inventory, none of them an op that
    ``--extends``'s table measured), topped up from the same generator so that each timer of
    ``--timers-from`` is backed by ``--min-per-timer`` ops (stratified where it matters: a timer
    that few ops of the suite use would otherwise fall in floors cells one op backs, whose bands
    pay t(0) for it; the extended table's ops count, by what its screens or its cells say); the
    seed; what the top-up added. ``extends``: what :func:`_extends` read of ``--extends``
    (read here when not given)."""
    seeds = _seeds(args.seed)
    if seeds is not None and len(seeds) > 1:
        raise UsageError(f"--seed {args.seed}: screen mode draws one sample; give one seed")
    seed = seeds[0] if seeds is not None else int(time.strftime("%Y%m%d", time.gmtime()))
    if args.sample < 2 and not (args.sample == 0 and args.timers_from):
        raise UsageError(f"--sample {args.sample}: draw two or more ops (or 0 with --timers-from: only the top-up)")
    if args.min_per_timer < 1:
        raise UsageError(f"--min-per-timer {args.min_per_timer}: give 1 or more ops per timer")
    _, calibrated, backing = extends if extends is not None else _extends(getattr(args, "extends", None))
    timers = _timers_of(args.timers_from) if args.timers_from else {}
    if args.inventory:
        from ..assets.inventory import load_inventory

        ops = sorted(load_inventory(args.inventory))
    else:
        from ..providers.flaggems import Suite

        ops = sorted(Suite.locate(args.suite, python=args.python).ops())
    if not ops:
        raise UsageError("no ops to draw from: give --inventory or --suite")
    fresh = [o for o in ops if o not in calibrated]
    if not fresh:
        raise UsageError(f"--extends {args.extends}: the table measured every op there is to draw from; "
                         "nothing is left to add")
    rng = random.Random(seed)
    drawn = rng.sample(fresh, min(args.sample, len(fresh)))
    topped: dict[str, list[str]] = {}
    known = set(fresh)
    for group in sorted(timers):
        have = sum(1 for o in drawn if o in timers[group])
        have += max(len(calibrated & timers[group]), backing.get(group, 0))
        pool = sorted(o for o in timers[group] & known if o not in drawn)
        extra = rng.sample(pool, min(max(0, args.min_per_timer - have), len(pool)))
        if extra:
            drawn += extra
            topped[group] = extra
    if not drawn:
        why = (f"every timer already has {args.min_per_timer} ops in {args.extends} or none is left to add"
               if calibrated else "the top-up found no op of the suite to add")
        raise UsageError(f"--sample 0: {why} (--timers-from {args.timers_from}); give --sample N, a larger "
                         "--min-per-timer, or screens that used other ops of the suite")
    return drawn, seed, topped


def _screen(args, hist: list[str]) -> tuple[list[Path], dict]:
    """Run one screen per history (resuming any already there); the run dirs and the draw."""
    ext = _extends(args.extends)
    if args.extends:
        _check_device(args, ext[0])
    ops, seed, topped = _draw(args, ext)
    work = Path(args.work or f"runs/calibrate-{seed}").absolute()
    from ..errors import check_writable_dir

    check_writable_dir(work, "--work")
    made = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    fresh = not (work / "sample.txt").exists()
    (work / "sample.txt").write_text("\n".join(ops) + "\n", encoding="utf-8")
    if topped:
        drew = f"{args.sample} ops drawn" if args.sample else "no plain draw (--sample 0)"
        print(f"opscreen calibrate: {drew} (seed {seed}), topped up from {args.timers_from}'s timers to "
              f"{args.min_per_timer} ops each: " + ", ".join(f"{g} +{len(x)}" for g, x in topped.items()), flush=True)
    dirs = []
    seen: dict[str, int] = {}
    for h in hist:
        seen[h] = seen.get(h, 0) + 1
        d = work / f"{h}-{seen[h]}"
        argv = [sys.executable, "-m", "opscreen", "run", "--isolation", HISTORY_ISOLATION[h], "--ops-file",
                str(work / "sample.txt"), "--out", str(d), "--timeout", str(args.timeout), "--plain"]
        for flag in ("backend", "suite", "python", "devices"):
            if getattr(args, flag):
                argv += [f"--{flag}", str(getattr(args, flag))]
        if h == "op" and seen[h] == 2:  # every op on another chip than in op-1 (with 2+ devices): chip cells
            argv += ["--placement-shift", "1"]
        print(f"opscreen calibrate: screen {d.name} ({len(ops)} ops, seed {seed})", flush=True)
        rc = subprocess.call(argv, stdin=subprocess.DEVNULL)
        if rc == 2 and not dirs and fresh:  # the first screen refused its arguments: leave nothing behind
            (work / "sample.txt").unlink(missing_ok=True)
            if made and not any(work.iterdir()):
                work.rmdir()
        if rc in (2, 130):
            raise SystemExit(rc)
        dirs.append(d)
    draw = {"seed": seed, "sample": ops, "work": str(work)}
    if args.timers_from:
        draw.update(timers_from=str(args.timers_from), min_per_timer=args.min_per_timer, topped_up=topped)
    if args.extends:
        draw["extends"] = str(args.extends)
    return dirs, draw


def _provenance(summaries, draw: dict | None, seeds: list[int] | None = None,
                draws: list[list] | None = None) -> dict:
    from ..results.summary import op_identity

    ident = op_identity(summaries[0])
    first_op = next((o for o in summaries[0].ops if o.device_name), None)
    several = bool(draws) and len(draws) > 1  # run() checked: one seed per draw, when seeds are given
    extra = {"draws": [{"runs": [s.name for s in d], "seed": seeds[k] if seeds else None,
                        "ops": sorted({o.op for s in d for o in s.ops if o.status == "passed"})}
                       for k, d in enumerate(draws)]} if several else {}
    return {**{
        "device_name": (summaries[0].caliber or {}).get("device_name") or (first_op.device_name if first_op else None),
        "backend": (summaries[0].caliber or {}).get("backend"),
        "driver_version": ident.get("driver_version"),
        "torch_version": ident.get("torch_version"),
        "triton_version": ident.get("triton_version"),
        "suite_commit": (summaries[0].caliber or {}).get("suite_commit"),
        "timer": (summaries[0].caliber or {}).get("timer"),
        "runs": [{"name": s.name, "isolation": (s.caliber or {}).get("isolation"), "ops": len(s.ops)} for s in summaries],
        "ops": sorted({o.op for s in summaries for o in s.ops if o.status == "passed"}),
        "seed": draw["seed"] if draw else (seeds[0] if seeds and not several else None),
        **({k: draw[k] for k in ("timers_from", "min_per_timer", "topped_up")} if draw and "topped_up" in draw else {}),
        **({"work": draw["work"]} if draw else {}),
        **({"extends": draw["extends"]} if draw and "extends" in draw else {}),
        "made": utcnow(),
        "how": "opscreen calibrate",
    }, **extra}


def run(args) -> int:
    from ..results import noise
    from ..results.compare import check_caliber
    from ..results.summary import load_or_build

    draw = None
    if args.runs and args.backend:
        raise UsageError("give RUN_DIRs to fit from, or --backend to screen a sample first, not both")
    if not args.runs and not args.backend:
        raise UsageError("nothing to calibrate from: give two or more RUN_DIRs, or --backend B to screen a sample")
    for name, default in SCREEN_DEFAULTS.items():
        if args.runs and getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is for screen mode (--backend B): with RUN_DIRs there is nothing to screen")
        if getattr(args, name) is None:
            setattr(args, name, default)
    hist = _histories(args.histories)
    _check_outputs(args)
    seeds = _seeds(args.seed)
    groups = draw_groups(args.runs) if args.runs else None
    if groups is not None:
        seen: dict[Path, str] = {}
        for d in (d for g in groups for d in g):
            key = d.expanduser().resolve()
            if key in seen:
                raise UsageError(f"{d} is given twice (as {seen[key]}): a run paired with itself reads no noise")
            seen[key] = str(d)
    if groups is not None and sum(len(g) for g in groups) < 2:
        raise UsageError("give two or more RUN_DIRs: the noise between processes needs pairs of screens")
    if groups is not None and seeds is not None and len(seeds) != len(groups):
        raise UsageError(f"--seed {args.seed}: {len(seeds)} seed{'s' if len(seeds) != 1 else ''} for {len(groups)} "
                         f"draw{'s' if len(groups) != 1 else ''}; give one per draw, comma-separated")
    if groups is None:
        dirs, draw = _screen(args, hist)
        groups = [dirs]
    loaded = [[load_or_build(d)[0] for d in g] for g in groups]
    if len(loaded) > 1:  # a draw's "op" is not another draw's "op": name each run by its path
        for g, ds in zip(loaded, groups):
            for s, d in zip(g, ds):
                s.name = str(d).rstrip("/")
    summaries = [s for g in loaded for s in g]
    for s in summaries[1:]:
        chk = check_caliber(summaries[0].caliber, s.caliber, allow=("isolation",))
        if not chk.ok:
            raise UsageError(f"{s.name} was measured differently from {summaries[0].name}: "
                             + "; ".join(f"{f} {x} vs {y}" for f, x, y in chk.refused))
    pairs = [(a, b, noise.history_of((a.caliber or {}).get("isolation"), (b.caliber or {}).get("isolation")))
             for g in loaded for a, b in itertools.combinations(g, 2)]
    prov = _provenance(summaries, draw, seeds, loaded)
    device = prov["device_name"] or "unknown device"
    table = noise.fit(pairs, name=args.name or device, match=args.match or _literal(device), provenance=prov)
    if not table.cells:
        raise UsageError("the runs share no measured rows: screen the same ops in each")
    out = Path(args.out) if args.out else noise.floors_dirs()[0] / f"{_slug(device)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    noise.write(table, out)
    print("\n".join(noise.format_table(table)))
    print(f"\nwrote {out}" + ("" if args.out else " (opscreen compare finds it there by device name)"))
    if draw and draw.get("extends"):
        print("\n".join(pool_hint(draw["extends"], groups[0], draw["seed"], device)), flush=True)
    return 0


def pool_hint(extends: str, new_runs: list[Path], new_seed: int, device: str) -> list[str]:
    """After ``--extends FLOORS``: the command that fits one table from FLOORS's draws and this
    one (a draw each, paired within itself), and a warning when FLOORS is for another device."""
    from ..results import noise

    old = noise.load(extends, flag="--extends")
    prov = old.provenance or {}
    if prov.get("draws"):
        draws = [([str(r) for r in d.get("runs") or []], d.get("seed")) for d in prov["draws"]]
    else:
        work = prov.get("work")
        runs = [str(Path(work) / r["name"]) if work else str(r["name"]) for r in prov.get("runs") or []]
        draws = [(runs, prov.get("seed"))]
    draws.append(([str(r) for r in new_runs], new_seed))
    seeds = [s for _, s in draws]
    cmd = "opscreen calibrate " + " ".join(",".join(_short(x) for x in r) for r, _ in draws)
    if all(s is not None for s in seeds):
        cmd += " --seed " + ",".join(str(s) for s in seeds)
    lines = [f"\nthis draw extends {extends}; to fit one table from its draws and this one (each paired within itself):",
             f"  {cmd}"]
    gone = [r for rs, _ in draws[:-1] for r in rs if not Path(r).is_dir()]
    if gone:
        lines.append(f"  ({len(gone)} of {extends}'s screens are not where its provenance names them, e.g. {gone[0]}: "
                     "give their paths)")
    if not old.matches(device):
        lines.append(f"warning: {extends} is for {old.name!r} (match {old.match!r}), this draw ran on {device!r}: "
                     "pool the draws of one device model only")
    return lines


def _check_outputs(args) -> None:
    """``--match`` and ``--out`` are usable, before anything is screened or written (``--work``:
    :func:`_screen`, which checks the default too)."""
    import re

    from ..errors import check_out_file, check_writable_dir
    from ..results import noise

    if args.match is not None:
        try:
            re.compile(args.match)
        except re.error as exc:
            raise UsageError(f"--match {args.match!r}: not a regular expression ({exc})") from None
    if args.out is not None:
        check_out_file(args.out, "--out", "floors.json")
    else:
        check_writable_dir(noise.floors_dirs()[0], "--out")  # the default: the floors dir (OPSCREEN_FLOORS_DIR)


def _short(path: str) -> str:
    """``path`` relative to the working directory when it lies under it (as a user typed it)."""
    p = Path(path)
    try:
        return str(p.relative_to(Path.cwd())) if p.is_absolute() else path
    except ValueError:
        return path


def _literal(name: str) -> str:
    import re

    return re.escape(name)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-").lower() or "device"
