#!/usr/bin/env bash
# Create .venv when absent, install opscreen with its test extras, run the tests.
source "$(dirname "$0")/_venv.sh" test
cd "$ROOT"
set +e
python -m pytest "$@"
rc=$?
[ $rc -eq 5 ] && { echo "no tests ran" >&2; exit 1; }
exit $rc
