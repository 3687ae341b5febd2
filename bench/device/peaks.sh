#!/usr/bin/env bash
# The achievable peaks of one NVIDIA GPU, twice (issue 32, docs/peaks.md): one device-tool call,
# run from the repo root with .fg/FlagGems and .whl carried:
#
#   DEVICE=0 bash bench/device/peaks.sh
#
# runs `opscreen devices --peaks` in N_PROC (default 3) processes one after the other (each its
# own interpreter, its own allocations), saving each run's peaks file under $OUT/peaks/<k>/, and
# prints each table and, per measured quantity, how far the processes' medians lie apart (the
# largest over the smallest). Targets: the processes agree within 2 % on the copy bandwidth and
# every matmul dtype; the copy's
# figure beside the 4.8 TB/s of NVIDIA's H200 sheet and beside the spec NVML's clocks give.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh peaks
dev="${DEVICE:-0}"
nvidia-smi -i "$dev" --query-gpu=name,uuid,driver_version,clocks.mem,clocks.max.mem,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
for k in $(seq "${N_PROC:-3}"); do
  echo "== process $k, $(date +%H:%M:%S)"
  /usr/bin/time -f "devices --peaks: %e s wall" python3 -m opscreen devices --backend cuda --peaks --devices "$dev" \
      --peaks-dir "$OUT/peaks/$k" 2>&1
done
python3 - "$OUT/peaks" <<'PY' | tee "$OUT/peaks.txt"
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
recs = [json.loads(next(d.rglob("peaks.json")).read_text()) for d in sorted(root.iterdir(), key=lambda d: int(d.name))
        if d.name.isdigit() and list(d.rglob("peaks.json"))]
if len(recs) < 2:
    sys.exit("fewer than two peaks files were written")
ach = [r["achievable"] for r in recs]
a = ach[0]
rows = [("copy GB/s", [x["bandwidth_gbps"] for x in ach])]
rows += [(f"matmul {d} TFLOPS", [x["tflops"].get(d) for x in ach]) for d in a["tflops"]]
worst = 0.0
for name, xs in rows:
    if all(xs):
        d = max(xs) / min(xs) - 1; worst = max(worst, d)
        print(f"{name:24} " + " ".join(f"{x:10.1f}" for x in xs) + f"  apart {100*d:.2f} %")
    else:
        print(f"{name:24} {xs}  (not measured in every process)")
print(f"worst gap between the {len(recs)} processes: {100*worst:.2f} % (target <= 2 %): " + ("met" if worst <= 0.02 else "NOT met"))
print("sizes:", json.dumps(recs[0]["measurement"].get("sizes")), " timed calls:",
      {k: v.get("tflops", v.get("gbps", {})).get("reps") for k, v in [("copy", recs[0]["measurement"]["copy"])]
       + list(recs[0]["measurement"]["matmul"].items()) if isinstance(v, dict) and "why" not in v})
bw = a["bandwidth_gbps"]
spec = (recs[0]["spec"].get("bandwidth") or {}).get("gbps")
print(f"copy {bw:.0f} GB/s = {100*bw/4800:.1f} % of the sheet's 4.8 TB/s; spec from NVML clocks {spec} GB/s"
      + (f" ({100*bw/spec:.1f} % of it)" if spec else ""))
PY
