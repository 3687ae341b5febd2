"""Arguments several commands share."""

from __future__ import annotations

import argparse
import json
import sys

from .. import settings as S
from ..backends import Selection, resolve, select


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
