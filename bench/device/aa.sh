#!/usr/bin/env bash
# An A/A of a given op list on one GPU (bench/timing_aa.py: each op run twice, identically,
# in fresh processes; the per-case |speedup change| per op), one device-tool call (run from
# the repo root with .fg/FlagGems and .whl carried):
#
#   OPS=abs,add,softmax,sum,layer_norm BUDGET=540 bash bench/device/aa.sh
#   OPS=layer_norm,softmax,sum OP_ARGS="--repeats 3" bash bench/device/aa.sh     # A/A of --repeats 3
#   OPS=layer_norm RUNS=6 SPLIT_MEDIAN=1 bash bench/device/aa.sh                 # median of 3 vs median of 3
#   OPS=mm OP_ARGS="--test-node benchmark/test_mm.py::test_mm" bash bench/device/aa.sh
#   OPS='' FALLBACK_OPS=nonzero,masked_select,mode bash bench/device/aa.sh       # the uncapturable ops
#
# OPS: main-group ops (default timing_aa.py's: add,softmax,sum,abs,layer_norm,mm);
# FALLBACK_OPS: ops whose graph capture fails (default none); RUNS (default 2); DEVICE
# (default 0); OP_TIMEOUT (default 300); AA_PIN=1 caches Triton's autotuning winners across
# the runs (TRITON_CACHE_AUTOTUNING=1); UPSTREAM=1 adds FlagGems' own --mode cudagraph.
# $OUT/aa.json is the A/A report that `opscreen compare --aa` takes as per-op floors
# (bench/results/2026-11-29-h200-aa-floors.json was made this way); $OUT/aa.tgz the run dirs.
# Replaces the retired h200_checks.sh's aa, repeats, repeats3 and mm-repeats steps.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh aa
[ "${AA_PIN:-0}" = 1 ] && export TRITON_CACHE_AUTOTUNING=1
args=(--suite "$FLAGGEMS_ROOT" --out "$OUT/aa.json" --work "$W/runs" --device "${DEVICE:-0}"
      --timeout "${OP_TIMEOUT:-300}" --runs "${RUNS:-2}" --deadline $(( ${BUDGET:-540} - 20 ))
      --fallback-ops "${FALLBACK_OPS:-}")
[ -n "${OPS+x}" ] && args+=(--ops "$OPS")
[ -n "${OP_ARGS:-}" ] && args+=(--op-args "$OP_ARGS")
[ "${SPLIT_MEDIAN:-0}" = 1 ] && args+=(--split-median)
[ "${UPSTREAM:-0}" = 1 ] && args+=(--upstream)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python3 bench/timing_aa.py "${args[@]}" > "$W/aa.txt" 2>&1; echo "timing_aa rc=$? at $SECONDS s"
tail -40 "$W/aa.txt"
grep -h "opscreen timing:" "$W"/runs/*/run.log "$W"/runs/*/*/run.log 2>/dev/null | sort | uniq -c | sort -rn | head -20
tar czf "$OUT/aa.tgz" -C "$W" .
ls -la "$OUT"
