#!/usr/bin/env bash
# The achievable peaks of one NVIDIA GPU, twice (issue 32, docs/peaks.md): one device-tool call,
# run from the repo root with .fg/FlagGems and .whl carried:
#
#   DEVICE=0 bash bench/device/peaks.sh
#
# runs `opscreen devices --peaks` in two processes one after the other (each its own
# interpreter, its own allocations), saving each run's peaks file under $OUT/peaks/<k>/, and
# prints each table and, per measured quantity, how far the two medians lie apart. Targets:
# the two processes agree within 2 % on the copy bandwidth and every matmul dtype; the copy's
# figure beside the 4.8 TB/s of NVIDIA's H200 sheet and beside the spec NVML's clocks give.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh peaks
dev="${DEVICE:-0}"
nvidia-smi -i "$dev" --query-gpu=name,uuid,driver_version,clocks.mem,clocks.max.mem,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
for k in 1 2; do
  echo "== process $k, $(date +%H:%M:%S)"
  /usr/bin/time -f "devices --peaks: %e s wall" python3 -m opscreen devices --backend cuda --peaks --devices "$dev" \
      --peaks-dir "$OUT/peaks/$k" 2>&1
done
python3 - "$OUT/peaks" <<'PY' | tee "$OUT/peaks.txt"
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
recs = [json.loads(next((root / k).rglob("peaks.json")).read_text()) for k in ("1", "2") if list((root / k).rglob("peaks.json"))]
if len(recs) < 2:
    sys.exit("fewer than two peaks files were written")
a, b = (r["achievable"] for r in recs)
rows = [("copy GB/s", a["bandwidth_gbps"], b["bandwidth_gbps"])]
rows += [(f"matmul {d} TFLOPS", a["tflops"].get(d), b["tflops"].get(d)) for d in a["tflops"]]
worst = 0.0
for name, x, y in rows:
    if x and y:
        d = abs(y / x - 1); worst = max(worst, d)
        print(f"{name:24} {x:10.1f} {y:10.1f}  apart {100*d:.2f} %")
    else:
        print(f"{name:24} {x} {y}  (not measured in both)")
print(f"worst gap between the two processes: {100*worst:.2f} % (target <= 2 %): " + ("met" if worst <= 0.02 else "NOT met"))
bw = a["bandwidth_gbps"]
spec = (recs[0]["spec"].get("bandwidth") or {}).get("gbps")
print(f"copy {bw:.0f} GB/s = {100*bw/4800:.1f} % of the sheet's 4.8 TB/s; spec from NVML clocks {spec} GB/s"
      + (f" ({100*bw/spec:.1f} % of it)" if spec else ""))
PY
