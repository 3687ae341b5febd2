"""``opscreen merge RUN_DIR... --out M``: join the run dirs of ``--shard`` runs into one.

The joining and its checks are :mod:`opscreen.batch.join`'s; this module parses the
command line and says what was merged.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import check_given

NAME = "merge"
HELP = "join the run dirs of one screen's shards (opscreen run --shard I/N) into one run dir"
DESCRIPTION = (
    "Join run dirs of one screen, split with 'opscreen run --shard I/N' across machines (a Slurm job array, "
    "say), into one new run dir that summary, compare and report read like any other (and 'opscreen run "
    "--out M' resumes: it runs the ops no shard completed). The inputs must be measured one way (the same "
    "caliber) and hold disjoint ops; otherwise nothing is written (exit 2). See docs/batch.md."
)
ORDER = 36


def add_arguments(p) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="the run dirs to join (opscreen run --out of each shard)")
    p.add_argument("--out", required=True, metavar="M", help="the merged run dir (a new directory)")


def run(args) -> int:
    from ..batch.join import join_runs

    check_given(args.out, "--out", "give the merged run dir (a new directory)")
    for r in args.runs:
        check_given(r, "RUN_DIR", "give the run dir of a shard")
    m = join_runs([Path(r) for r in args.runs], Path(args.out))
    counts: dict[str, int] = {}
    for rec in m.records.values():
        counts[rec.status] = counts.get(rec.status, 0) + 1
    parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no complete op"
    print(f"opscreen merge: {len(m.records)} ops from {len(args.runs)} run dirs ({parts}) into {m.out}; state {m.state}")
    for root, n in m.incomplete.items():
        print(f"opscreen merge: {root}: {n} op(s) not complete, left out; run them with: opscreen run --out {m.out}")
    return 0
