"""What a batch run says about where an op ran: 'stolen from dev N' only for an op that
an idle device took from device N's queue and ran there, never for one moved after a
device-fatal exit (real runs of the fault suite on two CPU slots)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"


def test_an_op_moved_after_a_device_fatal_exit_is_not_called_stolen(tmp_path, cli):
    suite, state = tmp_path / "suite", tmp_path / "state"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    state.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(FAULTS / "stub_torch")]),
        "FAULTS_STATE_DIR": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # ok_b, ok_d and fatal all hash to device 0: device 1 steals fatal (the last queued),
    # which exits device-fatal there and is moved back to device 0
    out = tmp_path / "run"
    res = cli("run", "--suite", suite, "--backend", "cpu", "--devices", "0,1", "--ops", "ok_b,ok_d,fatal",
              "--out", out, "--plain", env=env, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    fatal = json.loads((out / "ops" / "fatal" / "result.json").read_text())
    assert fatal["status"] == "device_fatal" and fatal["home_device"] == 0
    assert fatal["attempt_log"][0]["device"] == 1  # it was stolen first
    assert fatal["stolen_from"] is None, fatal  # then moved: the last attempt was not a steal
    lines = [line for line in res.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 3, res.stdout
    for line in lines:
        m = re.search(r" dev (\d+) .*stolen from dev (\d+)", line)
        assert not (m and m.group(1) == m.group(2)), line
    assert "stolen" not in next(line for line in lines if " fatal " in line)
