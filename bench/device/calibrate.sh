#!/usr/bin/env bash
# The user's path to a floors table on this device, `opscreen calibrate` in screen mode, cut
# into device-tool calls and grown over sessions (issue 31; docs/usage.md, "calibrate"):
#
#   SEED=20261205 N_OPS=12 HISTORIES=op,op BUDGET=555 bash bench/device/calibrate.sh
#   SEED=20261206 N_OPS=12 EXTENDS=.fg/cal/floors-nvidia-h100-80gb-hbm3-20261205.json bash bench/device/calibrate.sh
#
# draws N_OPS ops of INVENTORY (default ops/flaggems-inventory.yaml; empty: the suite's own ops)
# with seed SEED and screens them once per entry of HISTORIES (default op,op: two fresh-process
# screens, the rerun cells) with --timeout OP_TIMEOUT (default 600, calibrate's own: a
# compile-bound op on a cold cache needs minutes), stopped with SIGINT at the budget (BUDGET s,
# default 540). EXTENDS=FLOORS grows an earlier table (`calibrate --extends`: none of its ops is
# drawn again) and, once this draw's table is fitted, fits the pooled one the command prints.
#
# Everything is keyed by the GPU model (nvidia-smi's name; `cpu` with BACKEND=cpu), so an H100
# session never resumes an H200's screens:
# - the work dir /tmp/cal/<model>-<SEED> resumes from .fg/cal/cal-<model>-<SEED>.tgz (every
#   archive in .fg/cal is unpacked, so an EXTENDS table's screens are there to pool);
# - the Triton cache (TRITON_CACHE_DIR=/tmp/kcache/<model>) starts from .fg/kcache/kcache-<model>.tar.xz.part-*:
#   a fresh machine otherwise compiles every kernel again (2026-12-05: median op 17 s on a cold
#   cache, one op 3 x 150 s). Only Triton's compiled kernels travel, not FlagGems' tuning
#   database: with TRITON_CACHE_AUTOTUNING=0 (the default) every process still tunes, so the
#   cache saves compile time and changes no pick, as a user's own warm machine would.
# Back in $OUT: calibrate.log, cal-<model>-<SEED>.tgz (the run dirs, the device's checkout path
# written CHECKOUT/ and the .pyshim links left out; unpacked again with the path put back),
# floors-<model>-<SEED>.json (and floors-<model>-pooled.json with EXTENDS) once fitted, and
# kcache-<model>.tar.xz.part-aa.. (parts of 15 MiB, the whole kept under KCACHE_MAX_MB, default 40).
# Here, to carry them into the next call:
#   mkdir -p .fg/cal .fg/kcache; cp $FILES/cal-*.tgz $FILES/floors-*.json .fg/cal/; rm -f .fg/kcache/*; cp $FILES/kcache-* .fg/kcache/
# and carry [".fg/FlagGems.tar.xz", ".fg/cal", ".fg/kcache", ".whl"] (tar -C .fg -cJf .fg/FlagGems.tar.xz FlagGems).
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh cal
backend="${BACKEND:-cuda}"; seed="${SEED:-20261205}"
if [ "$backend" = cpu ]; then model=cpu; else
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
  model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
fi
model=$(tr 'A-Z' 'a-z' <<< "$model" | tr -cs 'a-z0-9.' '-' | sed 's/^-*//; s/-*$//')
name="$model-$seed"; work="$W/$name"; log="$OUT/calibrate.log"
echo "model $model, seed $seed, work $work" | tee -a "$log"
for a in .fg/cal/*.tgz; do  # resume: this draw's screens, and those of the draws it extends
  [ -f "$a" ] || continue; b=$(basename "$a" .tgz); d="$W/${b#cal-}"; [ -d "$d" ] && continue
  mkdir -p "$d" && tar xzf "$a" -C "$d" && grep -rlIZ CHECKOUT/ "$d" | xargs -0r sed -i "s|CHECKOUT/|$PWD/|g"
  echo "unpacked $a: $(ls "$d" | tr '\n' ' ')" | tee -a "$log"
done
export TRITON_CACHE_DIR="/tmp/kcache/$model"
if [ ! -d "$TRITON_CACHE_DIR" ] && ls .fg/kcache/kcache-"$model".tar.xz.part-* >/dev/null 2>&1; then
  python3 bench/device/xzpack.py unpack ".fg/kcache/kcache-$model.tar.xz" "$TRITON_CACHE_DIR" | tee -a "$log"
fi
inv="${INVENTORY-ops/flaggems-inventory.yaml}"
extends=""; [ -n "${EXTENDS:-}" ] && extends="--extends $EXTENDS"
floors="$OUT/floors-$name.json"
start=$SECONDS
timeout -s INT "$(( $(left) - 40 ))" python3 -m opscreen calibrate --backend "$backend" ${inv:+--inventory "$inv"} \
    --sample "${N_OPS:-12}" --seed "$seed" --histories "${HISTORIES:-op,op}" --timeout "${OP_TIMEOUT:-600}" \
    --work "$work" --out "$floors" $extends >> "$log" 2>&1
rc=$?
echo "calibrate rc=$rc after $(( SECONDS - start )) s" | tee -a "$log"
for d in "$work"/*/; do  # how far each screen got, and its op walls
  [ -f "$d/ops_status.csv" ] || continue
  python3 - "$d" <<'PY' | tee -a "$log"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/ops_status.csv")))
walls = [float(r["duration_s"]) for r in rows if r.get("duration_s") not in (None, "")]
by = {}
for r in rows:
    by[r["status"]] = by.get(r["status"], 0) + 1
print(f"{sys.argv[1]}: {len(rows)} ops {by}; wall median {statistics.median(walls) if walls else 0:.1f} s, "
      f"max {max(walls) if walls else 0:.1f} s")
PY
done
pooled=$(sed -n 's/^  \(opscreen calibrate .*\)$/\1/p' "$log" | tail -1)
if [ "$rc" = 0 ] && [ -n "$pooled" ]; then
  # a table's provenance may name its screens relative to where it was fitted, <seed>/<screen> (the
  # shipped H100 table does): pool in a folder where <seed> is that draw's unpacked work dir, and
  # name this draw's screens the same way
  mkdir -p "$W/draws"
  for d in "$W/$model"-*/; do b=$(basename "$d"); ln -sfn "${d%/}" "$W/draws/${b#"$model-"}"; done
  pooled=${pooled//"$W/$model-"/}
  echo "== (in $W/draws) $pooled" | tee -a "$log"
  (cd "$W/draws" && python3 -m $pooled --out "$OUT/floors-$model-pooled.json") >> "$log" 2>&1
  echo "pooled rc=$?" | tee -a "$log"
fi
# the run dirs, less the checkout path and the .pyshim links (as bench/results stores runs)
rm -rf "/tmp/calpack/$name" && mkdir -p /tmp/calpack && cp -r "$work" "/tmp/calpack/$name" \
  && find "/tmp/calpack/$name" -name .pyshim -prune -exec rm -rf {} + \
  && { grep -rlIZ "$PWD/" "/tmp/calpack/$name" | xargs -0r sed -i "s|$PWD/|CHECKOUT/|g"; } \
  && tar czf "$OUT/cal-$name.tgz" -C "/tmp/calpack/$name" . && echo "stored $OUT/cal-$name.tgz" | tee -a "$log"
# the Triton cache, in parts the device tool brings back (16 MiB a file), if the whole fits the carry
[ -d "$TRITON_CACHE_DIR" ] && python3 bench/device/xzpack.py pack "$TRITON_CACHE_DIR" "$OUT/kcache-$model.tar.xz" \
  --max-mb "${KCACHE_MAX_MB:-40}" | tee -a "$log"
ls -la "$OUT"
exit "$rc"
