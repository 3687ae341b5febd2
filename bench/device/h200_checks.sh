#!/usr/bin/env bash
# The GPU checks the open issues still need, for one call of the device tool each
# (run from the repo root on the device machine, with .fg/FlagGems and .whl carried;
# see bench/results/ for what earlier sessions measured):
#
#   bash bench/device/h200_checks.sh inventory   # collection of every FlagGems file (issue 7)
#   bash bench/device/h200_checks.sh mm          # `opscreen op mm` to completion (issue 3)
#   bash bench/device/h200_checks.sh fallback    # ops FlagGems' cudagraph mode loses (issue 4)
#   bash bench/device/h200_checks.sh aa          # graph-timer A/A incl. mm (issue 4)
#   bash bench/device/h200_checks.sh screen      # resumable screen on every GPU (issue 8)
#   bash bench/device/h200_checks.sh lanes       # 4 GPUs at once: A/A, pinned A/A + mm, fallback, inventory
#   bash bench/device/h200_checks.sh mm-split    # 4 GPUs: mm split by test and dtype, test_mm A/A, inventory
#   bash bench/device/h200_checks.sh l2          # 4 GPUs: A/A with L2 flush, with flush >= 50 us, default; mm fp32 stack
#   bash bench/device/h200_checks.sh repeats     # one op per GPU, 6 runs: median of 3 processes vs median of 3
#   bash bench/device/h200_checks.sh placement   # bench/placement.py on GPU 0 (torch and FlagGems), repeats on GPU 1
#   bash bench/device/h200_checks.sh repeats3    # A/A of `opscreen op --repeats 3`; GPU 1 with autotune winners pinned
#   bash bench/device/h200_checks.sh run-aa      # two `opscreen run --repeats 3` over all GPUs, then compare B with A
#   bash bench/device/h200_checks.sh mm-repeats  # every GPU: test_mm warmed, then its A/A at --repeats 3
#   bash bench/device/h200_checks.sh processes   # many processes per op (mm, sum, layer_norm, softmax) for bench/estimators.py
#   bash bench/device/h200_checks.sh rest        # test_mm with samples back to back vs OPSCREEN_REST_RATIO=1, clocks logged
#   bash bench/device/h200_checks.sh sample      # SEED/N_OPS random inventory ops, defaults, every GPU; resumes .fg/run
#   bash bench/device/h200_checks.sh workers     # SEED/N_OPS random ops, --no-steal: --isolation worker, then op; resumes .fg/wk, .fg/op
#   bash bench/device/h200_checks.sh profiler    # issue 18: profiler vs graph vs direct (3 processes), A/A of uncapturable ops
#   bash bench/device/h200_checks.sh lanes18     # issue 18: two-lane A/A of uncapturable + graph ops, then one lane alone
#   bash bench/device/h200_checks.sh speedpair   # issue 16: SEED/N_OPS random ops in chunks of CHUNK: worker (cold cache),
#                                                # op, worker again (both warm), chunk by chunk; resumes
#   bash bench/device/h200_checks.sh growth      # issue 16: `opscreen op mode` (profiler cap), then one worker's device memory op by op
#   bash bench/device/h200_checks.sh wkcause     # issue 16: op, worker, worker resting between ops, op again; GPU clocks logged
#                                                # MODES also: wk1 (a worker per op: --max-ops-per-worker 1),
#                                                # wkc, wk1c (wk, wk1 with the diagnostic canary: OPSCREEN_WORKER_CANARY=1),
#                                                # ophold, opchurn (op after HOLD_MB held / freed: bench/device/hold_plugin.py),
#                                                # opholdMB (e.g. ophold256 ophold4096: MB MiB held; several placements)
# sample, workers, wkcause: EXCLUDE="op ..." leaves ops of the draw out (say why in the results)
#
# The FlagGems copy is an archive of ed2508b (not a checkout): OPSCREEN_SUITE_COMMIT declares it.
#
# Everything lands in $OUT (the device tool brings back at most 8 files, so each step
# leaves one tarball and prints its figures last). Budget each step under 9 minutes.
set -u
step="${1:?usage: h200_checks.sh inventory|mm|fallback|aa|screen|lanes|mm-split|l2|repeats|placement|repeats3|run-aa|mm-repeats|processes|rest|sample|workers|profiler|lanes18|wkcause|speedpair|growth}"
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD/src" FLAGGEMS_ROOT="$PWD/.fg/FlagGems" PYTHONUNBUFFERED=1
export OPSCREEN_SUITE_COMMIT="${OPSCREEN_SUITE_COMMIT:-ed2508bcb5a03000e9774734201d840ba362cd11}"
OUT="${OUT:-/tmp/out}"
W=/tmp/h200; mkdir -p "$W" "$OUT"
left() { echo $(( ${BUDGET:-520} - SECONDS )); }
# draw SEED N: N ops of the inventory at random (seed SEED) into $W/sample.txt, less those in
# EXCLUDE (ops of the draw left out on purpose; say why in the results)
draw() {
  python3 - "$1" "$2" "${EXCLUDE:-}" > "$W/sample.txt" <<'PY'
import random, sys, yaml
inv = yaml.safe_load(open("ops/flaggems-inventory.yaml"))
skip = set(sys.argv[3].split())
print("\n".join(o for o in random.Random(int(sys.argv[1])).sample(sorted(inv["ops"]), int(sys.argv[2])) if o not in skip))
PY
  echo "seed $1: $(tr '\n' ' ' < "$W/sample.txt")${EXCLUDE:+ (drawn, then excluded: $EXCLUDE)}"
}
case "$step" in
  inventory)
    timeout -s INT "$(left)" python3 -m opscreen inventory --suite "$FLAGGEMS_ROOT" --env GEMS_VENDOR=nvidia --portable \
        --jobs 12 --batch 40 --timeout 400 --out "$W/flaggems-inventory.yaml" 2>&1 | tail -5
    ;;
  mm)
    python3 -m opscreen op mm --backend cuda --out "$W/mm" --timeout "$(left)" > "$W/mm.console" 2>&1
    echo "mm rc=$?"; grep -E "^\[opscreen\] result|timing:" "$W/mm/run.log" | tail -4
    ;;
  profiler)
    # torch ops side by side in 3 fresh processes, then an A/A (2 runs each, main group) of the
    # issue-18 ops whose capture fails: target p90 <= 5 %, max <= 15 % on their (profiler) rows
    timeout -s INT 240 python3 bench/device/profiler_check.py --processes 3 --json "$OUT/profiler_check.json" 2>&1 | tail -45
    OPS=${OPS:-fake_quantize_per_channel_affine_cachemask,index_add_,nll_loss_backward,reshape_and_cache,to_copy,repeat_interleave_tensor}
    python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --out "$OUT/aa-profiler.json" --work "$W/aa" --device 0 \
        --ops "$OPS" --fallback-ops '' --runs 2 --deadline "$(left)" 2>&1 | tail -40
    grep -h "opscreen timing:" "$W"/aa/*/run.log "$W"/aa/*/*/run.log 2>/dev/null | sort | uniq -c | sort -rn | head -20
    ;;
  fallback)
    for op in mode masked_select isin unique_consecutive nonzero bincount; do
      t=$(left); [ "$t" -lt 60 ] && { echo "$op: skipped (time)"; continue; }
      python3 -m opscreen op "$op" --backend cuda --out "$W/$op" --timeout "$t" > "$W/$op.console" 2>&1
      echo "$op rc=$?"; grep -E "^\[opscreen\] result|opscreen timing:" "$W/$op/run.log" | tail -3
    done
    ;;
  aa)
    # AA_PIN=1: reuse Triton autotuning winners across the two runs (TRITON_CACHE_AUTOTUNING)
    [ "${AA_PIN:-0}" = 1 ] && export TRITON_CACHE_AUTOTUNING=1
    python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --out "$W/aa.json" --work "$W/aa" --device 0 \
        --timeout 300 --ops "${AA_OPS:-abs,add,softmax,sum,layer_norm,mm}" --fallback-ops '' > "$W/aa.txt" 2>&1
    tail -15 "$W/aa.txt"; rm -rf "$W/aa"
    ;;
  screen)
    # Resume across calls: carry the previous run dir back in as .fg/run (untarred here).
    [ -d .fg/run ] && cp -r .fg/run "$W/run"
    timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all \
        --inventory ops/flaggems-inventory.yaml --timeout 600 --retries 1 --out "$W/run" --plain > "$W/run.console" 2>&1
    echo "run rc=$?"; tail -3 "$W/run.console"
    python3 -m opscreen summary "$W/run" | tail -12; python3 -m opscreen report "$W/run"
    ;;
  lanes)
    # One call, every GPU busy (4 lanes on nvidia-h200-x4; on fewer GPUs the lanes share).
    # Each lane has its own Triton and FlagGems caches, so every lane starts cold.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 ))
    lane() {  # lane INDEX NAME CMD...: on GPU INDEX mod n, own caches, log in $W/NAME.txt
      local g=$(( $1 % n )) name=$2; shift 2
      ( export TRITON_CACHE_DIR=/tmp/tc-$name FLAGGEMS_CACHE_DIR=/tmp/fc-$name; "$@" --device "$g" \
          --out "$W/$name.json" --work "/tmp/work-$name" --deadline "$B" > "$W/$name.txt" 2>&1 ) &
    }
    aa=(python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --timeout 300)
    lane 0 aa "${aa[@]}" --ops abs,add,softmax,sum,layer_norm --fallback-ops '' --upstream
    lane 1 aa-pinned env TRITON_CACHE_AUTOTUNING=1 "${aa[@]}" --ops abs,add,softmax,sum,layer_norm --fallback-ops ''
    lane 2 mm env TRITON_CACHE_AUTOTUNING=1 "${aa[@]}" --timeout 500 --ops mm --fallback-ops ''
    lane 3 fallback "${aa[@]}" --ops '' --fallback-ops mode,masked_select,isin,unique_consecutive,nonzero,bincount
    ( CUDA_VISIBLE_DEVICES=$(( 3 % n )) timeout -s INT "$B" python3 -m opscreen inventory --suite "$FLAGGEMS_ROOT" \
        --env GEMS_VENDOR=nvidia --jobs 12 --batch 40 --timeout 300 --portable --out "$W/flaggems-inventory.yaml" \
        > "$W/inventory.txt" 2>&1; echo "inventory rc=$?" >> "$W/inventory.txt" ) &
    wait
    for f in aa aa-pinned mm fallback; do echo "== $f"; tail -22 "$W/$f.txt"; done
    echo "== inventory"; tail -4 "$W/inventory.txt"
    mkdir -p "$W/mm-run"; cp -r /tmp/work-mm/runA/mm/. "$W/mm-run/" 2>/dev/null
    ;;
  mm-split)
    # mm cold: most of the time goes to compiling FlagGems' configs (22 for mm, 73 for
    # mm_self_transpose, per dtype and per integer specialisation). GPU 0: test_mm, all
    # dtypes, then its A/A from the warm caches; GPUs 1-3: test_mm_self_transpose_benchmark,
    # one dtype each. Inventory collection on the CPUs meanwhile.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 ))
    node=benchmark/test_mm.py
    ( export TRITON_CACHE_DIR=/tmp/tc-mm FLAGGEMS_CACHE_DIR=/tmp/fc-mm
      python3 -m opscreen op mm --backend cuda --device 0 --test-node "$node::test_mm" --out "$W/mm" \
          --timeout $(( B - 30 )) > "$W/mm.console" 2>&1
      echo "test_mm all dtypes: rc=$? at $SECONDS s" >> "$W/split.txt"
      python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --ops mm --fallback-ops '' --device 0 --timeout 300 \
          --op-args "--test-node $node::test_mm" --out "$W/mm-aa.json" --work /tmp/work-mm \
          --deadline $(( B - SECONDS )) > "$W/mm-aa.txt" 2>&1
      echo "test_mm A/A: done at $SECONDS s" >> "$W/split.txt" ) &
    i=1
    for dt in float16 float32 bfloat16; do
      ( export TRITON_CACHE_DIR=/tmp/tc-st-$dt FLAGGEMS_CACHE_DIR=/tmp/fc-st-$dt
        python3 -m opscreen op mm --backend cuda --device $(( i % n )) --dtypes $dt \
            --test-node "$node::test_mm_self_transpose_benchmark" --out "$W/mm-st-$dt" --timeout $(( B - 10 )) \
            > "$W/mm-st-$dt.console" 2>&1
        echo "test_mm_self_transpose_benchmark $dt: rc=$? at $SECONDS s" >> "$W/split.txt" ) &
      i=$(( i + 1 ))
    done
    ( CUDA_VISIBLE_DEVICES=$(( 3 % n )) timeout -s INT "$B" python3 -m opscreen inventory --suite "$FLAGGEMS_ROOT" \
        --env GEMS_VENDOR=nvidia --jobs 8 --batch 40 --timeout 300 --portable --out "$W/flaggems-inventory.yaml" \
        > "$W/inventory.txt" 2>&1; echo "inventory rc=$?" >> "$W/inventory.txt" ) &
    wait
    cat "$W/split.txt"
    for d in mm mm-st-float16 mm-st-float32 mm-st-bfloat16; do
      grep -E "^\[opscreen\] result" "$W/$d/run.log" | tail -1 | sed "s/^/$d: /"
      grep -cE "^(SUCCESS|FAILED)" "$W/$d/run.log" | sed "s/^/$d rows: /"
    done
    echo "== mm A/A"; tail -8 "$W/mm-aa.txt"
    echo "== inventory"; tail -3 "$W/inventory.txt"
    rm -rf /tmp/work-mm/runB
    ;;
  l2)
    # Between-process differences: the same A/A three ways at once (L2 flushed before every
    # sample; flushed only for cases of >= 50 us a call; the default), plus the float32
    # mm_self_transpose that never finished, to see where it spends its time (stack dump).
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 ))
    ops="${L2_OPS:-layer_norm,sum,softmax,abs}"
    aa=(python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --fallback-ops '' --timeout 250 --deadline "$B" --ops "$ops")
    ( export TRITON_CACHE_DIR=/tmp/tc-1 FLAGGEMS_CACHE_DIR=/tmp/fc-1 OPSCREEN_L2_FLUSH=1
      "${aa[@]}" --device 0 --out "$W/aa-flush.json" --work "$W/w-flush" > "$W/aa-flush.txt" 2>&1 ) &
    ( export TRITON_CACHE_DIR=/tmp/tc-2 FLAGGEMS_CACHE_DIR=/tmp/fc-2 OPSCREEN_L2_FLUSH=1 OPSCREEN_L2_FLUSH_MIN_MS=0.05
      "${aa[@]}" --device $(( 1 % n )) --out "$W/aa-flush50.json" --work "$W/w-flush50" > "$W/aa-flush50.txt" 2>&1 ) &
    ( export TRITON_CACHE_DIR=/tmp/tc-3 FLAGGEMS_CACHE_DIR=/tmp/fc-3
      "${aa[@]}" --device $(( 2 % n )) --out "$W/aa-default.json" --work "$W/w-default" > "$W/aa-default.txt" 2>&1 ) &
    ( export TRITON_CACHE_DIR=/tmp/tc-4 FLAGGEMS_CACHE_DIR=/tmp/fc-4
      python3 -m opscreen op mm --backend cuda --device $(( 3 % n )) --dtypes float32 \
          --test-node benchmark/test_mm.py::test_mm_self_transpose_benchmark --out "$W/mm-st-float32" \
          --timeout $(( B - 40 )) --grace 20 > /dev/null 2>&1 ) &
    wait
    for f in aa-flush aa-flush50 aa-default; do echo "== $f"; tail -14 "$W/$f.txt"; done
    echo "== mm_self_transpose float32"; python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['error'])" "$W/mm-st-float32/result.json"
    grep -cE "^(SUCCESS|FAILED)" "$W/mm-st-float32/run.log"
    ;;
  repeats)
    # Does sampling several processes beat the between-process spread? Six runs per op,
    # median of 3 against median of 3 (bench/results/2026-11-29-h200x4-timing.md).
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 )); i=0
    for op in ${REPEAT_OPS:-layer_norm sum softmax abs}; do
      ( export TRITON_CACHE_DIR=/tmp/tc-$op FLAGGEMS_CACHE_DIR=/tmp/fc-$op
        python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --ops "$op" --fallback-ops '' --runs 6 --split-median \
            --timeout 200 --deadline "$B" --device $(( i % n )) --out "$W/rep-$op.json" --work "/tmp/w-$op" \
            > "$W/rep-$op.txt" 2>&1 ) &
      i=$(( i + 1 ))
    done
    wait
    for f in "$W"/rep-*.txt; do echo "== $f"; tail -8 "$f"; done
    ;;
  placement)
    # Is the between-process spread where the memory lies? (bench/placement.py) On the
    # last GPU meanwhile: layer_norm, six processes, median of 3 against median of 3.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 ))
    ( export TRITON_CACHE_DIR=/tmp/tc-rep FLAGGEMS_CACHE_DIR=/tmp/fc-rep
      python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --ops layer_norm --fallback-ops '' --runs 6 --split-median \
          --timeout 200 --deadline "$B" --device $(( n - 1 )) --out "$W/rep-layer_norm.json" --work /tmp/w-rep \
          > "$W/rep-layer_norm.txt" 2>&1 ) &
    ( export CUDA_VISIBLE_DEVICES=0 PYTHONPATH="$PYTHONPATH:$FLAGGEMS_ROOT/src" TRITON_CACHE_DIR=/tmp/tc-pl
      for spec in "layer_norm torch" "layer_norm gems" "softmax torch" "sum torch" "abs torch"; do
        set -- $spec
        [ "$(left)" -lt 60 ] && { echo "$1 $2: skipped (time)"; continue; }
        timeout "$(left)" python3 bench/placement.py --op "$1" --impl "$2" --runs 4 --out "$W/pl-$1-$2.json"
      done > "$W/placement.txt" 2>&1 ) &
    wait
    cat "$W/placement.txt"; echo "== repeats"; tail -12 "$W/rep-layer_norm.txt"
    ;;
  repeats3)
    # Two identical `opscreen op --repeats 3` runs per op (each op in 3 processes, per-case
    # medians): lane 0 as a user runs it, lane 1 with Triton's autotuning results cached
    # across processes (TRITON_CACHE_AUTOTUNING=1), so the library keeps one config.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 ))
    lane() {  # lane INDEX NAME OPS [env...]
      local g=$(( $1 % n )) name=$2 ops=$3; shift 3
      ( export TRITON_CACHE_DIR=/tmp/tc-$name FLAGGEMS_CACHE_DIR=/tmp/fc-$name
        env "$@" python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --ops "$ops" --fallback-ops '' \
          --op-args "--repeats ${REPEATS:-3}" --timeout 300 --deadline "$B" --device "$g" \
          --out "$W/$name.json" --work "/tmp/work-$name" > "$W/$name.txt" 2>&1 ) &
    }
    lane 0 r3 "${R3_OPS:-layer_norm,softmax,sum}"
    lane 1 r3-pinned "${R3_PINNED_OPS:-layer_norm,abs}" TRITON_CACHE_AUTOTUNING=1
    wait
    for f in r3 r3-pinned; do echo "== $f"; tail -14 "$W/$f.txt"; done
    for f in r3 r3-pinned; do mkdir -p "$W/$f-runs"; cp -r /tmp/work-$f/. "$W/$f-runs/" 2>/dev/null; done
    ;;
  run-aa)
    # The batch path end to end: the same screen twice over every GPU, each op in three
    # processes, autotuning results cached across processes and runs; then compare.
    export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/tc-runaa FLAGGEMS_CACHE_DIR=/tmp/fc-runaa
    for r in A B; do
      t=$(left); [ "$t" -lt 60 ] && { echo "run $r: skipped (time)"; continue; }
      timeout -s INT "$t" python3 -m opscreen run --backend cuda --devices all --ops "${RUN_AA_OPS:-abs,add,softmax,sum,layer_norm}" \
          --repeats "${REPEATS:-3}" --timeout 300 --retries 0 --out "$W/run$r" --plain > "$W/run$r.console" 2>&1
      echo "run $r rc=$? after $SECONDS s"; tail -2 "$W/run$r.console"
    done
    python3 -m opscreen summary "$W/runA" | tail -3
    python3 -m opscreen compare "$W/runA" "$W/runB" --top 5 > "$W/compare.txt" 2>&1; echo "compare rc=$?"; head -30 "$W/compare.txt"
    python3 -m opscreen report "$W/runB" --against "$W/runA" | tail -1
    ;;
  mm-repeats)
    # test_mm A/A at --repeats 3 from warm caches, on each GPU: cold once (fills FlagGems'
    # tuning database and Triton's cache), then two identical runs of 3 processes each.
    # Autotuning results cached across processes. MM_DTYPES (default float16,bfloat16:
    # the GEMMs that reach the power limit) keeps the cold run short.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 )); node=benchmark/test_mm.py::test_mm
    dt="${MM_DTYPES:-float16,bfloat16}"
    export TRITON_CACHE_AUTOTUNING=1
    mm_lane() {  # mm_lane GPU
      local g=$1
      export TRITON_CACHE_DIR=/tmp/tc-mmr$g FLAGGEMS_CACHE_DIR=/tmp/fc-mmr$g
      python3 -m opscreen op mm --backend cuda --device "$g" --test-node "$node" --dtypes "$dt" \
          --out "$W/mm$g-warm" --timeout $(( B - 150 )) > "$W/mm$g-warm.console" 2>&1
      echo "gpu $g test_mm warm-up: rc=$? at $SECONDS s"
      python3 bench/timing_aa.py --suite "$FLAGGEMS_ROOT" --ops mm --fallback-ops '' --device "$g" --timeout 300 \
          --op-args "--test-node $node --repeats 3 --dtypes $dt" --out "$W/mm$g-r3.json" --work "$W/mm$g-runs" \
          --deadline $(( B - SECONDS ))
    }
    mm_lane 0 > "$W/mmr0.txt" 2>&1 & p0=$!
    [ "$n" -gt 1 ] && { mm_lane 1 > "$W/mmr1.txt" 2>&1 & p1=$!; }
    wait "$p0" ${p1:+"$p1"}
    for f in "$W"/mmr*.txt; do echo "== $f"; tail -12 "$f"; done
    ;;
  processes)
    # One op in many processes (`opscreen op --repeats N`), autotuning results cached
    # across processes, so that bench/estimators.py can split the processes into two
    # pretend runs many ways and say which per-case statistic (median, min, mean, ...)
    # reproduces best at a given number of processes. GPU 0: test_mm cold once (fills
    # the caches), then test_mm in ${MM_N:-6} processes; GPU 1: sum, layer_norm, softmax.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 15 ))
    export TRITON_CACHE_AUTOTUNING=1
    many() {  # many GPU NAME N OP [op args...]: stop between processes at the budget
      local g=$1 name=$2 k=$3 op=$4; shift 4; local t=$(( B - SECONDS ))
      [ "$t" -lt 40 ] && { echo "$name: skipped (time)"; return; }
      timeout -s INT "$t" python3 -m opscreen op "$op" --backend cuda --device "$g" --repeats "$k" \
          --timeout 300 --out "$W/p-$name" "$@" > "$W/p-$name.console" 2>&1
      echo "$name rc=$? at $SECONDS s: $(ls "$W/p-$name/repeats" 2>/dev/null | wc -l) processes"
    }
    ( export TRITON_CACHE_DIR=/tmp/tc-p0 FLAGGEMS_CACHE_DIR=/tmp/fc-p0; node=benchmark/test_mm.py::test_mm
      python3 -m opscreen op mm --backend cuda --device 0 --test-node "$node" --out "$W/mm-cold" \
          --timeout $(( B - 100 )) > "$W/mm-cold.console" 2>&1
      echo "mm cold rc=$? at $SECONDS s"
      many 0 mm "${MM_N:-6}" mm --test-node "$node" ) > "$W/p0.txt" 2>&1 &
    ( export TRITON_CACHE_DIR=/tmp/tc-p1 FLAGGEMS_CACHE_DIR=/tmp/fc-p1; g=$(( 1 % n ))
      many "$g" sum "${SUM_N:-10}" sum
      many "$g" layer_norm "${LN_N:-8}" layer_norm
      many "$g" softmax "${SOFTMAX_N:-8}" softmax ) > "$W/p1.txt" 2>&1 &
    wait
    cat "$W/p0.txt" "$W/p1.txt"
    for d in "$W"/p-*/; do python3 bench/estimators.py "$d" --n 3 2>&1 | tail -8; done
    ;;
  rest)
    # Does idle time between samples (OPSCREEN_REST_RATIO) steady the GEMMs near the
    # power limit? test_mm, one dtype per GPU: cold once, then 3 x (back to back,
    # rest 1) processes interleaved; SM clock, power and throttle reasons every 100 ms.
    n=$(nvidia-smi -L | wc -l); B=$(( ${BUDGET:-540} - 20 )); node=benchmark/test_mm.py::test_mm
    export TRITON_CACHE_AUTOTUNING=1
    nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader,nounits -lms 100 > "$W/smi.csv" 2>&1 & smi=$!
    lane() {  # lane GPU DTYPE
      local g=$1 dt=$2 t k r
      export TRITON_CACHE_DIR=/tmp/tc-r$g FLAGGEMS_CACHE_DIR=/tmp/fc-r$g
      python3 -m opscreen op mm --backend cuda --device "$g" --test-node "$node" --dtypes "$dt" \
          --out "$W/r$g-cold" --timeout $(( B - 120 )) > "$W/r$g-cold.console" 2>&1
      echo "gpu $g $dt cold rc=$? at $SECONDS s"
      for k in 1 2 3; do for r in 0 1; do
        t=$(( B - SECONDS )); [ "$t" -lt 45 ] && { echo "gpu $g rest$r #$k: skipped (time)"; continue; }
        OPSCREEN_REST_RATIO=$r python3 -m opscreen op mm --backend cuda --device "$g" --test-node "$node" \
            --dtypes "$dt" --out "$W/r$g-rest$r-$k" --timeout "$t" > "$W/r$g-rest$r-$k.console" 2>&1
        echo "gpu $g $dt rest$r #$k rc=$? at $SECONDS s"
      done; done
    }
    lane 0 float16 > "$W/lane0.txt" 2>&1 & p0=$!
    lane $(( 1 % n )) bfloat16 > "$W/lane1.txt" 2>&1 & p1=$!
    wait "$p0" "$p1"; kill "$smi" 2>/dev/null
    cat "$W/lane0.txt" "$W/lane1.txt"
    python3 - "$W" <<'PY'
import sys
from pathlib import Path
from opscreen.results.parse import parse_record_log
w = Path(sys.argv[1])
for d in sorted(w.glob("r*-rest*-*")):
    for r in parse_record_log(d / "record.log").rows:
        if r.torch_ms and r.lib_ms and r.torch_ms > 0.1:
            print(f"{d.name:<12} {r.dtype:<9} {r.shape:<28} torch {r.torch_ms * 1e3:8.1f} us rsd {100 * (r.torch_rsd or 0):5.2f}% "
                  f"n {r.torch_samples} | lib {r.lib_ms * 1e3:8.1f} us rsd {100 * (r.lib_rsd or 0):5.2f}% n {r.lib_samples}")
PY
    ;;
  sample)
    # A random sample of the inventory (seed SEED, N ops) screened with the defaults on every GPU;
    # a run dir carried back in as .fg/run is resumed (a screen longer than one call).
    seed="${SEED:-20261130}"; n_ops="${N_OPS:-24}"
    [ -d .fg/run ] && cp -r .fg/run "$W/run"
    draw "$seed" "$n_ops"
    timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --ops-file "$W/sample.txt" \
        --timeout 300 --out "$W/run" --plain > "$W/run.console" 2>&1
    echo "run rc=$?"; tail -4 "$W/run.console"
    python3 -m opscreen summary "$W/run" | tail -25; python3 -m opscreen report "$W/run"
    ;;
  workers)
    # Issue 16: the same random ops (seed SEED, N ops) on every GPU with --no-steal (each op on the
    # same GPU both times): first in warm workers, then a fresh process per op. Carried run dirs
    # .fg/wk and .fg/op are resumed (a pair longer than one call); bench/worker_ab.py compares them.
    seed="${SEED:-20261201}"; n_ops="${N_OPS:-40}"
    # wk: --isolation worker; wk1: a worker per op (--max-ops-per-worker 1: the worker's path without
    # the state earlier ops leave); op, op2: --isolation op (op2 vs op is the op-vs-op A/A).
    # The next A/A to run (issue 16): the wkcause step below, MODES="op wk op2".
    modes="${MODES:-wk op}"
    for m in $modes; do [ -d ".fg/$m" ] && cp -r ".fg/$m" "$W/$m"; done
    draw "$seed" "$n_ops"
    for m in $modes; do
      case "$m" in wk) iso="--isolation worker" ;; wk1) iso="--isolation worker --max-ops-per-worker 1" ;; *) iso="--isolation op" ;; esac
      [ "$(left)" -gt 20 ] || break
      # shellcheck disable=SC2086
      timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --no-steal $iso \
          --ops-file "$W/sample.txt" --timeout 300 --out "$W/$m" --plain >> "$W/$m.console" 2>&1
      echo "$m rc=$?"; grep -E "fresh process|could not start" "$W/$m.console" | tail -5; tail -3 "$W/$m.console"
    done
    for m in wk wk1 op2; do
      [ -d "$W/$m" ] && [ -d "$W/op" ] && { echo "== $m against op"; python3 bench/worker_ab.py "$W/$m" "$W/op" --json "$W/${m}_vs_op.json"; }
    done
    ;;
  lanes18)
    # Issue 18 on 2 GPUs: the profiler check (graph vs profiler vs direct, fresh processes, GPU 0
    # alone), then the same screen twice with both lanes busy (A, B: the two-lane A/A of the
    # uncapturable ops' profiler rows and of graph rows), then GPU 0's ops of A again with
    # GPU 0's lane alone (C: one lane against two lanes on the same GPU).
    OPS=${OPS:-fake_quantize_per_channel_affine_cachemask,index_add_,nll_loss_backward,reshape_and_cache,to_copy,repeat_interleave_tensor,ge,instance_norm}
    timeout -s INT "${CHECK_S:-150}" python3 bench/device/profiler_check.py --processes "${CHECK_N:-2}" \
        --json "$W/profiler_check.json" > "$W/profiler_check.txt" 2>&1; echo "profiler_check rc=$?"
    tail -30 "$W/profiler_check.txt"
    for r in A B; do
      timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --no-steal --isolation op \
          --ops "$OPS" --timeout 300 --out "$W/$r" --plain > "$W/$r.console" 2>&1
      echo "run $r rc=$? at $SECONDS s"; tail -2 "$W/$r.console"
    done
    ops0=$(python3 -c "import json,sys,pathlib; print(','.join(sorted(json.loads(p.read_text())['op'] for p in pathlib.Path(sys.argv[1]).glob('ops/*/result.json') if json.loads(p.read_text()).get('device') in (0,'0'))))" "$W/A")
    echo "GPU 0 ops of A: $ops0"
    timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices 0 --isolation op \
        --ops "$ops0" --timeout 300 --out "$W/C" --plain > "$W/C.console" 2>&1
    echo "run C rc=$? at $SECONDS s"; tail -2 "$W/C.console"
    for pair in "B A" "C A" "C B"; do set -- $pair
      echo "== A/A $1 against $2"; python3 bench/worker_ab.py "$W/$1" "$W/$2" --json "$W/aa_$1$2.json" | grep "^A/A"
    done
    python3 -m opscreen summary "$W/A" | tail -30
    python3 -m opscreen compare "$W/A" "$W/B" > "$W/compare.txt" 2>&1; echo "compare rc=$?"; head -40 "$W/compare.txt"
    ;;
  wkcause)
    # Issue 16: worker against fresh processes on the same ops, every GPU, --no-steal: op (fresh
    # processes; compiles on a fresh machine), worker, worker resting REST_S between ops (the device
    # idle as long as a fresh process's start), op again (the op-vs-op baseline; on a warm cache,
    # so the worker's speed is read against it), and the modes of the header.
    # SM clock, temperature and power every 200 ms in smi.csv.
    seed="${SEED:-20261201}"; n_ops="${N_OPS:-12}"
    # a mode cut by the budget resumes: carry its run dir back in as .fg/<mode> (from this step's tarball)
    for m in ${MODES:-op wk wkrest op2}; do [ -d ".fg/$m" ] && cp -r ".fg/$m" "$W/$m"; done
    draw "$seed" "$n_ops"
    nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
        --format=csv,noheader,nounits -lms 200 > "$W/smi.csv" 2>&1 & smi=$!
    for m in ${MODES:-op wk wkrest op2}; do
      case "$m" in wk|wk2|wkc|wkrest) iso="--isolation worker" ;; wk1|wk1c) iso="--isolation worker --max-ops-per-worker 1" ;; *) iso="--isolation op" ;; esac
      rest=0; [ "$m" = wkrest ] && rest="${REST_S:-8}"
      canary=0; case "$m" in wkc|wk1c) canary=1 ;; esac
      # ophold, opchurn: fresh processes given a device memory history first (bench/device/hold_plugin.py)
      # (opholdMB, e.g. ophold256: MB MiB held instead of HOLD_MB, so that several placements run side by side)
      hold=""; addopts=""; case "$m" in ophold*) hold="hold:${m#ophold}"; [ "$m" = ophold ] && hold="hold:${HOLD_MB:-1024}" ;;
        opchurn) hold="churn:${HOLD_MB:-1024}" ;; esac
      [ -n "$hold" ] && addopts="-p hold_plugin"
      [ "$(left)" -gt 30 ] || { echo "$m: skipped (time)"; continue; }
      echo "$m start $(date +%H:%M:%S.%N)" >> "$W/marks.txt"
      # shellcheck disable=SC2086
      PYTHONPATH="$PYTHONPATH:$PWD/bench/device" PYTEST_ADDOPTS="$addopts" OPSCREEN_DIAG_HOLD="$hold" \
      OPSCREEN_WORKER_REST_S=$rest OPSCREEN_WORKER_CANARY=$canary timeout -s INT "$(left)" python3 -m opscreen run \
          --backend cuda --devices all --no-steal $iso --ops-file "$W/sample.txt" --timeout 300 --out "$W/$m" --plain \
          > "$W/$m.console" 2>&1
      echo "$m rc=$? at $SECONDS s"; tail -2 "$W/$m.console"
      echo "$m end $(date +%H:%M:%S.%N)" >> "$W/marks.txt"
    done
    kill "$smi" 2>/dev/null
    # the workers' canary (device time per kernel of a fixed graph) after their imports and after each op
    for m in wkc wk1c; do [ -d "$W/$m" ] && python3 - "$W/$m" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("ops/*/result.json")):
    w = (json.loads(f.read_text()).get("phases") or {}).get("worker") or {}
    print(f"{sys.argv[1].rsplit('/', 1)[-1]:7s} {f.parent.name:36s} pid {w.get('pid')} #{w.get('op_index')} "
          f"canary start {w.get('canary_start_us')} us, after {w.get('canary_us')} us")
PY
    done
    pairs=()
    for m in ${MODES:-op wk wkrest op2}; do [ "$m" = op ] && continue
      [ -d "$W/$m" ] && { echo "== $m against op"; python3 bench/worker_ab.py "$W/$m" "$W/op" --json "$W/${m}_vs_op.json" | grep -E "^A/A|^(worker|op) "; }
      [ -d "$W/$m" ] && [ -d "$W/op" ] && pairs+=("$W/op" "$W/$m")
    done
    # what opscreen compare calls changed in each pair, by kernel size
    set -- "${pairs[@]}"; while [ "$#" -ge 2 ]; do python3 bench/verdict_rates.py "$1" "$2"; shift 2; done
    # where the time went (phases.timer: opscreen's timers against the suite's own code), and why workers were replaced
    for m in op op2 wk; do [ -d "$W/$m" ] && { echo "== $m"; python3 -m opscreen summary "$W/$m" | grep -A12 "^where the time went"; }; done
    # speed: the worker against the op run on a warm cache (op2 when it ran: op compiled first)
    for m in op2 op; do [ -d "$W/$m" ] && [ -d "$W/wk" ] && { echo "== wk against $m (speed)"; python3 bench/worker_ab.py "$W/wk" "$W/$m" | grep -E "^(worker|op) |^sum|GPU"; break; }; done
    ;;
  speedpair)
    # Issue 16's speed pair on one GPU within a session's device time: the draw (SEED, N_OPS)
    # runs CHUNK ops at a time, each chunk three times on the same lease: wk (--isolation
    # worker, the chunk's first screen: compiles on a cold cache), op (--isolation op, warm
    # cache), wk2 (worker again, warm cache), so that wherever the budget cuts, the chunks
    # done are like-for-like triples. Each mode's run dir grows chunk by chunk (a resume with
    # a longer --ops-file). A warm machine keeps $W between calls; on a fresh one, carry the
    # run dirs back as .fg/wk .fg/op .fg/wk2 (and its caches are cold again: say so).
    # FROM=K starts at the draw's K-th op (the ones before it measured in an earlier session, whose
    # run dirs are gone: pool their figures from its json); MODES also takes op2 (a second op run:
    # the op-vs-op baseline on the same lease); modes named with "at" run with TRITON_CACHE_AUTOTUNING=1
    # (e.g. MODES="wk op op2 opat opat2 wkat": the autotuning cache's A/A beside the plain one).
    seed="${SEED:-20261204}"; n_ops="${N_OPS:-40}"; chunk="${CHUNK:-5}"; modes="${MODES:-wk op wk2}"
    for m in $modes; do [ -d ".fg/$m" ] && [ ! -d "$W/$m" ] && cp -r ".fg/$m" "$W/$m"; done
    draw "$seed" "$n_ops"
    tail -n "+${FROM:-1}" "$W/sample.txt" > "$W/todo.txt"; mv "$W/todo.txt" "$W/sample.txt"
    # EXTRA="op ...": ops outside the draw, run after it (a chunk of their own when the draw left
    # a multiple of CHUNK); keep them out of the draw's figures (worker_ab.py --only)
    # shellcheck disable=SC2086
    [ -n "${EXTRA:-}" ] && printf '%s\n' $EXTRA >> "$W/sample.txt"
    total=$(wc -l < "$W/sample.txt"); k=0
    while [ "$k" -lt "$total" ]; do
      k=$(( k + chunk )); head -n "$k" "$W/sample.txt" > "$W/upto.txt"
      for m in $modes; do
        # only this draw's ops count: a machine can keep $W from an earlier session's draw
        done_n=0; while read -r o; do [ -f "$W/$m/ops/$o/.complete" ] && done_n=$((done_n + 1)); done < "$W/upto.txt"
        [ "$done_n" -ge "$(wc -l < "$W/upto.txt")" ] && continue
        [ "$(left)" -gt 30 ] || { echo "$m: stopped at chunk ending $k (time)"; break 2; }
        case "$m" in op*) iso="--isolation op" ;; *) iso="--isolation worker" ;; esac
        # a mode named with "at" (opat, opat2, wkat) runs with Triton's autotuning cache on: the
        # first such run stores each plain triton.autotune's winners, the later ones reuse them
        case "$m" in *at*) at=(TRITON_CACHE_AUTOTUNING=1) ;; *) at=(-u TRITON_CACHE_AUTOTUNING) ;; esac
        echo "$m chunk ..$k start $(date +%H:%M:%S) host $(hostname) ${at[*]}" >> "$W/marks.txt"
        # shellcheck disable=SC2086
        env "${at[@]}" timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices all --no-steal $iso \
            --ops-file "$W/upto.txt" --timeout 300 --out "$W/$m" --plain >> "$W/$m.console" 2>&1
        echo "$m ..$k rc=$? at $SECONDS s"
      done
    done
    for m in $modes; do echo "$m: $(ls "$W/$m"/ops/*/.complete 2>/dev/null | wc -l) ops done"; done
    for pair in "wk2 op" "wk op" "wk2 wk" "op2 op" "wk2 op2" "opat2 opat" "wkat opat" "wkat opat2" "op opat2" "opat op"; do
      set -- $pair; [ -d "$W/$1" ] && [ -d "$W/$2" ] || continue
      echo "== $1 against $2"; python3 bench/worker_ab.py "$W/$1" "$W/$2" --json "$W/${1}_vs_$2.json"
    done
    ;;
  growth)
    # Issue 16, two checks on one GPU: (1) `opscreen op mode` (the profiler timer's time cap inside
    # a batch: it timed out at 300 s before 375daac), with its profiler rows' sample counts; (2) one
    # warm worker over a draw (SEED, N_OPS; GPU 0, --no-steal), each op's device memory after its
    # hygiene in queue order: used (total - free) against allocated. Used growing op by op while
    # allocated stays near 0 is the loaded-code explanation of the worker's small-kernel A/A gap.
    # MODE_S=0 leaves the mode check out
    [ "${MODE_S:-320}" -gt 0 ] && { timeout -s INT "${MODE_S:-320}" python3 -m opscreen op mode --backend cuda --timeout 300 \
        --out "$W/mode" > "$W/mode.console" 2>&1; echo "op mode rc=$? at $SECONDS s"; tail -4 "$W/mode.console"; }
    [ "${MODE_S:-320}" -gt 0 ] && python3 - "$W/mode" <<'PY'
import collections, json, pathlib, sys
d = pathlib.Path(sys.argv[1])
res = json.loads((d / "result.json").read_text()) if (d / "result.json").exists() else {}
print("mode:", res.get("status"), res.get("duration_s"), "s;", (res.get("phases") or {}).get("timer"))
rows = collections.Counter()
for line in (d / "record.log").read_text().splitlines() if (d / "record.log").exists() else []:
    if '"result"' not in line: continue
    for r in json.loads(line.split("] ", 1)[1])["result"]:
        for s in ("_base", ""):
            rows[(r.get("timer" + s), r.get("samples" + s))] += 1
print("mode rows (timer, samples): count:", dict(rows))
PY
    draw "${SEED:-20261207}" "${N_OPS:-12}"
    timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices 0 --isolation worker \
        --ops-file "$W/sample.txt" --timeout 300 --out "$W/wkg" --plain > "$W/wkg.console" 2>&1
    echo "worker rc=$? at $SECONDS s"; tail -3 "$W/wkg.console"
    python3 - "$W/wkg" <<'PY'
import json, pathlib, sys
rows = []
for p in pathlib.Path(sys.argv[1]).glob("ops/*/result.json"):
    r = json.loads(p.read_text()); w = (r.get("phases") or {}).get("worker") or {}
    rows.append((w.get("pid"), w.get("op_index") or 0, r["op"], r["status"], r.get("duration_s"), w.get("device_used_start_mb"),
                 w.get("device_used_mb"), w.get("device_allocated_mb"), w.get("device_reserved_mb"), w.get("rss_mb")))
print("pid op_index op status wall_s used_start_mb used_mb allocated_mb reserved_mb rss_mb")
for row in sorted(rows, key=lambda t: (str(t[0]), t[1])): print(*row)
PY
    ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
tar czf "$OUT/$step.tgz" -C "$W" .
