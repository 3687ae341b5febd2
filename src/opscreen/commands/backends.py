"""``opscreen backends``: the registry, as text or JSON."""

from __future__ import annotations

from ..backends import BACKENDS, DETECT_ORDER
from ._common import print_json

NAME = "backends"
HELP = "list the known backends, their aliases, env keys and capabilities"
ORDER = 10


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args) -> int:
    rows = [b.describe() for b in BACKENDS.values()]
    if args.json:
        print_json({"detect_order": list(DETECT_ORDER) + ["cpu"], "backends": rows})
        return 0
    for r in rows:
        aliases = ", ".join(f"{a}" + (f" (vendor {v})" if v else "") for a, v in r["aliases"].items()) or "-"
        caps = ", ".join(k for k, v in r["capabilities"].items() if v is True) or "-"
        print(f"{r['name']:<7} {r['description']}")
        print(f"        aliases: {aliases}")
        print(f"        torch device: {r['device_type']}   GEMS_VENDOR: {r['vendor']}")
        print(f"        visible-devices env: {', '.join(r['visible_env']) or '(none: indices are parallel slots)'}")
        print(f"        device CLIs: {', '.join(r['cli']) or '-'}")
        print(f"        capabilities: {caps}")
    print(f"auto-detection order: {', '.join(DETECT_ORDER)}, then cpu")
    return 0
