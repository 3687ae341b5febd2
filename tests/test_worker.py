"""Warm workers (``--isolation worker``): real workers, real faults, real kills.

The fault suite runs op after op in one worker per lane; these tests check what a
worker must guarantee: every op still sees a fresh process's state, a fault in the
middle of a worker's queue is run again in a fresh process and costs the worker (the
next op gets a new one), and a runner killed while its workers run is resumed with
nothing lost, duplicated or left running.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


from test_batch_faults import faults, result, status_rows  # noqa: F401 - faults: the shared fixture

ROOT = Path(__file__).resolve().parent.parent


def phases(out: Path, op: str) -> dict:
    return result(out, op)["phases"]


def test_ops_share_a_worker_and_each_sees_a_fresh_process(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "leak_a,leak_b,ok_a", "--isolation", "worker", "--timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    ph = {op: phases(out, op) for op in ("leak_a", "leak_b", "ok_a")}
    for op, p in ph.items():
        assert p["mode"] == "worker" and "worker_attempt" not in p, (op, p)  # passed in the worker, no fresh re-run
        ident = json.loads((out / "ops" / op / "run_identity.json").read_text())
        assert ident["isolation"] == "worker"
        # every op has its own record log, holding its own rows only
        record = (out / "ops" / op / "record.log").read_text()
        assert f'"op_name": "{op}"' in record
        assert all(f'"op_name": "{other}"' not in record for other in ph if other != op)
    assert len({p["worker"]["pid"] for p in ph.values()}) == 1
    assert sorted(p["worker"]["op_index"] for p in ph.values()) == [1, 2, 3]
    assert faults.runs("leak_a") == faults.runs("leak_b") == 1
    faults.assert_no_leftovers()


def test_op_isolation_is_a_fresh_process_per_op(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "ok_a,ok_b", "--isolation", "op", "--timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    for op in ("ok_a", "ok_b"):
        assert phases(out, op)["mode"] == "process" and "worker" not in phases(out, op)
        assert json.loads((out / "ops" / op / "run_identity.json").read_text())["isolation"] == "op"


def test_faults_in_the_middle_of_a_workers_queue(faults):
    """A hang, a segfault and a device-fatal exit between passing ops on one lane: each
    fault is run again in a fresh process before it is recorded (same status as
    --isolation op), its worker is killed, and the next op starts a new worker."""
    out = faults.tmp / "run"
    ops = ["ok_a", "hang", "ok_b", "segv", "ok_c", "fatal", "ok_d"]
    res = faults.run(out, "--devices", "0", "--no-steal", "--ops", ",".join(ops), "--isolation", "worker",
                     "--retries", "0", "--fatal-threshold", "0", "--timeout", "4", "--grace", "0.5")
    assert res.returncode == 1, res.stdout + res.stderr
    rows = status_rows(out)
    expect = {"ok_a": "passed", "hang": "timeout", "ok_b": "passed", "segv": "crashed", "ok_c": "passed",
              "fatal": "device_fatal", "ok_d": "passed"}
    assert {op: rows[op]["status"] for op in ops} == expect
    pids = []
    for op in ops:
        p = phases(out, op)
        if expect[op] == "passed":
            assert p["mode"] == "worker", (op, p)
            pids.append(p["worker"]["pid"])
        else:
            # recorded from a fresh process; the worker's attempt kept beside it
            assert p["mode"] == "process" and p["worker_attempt"]["status"] == expect[op], (op, p)
            assert (out / "ops" / op / "worker.log").is_file()
            assert faults.runs(op) == 2  # once in the worker, once fresh
    # every fault cost its worker: the ok op after it ran in a new one, as its first op
    assert len(set(pids)) == 4, pids
    for op, fault in (("ok_b", "hang"), ("ok_c", "segv"), ("ok_d", "fatal")):
        w = phases(out, op)["worker"]
        assert w["op_index"] == 1
        # the new worker says why it replaced the one before
        assert w["replaces"] == {"why": "op_failed", "detail": f"{fault} {expect[fault]} in it"}, w
    assert phases(out, "ok_a")["worker"]["replaces"] is None  # the lane's first worker replaced none
    assert "timed out after 4 s" in rows["hang"]["error"]
    # the op's wall counts its run in the worker too (4 s there, 4 s fresh)
    assert result(out, "hang")["duration_s"] >= 8.0, result(out, "hang")
    summary = subprocess.run([sys.executable, "-m", "opscreen", "summary", str(out)], env=faults.env,
                             capture_output=True, text=True, timeout=120)
    assert "4 ops ran in 4 warm workers" in summary.stdout, summary.stdout
    # the run's caliber is its request (worker), though three of its ops' numbers came from fresh processes
    assert summary.stdout.splitlines()[0].endswith(", isolation worker)"), summary.stdout
    assert json.loads((out / "run_identity.json").read_text())["caliber"]["isolation"] == "worker"
    assert json.loads((out / "ops" / "hang" / "run_identity.json").read_text())["caliber"]["isolation"] == "op"
    assert "3 ran again fresh after they did not pass in a worker" in summary.stdout
    assert "workers replaced by their lane: 3 for op_failed" in summary.stdout, summary.stdout
    faults.assert_no_leftovers()


def test_runner_killed_while_its_workers_run_then_resumed(faults):
    out = faults.tmp / "run"
    ops = [f"ok_{c}" for c in "abcdefgh"]
    args = ["--ops", ",".join(ops), "--devices", "0,1", "--isolation", "worker", "--timeout", "60", "--grace", "0.5"]
    env = {"FAULTS_OP_SLEEP": "1.5"}
    proc = faults.popen(out, *args, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "ops" / "ok_c" / "run.log").exists() \
            and not (out / "ops" / "ok_d" / "run.log").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # mid-op: the workers sleep inside their ops
    workers = [p for p in faults.tagged() if p != proc.pid]
    assert workers, "no worker was running when the runner was killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    res = faults.run(out, *args, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not [p for p in workers if p in faults.tagged()], "a worker of the killed runner outlived it into the resume"
    rows = status_rows(out)  # asserts no duplicate rows
    assert set(rows) == set(ops) and all(r["status"] == "passed" for r in rows.values())
    for op in ops:
        assert (out / "ops" / op / ".complete").is_file()
    faults.assert_no_leftovers()


HYGIENE = r"""
import json, logging, os, random, signal, sys
sys.path.insert(0, sys.argv[1])
import torch
from opscreen.child import worker
base = worker.Baseline("", [], "cpu")
import opscreen.child.persist, opscreen.child.estimator, opscreen.child.timed_value  # one kept, two dropped
estimator = opscreen.child.estimator
persist = opscreen.child.persist
persist._SETTLED.add(("cuda", 0))  # this op settled the device (its first measurement)
persist._STREAMS[("cuda", 0)] = side = object()  # on the process's side stream
opscreen.child.timed_value.add_timer_time("timer_s", 1.0)  # this op's timer accounting
signal.signal(signal.SIGTERM, lambda *a: None)  # an op's handler (it holds its module)
fresh = {"dtype": str(torch.get_default_dtype()), "grad": torch.is_grad_enabled(), "draw": torch.rand(3).tolist()}
torch.manual_seed(base.torch["seed"])
fresh["draw"] = torch.rand(3).tolist()
torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)
torch.manual_seed(1234)
logging.getLogger("some.suite").addHandler(logging.NullHandler())
sys.path.append("/left/behind")
import gc, weakref
class Cycle:
    pass
loop = Cycle(); loop.me = loop; dead = weakref.ref(loop)  # the op's garbage cycle, frozen with its collection
gc.freeze(); del loop  # (timing.freeze_heap), which the session does not thaw
# a module of the op's suite, imported last, whose globals hold an object in a cycle
# (as the fault suite's test_leak does): nothing may keep it past the hygiene's collection
suite = sys.argv[2]
with open(os.path.join(suite, "op_module.py"), "w") as fh:
    fh.write("class Held:\n    pass\nHELD = Held()\nHELD.module_globals = globals()\n")
base.suite_root = os.path.realpath(suite) + os.sep
sys.path.insert(0, suite)
import op_module
held = weakref.ref(op_module.HELD)
del op_module
report = worker.hygiene(base)
frozen_after = gc.get_freeze_count()
after = {"dtype": str(torch.get_default_dtype()), "grad": torch.is_grad_enabled(), "draw": torch.rand(3).tolist()}
import opscreen.child
print(json.dumps({"fresh": fresh, "after": after, "report": report,
                  "handlers": len(logging.getLogger("some.suite").handlers), "path": "/left/behind" in sys.path,
                  "sigterm_default": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
                  "persist_kept": "opscreen.child.persist" in sys.modules,
                  "settles_again": not persist.settled("cuda", 0),
                  "stream_kept": persist.side_stream("cuda", 0, None) is side,
                  "estimator_dropped": "opscreen.child.estimator" not in sys.modules,
                  "estimator_unbound": getattr(opscreen.child, "estimator", None) is not estimator,
                  "next_op_timer_time": __import__("opscreen.child.timed_value").child.timed_value.timer_time(),
                  "cycle_collected": dead() is None, "frozen_after": frozen_after,
                  "suite_module_freed": held() is None}))
"""


def test_hygiene_restores_torch_state_logging_and_path(tmp_path):
    """Between ops the worker puts torch back as a fresh process has it (default dtype,
    grad mode, the generator's start seed), drops handlers, path entries and the op's
    signal handlers, and drops opscreen's plugin modules, also from their package's
    attributes (else they live on with what they hold), except persist.py, whose side
    stream stays and whose settling the next op does again."""
    res = subprocess.run([sys.executable, "-c", HYGIENE, str(ROOT / "src"), str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["after"] == got["fresh"]
    assert got["handlers"] == 0 and got["path"] is False
    assert got["report"]["rss_mb"] > 0
    assert got["sigterm_default"] and got["persist_kept"]
    # the next op settles the device again at its first measurement, as a fresh process's
    # op does (the same launches and allocations inside its session), on the same side stream
    assert got["settles_again"] and got["stream_kept"]
    assert got["estimator_dropped"] and got["estimator_unbound"]
    assert got["next_op_timer_time"] == {}  # the next op's phases.timer starts from nothing
    # the op's garbage is collected although its session froze it and left it frozen
    # (timing.freeze_heap: the heap stays frozen to the process's end or the hygiene), so is
    # the op's last-imported suite module, and the heap the next op starts from is frozen
    # (its collection then scans only what its session makes)
    assert got["cycle_collected"] and got["suite_module_freed"] and got["frozen_after"] > 1000


def test_op_repeats_share_one_worker_when_asked(faults):
    """``opscreen op --repeats 3 --isolation worker``: the three runs share one warm worker
    (and without the flag each is a fresh process, the default of ``opscreen op``)."""
    for isolation, modes in (("worker", {"worker"}), ("auto", {"process"})):
        out = faults.tmp / f"op-{isolation}"
        env = {k: v for k, v in faults.env.items() if k != "OPSCREEN_ISOLATION"}
        res = subprocess.run([sys.executable, "-m", "opscreen", "op", "ok_a", "--suite", str(faults.suite), "--backend", "cpu",
                              "--repeats", "3", "--isolation", isolation, "--out", str(out)],
                             env=env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, res.stdout + res.stderr
        ph = [json.loads((out / "repeats" / str(k) / "result.json").read_text())["phases"] for k in (1, 2, 3)]
        assert {p["mode"] for p in ph} == modes
        if isolation == "worker":
            assert len({p["worker"]["pid"] for p in ph}) == 1 and [p["worker"]["op_index"] for p in ph] == [1, 2, 3]
    faults.assert_no_leftovers()


def test_the_preflight_collects_in_the_worker_that_runs_the_lanes_first_op(faults):
    """With warm workers the run's preflight collection runs in a new worker for the first
    lane, which then runs that lane's ops: the imports are paid once, not twice."""
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "ok_a,ok_b", "--isolation", "worker", "--timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    ws = [phases(out, op)["worker"] for op in ("ok_a", "ok_b")]
    assert len({w["pid"] for w in ws}) == 1
    assert sorted(w["op_index"] for w in ws) == [1, 2]  # the collection is not counted as an op
    assert all(w["preflight"] and w["shared_start"] for w in ws)
    faults.assert_no_leftovers()


def test_a_preflight_refused_in_a_worker_leaves_no_worker(faults):
    """Lane 0's worker ran the refused collection, lane 1's was importing: both are gone."""
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0,1", "--isolation", "worker", "--", "--bogus")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "unrecognized arguments: --bogus" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not out.exists()
    faults.assert_no_leftovers()


def test_every_lanes_worker_starts_with_the_preflight(faults):
    """Two lanes: lane 0's worker ran the preflight, lane 1's was started beside it; both
    then ran their lane's ops, and nothing is left running."""
    out = faults.tmp / "run"
    ops = ("ok_a", "ok_b", "leak_a", "leak_b")
    res = faults.run(out, "--devices", "0,1", "--ops", ",".join(ops), "--isolation", "worker", "--timeout", "60",
                     "--no-steal")
    assert res.returncode == 0, res.stdout + res.stderr
    ws = {op: phases(out, op)["worker"] for op in ops}
    by_pid = {}
    for w in ws.values():
        by_pid.setdefault(w["pid"], []).append(w)
    assert len(by_pid) == 2, ws
    assert all(w["early"] for w in ws.values())
    assert sorted(any(w["preflight"] for w in group) for group in by_pid.values()) == [False, True]
    faults.assert_no_leftovers()


class _FakeCuda:
    """torch.cuda as the canary uses it: each replay of a graph of n kernels takes
    n x ``per_kernel_ms`` of device time, and a replay submitted to an idle device
    (after a synchronize) waits ``host_gap_ms`` for the host first."""

    def __init__(self, per_kernel_ms, host_gap_ms=0.0):
        import contextlib

        self.per_kernel_ms, self.host_gap_ms = per_kernel_ms, host_gap_ms
        self.captured = 0
        self.capturing = False
        self.streams = 0
        self.launches = 0  # eager launches outside any capture
        self.idle = True
        fake = self

        class Graph:
            def replay(self):
                if fake.idle:
                    fake.clock += fake.host_gap_ms
                fake.idle = False
                fake.clock += fake.captured * fake.per_kernel_ms

            def reset(self):
                pass

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = fake.clock

            def synchronize(self):
                fake.idle = True

            def elapsed_time(self, other):
                return other.t - self.t

        class Stream:
            def __init__(self):
                fake.streams += 1
                fake.stream_made_after = fake.launches

            def synchronize(self):
                fake.idle = True

        @contextlib.contextmanager
        def graph(g, stream=None, capture_error_mode="global"):
            fake.capturing = True
            yield
            fake.capturing = False

        @contextlib.contextmanager
        def stream(s):
            before, fake.current = fake.current, s
            yield
            fake.current = before

        self.clock = 0.0
        self.current = self.DEFAULT = object()  # the current stream: the default one until a context says
        self.on = []  # the stream of each eager launch, in order
        self.CUDAGraph, self.Event, self.Stream, self.graph, self.stream = Graph, Event, Stream, graph, stream

    def default_stream(self, index=None):
        return self.DEFAULT

    def is_available(self):
        return True

    def current_device(self):
        return 0

    def synchronize(self):
        self.idle = True

    def empty_cache(self):
        pass


class _FakeTorch:
    def __init__(self, per_kernel_ms, host_gap_ms=0.0):
        self.cuda = _FakeCuda(per_kernel_ms, host_gap_ms)

    def zeros(self, n, device=None):
        cuda = self.cuda

        class T:
            def add_(self, v):
                if cuda.capturing:
                    cuda.captured += 1
                else:
                    cuda.launches += 1
                    cuda.on.append(cuda.current)

        return T()


def _fresh_process_state():
    from opscreen.child import persist

    persist.forget_side_stream("cuda", 0)
    persist._SETTLED.clear()


def test_canary_reads_device_time_per_kernel_of_its_graph_on_the_processs_stream():
    from opscreen.child import persist, worker

    _fresh_process_state()
    fake = _FakeTorch(per_kernel_ms=0.00093, host_gap_ms=0.05)
    # each timed replay sits behind an untimed one: the host's submission gap is never timed
    assert worker.canary_us("cuda", fake) == pytest.approx(0.93)
    assert worker.canary_us("cuda", _FakeTorch(per_kernel_ms=0.00111, host_gap_ms=0.2)) == pytest.approx(1.11)
    assert fake.cuda.streams == 1  # the process's side stream, kept for the graph timer (persist.py)
    assert worker.canary_us("cpu", fake) is None
    broken = _FakeTorch(0.001)
    broken.zeros = None  # anything the canary cannot do: no reading, no error
    _fresh_process_state()
    assert worker.canary_us("cuda", broken) is None
    _fresh_process_state()


def test_the_canary_is_a_diagnostic_taken_only_when_asked():
    from opscreen.child import worker

    assert not worker.canary_enabled({}) and not worker.canary_enabled({worker.ENV_CANARY: "0"})
    assert worker.canary_enabled({worker.ENV_CANARY: "1"}) and worker.canary_enabled({worker.ENV_CANARY: " 1 "})


def test_the_device_is_settled_once_per_process_before_the_first_canary():
    """persist.settled_side_stream: the side stream made, then SETTLE_LAUNCHES eager
    launches on the default stream, once per process and device, before the canary's
    graph (and the graph timer's first measurement); the canary's own reading adds one
    warm launch and its capture."""
    from opscreen.child import persist, worker

    _fresh_process_state()
    fake = _FakeTorch(per_kernel_ms=0.001)
    worker.canary_us("cuda", fake)
    first = fake.cuda.launches
    assert first >= persist.SETTLE_LAUNCHES
    assert fake.cuda.stream_made_after == 0  # the side stream first: settling counts only once it exists
    side = persist.side_stream("cuda", 0, None)
    on = fake.cuda.on
    # work on the side stream first, then SETTLE_LAUNCHES on the default stream (the order that moves the device)
    assert on[:16] == [side] * 16 and on[16:16 + persist.SETTLE_LAUNCHES] == [fake.cuda.DEFAULT] * persist.SETTLE_LAUNCHES
    assert persist.settled("cuda", 0)
    worker.canary_us("cuda", fake)
    assert fake.cuda.launches - first < 10  # settled already: the second reading adds its warm-up only
    broken = _FakeTorch(0.001)
    broken.cuda.synchronize = None  # settling that fails is not recorded as done
    _fresh_process_state()
    assert persist.settle(broken, "cuda", 0) is False and not persist.settled("cuda", 0)
    assert persist.settle(fake, "cuda", 0) is True and persist.settle(fake, "cuda", 0) is False
    _fresh_process_state()


def test_a_worker_whose_canary_rises_is_replaced():
    """After an op, a canary reading over the worker's start's by more than the tolerance
    replaces the worker (the next op gets a fresh one); within it, the worker stays."""
    from opscreen.op import lane as L

    class FakeWorker:
        def __init__(self, start, now):
            self.ops, self.ready, self.last, self.closed = 1, {"canary_us": start}, {"canary_us": now}, False

        def close(self, grace=5.0):
            self.closed = True

    class Req:
        max_ops_per_worker = 100

    runner = L.LaneRunner()
    for start, now, replaced in ((0.93, 0.95, False), (0.93, 1.11, True), (None, 1.11, False), (0.93, None, False)):
        w = runner.worker = FakeWorker(start, now)
        runner.ended = None
        runner._maybe_recycle(Req())
        assert w.closed is replaced and (runner.worker is None) is replaced, (start, now)
        # why, for the next worker's ops (phases.worker.replaces)
        assert runner.ended == ({"why": "canary", "detail": "its canary read 1.110 us a kernel, over its start's "
                                 "0.930 us"} if replaced else None), runner.ended
    assert L.canary_drift({"canary_us": 0.93}, {"canary_us": 1.11}) == pytest.approx(0.1935, abs=1e-3)


@pytest.mark.parametrize("isolation", ["op", "worker"])
def test_a_process_that_dies_inside_a_graph_capture_runs_again_without_capturing_that_test(faults, isolation):
    """A child killed by SIGABRT while it held the graph timer's capture mark (MAGMA's C
    assert in cholesky_solve on the H200): even with --retries 0, the op runs again in a
    fresh process whose child config lists that test under no_capture, and passes; the
    dead run's log and what killed it are kept, and later runs of the op keep the list."""
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "ok_a,capture_abort,ok_b", "--isolation", isolation,
                     "--retries", "0", "--timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert {op: rows[op]["status"] for op in ("ok_a", "capture_abort", "ok_b")} == dict.fromkeys(
        ("ok_a", "capture_abort", "ok_b"), "passed")
    op_dir = out / "ops" / "capture_abort"
    test = "benchmark/test_capture_abort.py::test_capture_abort"
    res_json = result(out, "capture_abort")
    assert faults.runs("capture_abort") == 2
    (abort,) = res_json["capture_aborts"]
    assert abort["test"] == test and abort["status"] == "crashed" and "SIGABRT" in abort["error"], abort
    log = op_dir / abort["log"]
    assert abort["log"] == ("worker.log" if isolation == "worker" else "capture-abort-1.log")
    assert "invocation 1" in log.read_text()
    assert res_json["duration_s"] >= abort["wall_s"] + phases(out, "capture_abort")["child_wall_s"] - 0.01
    assert "timed without capture" in (op_dir / "run.log").read_text()
    assert json.loads((op_dir / "child_config.json").read_text())["no_capture"] == [test]
    assert json.loads((op_dir / "no_capture.json").read_text()) == [test]
    assert not (op_dir / ".capturing").exists()
    summary = subprocess.run([sys.executable, "-m", "opscreen", "summary", str(out)], env=faults.env,
                             capture_output=True, text=True, timeout=120)
    assert "1 op ran again after a process died inside a graph capture" in summary.stdout, summary.stdout
    assert "capture_abort" in summary.stdout.split("died inside a graph capture")[1].splitlines()[0]
    # `opscreen op` into a copy of the op dir later (a screen's own op dirs are refused to
    # `opscreen op`): the list holds, the op passes at once
    copy = faults.tmp / "capture_abort-again"
    shutil.copytree(op_dir, copy)
    again = subprocess.run([sys.executable, "-m", "opscreen", "op", "capture_abort", "--suite", str(faults.suite),
                            "--backend", "cpu", "--out", str(copy), "--timeout", "60"], env=faults.env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert faults.runs("capture_abort") == 3
    faults.assert_no_leftovers()


def test_opscreen_op_runs_a_capture_abort_again_and_an_interrupted_capture_is_not_blamed(faults):
    """`opscreen op` alone does the same; a capture mark left by a run that nobody saw end
    (a runner killed by SIGKILL) is removed, not taken as a capture abort."""
    out = faults.tmp / "op"
    out.mkdir()
    (out / ".capturing").write_text("benchmark/test_ok.py::test_ok[ok_a]\n")
    res = subprocess.run([sys.executable, "-m", "opscreen", "op", "capture_abort", "--suite", str(faults.suite),
                          "--backend", "cpu", "--out", str(out), "--timeout", "60"], env=faults.env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "inside the graph capture of benchmark/test_capture_abort.py::test_capture_abort" in res.stdout + res.stderr
    assert json.loads((out / "no_capture.json").read_text()) == ["benchmark/test_capture_abort.py::test_capture_abort"]
    assert faults.runs("capture_abort") == 2


class _MemCuda:
    """A device module that says what it holds, and counts how often it was asked."""

    def __init__(self, initialized: bool, free: int, total: int):
        self.initialized, self.free, self.total, self.asked = initialized, free, total, 0

    def is_initialized(self) -> bool:
        return self.initialized

    def mem_get_info(self):
        self.asked += 1
        return self.free, self.total


def test_device_used_is_read_only_where_a_context_exists():
    """``phases.worker.device_used_mb`` (total less free) is what stays on the device from op
    to op; asking for it must never make a context, which would put work on the device
    before an op's session, and a device without the calls says nothing."""
    sys.path.insert(0, str(ROOT / "src"))
    from opscreen.child.worker import device_used_mb

    class T:
        pass

    t = T()
    t.cuda = _MemCuda(True, free=139 * 2**30 - 1536 * 2**20, total=139 * 2**30)
    assert device_used_mb("cuda", t) == 1536.0
    t.cuda = _MemCuda(False, free=1, total=2)
    assert device_used_mb("cuda", t) is None and t.cuda.asked == 0
    t.npu = object()  # no is_initialized, no mem_get_info
    assert device_used_mb("npu", t) is None
    assert device_used_mb("cpu", t) is None and device_used_mb("musa", t) is None


def test_worker_ab_reads_the_devices_use_per_op(tmp_path):
    """bench/worker_ab.py's memory figures: the device's use after each op's hygiene, its
    maximum and its median growth per op over each worker's queue."""
    from benchload import load_bench

    ab = load_bench("worker_ab")

    def op(pid, i, used):
        return {"phases": {"worker": {"pid": pid, "op_index": i, "rss_mb": 900.0 + i, "device_used_mb": used}}}

    ops = {"a": op(1, 1, 1000.0), "b": op(1, 2, 1100.0), "c": op(1, 5, 1400.0), "d": op(2, 1, 990.0),
           "e": op(2, 3, 1010.0), "f": {"phases": {"worker": {"pid": 3, "op_index": 1}}}}
    mem = ab.memory(ops)
    assert mem["device_used_mb_max"] == 1400.0
    assert mem["device_used_growth_mb_per_op"] == pytest.approx(55.0)  # median of 100 and 10 a op
    assert mem["rss_growth_mb_per_op"] == 1.0


def test_the_pad_is_a_diagnostic_drawn_per_op_from_its_seed():
    from opscreen.child import worker

    assert worker.pad_spec({}) is None and worker.pad_spec({worker.ENV_PAD: "0"}) is None
    assert worker.pad_spec({worker.ENV_PAD: "many"}) is None
    assert worker.pad_spec({worker.ENV_PAD: "512"}) == (512.0, 0)
    spec = worker.pad_spec({worker.ENV_PAD: "512:7"})
    assert spec == (512.0, 7)
    # the op's test ids and markers name it; this run's folder and options do not
    key = worker.pad_key(["benchmark/test_x.py::test_abs", "-m", "abs", "/tmp/run1/ops/abs/cfg.json", "--x=1"])
    assert key == worker.pad_key(["benchmark/test_x.py::test_abs", "-m", "abs", "/tmp/run2/ops/abs/cfg.json", "--x=2"])
    sizes = [worker.pad_mb(spec, f"op{i}") for i in range(50)]
    assert all(0 <= s < 512 for s in sizes) and len(set(sizes)) > 40
    assert worker.pad_mb(spec, key) == worker.pad_mb(spec, key)
    assert worker.pad_mb(spec, key) != worker.pad_mb((512.0, 8), key)
    # nothing to hold on a CPU slot, nor without the knob
    assert worker.allocate_pad("cpu", spec, key) == (None, None)
    assert worker.allocate_pad("cuda", None, key) == (None, None)
