#!/usr/bin/env bash
# A resumable screen of a seeded random draw of the inventory, defaults, every GPU, one
# device-tool call at a time (run from the repo root with .fg/FlagGems and .whl carried):
#
#   SEED=20261130 N_OPS=24 BUDGET=540 bash bench/device/screen.sh
#   N_OPS=all bash bench/device/screen.sh          # the whole inventory (many calls)
#   OPS_FILE=my_ops.txt bash bench/device/screen.sh  # a list of your own instead of a draw
#
# The draw is N_OPS ops of ops/flaggems-inventory.yaml (seed SEED), less EXCLUDE="op ..."
# (ops left out on purpose: say why in the results). `opscreen run --devices all` with
# --timeout OP_TIMEOUT (default 300: a budget, as in the results) and opscreen's own default
# retries (RETRIES=N passes --retries N), stopped with SIGINT
# at the budget (BUDGET s, default 540), which is how a screen is cut into calls. The run dir
# resumes: on a warm machine from /tmp/screen/run, on a fresh one from .fg/run (the run dir of
# the last call's $OUT/screen.tgz, untarred there). Then summary and report (report.html in
# the tarball). EXTRA_ARGS passes more `opscreen run` arguments (e.g. "--isolation worker").
# Replaces the retired h200_checks.sh's screen and sample steps (bench/results/2026-11-30-h200-sample.md).
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh screen
[ -d .fg/run ] && [ ! -d "$W/run" ] && cp -r .fg/run "$W/run"
if [ -n "${OPS_FILE:-}" ]; then
  grep -v '^#' "$OPS_FILE" | grep . > "$W/sample.txt"
else
  python3 - "${SEED:-20261130}" "${N_OPS:-24}" "${EXCLUDE:-}" > "$W/sample.txt" <<'PY'
import random, sys, yaml
ops = sorted(yaml.safe_load(open("ops/flaggems-inventory.yaml"))["ops"])
n = len(ops) if sys.argv[2] == "all" else int(sys.argv[2])
skip = set(sys.argv[3].split())
print("\n".join(o for o in random.Random(int(sys.argv[1])).sample(ops, n) if o not in skip))
PY
fi
echo "ops ($(wc -l < "$W/sample.txt")): $(tr '\n' ' ' < "$W/sample.txt" | cut -c1-2000)${EXCLUDE:+ (excluded: $EXCLUDE)}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
# shellcheck disable=SC2086
timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --ops-file "$W/sample.txt" \
    --timeout "${OP_TIMEOUT:-300}" ${RETRIES:+--retries "$RETRIES"} ${EXTRA_ARGS:-} --out "$W/run" --plain >> "$W/run.console" 2>&1
echo "run rc=$? at $SECONDS s: $(ls "$W"/run/ops/*/.complete 2>/dev/null | wc -l) of $(wc -l < "$W/sample.txt") ops complete"
tail -3 "$W/run.console"
python3 -m opscreen summary "$W/run" | tail -25
python3 -m opscreen report "$W/run"
tar czf "$OUT/screen.tgz" -C "$W" --exclude='*.console' .
ls -la "$OUT"
