"""``opscreen merge``: real ``--shard`` runs joined into one run dir (the sample suite
on the CPU, and the fault suite for the refusals: its ops take well under a second)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, status_rows  # noqa: E402,F401  (faults: the shared fixture)

# three sample ops that --shard 0/2 and 1/2 split 1 + 2 (the shard hash is stable)
SAMPLE_OPS = "abs,relu,add"
FAST = {"OPSCREEN_MAX_TIME": "0.05"}  # a timing knob: the same for every shard, so one caliber


def summary_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".merge-" in p.name]


def test_merge_of_sample_suite_shards_summarizes_as_their_union(cli, tmp_path):
    shards = []
    for i in range(2):
        out = tmp_path / "runs" / f"shard-{i}"
        res = cli("run", "--backend", "cpu", "--ops", SAMPLE_OPS, "--shard", f"{i}/2", "--devices", "0", "--out", out,
                  "--plain", "--timeout", "300", env=FAST)
        assert res.returncode == 0, res.stdout + res.stderr
        shards.append(out)
    sizes = [len(status_rows(s)) for s in shards]
    assert sorted(sizes) == [1, 2], sizes  # both shards hold ops

    merged = tmp_path / "runs" / "all"
    res = cli("merge", *shards, "--out", merged)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 ops from 2 run dirs (3 passed)" in res.stdout and "state finished" in res.stdout
    assert set(status_rows(merged)) == set(SAMPLE_OPS.split(","))
    ident = json.loads((merged / "run_identity.json").read_text())
    assert ident["kind"] == "run" and ident["state"] == "finished" and ident["settings"]["shard"] is None
    assert sorted(ident["settings"]["ops"]) == sorted(SAMPLE_OPS.split(","))
    assert [m["shard"] for m in ident["merged_from"]] == ["0/2", "1/2"]
    assert len(ident["sessions"]) == 2

    for d in shards + [merged]:
        res = cli("summary", d)
        assert res.returncode == 0, res.stdout + res.stderr
    parts = [summary_json(s) for s in shards]
    whole = summary_json(merged)
    assert whole["columns"] == parts[0]["columns"]
    run_at = whole["columns"].index("run")  # the run's columns name the merged run, the rest is the shards' rows
    key = lambda row: json.dumps(row[:run_at] + row[run_at + 3:], sort_keys=True)  # noqa: E731
    assert sorted(map(key, whole["rows"])) == sorted(key(r) for p in parts for r in p["rows"])
    started = json.loads((merged / "run_identity.json").read_text())["started_at"]
    assert {tuple(r[run_at:run_at + 2]) for r in whole["rows"]} == {(merged.name, started)}
    assert started == min(p["identity"]["started_at"] for p in parts)
    assert whole["rows"], "the sample ops measured something"
    assert {o["op"]: o for o in whole["ops"]} == {o["op"]: o for p in parts for o in p["ops"]}
    assert whole["counts"]["ops"] == {"passed": 3}
    assert whole["caliber"] == parts[0]["caliber"]
    # the merged dir is a run dir like any other: a resume finds nothing to do
    res = cli("run", "--out", merged, "--plain", env=FAST)
    assert res.returncode == 0 and "0 ops to run" in res.stdout and "3 already complete" in res.stdout, res.stdout
    res = cli("compare", shards[0], merged)
    assert res.returncode in (0, 1), res.stdout + res.stderr


def _shard(faults, out: Path, i: int, *args) -> Path:
    res = faults.run(out, "--ops", "ok_a,ok_b,ok_c,ok_d,ok_e", "--shard", f"{i}/2", "--devices", "0", "--timeout", "20", *args)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def _refused(cli, out: Path, *runs) -> str:
    res = cli("merge", *runs, "--out", out)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opscreen merge: "), res.stderr
    assert not out.exists() and not leftovers(out.parent), "a refused merge writes nothing"
    return lines[0]


def test_merge_refuses_duplicates_mismatches_and_live_runs(faults, cli):
    tmp = faults.tmp
    s0, s1 = _shard(faults, tmp / "s0", 0), _shard(faults, tmp / "s1", 1)
    out = tmp / "merged"

    # the same op in two inputs: a shard run twice (another copy of it), or a run dir given twice
    again = tmp / "s0-again"
    shutil.copytree(s0, again)
    line = _refused(cli, out, s0, s1, again)
    assert "is in both" in line and str(s0) in line and str(again) in line
    assert "given twice" in _refused(cli, out, s0, s0)

    # a shard measured another way (FlagTune on): the caliber differs
    other = _shard(faults, tmp / "s1-tuned", 1, "--use-flagtune", "1")
    line = _refused(cli, out, s0, other)
    assert "measured differently" in line and "use_flagtune '0' vs '1'" in line
    # a shard screened in warm workers, the other in fresh processes
    warm = _shard(faults, tmp / "s1-worker", 1, "--isolation", "worker")
    line = _refused(cli, out, s0, warm)
    assert "measured differently" in line and "isolation 'op' vs 'worker'" in line

    # a run dir a live runner holds, an op dir, an existing --out
    fd = os.open(s1 / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"4242\n", 0)
        assert "in use by a running opscreen run (pid 4242)" in _refused(cli, out, s0, s1)
    finally:
        os.close(fd)
    assert "no batch run_identity.json" in _refused(cli, out, s0, s1 / "ops")
    out.mkdir()
    res = cli("merge", s0, s1, "--out", out)
    assert res.returncode == 2 and "exists" in res.stderr
    out.rmdir()

    # and the good merge, of an interrupted shard: its incomplete op is left out, and a
    # resume of the merged dir runs it (and nothing else)
    lost = next(iter(status_rows(s1)))
    (s1 / "ops" / lost / ".complete").unlink()
    res = cli("merge", s0, s1, "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "state incomplete" in res.stdout and f"opscreen run --out {out}" in res.stdout
    assert lost not in status_rows(out) and not (out / "ops" / lost).exists()
    ops = [f"ok_{c}" for c in "abcde"]
    before = {op: faults.runs(op) for op in ops}
    res = faults.run(out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(status_rows(out)) == set(ops)
    assert {op: faults.runs(op) for op in ops} == {**before, lost: before[lost] + 1}
    faults.assert_no_leftovers()
