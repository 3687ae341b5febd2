"""``opscreen devices``: the devices a backend sees, and which source saw them."""

from __future__ import annotations

import os
import sys

from .. import settings as S
from ..tables import emit, table
from ._common import add_backend_arguments, print_json, selection_from

NAME = "devices"
HELP = "list the devices of a backend (vendor CLI and torch probe, each with a timeout)"
ORDER = 20


def add_arguments(p) -> None:
    add_backend_arguments(p)
    p.add_argument("--python", help="the suite's interpreter for the torch probe (default: this one)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args) -> int:
    S.enumeration_timeouts(os.environ)  # a bad one is one line, not "no devices found"
    sel = selection_from(args)
    b = sel.backend
    en = b.enumerate(args.python)
    if args.json:
        print_json(
            {
                "backend": b.name,
                "vendor": b.vendor,
                "selected_by": sel.source,
                "devices": [{"index": d.index, "name": d.name, "source": d.source} for d in en.devices],
                "sources_tried": en.sources_tried,
                "messages": en.messages,
            }
        )
        return 0
    print(f"backend {b.name} (vendor {b.vendor}, selected by {sel.source})")
    for msg in en.messages:
        print(f"  note: {msg}", file=sys.stderr)
    if not en.devices:
        print(f"  no {b.name} devices found (tried: {', '.join(en.sources_tried) or 'nothing'})")
        return 0
    t = table("index>", "name", "source")
    for d in en.devices:
        t.row(d.index, d.name, d.source)
    emit([t])
    if b.capabilities.slots:
        print("  on this backend --devices 0,1,... are parallel slots on the host")
    return 0
