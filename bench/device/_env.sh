# Sourced by every bench/device entry point, from the repo root on the device machine: the
# carried wheels (.whl: SQLAlchemy for FlagGems) installed into /tmp/site, the carried
# FlagGems copy (.fg/FlagGems, an archive of ed2508b: OPSCREEN_SUITE_COMMIT declares it; or,
# when that folder is not carried, .fg/FlagGems.tar.xz, 1.7 MiB against 29 MiB, unpacked in
# its place), $OUT, a work dir W=/tmp/$1 and left(): the seconds of BUDGET (default 540) still left.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
FG="$PWD/.fg/FlagGems"  # the same path either way: a run dir resumes with the suite root it recorded
if [ ! -d "$FG" ] && [ -f .fg/FlagGems.tar.xz ]; then python3 bench/device/xzpack.py unpack .fg/FlagGems.tar.xz .fg || exit 1; fi
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
if [ -d "$FG" ]; then
  export FLAGGEMS_ROOT="$FG" OPSCREEN_SUITE_COMMIT="${OPSCREEN_SUITE_COMMIT:-ed2508bcb5a03000e9774734201d840ba362cd11}"
fi
OUT="${OUT:-/tmp/out}"; W="/tmp/$1"; mkdir -p "$W" "$OUT"
left() { echo $(( ${BUDGET:-540} - SECONDS )); }
