"""Damaged files in a run dir (real runs of the fault suite, then real damage)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, status_rows  # noqa: E402,F401  (faults: the shared fixture)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("damage", ["truncated", "empty", "not an object"])
def test_damaged_run_identity_is_named_as_such_and_nothing_is_written(faults, damage):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    ident = out / "run_identity.json"
    text = ident.read_text()
    ident.write_text({"truncated": text[: len(text) // 2], "empty": "", "not an object": "[1, 2]\n"}[damage])
    before = snapshot(out)

    for argv in ([], ["--ops", "ok_a,ok_b", "--devices", "0"]):
        res = faults.run(out, *argv)
        assert res.returncode == 2, res.stdout + res.stderr
        lines = res.stderr.splitlines()
        assert len(lines) == 1, res.stderr
        assert "run_identity.json is damaged" in lines[0], lines[0]
        assert {"truncated": "not valid JSON", "empty": "(empty)", "not an object": "not a JSON object"}[damage] in lines[0]
        assert "another --out" in lines[0]
        assert "no run_identity.json" not in lines[0]
        assert snapshot(out) == before  # nothing written
    assert faults.runs("ok_a") == 1 and faults.runs("ok_b") == 1

    # as the source of a replay: the same diagnosis
    res = faults.run(faults.tmp / "replay", "--replay-from", out)
    assert res.returncode == 2 and "run_identity.json is damaged" in res.stderr, res.stderr
    assert not (faults.tmp / "replay").exists()


@pytest.mark.parametrize("damage", ["truncated", "missing", "no status"])
def test_complete_op_with_damaged_result_runs_again(faults, damage):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    result = out / "ops" / "ok_a" / "result.json"
    text = result.read_text()
    if damage == "truncated":
        result.write_text(text[: len(text) // 3])
    elif damage == "missing":
        result.unlink()
    else:
        obj = json.loads(text)
        del obj["status"]
        result.write_text(json.dumps(obj))
    assert (out / "ops" / "ok_a" / ".complete").is_file()

    res = faults.run(out)  # resume with the recorded settings
    assert res.returncode == 0, res.stdout + res.stderr
    said = [line for line in res.stdout.splitlines() if line.startswith("opscreen run: ok_a: result.json")]
    assert len(said) == 1 and "it runs again" in said[0], res.stdout
    assert "1 already complete" in res.stdout
    assert faults.runs("ok_a") == 2 and faults.runs("ok_b") == 1
    rows = status_rows(out)
    assert rows["ok_a"]["status"] == "passed" and rows["ok_a"]["attempts"] == "1", rows["ok_a"]
    assert rows["ok_a"]["duration_s"] and not rows["ok_a"]["error"]
    fresh = json.loads(result.read_text())
    assert fresh["status"] == "passed" and fresh["op"] == "ok_a"
    ident = json.loads((out / "run_identity.json").read_text())
    assert list(ident["sessions"][-1]["damaged_rerun"]) == ["ok_a"]


def test_damaged_result_of_an_op_left_out_of_the_resume_is_not_a_passed_row(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    (out / "ops" / "ok_a" / "result.json").write_text("{")
    res = faults.run(out, "--ops", "ok_b,ok_c", "--devices", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok_a: result.json not valid JSON" in res.stdout
    rows = status_rows(out)
    assert "ok_a" not in rows  # no row claims a result that is gone
    assert rows["ok_b"]["status"] == "passed" and rows["ok_c"]["status"] == "passed"
    assert faults.runs("ok_a") == 1
