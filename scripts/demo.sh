#!/usr/bin/env bash
# Create .venv (shared with test.sh: scripts/_venv.sh), screen the bundled sample suite
# on the CPU (two lanes), then summarise it and write the HTML report. Exits with the
# status of `opscreen run` (0 only when every op passed), so CI (.ci/run) fails with it;
# when an op did not pass, the end of its run.log is printed.
source "$(dirname "$0")/_venv.sh"
cd "$ROOT"
RUN_DIR="${OPSCREEN_DEMO_DIR:-runs/demo}"
echo "== opscreen backends"
opscreen backends
echo
echo "== opscreen devices --backend cpu"
opscreen devices --backend cpu
echo
echo "== opscreen run: the sample suite on two CPU lanes -> $RUN_DIR"
set +e
opscreen run --backend cpu --devices 0,1 --out "$RUN_DIR" --plain
rc=$?
set -e
echo
echo "== opscreen summary $RUN_DIR"
opscreen summary "$RUN_DIR"
echo
opscreen report "$RUN_DIR"
echo
if [ "$rc" -ne 0 ]; then
    echo "== opscreen run exited $rc: the ops that did not pass, and the end of their run.log"
    python - "$RUN_DIR" <<'PY'
import csv, sys
from pathlib import Path

run = Path(sys.argv[1])
try:
    rows = list(csv.DictReader(open(run / "ops_status.csv", newline="")))
except OSError as exc:
    sys.exit(f"(no ops_status.csv: {exc})")
bad = [r for r in rows if r.get("status") not in ("passed", "skipped", "dismissed")]
for r in bad[:5]:
    print(f"-- {r.get('op')}: {r.get('status')}, {r.get('attempts')} attempt(s): {r.get('error') or ''}")
    log = run / (r.get("path") or f"ops/{r.get('op')}") / "run.log"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError as exc:
        print(f"   (no run.log: {exc})")
        continue
    for line in lines[-25:]:
        print(f"   {line}")
if len(bad) > 5:
    print(f"-- and {len(bad) - 5} more: {', '.join(r.get('op', '?') for r in bad[5:])}")
PY
    echo
fi
case "$RUN_DIR" in /*) shown="$RUN_DIR" ;; *) shown="$ROOT/$RUN_DIR" ;; esac
echo "ops_status.csv: $shown/ops_status.csv"
echo "summary.csv:    $shown/summary.csv"
echo "report:         $shown/report.html"
echo "(run the same command again to resume; delete $RUN_DIR for a fresh screen)"
exit $rc
