#!/usr/bin/env bash
# Does the harness's device telemetry (issue 32, docs/telemetry.md) move what it watches? One
# device-tool call on one NVIDIA GPU (run from the repo root with .fg/FlagGems and .whl carried):
#
#   SEED=20261203 N_OPS=12 BUDGET=540 bash bench/device/telemetry.sh
#
# .whl must hold nvidia-ml-py's wheel beside the others (pynvml is pure Python; the device
# machine reaches no registry):
#
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl "nvidia-ml-py>=12.535"
#
# It draws N_OPS ops of the inventory at random (seed SEED, recorded in $OUT/telemetry.txt) and
# screens them four times on DEVICE (default 0), with ISOLATION (default op: fresh processes;
# worker: one worker process a run, some 2.5x quicker an op) and the graph timer:
# off, on, off2, on2 (OPSCREEN_TELEMETRY_MS=0 for off*, INTERVAL_MS, default 50, for on*), in
# that order, so that the first run's compiles fall on an "off" run. Each mode's run dir resumes
# where an earlier call stopped (from /tmp/telemetry on a warm machine, else from
# .fg/telemetry/<mode>, the run dirs of the last call's $OUT/telemetry.tgz untarred there).
# At about 15 s an op (a fresh process costs some 10 s around its measurement on an H200), the 48
# op runs of the default draw take about 12 minutes: two calls, the second resuming the first's
# run dirs (untar its telemetry.tgz into .fg/telemetry before the second call).
# Then, for the graph rows measured in both runs of each pair:
#
#   - the A/A spread of the speedup (|ln B/A|: median, p90, max) of off/off2, on/on2 and off/on,
#     and `opscreen compare`'s verdict counts. Target: on/on2 within the spread of off/off2;
#   - the telemetry's cost per op: sampling_s (the thread's time in NVML calls) over the op's
#     child wall (result.json phases.child_wall_s). Target: under 1 %;
#   - the fields filled: telemetry and device_state of the first ops, and summary's lines.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh telemetry
python3 -c "import pynvml" 2>/dev/null || { echo "pynvml is not importable: carry nvidia-ml-py's wheel in .whl (see the head of this script)"; exit 1; }
seed="${SEED:-20261203}"; n_ops="${N_OPS:-12}"; dev="${DEVICE:-0}"; interval="${INTERVAL_MS:-50}"; iso="${ISOLATION:-op}"
modes="off on off2 on2"
for m in $modes; do [ -d ".fg/telemetry/$m" ] && [ ! -d "$W/$m" ] && cp -r ".fg/telemetry/$m" "$W/$m"; done
python3 - "$seed" "$n_ops" > "$W/sample.txt" <<'PY'
import random, sys, yaml
inv = yaml.safe_load(open("ops/flaggems-inventory.yaml"))
print("\n".join(random.Random(int(sys.argv[1])).sample(sorted(inv["ops"]), int(sys.argv[2]))))
PY
n_ops=$(wc -l < "$W/sample.txt")
{ echo "seed $seed, $n_ops ops, device $dev, isolation $iso, interval $interval ms: $(tr '\n' ' ' < "$W/sample.txt")"
  nvidia-smi -i "$dev" --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode --format=csv,noheader
} | tee "$W/head.txt"
for m in $modes; do
  done_n=$(for o in $(cat "$W/sample.txt"); do [ -f "$W/$m/ops/$o/.complete" ] && echo "$o"; done | wc -l)
  [ "$done_n" -ge "$n_ops" ] && { echo "$m: all $n_ops ops done"; continue; }
  [ "$(left)" -gt 40 ] || { echo "$m: not started (time)"; break; }
  case "$m" in on*) ms="$interval" ;; *) ms=0 ;; esac
  echo "$m (OPSCREEN_TELEMETRY_MS=$ms) start $(date +%H:%M:%S), $done_n done, $(left) s left"
  OPSCREEN_TELEMETRY_MS="$ms" timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices "$dev" \
      --isolation "$iso" --timer graph --ops-file "$W/sample.txt" --timeout "${OP_TIMEOUT:-150}" --retries 0 \
      --out "$W/$m" --plain >> "$W/$m.console" 2>&1
  echo "$m rc=$? at $SECONDS s: $(ls "$W/$m"/ops/*/.complete 2>/dev/null | wc -l) ops complete"
done
for pair in "off off2" "on on2" "off on"; do
  set -- $pair; [ -d "$W/$1" ] && [ -d "$W/$2" ] || continue
  echo "== compare $1 $2"; python3 -m opscreen compare "$W/$1" "$W/$2" --out "$W/cmp_$1_$2" 2>&1 | grep -E "^(rows|also differs|throttled|same caliber)" | cut -c1-400
done
python3 - "$W" <<'PY' | tee "$W/telemetry.txt"
import json, math, pathlib, statistics, sys
from opscreen.results.summary import COLUMNS, build_summary
w = pathlib.Path(sys.argv[1])
print((w / "head.txt").read_text().strip())
runs = {m: build_summary(w / m) for m in ("off", "on", "off2", "on2") if (w / m / "ops").is_dir()}
col = {c: i for i, c in enumerate(COLUMNS)}
def graph_rows(s):
    return {(r[0], r[col["variant"]] or "", r[col["dtype"]], r[col["shape"]]): r[col["speedup"]] for r in s.rows
            if r[col["status"]] == "ok" and r[col["torch_timer"]] == r[col["lib_timer"]] == "graph" and r[col["speedup"]]}
def q(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")
p90 = {}
for a, b in (("off", "off2"), ("on", "on2"), ("off", "on"), ("off2", "on2")):
    if a in runs and b in runs:
        ra, rb = graph_rows(runs[a]), graph_rows(runs[b])
        d = [abs(math.log(rb[k] / ra[k])) for k in ra.keys() & rb.keys()]
        p90[a, b] = q(d, .9)
        print(f"A/A {a} vs {b}: {len(d)} graph rows, |ln B/A| median {100*q(d,.5):.2f}%  p90 {100*q(d,.9):.2f}%  "
              f"max {100*max(d or [float('nan')]):.2f}%")
if ("on", "on2") in p90 and ("off", "off2") in p90:
    on, off = p90["on", "on2"], p90["off", "off2"]
    print(f"target (A/A with telemetry within the A/A without it, p90): on/on2 {100*on:.2f}% vs off/off2 {100*off:.2f}%: "
          + ("within" if on <= off * 1.1 + 1e-4 else "OUTSIDE") + " (10 % slack on the off/off2 p90)")
for m in ("on", "on2"):
    if m not in runs:
        continue
    cost, filled = [], 0
    for o in sorted((w / m / "ops").iterdir()):
        r = json.loads((o / "result.json").read_text()) if (o / "result.json").is_file() else {}
        t, wall = r.get("telemetry") or {}, (r.get("phases") or {}).get("child_wall_s")
        if t.get("source") == "nvml" and wall:
            cost.append(t.get("sampling_s", 0) / wall); filled += 1
    print(f"cost {m}: {filled} ops with nvml telemetry; sampling_s / child wall: median {100*q(cost,.5):.3f}%  "
          f"max {100*max(cost or [float('nan')]):.3f}% (target < 1 %)")
    ops = sorted((w / m / "ops").iterdir())[:2]
    for o in ops:
        print(f"{m}/{o.name} telemetry:", json.dumps(json.loads((o / "result.json").read_text()).get("telemetry"))[:1500])
        print(f"{m}/{o.name} device_state:", json.dumps(json.loads((o / "run_identity.json").read_text()).get("device_state"))[:800])
    print("throttled ops:", {x.op: x.throttled for x in runs[m].ops if x.throttled not in (None, "no")} or "none")
PY
python3 -m opscreen summary "$W/on" 2>&1 | grep -A12 "^telemetry" | head -14
tar czf "$OUT/telemetry.tgz" -C "$W" --exclude='*.console' .
cp "$W/telemetry.txt" "$OUT/" 2>/dev/null
ls -la "$OUT"
