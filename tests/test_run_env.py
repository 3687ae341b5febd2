"""`opscreen run` honours the environment knobs of `opscreen op` (flags still win)."""

from __future__ import annotations

import json


def test_run_reads_env_knobs_and_flags_win(cli, tmp_path):
    out = tmp_path / "run"
    env = {"USE_FLAGTUNE": "1", "DTYPES": "float32"}
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "relu", "--out", out, "--plain", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["caliber"]["use_flagtune"] == "1"
    assert ident["caliber"]["dtypes"] == ["float32"]
    cfg = json.loads((out / "ops" / "relu" / "child_config.json").read_text())
    assert cfg["use_flagtune"] == "1" and cfg["dtypes"] == ["float32"]

    out2 = tmp_path / "run2"
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "relu", "--out", out2, "--plain",
              "--use-flagtune", "0", env={"USE_FLAGTUNE": "1", "DTYPES": "float32"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert json.loads((out2 / "run_identity.json").read_text())["caliber"]["use_flagtune"] == "0"


def test_run_rejects_bad_env_knob(cli, tmp_path):
    res = cli("run", "--backend", "cpu", "--ops", "relu", "--out", tmp_path / "r", env={"USE_FLAGTUNE": "yes"}, cwd=tmp_path)
    assert res.returncode == 2 and "USE_FLAGTUNE" in res.stderr
    assert not (tmp_path / "r").exists()
