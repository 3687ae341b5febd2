"""``opscreen publish --out SITE``: a static site of the results store's history (docs/store.md)."""

from __future__ import annotations

from ._common import add_noise_k_argument, add_repo_argument, commit_order, percent
from .store import add_db_argument

NAME = "publish"
HELP = "write a static site of the results store's history: an index of ops, a page per op with plots"
DESCRIPTION = (
    "Write SITE/index.html (every op of one caliber on one device model: its cases, latest geometric-mean "
    "metric, open change points and flaky cases), SITE/ops/<op>.html (its change points, and each case's history "
    "plot with a permalink) and SITE/history.json, from the results store (opscreen store add). Relative links "
    "only: the site works from file:// and from any static host. The change points are opscreen history's."
)
ORDER = 49


def add_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="SITE", help="the site's folder (new, empty, or a site that "
                                                               "publish wrote: it is replaced whole)")
    p.add_argument("--device", metavar="D", help="the device model (default: that of the store's latest run)")
    p.add_argument("--caliber", type=int, metavar="ID", help="the caliber (default: that of the latest run)")
    p.add_argument("--metric", choices=("speedup", "lib_ms"), default="speedup",
                   help="the speedup over torch (default) or the library's latency")
    p.add_argument("--min-change", default="1", metavar="PCT", help="never call a step below PCT a change (default 1)")
    p.add_argument("--floors", metavar="FILE", help="the floors table (default: the one found for the device)")
    add_repo_argument(p)
    add_noise_k_argument(p)
    add_db_argument(p)


def run(args) -> int:
    from ..errors import check_given
    from ..results import noise
    from ..store.db import open_store
    from ..store.history import load_history
    from ..store.publish import check_out, publish
    from pathlib import Path

    check_given(args.out, "--out", "give the folder to write the site in")
    check_given(args.device, "--device", "give the device model's name (opscreen store list shows them)")
    out = Path(args.out).expanduser().absolute()
    check_out(out)  # before the store is read
    min_change = percent(args.min_change) / 100.0
    table = noise.load(args.floors) if args.floors else True
    order, ordered_by = commit_order(args.repo)
    store = open_store(args.db, create=False)
    try:
        h = load_history(store, None, args.device, caliber=args.caliber, metric=args.metric, k=args.noise_k,
                         min_change=min_change, table=table, order=order, ordered_by=ordered_by)
    finally:
        store.close()
    n = publish(h, out)
    print(f"opscreen publish: {n['ops']} ops, {n['cases']} cases over {n['runs']} runs, {n['open']} open change "
          f"points; wrote {out / 'index.html'}")
    return 0
