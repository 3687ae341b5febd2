# Sourced by every bench/device entry point, from the repo root on the device machine: the
# carried wheels (.whl: SQLAlchemy for FlagGems) installed into /tmp/site, the carried
# FlagGems copy (.fg/FlagGems, an archive of ed2508b: OPSCREEN_SUITE_COMMIT declares it),
# $OUT, a work dir W=/tmp/$1 and left(): the seconds of BUDGET (default 540) still left.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD/src" FLAGGEMS_ROOT="$PWD/.fg/FlagGems" PYTHONUNBUFFERED=1
export OPSCREEN_SUITE_COMMIT="${OPSCREEN_SUITE_COMMIT:-ed2508bcb5a03000e9774734201d840ba362cd11}"
OUT="${OUT:-/tmp/out}"; W="/tmp/$1"; mkdir -p "$W" "$OUT"
left() { echo $(( ${BUDGET:-540} - SECONDS )); }
