#!/usr/bin/env bash
# A real history over FlagGems commits (issue 33, docs/store.md): OPS screened at each commit of
# .fg/history/commits.txt, in order, one run dir a commit, for `opscreen store add` and
# `opscreen history` to read afterwards (bench/results/2026-12-03-h200-history.md). One or more
# device-tool calls, from the repo root with .fg and .whl carried:
#
#   OPS="i0 index topk index_copy clip rrelu_with_noise_functional" BUDGET=540 bash bench/device/history.sh
#
# .fg/FlagGems is the suite at ed2508b; .fg/history/<sha>.patch.gz turns it into commit <sha>
# (`git diff --binary ed2508b <sha> -- src benchmark conf pytest.ini`, gzipped: the trees
# themselves would not fit a call's 64 MiB), and commits.txt lists "<sha> <date> <subject>" in
# commit order. Each commit's screen is `opscreen run --isolation worker` of OPS with the
# suite commit declared (OPSCREEN_SUITE_COMMIT), so that the store orders and labels them.
# A run dir already complete (on a warm machine in /tmp/history, else from .fg/history/runs,
# the last call's $OUT/history.tgz untarred there) is skipped: a later call resumes.
set -u
cd "$(dirname "$0")/../.."
source bench/device/_env.sh history
ops="${OPS:-i0 index topk index_copy clip rrelu_with_noise_functional}"
printf '%s\n' $ops > "$W/ops.txt"; n_ops=$(wc -l < "$W/ops.txt")
[ -d .fg/history/runs ] && [ ! -d "$W/runs" ] && cp -r .fg/history/runs "$W/runs"
mkdir -p "$W/runs"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
k=0
while read -r sha rest; do
  k=$((k + 1)); label=$(printf '%02d_%s' "$k" "${sha:0:9}"); d="$W/runs/$label"
  done_n=$(for o in $(cat "$W/ops.txt"); do [ -f "$d/ops/$o/.complete" ] && echo "$o"; done | wc -l)
  [ "$done_n" -ge "$n_ops" ] && { echo "$label: all $n_ops ops done"; continue; }
  [ "$(left)" -gt 45 ] || { echo "$label: not started (time)"; break; }
  tree="/tmp/fg_${sha:0:9}"
  if [ ! -d "$tree" ]; then
    cp -r .fg/FlagGems "$tree.tmp" && gunzip -c ".fg/history/$sha.patch.gz" > "/tmp/$sha.patch" \
      && { [ ! -s "/tmp/$sha.patch" ] || (cd "$tree.tmp" && git apply --binary "/tmp/$sha.patch"); } \
      && mv "$tree.tmp" "$tree" || { echo "$label: the patch did not apply"; rm -rf "$tree.tmp"; continue; }
  fi
  echo "$label ($rest) start $(date +%H:%M:%S), $done_n done, $(left) s left"
  OPSCREEN_SUITE_COMMIT="$sha" timeout -s INT "$(left)" python3 -m opscreen run --backend cuda --devices "${DEVICE:-0}" \
      --suite "$tree" --isolation worker --ops-file "$W/ops.txt" --timeout "${OP_TIMEOUT:-150}" --retries 0 \
      --out "$d" --plain >> "$W/$label.console" 2>&1
  echo "$label rc=$? at $SECONDS s: $(ls "$d"/ops/*/.complete 2>/dev/null | wc -l) ops complete"
  tail -3 "$W/$label.console"
done < .fg/history/commits.txt
tar czf "$OUT/history.tgz" -C "$W" runs
ls -la "$OUT"
