"""Arguments several commands share."""

from __future__ import annotations

import argparse
import json
import sys

from .. import settings as S
from ..backends import Selection, resolve, select
from ..errors import UsageError
from ..results.summary import DEFAULT_MAX_BAND, NOISE_K


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """``--backend`` and ``--cap``, as opscreen.settings declares them."""
    S.add_arguments(p, S.OP, names=("backend", "cap"))


def recorded_backend(settings: dict):
    """The backend a recorded run (its settings) used, with its recorded capabilities
    (graph_api aside: it follows from the backend)."""
    backend = resolve(settings["backend"]).with_vendor(settings.get("vendor"))
    caps = dict(settings.get("capabilities") or {})
    caps.pop("graph_api", None)
    return backend.with_capabilities(**caps) if caps else backend


def selection_from(args) -> Selection:
    return select(getattr(args, "backend", None), caps=getattr(args, "cap", None))


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def percent(text) -> float:
    """A percentage option's value (``3`` or ``3%``) -> 3.0; UsageError when not one, not
    finite, or negative."""
    try:
        v = float(str(text).rstrip("%"))
    except ValueError:
        raise UsageError(f"not a percentage: {text!r} (e.g. 3 or 3%)") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise UsageError(f"not a finite percentage: {text!r} (e.g. 3 or 3%)")
    if v < 0:
        raise UsageError(f"a percentage must not be negative: {text!r}")
    return v


def noise_k(value: str) -> float:
    """``--noise-k K``: a finite number > 0 (argparse type; a bad one is one line, exit 2)."""
    try:
        k = float(value)
    except ValueError:
        k = float("nan")
    if not (k > 0 and k != float("inf")):
        raise argparse.ArgumentTypeError(f"{value!r}: give a number > 0 (the band is K x the row's noise)")
    return k


def add_noise_k_argument(p: argparse.ArgumentParser) -> None:
    """``--noise-k K``: a row's band is K x its recorded noise (compare, summary, report)."""
    p.add_argument("--noise-k", type=noise_k, default=NOISE_K, metavar="K",
                   help=f"a row's band is K x its recorded noise, sqrt(noise_A^2 + noise_B^2) between two runs "
                        f"(default {NOISE_K:g})")


def add_repo_argument(p: argparse.ArgumentParser) -> None:
    """``--repo PATH``: order a history's runs by their suite commits' dates (history, publish)."""
    p.add_argument("--repo", metavar="PATH",
                   help="order the runs by their suite commits' dates in this git checkout of the suite (asv's order), "
                        "not by when they ran: for screens of older commits made later (a backfill, a bisection)")


def commit_order(repo: str | None):
    """``(order, ordered_by)`` for :func:`opscreen.store.history.load_history` from ``--repo``:
    the runs by their start without one; a path that is no checkout is one line, at once."""
    if repo is None:
        return None, "run start"
    from pathlib import Path

    from ..errors import check_given
    from ..gitinfo import commit_times, require_checkout

    check_given(repo, "--repo", "give the path of the suite's git checkout")
    path = require_checkout(Path(repo))  # before the store is opened
    return (lambda commits: commit_times(path, commits)), f"commit date in {repo}"


def add_max_band_argument(p: argparse.ArgumentParser) -> None:
    """``--max-band PCT``: rows whose band is wider are "unresolved" (compare, summary)."""
    p.add_argument("--max-band", default=f"{DEFAULT_MAX_BAND * 100:g}", metavar="PCT",
                   help="a row whose noise band is wider than ±PCT is 'unresolved': neither same nor "
                        f"faster/slower (default {DEFAULT_MAX_BAND * 100:g})")


SUITE_BUDGETS = ("--warmup", "--iter")


def warn_suite_budgets(extra_args, timer: str, who: str) -> bool:
    """One line on stderr when the suite's ``--warmup``/``--iter`` (its ``do_bench`` budgets,
    in ms) are passed through to a timer that does not use them (every timer but
    ``direct``); True when it warned."""
    given = [a for a in extra_args or () if str(a).split("=", 1)[0] in SUITE_BUDGETS]
    if not given or timer == "direct":
        return False
    sys.stderr.write(f"{who}: {' '.join(sorted({a.split('=', 1)[0] for a in given}))} set the suite's do_bench "
                     f"budgets, which the {timer} timer does not use: it samples by its own knobs "
                     "(OPSCREEN_WARMUP_MS, OPSCREEN_MAX_TIME, ...; docs/timing.md, \"Knobs\"); --timer direct times "
                     "with the suite's do_bench\n")
    return True
