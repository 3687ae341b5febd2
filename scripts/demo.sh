#!/usr/bin/env bash
# Create .venv, install, and screen the bundled sample suite on the CPU (two lanes),
# then summarise it and write the HTML report.
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
echo "ops_status.csv: $ROOT/$RUN_DIR/ops_status.csv"
echo "summary.csv:    $ROOT/$RUN_DIR/summary.csv"
echo "report:         $ROOT/$RUN_DIR/report.html"
echo "(run the same command again to resume; delete $RUN_DIR for a fresh screen)"
exit $rc
