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


def test_triton_cache_autotuning_is_set_explicitly_and_recorded(cli, tmp_path):
    # Triton's own spelling in the environment is taken, and reaches the child as 1
    out = tmp_path / "run"
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "relu", "--out", out, "--plain",
              env={"TRITON_CACHE_AUTOTUNING": "true"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert json.loads((out / "run_identity.json").read_text())["caliber"]["triton_cache_autotuning"] == "1"
    op_ident = json.loads((out / "ops" / "relu" / "run_identity.json").read_text())
    assert op_ident["caliber"]["triton_cache_autotuning"] == "1"
    assert op_ident["env"]["TRITON_CACHE_AUTOTUNING"] == "1"
    assert op_ident["tuning_caches_at_start"]["triton_cache_autotuning"] is True
    # the flag wins over the environment, and the child gets 0, not the inherited value
    out2 = tmp_path / "run2"
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "relu", "--out", out2, "--plain",
              "--triton-cache-autotuning", "0", env={"TRITON_CACHE_AUTOTUNING": "1"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    op_ident = json.loads((out2 / "ops" / "relu" / "run_identity.json").read_text())
    assert op_ident["caliber"]["triton_cache_autotuning"] == "0"
    assert op_ident["env"]["TRITON_CACHE_AUTOTUNING"] == "0"
    assert op_ident["tuning_caches_at_start"]["triton_cache_autotuning"] is False
    # a resume that asks for the other value is refused, nothing run
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "relu", "--out", out2, "--plain",
              "--triton-cache-autotuning", "1", cwd=tmp_path)
    assert res.returncode == 2 and "triton_cache_autotuning" in res.stderr


def test_run_rejects_a_bad_triton_cache_autotuning(cli, tmp_path):
    res = cli("run", "--backend", "cpu", "--ops", "relu", "--out", tmp_path / "r",
              env={"TRITON_CACHE_AUTOTUNING": "maybe"}, cwd=tmp_path)
    assert res.returncode == 2 and "TRITON_CACHE_AUTOTUNING must be 0 or 1, not 'maybe'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
