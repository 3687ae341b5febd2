"""The attempt, retry and dtype-fallback state machine, without processes or files."""

from __future__ import annotations

from opscreen.batch.attempts import (
    FINISH,
    LEAVE,
    RUN_ELSEWHERE,
    RUN_HERE,
    Attempt,
    AttemptMachine,
    left_incomplete,
)


def att(state, status, *, sig=None, error=None, dtype_error=False, device=0):
    return Attempt(
        n=len(state.attempts) + 1, level=state.level, dtypes=state.request_dtypes(), device=device, status=status,
        exit_code=0 if status == "passed" else 1, child_returncode=0, duration_s=1.0, error=error,
        signature=sig, dtype_error=dtype_error,
    )


def test_pass_finishes_at_once():
    m = AttemptMachine(retries=2)
    s = m.start("abs", home=1)
    assert s.home == 1 and s.request_dtypes() is None
    a = m.after(s, att(s, "passed"))
    assert (a.kind, a.status, a.error) == (FINISH, "passed", None)
    assert len(s.attempts) == 1 and s.level == 0


def test_skipped_is_final_ok():
    m = AttemptMachine()
    s = m.start("abs")
    assert m.after(s, att(s, "skipped")).kind == FINISH


def test_same_failure_twice_is_deterministic():
    m = AttemptMachine(retries=5)
    s = m.start("abs")
    assert m.after(s, att(s, "failed", sig="ValueError: N", error="boom")).kind == RUN_HERE
    a = m.after(s, att(s, "failed", sig="ValueError: N", error="boom"))
    assert (a.kind, a.status, a.error) == (FINISH, "failed", "boom")
    assert s.stop_reason == "deterministic: same failure twice"


def test_different_failures_retry_until_exhausted():
    m = AttemptMachine(retries=2)
    s = m.start("abs")
    assert m.after(s, att(s, "failed", sig="a")).kind == RUN_HERE
    assert m.after(s, att(s, "crashed", sig="b")).kind == RUN_HERE
    a = m.after(s, att(s, "failed", sig="c", error="third"))
    assert (a.kind, a.status, a.error) == (FINISH, "failed", "third")
    assert s.stop_reason == "no retries left (2)" and len(s.attempts) == 3


def test_timeout_is_retried_here_then_passes():
    m = AttemptMachine(retries=2)
    s = m.start("abs")
    assert m.after(s, att(s, "timeout")).kind == RUN_HERE
    a = m.after(s, att(s, "passed"))
    assert (a.kind, a.status) == (FINISH, "passed") and len(s.attempts) == 2


def test_device_fatal_moves_to_another_device():
    m = AttemptMachine(retries=2)
    s = m.start("abs")
    assert m.after(s, att(s, "device_fatal")).kind == RUN_ELSEWHERE
    # a plain retry on a device that went bad meanwhile moves too
    assert m.after(s, att(s, "failed", sig="x"), device_bad=True).kind == RUN_ELSEWHERE


def test_no_retries_finishes_a_timeout():
    m = AttemptMachine(retries=0)
    s = m.start("abs")
    a = m.after(s, att(s, "timeout", error="timed out"))
    assert (a.kind, a.status, a.error) == (FINISH, "timeout", "timed out")


def test_stop_during_a_due_retry_leaves_the_op_incomplete():
    m = AttemptMachine(retries=2)
    s = m.start("abs")
    a = m.after(s, att(s, "timeout"), stopping=True)
    assert a.kind == LEAVE and s.stop_reason == "interrupted"
    # a final answer is still recorded while stopping
    s2 = m.start("neg")
    assert m.after(s2, att(s2, "passed"), stopping=True).kind == FINISH


def test_interrupted_and_unwritable_attempts_are_not_recorded():
    assert left_incomplete("interrupted", False)
    assert left_incomplete("failed", True) and not left_incomplete("passed", True)
    assert not left_incomplete("failed", False)


def test_dtype_error_level1_then_level2_each_dtype_alone_keeping_passers():
    m = AttemptMachine(retries=2, dtypes=["float16", "float64"], op_dtypes={"abs": ["float16", "float32"]})
    s = m.start("abs")
    assert s.request_dtypes() == ["float16", "float64"]
    a = m.after(s, att(s, "failed", dtype_error=True, error="Given dtype(s) float64 can't be supported"))
    assert a.kind == RUN_HERE and s.level == 1 and s.request_dtypes() is None
    a = m.after(s, att(s, "failed", dtype_error=True, error="not implemented for 'Half'"))
    assert a.kind == RUN_HERE and s.level == 2
    # level 2: requested dtypes first, then the op's own, each alone
    assert s.request_dtypes() == ["float16"]
    assert m.after(s, att(s, "passed")).kind == RUN_HERE
    assert s.request_dtypes() == ["float64"]
    assert m.after(s, att(s, "failed", dtype_error=True, error="no f64")).kind == RUN_HERE
    assert s.request_dtypes() == ["float32"]
    # a plain failure of one dtype is retried within its step, then not kept
    assert m.after(s, att(s, "failed", sig="s", error="bad")).kind == RUN_HERE
    a = m.after(s, att(s, "failed", sig="s", error="bad"))
    assert a.kind == FINISH and a.status == "passed"
    assert s.l2_passed == ["float16"] and s.l2_failed == {"float64": "no f64", "float32": "bad"}
    assert a.error == "dtype fallback kept float16; failed float64: no f64; float32: bad"


def test_level1_pass_says_what_it_ran():
    m = AttemptMachine(dtypes=["float64"])
    s = m.start("abs")
    assert m.after(s, att(s, "failed", dtype_error=True, error="no f64")).kind == RUN_HERE
    a = m.after(s, att(s, "passed"))
    assert a.kind == FINISH and a.status == "passed_own_dtypes"  # passed, but not with the dtypes asked for
    assert a.error == "dtype fallback: ran the op's own dtypes (requested dtypes failed: no f64)"


def test_level2_pass_without_a_requested_dtype_says_so():
    m = AttemptMachine(dtypes=["int32", "float64"], op_dtypes={"abs": ["float16"]})
    s = m.start("abs")
    m.after(s, att(s, "failed", dtype_error=True, error="no int32"))  # level 1: the op's own
    m.after(s, att(s, "failed", dtype_error=True, error="not for Half"))  # level 2: each alone
    assert s.request_dtypes() == ["int32"]
    m.after(s, att(s, "failed", dtype_error=True, error="no int32"))
    m.after(s, att(s, "failed", dtype_error=True, error="no f64"))
    a = m.after(s, att(s, "passed"))
    assert (a.kind, a.status) == (FINISH, "passed_own_dtypes") and s.l2_passed == ["float16"]
    assert a.error.startswith("dtype fallback kept float16; failed int32: no int32")


def test_level2_nothing_passes_keeps_the_last_status():
    m = AttemptMachine(op_dtypes={"abs": ["float16"]})
    s = m.start("abs")
    assert m.after(s, att(s, "failed", dtype_error=True)).kind == RUN_HERE  # no --dtypes: straight to level 2
    assert s.level == 2 and s.request_dtypes() == ["float16"]
    a = m.after(s, att(s, "failed", dtype_error=True, error="no f16"))
    assert (a.kind, a.status, a.error) == (FINISH, "failed", "no f16")


def test_dtype_error_without_a_dtype_list():
    m = AttemptMachine(dtypes=None, op_dtypes={})
    s = m.start("abs")
    a = m.after(s, att(s, "failed", dtype_error=True, error="dtype"))
    assert (a.kind, a.status, a.error) == (FINISH, "failed", "dtype")
    assert s.stop_reason == "dtype failure and no dtype list known for the op"


def test_next_dtype_step_while_stopping_or_on_a_bad_device():
    m = AttemptMachine(dtypes=["float64"], op_dtypes={"abs": ["float16"]})
    s = m.start("abs")
    assert m.after(s, att(s, "failed", dtype_error=True), stopping=True).kind == LEAVE
    s2 = m.start("abs")
    assert m.after(s2, att(s2, "failed", dtype_error=True), device_bad=True).kind == RUN_ELSEWHERE
