#!/usr/bin/env bash
# The pull-request gate (docs/gate.md; the workflow docs/ci/opscreen-gate.yml runs it):
# screen the ops a pull request changed on its head and on its base, then let
# `opscreen compare --fail-on` decide.
#
#   scripts/opscreen-gate.sh HEAD_SUITE BASE_REV OUT_DIR [FAIL_ON_PCT] [-- OPSCREEN_RUN_ARGS...]
#
# HEAD_SUITE: the library's checkout at the pull request's head, with its history (fetch-depth 0).
# BASE_REV:   the base branch's commit; the gate compares against its merge base with HEAD, so
#             that what the base branch gained since the fork is not counted as the change.
# OUT_DIR:    gets base-src/ (a git worktree of the merge base), ops.txt (the head's selection),
#             base-ops.txt (those the base has: the base run's --ops-file), head/ and base/ (the run dirs) and compare.csv.
# After --:   arguments for both `opscreen run`s (--backend cuda --python ~/gems/bin/python ...).
# RESOLVE_REPEATS (environment, default 3; 0 or 1: off): when the comparison passes but leaves rows
#             unresolved, their ops run again in RESOLVE_REPEATS fresh processes each on both sides
#             (base-resolve/, head-resolve/) and that comparison decides (compare-resolve.csv): the
#             attempts Pinpoint adds while its answer is unknown.
#
# Exit status: the last compare's (0 no regression of FAIL_ON_PCT % or more, 1 one or more), 0 when
# no op was selected (said on stderr), 2 on bad input (a run or compare that refused its arguments).
set -euo pipefail

usage() { echo "usage: $0 HEAD_SUITE BASE_REV OUT_DIR [FAIL_ON_PCT] [-- OPSCREEN_RUN_ARGS...]" >&2; exit 2; }
[ $# -ge 3 ] || usage
HEAD_SUITE=$1 BASE_REV=$2 OUT=$3
shift 3
FAIL_ON=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then FAIL_ON=$1; shift; fi
if [ $# -gt 0 ]; then [ "$1" = "--" ] || usage; shift; fi
OPSCREEN=${OPSCREEN:-opscreen}
RESOLVE_REPEATS=${RESOLVE_REPEATS:-3}
[[ "$RESOLVE_REPEATS" =~ ^[0-9]+$ ]] || { echo "opscreen-gate: RESOLVE_REPEATS=$RESOLVE_REPEATS: give a whole number (0: no resolve round)" >&2; exit 2; }

MERGE_BASE=$(git -C "$HEAD_SUITE" merge-base "$BASE_REV" HEAD 2>/dev/null) || {
    echo "opscreen-gate: $BASE_REV has no merge base with HEAD in $HEAD_SUITE (a git checkout with its history?)" >&2
    exit 2
}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

echo "== the ops changed since $MERGE_BASE, on the head"
set +e
"$OPSCREEN" run --suite "$HEAD_SUITE" --changed-since "$MERGE_BASE" --write-ops "$OUT/ops.txt" --out "$OUT/head" --plain "$@"
rc=$?
set -e
[ "$rc" -le 1 ] || exit "$rc"  # 0 all passed, 1 some op did not pass (compare judges it); else stop
if ! grep -qv '^#' "$OUT/ops.txt"; then
    echo "opscreen-gate: no op changed since $MERGE_BASE: nothing to gate" >&2
    exit 0
fi

echo "== the same ops on the base ($MERGE_BASE)"
if [ ! -d "$OUT/base-src" ]; then
    git -C "$HEAD_SUITE" worktree add --detach "$OUT/base-src" "$MERGE_BASE" >/dev/null
fi
# an op the pull request adds has no base to compare with: the base screens the others
"$OPSCREEN" inventory --suite "$OUT/base-src" --no-collect --out "$OUT/base-inventory.json" >/dev/null
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
known = set(json.load(open(f"{out}/base-inventory.json"))["ops"])
ops = [l.strip() for l in open(f"{out}/ops.txt") if l.strip() and not l.startswith("#")]
new = [op for op in ops if op not in known]
if new:
    print(f"opscreen-gate: {len(new)} ops are new in the head (no base to compare): {', '.join(new)}", file=sys.stderr)
with open(f"{out}/base-ops.txt", "w") as f:
    f.write("# the head's selection that the base has\n" + "".join(f"{op}\n" for op in ops if op in known))
PY
if ! grep -qv '^#' "$OUT/base-ops.txt"; then
    echo "opscreen-gate: every selected op is new in the head: nothing to compare" >&2
    exit 0
fi
set +e
"$OPSCREEN" run --suite "$OUT/base-src" --ops-file "$OUT/base-ops.txt" --out "$OUT/base" --plain "$@"
rc=$?
set -e
[ "$rc" -le 1 ] || exit "$rc"

echo "== compare: base -> head, failing on a regression of $FAIL_ON % or more"
set +e
"$OPSCREEN" compare "$OUT/base" "$OUT/head" --fail-on "$FAIL_ON" --out "$OUT/compare.csv" --write-unresolved "$OUT/unresolved.txt"
rc=$?
set -e
if [ "$rc" -ne 0 ] || [ "$RESOLVE_REPEATS" -le 1 ] || ! grep -qv '^#' "$OUT/unresolved.txt"; then
    exit "$rc"
fi

echo "== resolve: the ops with unresolved rows again, $RESOLVE_REPEATS fresh processes each, base then head"
for side in base head; do
    src="$OUT/base-src"; [ "$side" = head ] && src="$HEAD_SUITE"
    set +e
    "$OPSCREEN" run --suite "$src" --ops-file "$OUT/unresolved.txt" --out "$OUT/$side-resolve" --plain "$@" \
        --repeats "$RESOLVE_REPEATS" --isolation op
    rc=$?
    set -e
    [ "$rc" -le 1 ] || exit "$rc"
done
exec "$OPSCREEN" compare "$OUT/base-resolve" "$OUT/head-resolve" --fail-on "$FAIL_ON" --out "$OUT/compare-resolve.csv"
