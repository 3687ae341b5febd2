#!/usr/bin/env bash
# The FlagGems inventory collected on a GPU machine (every file of the suite collected by
# pytest, the scan checked against it), one device-tool call (run from the repo root with
# .fg/FlagGems and .whl carried):
#
#   BUDGET=540 bash bench/device/inventory.sh
#
# $OUT/flaggems-inventory.yaml is the file to commit as ops/flaggems-inventory.yaml
# (src/opscreen/assets/data/; docs/assets.md says what the committed one recorded). JOBS
# (default 8) processes of 40 files each; --portable keeps machine paths out of the file.
# The FlagGems copy carried is an archive of ed2508b, not a checkout: OPSCREEN_SUITE_COMMIT
# declares its commit (set it to the copy you carry). Replaces the retired h200_checks.sh's inventory step.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh inventory
timeout -s INT $(( ${BUDGET:-540} - 10 )) python3 -m opscreen inventory --suite "$FLAGGEMS_ROOT" \
    --env GEMS_VENDOR=nvidia --portable --jobs "${JOBS:-8}" --batch 40 --timeout 400 \
    --out "$OUT/flaggems-inventory.yaml" > "$OUT/inventory.txt" 2>&1
echo "inventory rc=$? at $SECONDS s"; tail -5 "$OUT/inventory.txt"
git diff --no-index --stat ops/flaggems-inventory.yaml "$OUT/flaggems-inventory.yaml" 2>/dev/null | tail -1
ls -la "$OUT"
