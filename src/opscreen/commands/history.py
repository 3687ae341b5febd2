"""``opscreen history [OP]``: each case's series over suite commits and its change points (docs/store.md)."""

from __future__ import annotations

from ._common import add_noise_k_argument, add_repo_argument, commit_order, percent
from .store import add_db_argument

NAME = "history"
HELP = "each case's series over suite commits in the results store, its change points and flaky cases"
DESCRIPTION = (
    "Read the runs of one caliber on one device model from the results store (opscreen store add) and print, "
    "per case of OP (every op when OP is left out), its series over the runs (ordered by their start, each named "
    "by its suite commit), the change points found in it (asv's step detection, then the noise model: a step "
    "within the case's floors band, the band compare uses between two processes, is no change) with their "
    "commit range, step and evidence, and the cases whose verdict flips back and forth (flaky). See docs/store.md."
)
ORDER = 48


def add_arguments(p) -> None:
    p.add_argument("op", nargs="?", metavar="OP", help="the op (default: every op; the series shown are then those "
                                                       "with change points or flips, unless --all)")
    p.add_argument("--device", metavar="D", help="the device model (its name, as run_identity.json says it; default: "
                                                 "that of the store's latest run)")
    p.add_argument("--caliber", type=int, metavar="ID", help="the caliber (default: that of the latest run; the head "
                                                             "lists the others)")
    p.add_argument("--metric", choices=("speedup", "lib_ms"), default="speedup",
                   help="the speedup over torch (default) or the library's latency")
    p.add_argument("--min-change", default="1", metavar="PCT",
                   help="never call a step below PCT a change, however narrow its band (default 1)")
    p.add_argument("--min-size", type=int, default=2, metavar="N",
                   help="runs a level needs inside the series to count (default 2; fewer: an outlier)")
    p.add_argument("--floors", metavar="FILE", help="the floors table (default: the one found for the device, else "
                                                    "the conservative default)")
    add_noise_k_argument(p)
    add_repo_argument(p)
    p.add_argument("--all", action="store_true", help="show every case's series, not only those that changed")
    p.add_argument("--json", action="store_true", help="print the history as JSON")
    add_db_argument(p)


def run(args) -> int:
    import json

    from ..errors import UsageError, check_given
    from ..results import noise
    from ..store.db import open_store
    from ..store.history import format_history, load_history

    check_given(args.op, "OP", "give an op's name, or leave it out for every op")
    check_given(args.device, "--device", "give the device model's name (opscreen store list shows them)")
    if args.min_size < 1:
        raise UsageError(f"--min-size {args.min_size}: give a number of runs, 1 or more")
    min_change = percent(args.min_change) / 100.0
    table = noise.load(args.floors) if args.floors else True
    order, ordered_by = commit_order(args.repo)
    store = open_store(args.db, create=False)
    try:
        h = load_history(store, args.op, args.device, caliber=args.caliber, metric=args.metric, k=args.noise_k,
                         min_change=min_change, min_size=args.min_size, table=table, order=order,
                         ordered_by=ordered_by)
    finally:
        store.close()
    if args.json:
        print(json.dumps(h.to_json(), indent=1, default=str))
    else:
        print(format_history(h, args.op, show_all=args.all))
    return 0
