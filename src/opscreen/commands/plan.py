"""``opscreen plan``: the pytest plugins a per-op child would load."""

from __future__ import annotations

from ..op.plan import planned_timer, plugin_plan
from ..settings import TIMERS, default
from ._common import add_backend_arguments, print_json, selection_from

NAME = "plan"
HELP = "print the plugin plan (-p list) for a backend"
ORDER = 30


def add_arguments(p) -> None:
    add_backend_arguments(p)
    p.add_argument("--timer", default=default("timer"), choices=TIMERS, help="requested timer (default auto)")
    p.add_argument("--json", action="store_true")


def run(args) -> int:
    sel = selection_from(args)
    plan = plugin_plan(sel.backend, args.timer)
    timer = planned_timer(sel.backend, args.timer)
    if args.json:
        print_json({"backend": sel.name, "vendor": sel.vendor, "timer": timer, "plugins": [p.module for p in plan]})
        return 0
    print(f"backend {sel.name} (vendor {sel.vendor}, selected by {sel.source}), timer {timer}")
    for p in plan:
        print(f"  -p {p.module:<28} {p.why}")
    return 0
