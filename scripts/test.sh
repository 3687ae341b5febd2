#!/usr/bin/env bash
# Create .venv when absent (shared with demo.sh: scripts/_venv.sh), run the tests.
source "$(dirname "$0")/_venv.sh"
cd "$ROOT"
set +e
python -m pytest "$@"
rc=$?
[ $rc -eq 5 ] && { echo "no tests ran" >&2; exit 1; }
exit $rc
