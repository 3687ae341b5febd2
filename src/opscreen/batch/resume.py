"""Resuming a batch run dir, or replaying one: its recorded settings, and the checks
that refuse a resume that would mix measurements made differently."""

from __future__ import annotations

from pathlib import Path

from .. import settings as S
from ..errors import UsageError


def load_settings(run_dir: Path, what: str) -> dict:
    from .. import contracts
    from .journal import IDENTITY, json_problem

    ident = contracts.read(contracts.RUN_IDENTITY, run_dir / IDENTITY)  # a newer one: one line, exit 2
    problem = json_problem(run_dir / IDENTITY)
    if problem not in (None, "missing"):
        raise UsageError(f"{what} {run_dir}: its run_identity.json is damaged ({problem}); the run's settings cannot be read")
    if not ident or ident.get("kind") != "run" or not isinstance(ident.get("settings"), dict):
        raise UsageError(f"{what} {run_dir}: no batch run_identity.json there (give the RUN_DIR of an earlier 'opscreen run')")
    return ident


def refuse_other_timing(out: Path, recorded: dict, backend, planned: str) -> None:
    """A resume measures the rest of the ops as the run's first session did: the same
    timing knobs (``OPSCREEN_*``) and, when the ``planned`` timer is graph, the same
    timing method, else a usage error."""
    from ..child.config import TIMING_METHOD
    from ..op.run import planned_timing

    clash = []
    had, now = recorded.get("timing") or {}, planned_timing(backend)
    if _effective(had) != _effective(now):
        clash.append(f"timing knobs (OPSCREEN_* variables): recorded {had or 'defaults'}, now {now or 'defaults'}"
                     + _as_recorded(had, now))
    method = recorded.get("timing_method") or 1
    if planned == "graph" and method != TIMING_METHOD:
        clash.append(f"timing method: recorded {method}, this opscreen measures with {TIMING_METHOD} (docs/timing.md)")
    if clash:
        raise _mixed(out, clash)


def _mixed(out: Path, clash: list[str]) -> UsageError:
    """One line: what the recorded run and this session differ in."""
    return UsageError(f"{out} was measured with other settings ({'; '.join(clash)}); resuming would mix "
                      "measurements: use another --out")


def _effective(timing: dict) -> dict:
    """The knobs of a timing dict that differ from the child's defaults: a knob written at its
    default value measures as one left out."""
    from ..child.config import TIMING_DEFAULTS

    return {k: v for k, v in timing.items() if k not in TIMING_DEFAULTS or TIMING_DEFAULTS[k] != v}


def _as_recorded(had: dict, now: dict) -> str:
    """How to plan the recorded knobs again where the difference is knobs this opscreen sets
    that the run did not record (an older opscreen's run): their variables at their defaults."""
    from ..child.config import TIMING_DEFAULTS, TIMING_ENV

    env_of = {name: env for env, name in TIMING_ENV.items()}  # every such knob has a default
    now_set = _effective(now)
    new = [k for k in now_set if k not in had]
    if not new or any(k not in env_of for k in new) or any(now_set.get(k) != v for k, v in _effective(had).items()):
        return ""
    words = " ".join(f"{env_of[k]}={_word(TIMING_DEFAULTS[k])}" for k in sorted(new))
    return f"; to measure the rest as recorded: {words}"


def _word(value) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def open_run_dir(out: Path, journal, resume: bool | None, in_place_replay: bool) -> tuple[dict | None, bool]:
    """The identity of the run in ``out`` (None: a new run) and whether this session resumes it;
    a run dir that cannot be resumed is a one-line UsageError."""
    existing = journal.read_identity() if out.is_dir() else None
    damaged = journal.identity_problem() if out.is_dir() else None
    holds_ops = (out / "ops").is_dir() and any((out / "ops").iterdir())
    if damaged and holds_ops:
        raise UsageError(
            f"--out {out}: its run_identity.json is damaged ({damaged}); it held the run's settings (ops, devices, "
            "how they were measured), so this run dir cannot be resumed: start again with another --out "
            f"(the op results under {out / 'ops'} are left as they are)"
        )
    if out.is_dir() and not existing and holds_ops:
        raise UsageError(f"--out {out} holds op results but no run_identity.json: not a run dir of 'opscreen run'")
    resuming = existing is not None and not in_place_replay
    if resuming and resume is False:
        raise UsageError(f"--no-resume: {out} already holds a run; choose another --out")
    if existing is not None and existing.get("kind") != "run":
        raise UsageError(f"--out {out} is not a batch run dir (run_identity.json kind {existing.get('kind')!r})")
    return existing, resuming


def refuse_clashes(out: Path, resolved: S.Resolved, recorded: dict, asked_backend, asked_suite: str | None) -> None:
    """Caliber settings asked explicitly (flag or environment) must match the run being resumed,
    and so must an explicit backend (``asked_backend``) and suite."""
    clash = S.caliber_clashes(resolved, recorded)
    if asked_backend is not None and recorded.get("backend"):
        if asked_backend.name != recorded["backend"] or asked_backend.vendor != recorded.get("vendor"):
            clash.append(f"backend: recorded {recorded['backend']}/{recorded.get('vendor')}, "
                         f"asked {asked_backend.name}/{asked_backend.vendor}")
    if asked_suite and recorded.get("suite_root") and str(Path(asked_suite).expanduser().resolve()) != recorded["suite_root"]:
        clash.append(f"suite: recorded {recorded['suite_root']}, asked {Path(asked_suite).resolve()}")
    if clash:
        raise _mixed(out, clash)


def refuse_moved_suite(out: Path, existing: dict | None, suite) -> None:
    rec_commit = ((existing or {}).get("caliber") or {}).get("suite_commit")
    now_commit = (suite.git or {}).get("commit")
    if rec_commit and now_commit and rec_commit != now_commit:
        raise UsageError(
            f"{out}: the suite moved from commit {rec_commit[:12]} to {now_commit[:12]} since this run started; "
            "resuming would mix measurements (use another --out)"
        )
