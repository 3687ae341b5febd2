#!/usr/bin/env bash
# What a checkout needs before its first device-tool call, in one command (here, not on the device):
#
#   bash bench/device/prepare.sh FLAGGEMS_GIT [COMMIT]
#
# FLAGGEMS_GIT is a FlagGems git repository: a bare one (a mirror, as the session's `fetch`
# brings it) or a checkout. COMMIT defaults to the one every
# bench/results page measured, ed2508b, which _env.sh declares as OPSCREEN_SUITE_COMMIT (give
# another one and export OPSCREEN_SUITE_COMMIT to match in the device command). It writes, all
# ignored through .git/info/exclude (never committed: they are built from fetched code):
# - .fg/FlagGems: src/, benchmark/, conf/ and pytest.ini of COMMIT (about 29 MiB);
# - .fg/FlagGems.tar.xz: the same packed (about 2 MiB), what the device calls carry, so that the
#   64 MiB carry has room for run dirs and the Triton cache; _env.sh unpacks it there;
# - .whl/: FlagGems' one dependency the device image lacks, SQLAlchemy (for its Python 3.12);
# - .fg/cal: the committed H100 calibration screens (bench/results/2026-12-06-h100-calibrate-runs.tgz),
#   one archive per draw, where bench/device/calibrate.sh finds them to pool with a new draw
#   (EXTENDS=src/opscreen/assets/data/floors/nvidia-h100-80gb-hbm3.json, the table they made);
# - .fg/kcache, .fg/noise: empty, for what later calls bring back.
# Running it again rebuilds .fg/FlagGems and its archive and keeps the rest.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: bash bench/device/prepare.sh FLAGGEMS_GIT [COMMIT] (a FlagGems git repository or checkout)" >&2; exit 2; }
src="$1"
# the default is the commit _env.sh declares on the device, read from there so the two never differ
commit="${2:-$(sed -n 's/.*OPSCREEN_SUITE_COMMIT:-\([0-9a-f]\{40\}\).*/\1/p' bench/device/_env.sh)}"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then gd=$(git -C "$src" rev-parse --absolute-git-dir)
else echo "prepare.sh: $src is not a git repository: give a FlagGems clone or the fetched mirror" >&2; exit 2; fi
git --git-dir "$gd" cat-file -e "$commit^{commit}" 2>/dev/null \
  || { echo "prepare.sh: $src has no commit $commit: fetch it, or name one it has" >&2; exit 2; }
mkdir -p .git/info
for p in /.fg/ /.whl/; do grep -qxF "$p" .git/info/exclude 2>/dev/null || echo "$p" >> .git/info/exclude; done
rm -rf .fg/FlagGems .fg/FlagGems.tar.xz
mkdir -p .fg/FlagGems .fg/cal .fg/kcache .fg/noise .whl
git --git-dir "$gd" archive "$commit" src benchmark conf pytest.ini | tar -x -C .fg/FlagGems
tar -C .fg -cJf .fg/FlagGems.tar.xz FlagGems
ls .whl/[Ss][Qq][Ll]*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "sqlalchemy==2.0.48"
# the committed archive holds one folder per draw (20261205/, 20261206/); calibrate.sh resumes
# one archive per draw, cal-<model>-<seed>.tgz, holding that draw's work dir
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar xzf bench/results/2026-12-06-h100-calibrate-runs.tgz -C "$tmp"
for d in "$tmp"/*/; do
  a=".fg/cal/cal-nvidia-h100-80gb-hbm3-$(basename "$d").tgz"
  [ -f "$a" ] || tar czf "$a" -C "$d" .
done
echo "FlagGems $(git --git-dir "$gd" rev-parse --short "$commit"): .fg/FlagGems ($(du -sh .fg/FlagGems | cut -f1)), .fg/FlagGems.tar.xz ($(du -h .fg/FlagGems.tar.xz | cut -f1))"
echo "wheels: $(ls .whl | tr '\n' ' ')"
echo "carry in each device call: [\".fg/FlagGems.tar.xz\", \".whl\"] (+ \".fg/cal\", \".fg/kcache\" for calibrate.sh; \".fg/noise\" to resume noise.sh)"
