"""The op list of a batch run: which ops (``--ops``, ``--ops-file``, ``--inventory``, a
replay's failures, a resumed run's list, or the whole suite), their targets, their own
dtypes (for level 2), and the dismiss list."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError, read_input
from ..tables import first


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
    if errors:  # one line: the first few, then how many more
        raise UsageError(f"{len(errors)} of {len(ops)} ops cannot be run, nothing was started: {first(errors, 5, '; ')} "
                         "(opscreen inventory lists the suite's ops)")
    return targets


def op_dtype_lists(suite) -> dict[str, list[str]]:
    """op -> the dtypes its tests' ``dtypes=`` expressions name (for level 2)."""
    from .retry import dtypes_from_expr

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
    from .journal import STATUS_CSV, read_status_csv

    rows = read_status_csv(run_dir / STATUS_CSV)
    return [r["op"] for r in rows if r.get("status") not in ("passed", "skipped", "dismissed", "passed_own_dtypes")]


def changed_ops(suite, rev: str) -> tuple[list[str], str]:
    """``--changed-since REV``: the ops the changes since REV touch, each reason said on
    stderr; none is :class:`~opscreen.providers.changes.NothingSelected`."""
    from ..providers.changes import NothingSelected, nothing_selected, report_lines, select

    sel = select(suite, rev)
    for line in report_lines(sel):
        print(f"opscreen run: {line}", file=sys.stderr)
    if not sel.ops:
        raise NothingSelected(nothing_selected(sel))
    return sel.ops, sel.source


def write_ops(path: str, ops: list[str], source: str, flag: str = "--write-ops", who: str = "opscreen run") -> None:
    """``--write-ops FILE`` (or ``flag``): the op list, one per line, readable by ``--ops-file``."""
    from ..fsio import atomic_write_text

    text = f"# {who}: {len(ops)} ops ({source})\n" + "".join(f"{op}\n" for op in ops)
    try:
        atomic_write_text(Path(path).expanduser(), text)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None


def choose_ops(args, suite, replay_dir: Path | None, resuming: bool, recorded: dict) -> tuple[list[str], str]:
    """The ops to run and where the list came from (said in the run identity)."""
    if args.ops is not None:
        ops, source = split_ops(args.ops), "--ops"
    elif args.ops_file is not None:
        ops, source = read_ops_file(args.ops_file), f"--ops-file {args.ops_file}"
    elif getattr(args, "changed_since", None) is not None:
        ops, source = changed_ops(suite, args.changed_since)
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
    return ops, source
