"""Device telemetry (docs/telemetry.md): the NVML monitor and the harness's sampler against a
stand-in ``pynvml`` put in ``sys.modules`` (decoding, the fallback of older drivers, stats and
shares, the device's state, the off switch, the thread stopped when the child exits, times
out, crashes or is stopped, in a fresh process and in a warm worker), the rule that flags
throttled rows, compare's words for them and for a device state that differs, and the
unknown path for real (the cpu backend, and NVML on this host without a GPU driver)."""

from __future__ import annotations

import csv

import json
import os
import re
import sys
import threading
import time
import types
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_batch_faults import CONTROLLED, Faults  # noqa: E402

from opscreen.backends import devmon  # noqa: E402
from opscreen.backends.devmon import Sample, Unavailable, decode_reasons, open_monitor  # noqa: E402
from opscreen.op import run as op_run  # noqa: E402
from opscreen.op import telemetry  # noqa: E402
from opscreen.results import throttle, traces  # noqa: E402
from opscreen.results.report import render_report  # noqa: E402
from opscreen.results.compare import CSV_COLUMNS, compare_summaries, format_comparison  # noqa: E402
from opscreen.results.summary import COLUMNS, OpSummary, Summary, build_summary  # noqa: E402

SM, MEM, GPU_TEMP = 0, 2, 0  # NVML's NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU
UUID = "GPU-5a3a9e1c-0d1e-4c1b-9a57-1b2c3d4e5f60"


class NVMLError(Exception):
    pass


class NVMLError_FunctionNotFound(NVMLError):
    pass


def fake_nvml(*, reasons=(0x0,), sm=(1980,), event_api=True, init_error=None, power_mw=650_000) -> types.ModuleType:
    """A stand-in for pynvml: one device, UUID ``UUID`` at index 0. ``reasons`` and ``sm`` are
    read in turn, one per sample; ``event_api=False`` is a driver without
    nvmlDeviceGetCurrentClocksEventReasons; ``calls`` counts the sampling calls."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = SM, MEM, GPU_TEMP
    m.NVML_CLOCK_ID_CURRENT, m.NVML_CLOCK_ID_APP_CLOCK_TARGET, m.NVML_CLOCK_ID_APP_CLOCK_DEFAULT = 0, 1, 2
    m.calls = {"init": 0, "sample": 0}
    handle = object()
    state = {"i": 0}

    def init():
        m.calls["init"] += 1
        if init_error:
            raise init_error

    def by_uuid(u):
        if u != UUID:
            raise NVMLError("Not Found")
        return handle

    def by_index(i):
        if i != 0:
            raise NVMLError("Invalid Argument")
        return handle

    def clock(h, kind):
        if kind == SM:
            m.calls["sample"] += 1
            state["i"] += 1
            return sm[(state["i"] - 1) % len(sm)]
        return 2619

    def current_reasons(h):
        return reasons[(state["i"] - 1) % len(reasons)]

    def event_reasons(h):
        if not event_api:
            raise NVMLError_FunctionNotFound("Function Not Found")
        return current_reasons(h)

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByUUID, m.nvmlDeviceGetHandleByIndex = by_uuid, by_index
    m.nvmlDeviceGetClockInfo = clock
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980 if kind == SM else 2619
    m.nvmlDeviceGetClock = lambda h, kind, cid: (1755 if cid == 1 else 1980) if kind == SM else 2619
    m.nvmlDeviceGetPowerUsage = lambda h: power_mw
    m.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    m.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000
    m.nvmlDeviceGetTemperature = lambda h, sensor: 41
    m.nvmlDeviceGetCurrentClocksEventReasons = event_reasons
    m.nvmlDeviceGetCurrentClocksThrottleReasons = current_reasons
    m.nvmlDeviceGetPersistenceMode = lambda h: 1
    m.nvmlDeviceGetMigMode = lambda h: [0, 0]
    m.nvmlDeviceGetEccMode = lambda h: [1, 1]
    m.nvmlDeviceGetComputeMode = lambda h: 3
    m.nvmlDeviceGetUUID = lambda h: UUID

    def unsupported(*a):
        raise NVMLError("Not Supported")

    m.nvmlDeviceGetApplicationsClock = m.nvmlDeviceGetDefaultApplicationsClock = unsupported
    return m


def _sample(t, sm=1980.0, reasons=0x0, power=650.0):
    return Sample(t=t, sm_clock_mhz=sm, mem_clock_mhz=2619.0, power_w=power, power_limit_w=700.0, temperature_c=41.0,
                  reasons=reasons)


# -- decoding, the monitor, the device's state ---------------------------------------------


def test_reasons_decode_to_nvml_names_and_unknown_bits_are_kept():
    assert decode_reasons(0x0) == [] and decode_reasons(None) == []
    assert decode_reasons(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0x2 | 0x8 | 0x10 | 0x20 | 0x80 | 0x100) == [
        "applications_clocks_setting", "hw_slowdown", "sync_boost", "sw_thermal_slowdown", "hw_power_brake_slowdown",
        "display_clocks_setting"]
    assert decode_reasons(0x4 | 0x1000) == ["sw_power_cap", "other_0x1000"]


def test_nvml_monitor_finds_the_device_by_uuid_else_by_index(monkeypatch):
    nv = fake_nvml(reasons=(0x4,))
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    mon = open_monitor("cuda", UUID.removeprefix("GPU-"), 3)  # torch's bare UUID: NVML's has the prefix
    assert mon.source == "nvml" and mon.found_by == "uuid" and mon.reasons_api == "clocks_event"
    s = mon.sample()
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.power_w, s.power_limit_w, s.temperature_c, s.reasons) == \
        (1980, 2619, 650.0, 700.0, 41, 0x4)
    assert open_monitor("cuda", None, 0).found_by == "index"
    assert open_monitor("cuda", "GPU-someone-else", 0).found_by == "index"
    with pytest.raises(Unavailable, match="no device with UUID"):
        open_monitor("cuda", "GPU-someone-else", 5)
    assert nv.calls["init"] == 1  # NVML is initialised once per process


def test_an_older_driver_reads_the_throttle_reasons(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(reasons=(0x40,), event_api=False))
    mon = open_monitor("cuda", UUID, None)
    assert mon.reasons_api == "clocks_throttle" and mon.sample().reasons == 0x40


def test_the_device_state(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    st = open_monitor("cuda", UUID, None).state()
    assert st["source"] == "nvml" and st["uuid"] == UUID and st["found_by"] == "uuid"
    assert st["power_limit_w"] == {"enforced": 700.0, "default": 700.0}
    assert st["clocks_mhz"]["sm"] == {"application": 1755, "application_default": 1980, "max": 1980}
    assert st["clocks_mhz"]["mem"] == {"application": 2619, "application_default": 2619, "max": 2619}
    assert (st["persistence_mode"], st["mig_mode"], st["ecc_mode"], st["compute_mode"]) == \
        (True, False, True, "exclusive_process")
    assert st["clocks_locked"] is True  # the SM's application clock is not its default
    assert devmon.clocks_locked({"sm": {"application": 1980, "application_default": 1980}}) is False
    assert devmon.clocks_locked({"sm": {"application": None, "application_default": 1980}}) is None


def test_nvml_that_does_not_initialise_is_unknown_with_its_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(init_error=NVMLError("Driver Not Loaded")))
    with pytest.raises(Unavailable, match=r"NVML did not initialise \(NVMLError: Driver Not Loaded\)"):
        open_monitor("cuda", UUID, 0)


def test_the_real_nvml_of_this_host_gives_a_device_or_a_reason():
    """The real pynvml: on a host without a GPU driver (this CPU machine) a reason and never a
    number; on one with a driver, the first GPU's readings."""
    try:
        mon = open_monitor("cuda", None, 0)
    except Unavailable as exc:
        assert re.match(r"(NVML did not initialise|pynvml is not importable) \(\w+", str(exc)), str(exc)
        return
    assert mon.source == "nvml" and mon.found_by == "index" and mon.sample().sm_clock_mhz is not None


@pytest.mark.parametrize("backend", ["musa", "ascend", "mlu", "cpu"])
def test_backends_without_a_library_say_so(backend):
    with pytest.raises(Unavailable, match=f"the {backend} backend has no device-telemetry library"):
        open_monitor(backend, None, 0)


def fake_amdsmi() -> types.ModuleType:
    """A stand-in for ROCm's amdsmi (6.1 or newer): one GPU, no clock-event reasons."""
    m = types.ModuleType("amdsmi")
    m.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    m.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="hotspot")
    m.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    handle = object()
    m.amdsmi_init = lambda: None
    m.amdsmi_get_processor_handles = lambda: [handle]
    m.amdsmi_get_gpu_device_uuid = lambda h: "amd-uuid-0"
    m.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == "gfx" else 1300,
                                               "max_clk": 2100 if kind == "gfx" else 1300}
    m.amdsmi_get_power_info = lambda h: {"current_socket_power": "N/A", "average_socket_power": 550,
                                         "power_limit": 750}
    m.amdsmi_get_temp_metric = lambda h, kind, metric: 61
    return m


def test_the_amdsmi_monitor_reads_clocks_and_power_and_no_reasons(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi())
    mon = open_monitor("rocm", "amd-uuid-0", 3)
    assert mon.source == "amdsmi" and mon.found_by == "uuid" and mon.reasons_api is None
    s = mon.sample()
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.power_w, s.power_limit_w, s.temperature_c, s.reasons) == \
        (2100, 1300, 550, 750, 61, None)  # "N/A" is no number: the average power stands in
    assert open_monitor("rocm", "other", 0).found_by == "index" and mon.max_sm_clock_mhz() == 2100
    st = mon.state()
    assert st["power_limit_w"]["enforced"] == 750 and st["clocks_locked"] is None and st["mig_mode"] is None
    r = telemetry.reduce_samples([s, s], mon.max_sm_clock_mhz())
    assert r["reasons"] is None and r["busy_samples"] is None and throttle.throttled({"source": "amdsmi", **r}) is None


# -- stats, shares, the window -----------------------------------------------------------------


def test_stats_busy_clock_and_reason_shares():
    samples = [_sample(1, 1980, 0x1), _sample(2, 1410, 0x4), _sample(3, 1500, 0x4 | 0x40), _sample(4, 1980, 0x0),
               _sample(5, 345, 0x1, power=90.0)]
    r = telemetry.reduce_samples(samples, 1980)
    assert r["samples"] == 5 and r["busy_samples"] == 3
    assert r["sm_clock_mhz"] == {"min": 345.0, "median": 1500.0, "max": 1980.0}
    assert r["sm_clock_busy_mhz"] == {"min": 1410.0, "median": 1500.0, "max": 1980.0}  # the idle samples left out
    assert r["power_w"] == {"min": 90.0, "median": 650.0, "max": 650.0}
    assert r["reasons"] == {"gpu_idle": 0.4, "hw_thermal_slowdown": 0.2, "sw_power_cap": 0.4}
    assert r["bad_reasons"] == ["hw_thermal_slowdown", "sw_power_cap"] and r["max_sm_clock_mhz"] == 1980
    none = telemetry.reduce_samples([], 1980)
    assert none["samples"] == 0 and none["sm_clock_mhz"] is None and none["reasons"] is None


def test_the_window_is_the_childs_measurement_phase():
    ident = {"phases": {"start_imports_s": 2.0, "collection_s": 0.5, "measurement_s": 3.0, "teardown_s": 0.1}}
    assert telemetry.measurement_window(ident, 100.0) == pytest.approx((102.5, 105.501))
    assert telemetry.measurement_window({"phases": {"start_imports_s": 2.0, "collection_s": None}}, 100.0) is None
    assert telemetry.measurement_window(ident, None) is None and telemetry.measurement_window(None, 1.0) is None


# -- the throttle rule -------------------------------------------------------------------------


def test_throttled_cells():
    tel = {"source": "nvml", "samples": 10, "reasons": {"gpu_idle": 0.5}, "max_sm_clock_mhz": 1980,
           "sm_clock_busy_mhz": {"median": 1980}}
    assert throttle.throttled(tel) == "no"
    assert throttle.throttled({**tel, "reasons": {"sw_power_cap": 0.12, "sync_boost": 1.0}}) == "sw_power_cap 12%"
    assert throttle.throttled({**tel, "sm_clock_busy_mhz": {"median": 1400}}) == "sm clock 1400/1980 MHz"
    assert throttle.throttled({**tel, "sm_clock_busy_mhz": {"median": 1500}}) == "no"  # 75.8 % of 1980: above 75 %
    both = throttle.throttled({**tel, "reasons": {"hw_slowdown": 0.3}, "sm_clock_busy_mhz": {"median": 990}})
    assert both == "hw_slowdown 30%; sm clock 990/1980 MHz"
    for unknown in (None, {"source": "unknown", "why": "x"}, {"source": "off"}, {**tel, "samples": 0},
                    {**tel, "reasons": None, "sm_clock_busy_mhz": None}):
        assert throttle.throttled(unknown) is None
    assert throttle.combine(["no", "sw_power_cap 4%"]) == "repeat 2: sw_power_cap 4%"
    assert throttle.combine(["no", None]) == "no" and throttle.combine([None, None]) is None


# -- the sampler around real children (the fault suite) ------------------------------------------


@pytest.fixture
def faults(tmp_path, monkeypatch):
    f = Faults(tmp_path)
    for k, v in f.env.items():
        monkeypatch.setenv(k, v)
    for k in CONTROLLED:
        monkeypatch.delenv(k, raising=False)
    yield f
    f.assert_no_leftovers()


@pytest.fixture
def nvml_on_cpu(monkeypatch):
    """The cpu backend's children, sampled through the stand-in NVML; every Sampler kept."""
    nv = fake_nvml(reasons=(0x0, 0x4, 0x1, 0x0), sm=(1980, 1410, 345, 1980))
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setitem(devmon.MONITORS, "cpu", devmon.NvmlMonitor)
    made: list = []

    class Kept(telemetry.Sampler):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(op_run, "Sampler", Kept)
    nv.made = made
    return nv


def _run(faults, op, timeout=60.0, stop=None, isolation="op", repeats=1):
    from opscreen.backends import resolve
    from opscreen.op.lane import LaneRunner
    from opscreen.op.request import OpRequest
    from opscreen.providers.flaggems import Suite

    suite = Suite.locate(str(faults.suite), python=sys.executable)
    req = OpRequest(op=op, target=suite.resolve(op), suite=suite, backend=resolve("cpu"), timer="wallclock",
                    timeout=timeout, grace=0.5, isolation=isolation, repeats=repeats)
    out = faults.tmp / f"op-{op}-{isolation}"
    if isolation == "worker":
        lane = LaneRunner()
        try:
            lane.run(req, out, stop=stop)
        finally:
            lane.close()
    else:
        op_run.run_op(req, out, stop=stop)
    return out, json.loads((out / "result.json").read_text()), json.loads((out / "run_identity.json").read_text())


def _valid(res: dict, ident: dict) -> None:
    """result.json and run_identity.json with NVML's blocks match their contracts' schemas."""
    import jsonschema
    from importlib.resources import files

    from opscreen import contracts

    for c, obj in ((contracts.RESULT, res), (contracts.RUN_IDENTITY, ident)):
        schema = json.loads(files("opscreen").joinpath("schemas", c.schema_file()).read_text(encoding="utf-8"))
        jsonschema.validate(obj, schema)
        with pytest.raises(jsonschema.ValidationError):  # the blocks are checked, not only allowed
            key = "telemetry" if c is contracts.RESULT else "device_state"
            jsonschema.validate({**obj, key: {**obj[key], "a_new_key": 1}}, schema)


def _stopped(nv, since: int):
    """Every sampler has stopped, and no NVML call came after the run returned."""
    calls = nv.calls["sample"]
    time.sleep(0.3)
    assert nv.made[since:] and all(not s.alive() for s in nv.made[since:])
    assert nv.calls["sample"] == calls


def test_an_op_that_passes_records_its_measurement(faults, nvml_on_cpu, monkeypatch):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "10")
    monkeypatch.setenv("FAULTS_OP_SLEEP", "0.5")  # a measurement phase of half a second: dozens of samples
    out, res, ident = _run(faults, "ok_a")
    assert res["status"] == "passed"
    tel = res["telemetry"]
    assert tel["source"] == "nvml" and tel["window"] == "measurement" and tel["interval_ms"] == 10
    assert tel["device"] == {"uuid": UUID, "index": 0, "found_by": "index"}  # the cpu child names no UUID
    assert 0 < tel["samples"] <= tel["samples_all"] and tel["samples"] >= 10
    assert set(tel["reasons"]) <= {"sw_power_cap", "gpu_idle"} and all(0 < v <= 1 for v in tel["reasons"].values())
    assert 345 <= tel["sm_clock_mhz"]["min"] <= tel["sm_clock_mhz"]["median"] <= tel["sm_clock_mhz"]["max"] <= 1980
    assert tel["power_w"] == {"min": 650.0, "median": 650.0, "max": 650.0} and tel["sampling_s"] >= 0
    assert tel["window_s"] >= 0.5 and tel["samples"] <= tel["window_s"] / 0.010 + 2
    assert ident["device_state"]["source"] == "nvml" and ident["device_state"]["power_limit_w"]["enforced"] == 700.0
    _valid(res, ident)
    _stopped(nvml_on_cpu, 0)
    tr = tel["trace"]
    assert len(tr["t_s"]) == len(tr["sm_clock_mhz"]) == len(tr["power_w"]) == min(tel["samples"], telemetry.TRACE_POINTS)
    assert tr["t_s"] == sorted(tr["t_s"]) and 0 <= tr["t_s"][0] and tr["t_s"][-1] <= tel["window_s"]
    s = build_summary(out)
    assert s.ops[0].throttled.startswith("sw_power_cap") and {r[COLUMNS.index("throttled")] for r in s.rows} == \
        {s.ops[0].throttled}
    html = render_report(s, out / "report.html")
    assert html.count('<div class="trace"><svg class="trace"') == 1 and html.count("<polyline") == 2
    assert "device: " in html and "samples (nvml, every 10 ms), SM clock" in html and "throttled: sw_power_cap" in html
    dev = device_section(html)  # the device's state and what its telemetry saw, as recorded
    assert "<td>power limit</td><td>enforced 700 W" in dev and "<td>persistence mode</td><td>on</td>" in dev
    assert "<td>state recorded by</td><td>nvml, 1 of 1 ops; the same in each</td>" in dev
    assert "<td>throttled ops</td><td>1 of 1: ok_a</td>" in dev and "<td>telemetry</td><td>nvml 1 ops</td>" in dev
    assert "<td>power (op medians)</td><td>650 W</td>" in dev and 'href="#device"' in html


def device_section(html: str) -> str:
    i = html.index('<section id="device">')
    return html[i:html.index("</section>", i)]


def test_nvml_that_fails_to_initialise_leaves_the_op_unknown_with_why(faults, nvml_on_cpu, monkeypatch):
    broken = fake_nvml(init_error=NVMLError("Driver/library version mismatch"))
    broken.made = nvml_on_cpu.made
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    _, res, ident = _run(faults, "ok_e")
    why = "NVML did not initialise (NVMLError: Driver/library version mismatch)"
    assert res["status"] == "passed" and res["telemetry"] == {"source": "unknown", "why": why}
    assert ident["device_state"] == {"source": "unknown", "why": why}
    _stopped(broken, 0)


@pytest.mark.parametrize("written", [True, False])
def test_a_child_gone_before_the_first_look_still_has_its_device(nvml_on_cpu, tmp_path, written):
    """The race CI hit: the child wrote its identity and exited before the thread's first poll.
    The stop comes first here by construction; the thread reads the identity once more."""
    ident = tmp_path / "run_identity.json"
    if written:
        ident.write_text(json.dumps({"device_uuid": UUID}), encoding="utf-8")
    s = telemetry.Sampler("cpu", 0, ident, 10.0)
    s._stop.set()
    s.start()
    s.stop()
    assert not s.alive() and s.samples == []
    rec = s.record(None)
    if written:
        assert s.state["uuid"] == UUID and rec["source"] == "nvml" and rec["samples"] == 0
    else:
        assert s.state is None and rec == {"source": "unknown",
                                           "why": "the child never wrote its identity, so its device was never known"}


def test_the_off_switch_reads_the_state_and_samples_nothing(faults, nvml_on_cpu, monkeypatch):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "0")
    _, res, ident = _run(faults, "ok_b")
    assert res["telemetry"]["source"] == "off" and "samples" not in res["telemetry"]
    assert nvml_on_cpu.calls["sample"] == 0 and ident["device_state"]["source"] == "nvml"
    _stopped(nvml_on_cpu, 0)


@pytest.mark.parametrize("op,status", [("hang", "timeout"), ("segv", "crashed")])
def test_the_thread_stops_when_the_child_times_out_or_crashes(faults, nvml_on_cpu, monkeypatch, op, status):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "10")
    _, res, _ = _run(faults, op, timeout=3.0)
    assert res["status"] == status
    tel = res["telemetry"]
    assert tel["source"] == "nvml" and tel["window"] == "child"  # no phases reported: every sample counts
    assert tel["samples"] == tel["samples_all"] > 0
    _stopped(nvml_on_cpu, 0)


def test_the_thread_stops_when_the_op_is_stopped(faults, nvml_on_cpu, monkeypatch):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "10")
    stop = threading.Event()
    threading.Timer(2.0, stop.set).start()
    _, res, _ = _run(faults, "hang", timeout=60.0, stop=stop)
    assert res["status"] == "interrupted" and res["telemetry"]["samples"] > 0
    _stopped(nvml_on_cpu, 0)


def test_a_warm_workers_ops_are_sampled_too(faults, nvml_on_cpu, monkeypatch):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "10")
    monkeypatch.setenv("FAULTS_OP_SLEEP", "0.3")
    _, res, _ = _run(faults, "ok_c", isolation="worker")
    assert res["status"] == "passed" and res["phases"]["mode"] == "worker"
    assert res["telemetry"]["source"] == "nvml" and res["telemetry"]["window"] == "measurement"
    assert res["telemetry"]["samples"] > 0
    _stopped(nvml_on_cpu, 0)


def test_each_repeat_keeps_its_own_and_the_summary_joins_them(faults, nvml_on_cpu, monkeypatch):
    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "10")
    monkeypatch.setenv("FAULTS_OP_SLEEP", "0.3")
    out, res, _ = _run(faults, "ok_d", repeats=2)
    assert res["status"] == "passed" and res["repeats"]["ran"] == 2
    per = [json.loads((out / "repeats" / str(k) / "result.json").read_text())["telemetry"] for k in (1, 2)]
    assert all(t["source"] == "nvml" and t["samples"] > 0 for t in per)
    op = build_summary(out).ops[0]
    assert op.telemetry == {"processes": per}
    want = [throttle.throttled(t) for t in per]
    assert op.throttled == throttle.combine(want) and op.throttled != "no"  # the stand-in reports sw_power_cap
    _stopped(nvml_on_cpu, 0)


def test_a_trace_is_thinned_evenly_and_drawn_from_numbers_only():
    samples = [_sample(100.0 + 0.01 * i, sm=1980 - i, power=600.0 + i) for i in range(500)]
    tr = telemetry.trace(samples, start=100.0, points=50)
    assert len(tr["t_s"]) == 50 and tr["t_s"][0] == 0.0 and tr["t_s"][-1] == pytest.approx(4.99)
    assert tr["sm_clock_mhz"][0] == 1980 and tr["sm_clock_mhz"][-1] == 1481 and telemetry.trace([]) is None
    svg = traces.trace_svg({"source": "nvml", "trace": tr, "max_sm_clock_mhz": 1980, "power_limit_w": {"max": 700.0}})
    assert svg.startswith('<svg class="trace"') and svg.count("<polyline") == 2 and svg.count("<line") == 2
    assert "SM clock 1730 MHz median, 1481-1980" in svg and "power 850 W median, 600-1099" in svg
    stats = {"min": 1000.0, "median": 1900.0, "max": 1980.0}  # result.json's, over every sample: the label's
    assert "SM clock 1900 MHz median, 1000-1980" in traces.trace_svg({"source": "nvml", "trace": tr, "sm_clock_mhz": stats})
    assert traces.trace_svg({"source": "unknown", "why": "x"}) is None and traces.trace_svg(None) is None
    assert traces.trace_svg({"processes": [None, {"source": "nvml", "trace": tr}]}).count("<polyline") == 2


def test_a_bad_interval_is_one_line(monkeypatch):
    from opscreen.errors import UsageError

    monkeypatch.setenv("OPSCREEN_TELEMETRY_MS", "fast")
    with pytest.raises(UsageError, match="OPSCREEN_TELEMETRY_MS='fast' is neither 0"):
        telemetry.interval_ms()


# -- the unknown path for real: the sample suite on the cpu backend --------------------------------


def test_the_cpu_backend_records_unknown_for_real(tmp_path):
    from conftest import run_cli

    fast = {"OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3", "OPSCREEN_WARMUP_CALLS": "1"}
    res = run_cli("run", "--backend", "cpu", "--devices", "0", "--ops", "abs,relu", "--dtypes", "float32", "--plain",
                  "--out", tmp_path / "run", env=fast, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    for op in ("abs", "relu"):
        d = tmp_path / "run" / "ops" / op
        tel = json.loads((d / "result.json").read_text())["telemetry"]
        assert tel == {"source": "unknown", "why": "the cpu backend has no device-telemetry library in opscreen "
                                                   "(NVML and amdsmi only)"}
        assert json.loads((d / "run_identity.json").read_text())["device_state"]["source"] == "unknown"
    res = run_cli("summary", tmp_path / "run")
    assert res.returncode == 0 and "telemetry: unknown 2 ops (the cpu backend has no device-telemetry" in res.stdout
    js = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {r[COLUMNS.index("throttled")] for r in js["rows"]} == {None}
    html = render_report(build_summary(tmp_path / "run"), tmp_path / "run" / "report.html")
    assert '<div class="trace">' not in html and "device: " not in html  # nothing sampled: nothing drawn
    dev = device_section(html)  # unknown, with its reason: no guessed clock, power or state
    assert "<td>device state</td><td>unknown (the cpu backend has no device-telemetry library" in dev
    assert "<td>telemetry</td><td>unknown 2 ops</td>" in dev
    assert "clock" not in dev and "power" not in dev and "throttled" not in dev


# -- compare names the throttled side and a device state that differs ------------------------------


def _row(**kw) -> list:
    d = dict.fromkeys(COLUMNS)
    d.update(op="op", test="", dtype="float32", shape="[1]", status="ok", op_status="passed", torch_timer="graph",
             lib_timer="graph", torch_noise_pct=0.05, lib_noise_pct=0.05)
    d.update(kw)
    d["speedup"] = d["torch_ms"] / d["lib_ms"]
    return [d[c] for c in COLUMNS]


def _summary(name, rows, state=None) -> Summary:
    ops = [OpSummary(op=o, status="passed", device_state=state) for o in sorted({r[0] for r in rows})]
    cal = {"device_name": "NVIDIA H200", "backend": "cuda", "isolation": "op", "timer": "graph"}
    return Summary(kind="run", name=name, identity={}, caliber=cal, ops=ops, rows=rows)


def test_compare_names_the_throttled_side_of_a_row_it_calls_slower():
    state = {"source": "nvml", "power_limit_w": {"enforced": 700.0, "default": 700.0}, "persistence_mode": True,
             "clocks_mhz": {"sm": {"application": 1980, "max": 1980}}, "clocks_locked": False}
    capped = {**state, "power_limit_w": {"enforced": 600.0, "default": 700.0}}
    a = _summary("A", [_row(op="x", torch_ms=0.1, lib_ms=0.1, throttled="no"),
                       _row(op="y", torch_ms=0.1, lib_ms=0.1, throttled="no")], state)
    b = _summary("B", [_row(op="x", torch_ms=0.1, lib_ms=0.12, throttled="sw_power_cap 40%"),
                       _row(op="y", torch_ms=0.1, lib_ms=0.12, throttled="no")], capped)
    c = compare_summaries(a, b, table=False)
    by = {r.op: r for r in c.rows}
    assert by["x"].verdict.value == by["y"].verdict.value == "slower"
    assert by["x"].throttled == "B" and by["y"].throttled is None
    text = format_comparison(c)
    assert "also differs: device state power_limit_w.enforced: A 700.0, B 600.0" in text
    assert "power_limit_w.default" not in text and "persistence_mode" not in text  # the same on both sides
    assert "throttled: 1 rows called faster, slower or pick were measured while the device throttled (A 0, B 1" in text
    assert "samples, B throttled" in text
    csv_lines = c.to_csv_text().splitlines()
    col = csv_lines[0].split(",").index("throttled")
    assert CSV_COLUMNS[col] == "throttled"
    x = next(row for row in csv.reader(csv_lines[1:]) if row[0] == "x")
    assert x[col] == "B"
    # unknown on either side (an older run, the cpu backend): nothing is named
    a2 = _summary("A", [_row(op="x", torch_ms=0.1, lib_ms=0.1)])
    c2 = compare_summaries(a2, _summary("B", [_row(op="x", torch_ms=0.1, lib_ms=0.12, throttled="no")]), table=False)
    assert c2.rows[0].throttled is None and "device state" not in format_comparison(c2)


# -- the fake vendor runtimes (tests/fixtures/vendors): what they cannot report is unknown ------------


@pytest.mark.parametrize("name", ["musa", "ascend", "mlu", "rocm"])
def test_the_fake_vendors_record_unknown_telemetry_and_device_state(name, cli, tmp_path):
    from test_vendor_backends import VENDORS, vendor_env

    out = tmp_path / "op"
    res = cli("op", "add", "--backend", name, "--device", "1", "--dtypes", "float32", "--out", out,
              env={**vendor_env(VENDORS[name], tmp_path), "OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3"},
              timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    tel = json.loads((out / "result.json").read_text())["telemetry"]
    state = json.loads((out / "run_identity.json").read_text())["device_state"]
    if name == "rocm":  # a backend with a library, which this host lacks: its import error says so
        assert tel["source"] == "unknown" and tel["why"].startswith("amdsmi is not importable (ModuleNotFoundError")
    else:
        assert tel == {"source": "unknown",
                       "why": f"the {name} backend has no device-telemetry library in opscreen (NVML and amdsmi only)"}
    assert state == tel  # the same reason, never a guessed value
    res = cli("summary", out)
    assert res.returncode == 0 and "telemetry: unknown 1 ops" in res.stdout
    assert {r[COLUMNS.index("throttled")] for r in json.loads((out / "summary.json").read_text())["rows"]} == {None}
