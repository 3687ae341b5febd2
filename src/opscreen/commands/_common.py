"""Arguments several commands share."""

from __future__ import annotations

import argparse
import json
import sys

from ..backends import Selection, resolve, select


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", help="backend name or alias (default: $ZL_BACKEND, else auto-detected, else cpu)")
    p.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="KEY=on|off",
        help="override a capability flag of the backend (repeatable; also $OPSCREEN_CAPS)",
    )


def add_pytest_args(p: argparse.ArgumentParser) -> None:
    """Extra pytest arguments: everything after the first ``--`` of the command line.

    cli.main splits the command line there before argparse runs (argparse mixes a
    ``--`` tail into optional positionals such as ``opscreen op [OP]``), so this
    positional only shows the syntax in --help and catches stray words before ``--``.
    """
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                   help="extra pytest arguments, after --: e.g. -- --warmup 25 --iter 100 (give an option's value "
                   "in the same word, --output=PATH)")


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
