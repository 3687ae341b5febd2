"""The identity plugin's record of GPU clocks/temperature/power, through a fake nvidia-smi."""

from __future__ import annotations

import os
import stat

import pytest

from opscreen.child import device, identity


def fake_smi(tmp_path, body: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def probe_uuid(monkeypatch):
    monkeypatch.setitem(device.PROBE, "uuid", "6e5ee5d0-1111-2222-3333-444455556666")


def test_gpu_state_queries_the_device_by_uuid(tmp_path, monkeypatch, probe_uuid):
    log = tmp_path / "args"
    monkeypatch.setenv("PATH", fake_smi(tmp_path, f'echo "$@" > {log}\necho "1980, 1980, 2619, 41, 118.52, P0, 0x0000000000000000"\n'))
    state = identity.gpu_state({"backend": "cuda"})
    assert state["clocks.sm"] == "1980" and state["temperature.gpu"] == "41"
    assert state["clocks_throttle_reasons.active"] == "0x0000000000000000" and state["at"]
    assert "-i GPU-6e5ee5d0-1111-2222-3333-444455556666" in log.read_text()


def test_gpu_state_drops_a_field_the_driver_no_longer_knows(tmp_path, monkeypatch, probe_uuid):
    body = ('case "$*" in *throttle*) echo "Field is not a valid field to query." >&2; exit 2;; esac\n'
            'echo "1755, 1980, 2619, 77, 690.1, P0"\n')
    monkeypatch.setenv("PATH", fake_smi(tmp_path, body))
    state = identity.gpu_state({"backend": "cuda"})
    assert state["clocks.sm"] == "1755" and "clocks_throttle_reasons.active" not in state


def test_gpu_state_is_none_off_cuda_or_without_nvidia_smi(tmp_path, monkeypatch, probe_uuid):
    assert identity.gpu_state({"backend": "cpu"}) is None
    monkeypatch.setenv("PATH", fake_smi(tmp_path, "exit 9\n"))
    assert identity.gpu_state({"backend": "cuda"}) is None


def test_identity_takes_state_and_driver_from_one_nvidia_smi_call(tmp_path, monkeypatch, probe_uuid):
    calls = tmp_path / "calls"
    body = (f'echo x >> {calls}\n'
            'case "$*" in *driver_version*) echo "580.159.04, 1980, 1980, 3201, 41, 118.5, P0, 0x0";; '
            '*) echo "1980, 1980, 3201, 41, 118.5, P0, 0x0";; esac\n')
    monkeypatch.setenv("PATH", fake_smi(tmp_path, body))
    ident = identity.build({"backend": "cuda"})
    assert ident["driver_version"] == "580.159.04"
    assert ident["gpu_state"]["start"]["clocks.mem"] == "3201"
    assert "driver_version" not in ident["gpu_state"]["start"]
    assert len(calls.read_text().split()) == 1
