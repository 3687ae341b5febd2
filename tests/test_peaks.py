"""Peaks (docs/peaks.md): the spec formula and the FLOPs table on datasheet numbers, the NVML path
against a stand-in ``pynvml`` in ``sys.modules``, the achievable peak measured for real by the
cpu backend in the sample suite's interpreter (``.venv``'s python with CPU torch), the peaks file
found by a summary, summary 5's %-of-peak cells on synthetic rows, and the report's plot."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import run_cli  # noqa: E402
from synth import make_run  # noqa: E402

from opscreen import contracts  # noqa: E402
from opscreen.backends import BACKENDS  # noqa: E402
from opscreen.backends import peaks as P  # noqa: E402
from opscreen.results import peaks as RP  # noqa: E402
from opscreen.results.report import render_report  # noqa: E402
from opscreen.results.summary import COLUMNS, build_summary, format_summary, load_summary, write_summary  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SM, MEM = 0, 2  # NVML_CLOCK_SM, NVML_CLOCK_MEM
UUID = "GPU-5a3a9e1c-0d1e-4c1b-9a57-1b2c3d4e5f60"
SMALL = {"copy_bytes": 8 << 20, "matmul_n": 128, "reps": 5, "budget_s": 0.2}


# -- the spec peak: formula and table ---------------------------------------------------------


def test_the_bandwidth_formula_on_datasheet_numbers():
    # H100 SXM: NVML's max memory clock 2619 MHz on a 5120-bit HBM3 bus -> its datasheet's 3.35 TB/s
    h100 = P.spec_bandwidth(2619, 5120)
    assert h100["gbps"] == pytest.approx(3352.3, abs=0.1) and h100["ddr_factor"] == 2
    # H200: 6144 bits (six HBM3e stacks of 1024); its 4.8 TB/s is a memory clock of 3125 MHz
    assert P.spec_bandwidth(3125, 6144)["gbps"] == pytest.approx(4800.0)
    no = P.spec_bandwidth(None, 6144)
    assert no["gbps"] is None and "bus width" in no["why"]


@pytest.mark.parametrize("sms, mhz, cc, want", [
    (132, 1830, "9.0", {"float16": 989.4, "bfloat16": 989.4, "tf32": 494.7}),  # H100 SXM5 whitepaper, dense
    (132, 1980, "9.0", {"float32": 66.9}),  # H100 SXM5 fp32 at its 1980 MHz boost
    (108, 1410, "8.0", {"float16": 312.0, "tf32": 156.0, "float32": 19.5}),  # A100 whitepaper, dense
    (142, 2520, "8.9", {"float16": 362.05, "float32": 91.6}),  # L40S datasheet, dense
])
def test_the_flops_table_gives_the_datasheets_dense_figures(sms, mhz, cc, want):
    got = P.spec_flops(sms, mhz, cc)
    assert got["convention"].startswith("dense")
    for dtype, tflops in want.items():
        assert got["tflops"][dtype] == pytest.approx(tflops, rel=0.015), (cc, dtype)


def test_a_capability_outside_the_table_or_no_sm_count_is_unknown():
    for cc in ("10.0", "7.0", None):
        got = P.spec_flops(148, 1965, cc)
        assert got["tflops"] is None and "not in opscreen's table" in got["why"]
    assert P.spec_flops(None, 1980, "9.0")["tflops"] is None


# -- the NVML path, against a stand-in pynvml ---------------------------------------------------


def fake_nvml(*, bus_width=True, init_error=None) -> types.ModuleType:
    """One H200-like device, UUID ``UUID``: max SM clock 1980 MHz, max memory clock 3201 MHz, 6144 bits."""
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = SM, MEM, 0
    handle = object()

    def init():
        if init_error:
            raise init_error

    def by_uuid(u):
        if u != UUID:
            raise RuntimeError("Not Found")
        return handle

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByUUID = by_uuid
    m.nvmlDeviceGetHandleByIndex = lambda i: handle if i == 0 else (_ for _ in ()).throw(RuntimeError("Invalid"))
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980 if kind == SM else 3201
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0
    if bus_width:
        m.nvmlDeviceGetMemoryBusWidth = lambda h: 6144
    return m


FACTS = {"type": "cuda", "index": 0, "name": "NVIDIA H200", "uuid": UUID.removeprefix("GPU-"), "sm_count": 132,
         "compute_capability": "9.0"}


def test_the_spec_peak_from_nvml_and_the_table(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    spec = P.spec_peaks("cuda", FACTS)
    assert spec["source"] == "nvml+table" and spec["found_by"] == "uuid"
    bw = spec["bandwidth"]
    assert (bw["mem_clock_mhz"], bw["bus_width_bits"]) == (3201, 6144) and bw["gbps"] == pytest.approx(4916.7, abs=0.1)
    assert spec["flops"]["tflops"]["float16"] == pytest.approx(132 * 1980e6 * 4096 / 1e12, abs=0.1)
    rec = P.peaks_record(BACKENDS["cuda"], 0, {"device": FACTS, "timer": "events", "threads": 1,
                                               "copy": {"gbps": {"median": 4100.0}},
                                               "matmul": {"float16": {"n": 8192, "tflops": {"median": 750.0}},
                                                          "tf32": {"n": 8192, "why": "not measured"}}})
    assert rec["achievable"] == {"bandwidth_gbps": 4100.0, "tflops": {"float16": 750.0, "tf32": None}}
    assert rec["of_spec"]["bandwidth"] == pytest.approx(4100 / 4916.7, abs=1e-4)
    assert rec["of_spec"]["tflops"] == {"float16": pytest.approx(750 / 1070.5, abs=1e-4), "tf32": None}


def test_a_driver_without_the_bus_width_or_nvml_leaves_the_spec_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(bus_width=False))
    spec = P.spec_peaks("cuda", FACTS)
    assert spec["bandwidth"]["gbps"] is None and spec["bandwidth"]["why"]
    assert spec["flops"]["tflops"]["bfloat16"] > 0  # the FLOPs need no bus width
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(init_error=RuntimeError("Driver Not Loaded")))
    spec = P.spec_peaks("cuda", FACTS)
    assert spec["source"] == "unknown" and "Driver Not Loaded" in spec["why"]
    assert spec["bandwidth"]["gbps"] is None and spec["flops"]["tflops"] is None
    for backend in ("cpu", "rocm", "musa"):
        assert P.spec_peaks(backend, FACTS)["source"] == "unknown"


# -- the achievable peak, measured for real on the cpu backend ----------------------------------


def test_the_cpu_backend_measures_copy_and_matmul_in_the_suites_interpreter():
    out = P.measure_device(BACKENDS["cpu"], str(ROOT / ".venv" / "bin" / "python"), 1, sizes=SMALL, timeout=300)
    assert "error" not in out, out
    copy = out["copy"]
    assert copy["counted_bytes"] == 2 * copy["bytes"] == 2 * (8 << 20)  # read + write
    assert 0.05 < copy["gbps"]["median"] <= copy["gbps"]["best"] < 1e4 and copy["gbps"]["reps"] >= 3
    mm = out["matmul"]
    for d in ("float32", "float16", "bfloat16"):
        assert mm[d]["flops"] == 2 * 128 ** 3 and 0 < mm[d]["tflops"]["median"] <= mm[d]["tflops"]["best"], d
    assert "tflops" not in mm["tf32"] and "CUDA" in mm["tf32"]["why"]
    assert out["threads"] == 1 and out["timer"] == "host" and out["device"]["index"] == 1  # the slot
    rec = P.peaks_record(BACKENDS["cpu"], 1, out, "AMD EPYC")
    assert rec["spec"]["source"] == "unknown" and "cpu backend" in rec["spec"]["why"]
    assert rec["of_spec"]["bandwidth"] is None and rec["achievable"]["bandwidth_gbps"] == copy["gbps"]["median"]


def test_devices_peaks_prints_and_saves_where_summary_finds_it(tmp_path):
    res = run_cli("devices", "--backend", "cpu", "--peaks", "--peaks-dir", tmp_path, "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    [rec] = json.loads(res.stdout)
    name = rec["device"]["name"]
    assert name and rec["saved"] == [str(tmp_path / f"name-{P._slug(name)}" / "peaks.json")]
    found = P.find(None, name, tmp_path)
    assert found["found_by"] == "name" and found["achievable"]["bandwidth_gbps"] > 0
    assert contracts.load(contracts.PEAKS, rec["saved"][0])["schema"] == "opscreen.peaks/1"
    text = run_cli("devices", "--backend", "cpu", "--peaks", "--peaks-dir", tmp_path / "b", timeout=600).stdout
    assert "copy GB/s (read+write)" in text and "spec bandwidth: unknown (the cpu backend" in text


def test_a_device_the_interpreter_cannot_reach_is_one_line_and_exit_1(tmp_path):
    res = run_cli("devices", "--backend", "cuda", "--peaks", "--peaks-dir", tmp_path, timeout=300)
    assert res.returncode == 1 and "device 0:" in res.stderr and not list(tmp_path.iterdir())


# -- summary 5: %-of-peak per row -----------------------------------------------------------------


def _peaks_file(root: Path, name="NVIDIA H200", bw=4000.0, tflops=None, spec_bw=4916.7, uuid=None) -> dict:
    tflops = tflops or {"float32": 50.0, "tf32": 400.0, "float16": 700.0, "bfloat16": 650.0}
    rec = {"backend": "cuda", "vendor": "nvidia",
           "device": {"type": "cuda", "index": 0, "torch": "t", "name": name, "uuid": uuid, "sm_count": 132,
                      "compute_capability": "9.0", "hip": None},
           "measured_at": "2026-12-03T09:00:00+00:00", "achievable": {"bandwidth_gbps": bw, "tflops": tflops},
           "spec": {"source": "nvml+table", "bandwidth": P.spec_bandwidth(3201, 6144),
                    "flops": P.spec_flops(132, 1980, "9.0")},
           "of_spec": {"bandwidth": None, "tflops": {}},
           "measurement": {"timer": "events", "threads": 1, "copy": {"bytes": 1, "counted_bytes": 2, "gbps": {
               "median": bw, "best": bw, "reps": 3, "spread": 0.0}}, "matmul": {}, "sizes": {}}}
    assert rec["spec"]["bandwidth"]["gbps"] == pytest.approx(spec_bw, abs=0.1)
    P.save(rec, root)
    return rec


def test_summary_rows_get_their_percent_of_the_peak_of_their_dtype(tmp_path):
    make_run(tmp_path / "run", n_ops=12, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0)
    empty = build_summary(tmp_path / "run", peaks_dir=tmp_path / "none")
    assert empty.peaks is None and all(r[COLUMNS.index("peak_basis"):] == [None] * 5 for r in empty.rows)
    pk = _peaks_file(tmp_path / "peaks")
    s = build_summary(tmp_path / "run", peaks_dir=tmp_path / "peaks")
    rows = [dict(zip(COLUMNS, r)) for r in s.rows]
    with_t = [r for r in rows if r["status"] == "ok" and r["tflops"]]
    assert with_t and any(r["tflops"] is None for r in rows)
    for r in rows:
        if r not in with_t:  # no GB/s, no TFLOPS: nothing invented
            assert [r[c] for c in contracts.PEAK_COLUMNS] == [None] * 5
            continue
        peak, spec = pk["achievable"]["tflops"][r["dtype"]], pk["spec"]["flops"]["tflops"][r["dtype"]]
        assert r["peak_basis"] == f"flops {r['dtype']}"
        assert r["lib_pct_peak"] == pytest.approx(100 * r["tflops"] / peak, rel=1e-3)
        assert r["torch_pct_peak"] == pytest.approx(100 * r["tflops"] * r["lib_ms"] / r["torch_ms"] / peak, rel=1e-3)
        assert r["lib_pct_spec"] == pytest.approx(100 * r["tflops"] / spec, rel=1e-3)
    far = s.peaks["furthest"]
    assert s.peaks["found_by"] == "name" and far == sorted(far, key=lambda o: (o["lib_pct_peak"], o["op"]))
    assert {o["bound"] for o in far} == {"flops"}
    assert "furthest from peak" in format_summary(s) and far[0]["op"] in format_summary(s)
    write_summary(s)  # and it reads back, as written
    back = load_summary(tmp_path / "run")
    assert back.rows == json.loads(s.to_json_text())["rows"] and back.peaks == s.peaks


def test_a_uuid_wins_over_the_model_name(tmp_path):
    _peaks_file(tmp_path, bw=1000.0)
    _peaks_file(tmp_path, bw=2000.0, uuid="abc-1")  # the same model: its name file now holds this chip
    _peaks_file(tmp_path, bw=3000.0, uuid="abc-2")
    assert P.find("abc-1", "NVIDIA H200", tmp_path)["achievable"]["bandwidth_gbps"] == 2000.0
    assert P.find("GPU-abc-2", "NVIDIA H200", tmp_path)["found_by"] == "uuid"
    assert P.find("gone", "NVIDIA H200", tmp_path)["achievable"]["bandwidth_gbps"] == 3000.0
    assert P.find(None, "NVIDIA A100", tmp_path) is None


def test_gbps_rows_and_rows_with_both(tmp_path):
    pk = _peaks_file(tmp_path)
    base = {"status": "ok", "dtype": "float16", "torch_ms": 2.0, "lib_ms": 1.0, "tflops": None}
    bw = RP.row_cells({**base, "torch_gbps": 1000.0, "lib_gbps": 2000.0}, pk)
    assert bw == ["bandwidth", 25.0, 50.0, pytest.approx(100 * 1000 / 4916.7, rel=1e-3),
                  pytest.approx(100 * 2000 / 4916.7, rel=1e-3)]
    # both: the bound the library is closer to (70 TFLOPS is 10 % of 700; 2000 GB/s is 50 % of 4000)
    both = RP.row_cells({**base, "torch_gbps": 1000.0, "lib_gbps": 2000.0, "tflops": 70.0}, pk)
    assert both[0] == "bandwidth"
    assert RP.row_cells({**base, "lib_gbps": 40.0, "tflops": 560.0}, pk)[:3] == ["flops float16", 40.0, 80.0]
    for row in ({**base, "dtype": "int32", "tflops": 3.0}, {**base, "status": "failed", "lib_gbps": 9.0}, base):
        assert RP.row_cells(row, pk) == [None] * 5  # no peak of int32; a failed row; neither figure
    assert RP.row_cells({**base, "lib_gbps": 9.0}, None) == [None] * 5


def test_the_report_plots_percent_of_peak_against_speedup(tmp_path):
    make_run(tmp_path / "run", n_ops=8, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0)
    plain = render_report(build_summary(tmp_path / "run", peaks_dir=tmp_path / "none"), tmp_path / "a.html")
    assert 'id="peaks"' not in plain
    _peaks_file(tmp_path / "peaks")
    s = build_summary(tmp_path / "run", peaks_dir=tmp_path / "peaks")
    html = render_report(s, tmp_path / "b.html")
    section = html[html.index('<section id="peaks">'):]
    section = section[:section.index("</section>")]
    assert "<svg" in section and "of peak" in section and 'href="#peaks"' in html
    n = sum(1 for r in s.rows if r[COLUMNS.index("lib_pct_peak")] is not None)
    assert f"({n} cases)" in section and n > 0


def test_a_run_records_its_devices_peaks_and_its_summary_keeps_them_elsewhere(tmp_path):
    """The identity carries the peaks file found when the op ran, so a summary made where no peaks
    file lies (the run dir carried to a laptop) still has them; without a file it says unknown."""
    peaks = tmp_path / "peaks"
    res = run_cli("devices", "--backend", "cpu", "--peaks", "--peaks-dir", peaks, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    for name, where in (("with", peaks), ("without", tmp_path / "none")):
        res = run_cli("run", "--ops", "abs", "--devices", "0", "--out", tmp_path / name, "--plain",
                      env={"OPSCREEN_PEAKS_DIR": str(where)}, timeout=600)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    pk = json.loads((tmp_path / "with" / "ops" / "abs" / "run_identity.json").read_text())["peaks"]
    assert pk["source"] == "peaks_file" and pk["found_by"] == "name" and pk["achievable"]["bandwidth_gbps"] > 0
    none = json.loads((tmp_path / "without" / "ops" / "abs" / "run_identity.json").read_text())["peaks"]
    assert none["source"] == "unknown" and "devices --peaks" in none["why"]
    s = build_summary(tmp_path / "with", peaks_dir=tmp_path / "elsewhere")
    assert s.peaks["found_by"] == "identity" and s.peaks["achievable"] == pk["achievable"]
    assert build_summary(tmp_path / "without", peaks_dir=tmp_path / "elsewhere").peaks is None


def test_the_warm_up_is_by_time_and_the_timing_by_count_and_time():
    from opscreen.child import peaks as CP

    calls = []

    def once(fn):  # a call that takes 5 ms of the host clock, and says so
        import time
        time.sleep(0.005)
        calls.append(1)
        return 0.005

    times = CP._repeat(once, None, reps=3, budget_s=0.05, warmup_s=0.05)
    warm = len(calls) - len(times)
    assert warm >= 8  # 50 ms of 5 ms calls, not the 2 of a count
    assert len(times) >= 10 and sum(times) >= 0.05  # the budget, beyond the 3 asked
    calls.clear()
    assert len(CP._repeat(once, None, reps=4, budget_s=0.0, warmup_s=0.0)) == 4 and len(calls) == 6  # 2 warm, 4 timed
    assert len(CP._repeat(once, None, reps=1, budget_s=10.0, warmup_s=0.0, max_reps=7)) == 7  # the cap holds


def test_furthest_ranks_bandwidth_and_flops_bounds_apart():
    """An elementwise op FlagGems rates by TFLOPS sits far below a matmul peak by nature: it must not
    push the bandwidth-bound ops out of the list."""
    from opscreen.results.peaks import furthest

    rows = [{"op": f"ew{i}", "peak_basis": "flops float16", "lib_pct_peak": 0.1 + i, "torch_pct_peak": 0.1,
             "speedup": 1.0} for i in range(12)]
    rows += [{"op": f"bw{i}", "peak_basis": "bandwidth", "lib_pct_peak": 40.0 + i, "torch_pct_peak": 50.0,
              "speedup": 0.9} for i in range(3)]
    rows += [{"op": "mm", "peak_basis": "flops bfloat16", "lib_pct_peak": 70.0, "torch_pct_peak": 71.0,
              "speedup": 0.98}, {"op": "bw0", "peak_basis": "flops float16", "lib_pct_peak": 1.5}]
    far = furthest(rows, n=4)
    assert [o["op"] for o in far] == ["bw0", "bw1", "bw2", "ew0", "ew1", "bw0", "ew2"]
    assert [o["bound"] for o in far] == ["bandwidth"] * 3 + ["flops"] * 4
    assert far[0]["rows"] == 1 and far[-2]["lib_pct_peak"] == 1.5
