#!/usr/bin/env bash
# The noise between processes on one GPU (issue 31), one device-tool call at a time:
#
#   SEED=20261208 N_OPS=32 BUDGET=540 bash bench/device/noise.sh
#
# draws N_OPS ops of the inventory at random (seed SEED) and screens them with the defaults
# (--timeout OP_TIMEOUT, default 150 s; --retries RETRIES, default 0: a budget, not a product default)
# in the modes MODES (default "op wk op2", in that order): op and op2 are `--isolation op`
# (fresh processes; op runs first, on the machine's cold Triton cache), wk is
# `--isolation worker`; wkpad<K> is a worker holding a seeded random pad below PAD_MB MiB
# (default 1024) through each op, seed K (OPSCREEN_WORKER_PAD, docs/workers.md); off<K> is
# `--isolation op` with the device telemetry off (OPSCREEN_TELEMETRY_MS=0; every other mode
# samples it at the default interval), for issue 32's fresh-process A/A; probe is a warm worker
# with two samples of 50 ms at most per case (the CPU sample suite's 16 ops in a warm worker,
# one after the other on 2026-12-05: median op 0.95 s against 2.84 s with the defaults, 18 s against
# 46 s in all), whose figures are not for comparing: it finds which timer each op of a large draw needs,
# for `opscreen calibrate --sample 0 --timers-from` (docs/usage.md); raw<mode> is <mode> with
# --input-seed off (the suite's own unseeded inputs, as every run before 2026-12-06), every other
# mode runs with the default seed 0 (docs/timing.md, "Inputs"). TIMER
# (default: the run's own default) is passed as --timer. Each mode's run dir resumes where an earlier call stopped: on a warm
# machine from /tmp/noise, on a fresh one from .fg/noise/<mode> (the run dirs of the last
# call's $OUT/noise.tgz, untarred there). Then `opscreen compare` on the pairs, and
# bench/worker_ab.py on wk against op (the A/A and speed figures of docs/workers.md);
# SKIP=K screens only the draw's ops after its first K (Python's random.sample is
# prefix-stable: N_OPS=32 begins with the 13 ops of N_OPS=13, so a later session can add the
# rest of a draw an earlier one began); EXCLUDE=a,b leaves those ops of the draw out (one that
# times out compiling costs OP_TIMEOUT in every mode); ADD=a,b appends those ops to the draw (named
# ops, reported apart from the random ones); OPS=a,b,c screens those ops in place of a draw
# (a named top-up: the ops of a rare timer that an earlier random sample found, to back that timer's
# floors cells as a draw of their own; SEED then only names the run). Run from the repo root with .fg/FlagGems and .whl carried. bench/verdict_rates.py and
# bench/noise_model.py then read the run dirs of noise.tgz (bench/README.md).
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh noise
seed="${SEED:-20261208}"; n_ops="${N_OPS:-32}"; modes="${MODES:-op wk op2}"
for m in $modes; do [ -d ".fg/noise/$m" ] && [ ! -d "$W/$m" ] && cp -r ".fg/noise/$m" "$W/$m"; done
python3 - "$seed" "$n_ops" "${SKIP:-0}" "${EXCLUDE:-}" > "$W/sample.txt" <<'PY'
import random, sys, yaml
inv = yaml.safe_load(open("ops/flaggems-inventory.yaml"))
draw = random.Random(int(sys.argv[1])).sample(sorted(inv["ops"]), int(sys.argv[2]))
print("\n".join(o for o in draw[int(sys.argv[3]):] if o not in sys.argv[4].split(",")))
PY
[ -n "${OPS:-}" ] && tr ',' '\n' <<< "$OPS" | grep -v '^$' > "$W/sample.txt"
[ -n "${ADD:-}" ] && tr ',' '\n' <<< "$ADD" | grep -v '^$' | grep -vxF -f "$W/sample.txt" >> "$W/sample.txt"
n_ops=$(wc -l < "$W/sample.txt")
echo "seed $seed: $(tr '\n' ' ' < "$W/sample.txt")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode --format=csv,noheader
for m in $modes; do
  done_n=$(for o in $(cat "$W/sample.txt"); do [ -f "$W/$m/ops/$o/.complete" ] && echo "$o"; done | wc -l)
  [ "$done_n" -ge "$n_ops" ] && { echo "$m: all $n_ops ops done"; continue; }
  [ "$(left)" -gt 40 ] || { echo "$m: not started (time)"; break; }
  pad=""; tel=""; fast=""; seedv="${OPSCREEN_INPUT_SEED:-0}"; mm="$m"
  case "$m" in raw*) seedv=off; mm="${m#raw}" ;; esac
  case "$mm" in wkpad*) iso=worker; pad="${PAD_MB:-1024}:${m#wkpad}" ;; wk*) iso=worker ;; off*) iso=op; tel=0 ;;
    probe*) iso=worker; fast="OPSCREEN_MIN_SAMPLES=2 OPSCREEN_MAX_TIME=0.05 OPSCREEN_WARMUP_CALLS=1 OPSCREEN_WARMUP_MS=0 OPSCREEN_REST_RATIO=0" ;;
    *) iso=op ;; esac
  echo "$m start $(date +%H:%M:%S), $done_n done, $(left) s left"
  env $fast OPSCREEN_INPUT_SEED="$seedv" OPSCREEN_WORKER_PAD="$pad" OPSCREEN_TELEMETRY_MS="${tel:-${OPSCREEN_TELEMETRY_MS:-50}}" timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --isolation "$iso" ${TIMER:+--timer "$TIMER"} \
      --ops-file "$W/sample.txt" --timeout "${OP_TIMEOUT:-150}" --retries "${RETRIES:-0}" --out "$W/$m" --plain >> "$W/$m.console" 2>&1
  echo "$m rc=$? at $SECONDS s: $(ls "$W/$m"/ops/*/.complete 2>/dev/null | wc -l) ops complete"
done
# the autotune records, as a check that each mode's children wrote them (a warm worker's ops
# recorded none until 2026-12-07: bench/results/2026-12-07-h100-worker-aa.md)
python3 - "$W" $modes <<'PY'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
for m in sys.argv[2:]:
    recs = {p.parent.name: json.loads(p.read_text()).get("autotune") or {} for p in sorted(root.glob(f"{m}/ops/*/run_identity.json"))}
    tuned = sorted(o for o, a in recs.items() if a.get("kernels"))
    print(f"autotune record, {m}: {len(tuned)} of {len(recs)} ops with an autotuned kernel ({', '.join(tuned[:8])})")
PY
for pair in "op2 op" "off2 off" "op off" "wk op" "wk op2" "wk2 wk" "rawwk2 rawwk" "rawop2 rawop" "rawwk wk"; do
  set -- $pair; [ -d "$W/$1" ] && [ -d "$W/$2" ] || continue
  echo "== compare $2 $1"; python3 -m opscreen compare "$W/$2" "$W/$1" --allow-mismatch isolation --out "$W/cmp_$1_vs_$2" 2>&1 | sed -n 1,12p
done
[ -d "$W/wk" ] && [ -d "$W/op" ] && { echo "== worker_ab wk op"; python3 bench/worker_ab.py "$W/wk" "$W/op" --json "$W/wk_vs_op.json" | tail -30; }
tar czf "$OUT/noise.tgz" -C "$W" --exclude='*.console' .
ls -la "$OUT"
