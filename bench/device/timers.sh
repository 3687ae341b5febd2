#!/usr/bin/env bash
# The timers' own checks on one GPU, one device-tool call (run from the repo root with
# .fg/FlagGems and .whl carried):
#
#   BUDGET=540 bash bench/device/timers.sh
#   CHECKS=profiler bash bench/device/timers.sh   # only one of them (profiler, settle)
#
# profiler: bench/device/profiler_check.py in PROCESSES (default 3) fresh processes: the
#   profiler timer against the graph timer and triton's do_bench on capturable and
#   uncapturable torch ops (docs/timing.md; bench/results/2026-11-30-h200-profiler.md).
# settle: bench/device/canary_probe.py --check, twice (fresh processes): the device state a
#   process settles into before its first measurement, and whether the graph timer's small
#   kernels hold still after it (bench/results/2026-12-01-h200-settle.md).
# The A/A of the uncapturable ops is bench/device/aa.sh with OPS=... of them. Replaces
# the retired h200_checks.sh's profiler and lanes18 steps.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh timers
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
for c in ${CHECKS:-profiler settle}; do
  [ "$(left)" -gt 30 ] || { echo "$c: skipped (time)"; continue; }
  case "$c" in
    profiler)
      timeout -s INT "$(left)" python3 bench/device/profiler_check.py --processes "${PROCESSES:-3}" \
          --json "$OUT/profiler_check.json" 2>&1 | tail -45 ;;
    settle)
      for k in 1 2; do
        timeout -s INT "$(left)" python3 bench/device/canary_probe.py --check --json "$OUT/settle-$k.json" 2>&1 | tail -20
      done ;;
    *) echo "unknown check $c" >&2; exit 2 ;;
  esac
  echo "$c done at $SECONDS s"
done
ls -la "$OUT"
