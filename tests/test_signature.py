"""Failure signatures and dtype-failure detection from run.log text."""

from __future__ import annotations

from opscreen.batch.retry import dtypes_from_expr, level2_candidates
from opscreen.batch.signature import extract, from_log, is_dtype_error, mask

PYTEST_FAIL = """\
[opscreen] op abs | node benchmark/test_abs.py -m abs
benchmark/test_abs.py F
=================================== FAILURES ===================================
___________________________________ test_abs ___________________________________
    def test_abs():
>       bench.run()
E       RuntimeError: CUDA error: an illegal memory access was encountered at 0x7f3a2c001000
E       Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

benchmark/base.py:120: RuntimeError
=========================== short test summary info ============================
FAILED benchmark/test_abs.py::test_abs - RuntimeError: CUDA error: an illegal memory access was encountered at 0x7f3a2c001000
============================== 1 failed in 3.21s ===============================
"""


def test_e_line_wins_and_masks_addresses():
    f = extract(PYTEST_FAIL)
    assert f.kind == "E"
    assert f.error.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert "<addr>" in f.signature and "7f3a" not in f.signature
    other = extract(PYTEST_FAIL.replace("0x7f3a2c001000", "0x7f4b00000040"))
    assert other.signature == f.signature
    assert not f.dtype_error


def test_numbers_and_hex_ids_are_masked():
    a = mask("RuntimeError: shape [64, 128] mismatch in block deadbeef12 (pid 4242), took 3.25 s")
    b = mask("RuntimeError: shape [32, 256] mismatch in block 0123abcd99 (pid 17), took 0.5 s")
    assert a == b
    # dtype names keep their digits
    assert "float64" in mask("bad dtype torch.float64")
    assert mask("ValueError: x") != mask("TypeError: x")


def test_failed_summary_line_when_no_e_line():
    text = "FAILED benchmark/test_x.py::test_x - AssertionError: 3 != 4\n"
    f = extract(text)
    assert f.kind == "FAILED"
    assert f.signature == "AssertionError: N != N"


def test_fatal_line_and_python_fatal():
    f = extract("faults: fatal\nOPSCREEN-FATAL: illegal-address: an illegal memory access was encountered\n")
    assert f.kind == "fatal" and f.signature.startswith("fatal: illegal-address")
    g = extract("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n")
    assert g.kind == "python-fatal"
    assert g.signature == "python-fatal: Segmentation fault"


def test_status_fallback_and_none():
    assert extract("all good\n") is None
    f = extract("nothing\n", status="crashed", returncode=-11)
    assert f.kind == "status" and f.signature == "crashed (returncode -11)"


def test_flaggems_unsupported_dtype_is_a_dtype_error():
    log = (
        "E       ValueError: Given dtype(s) 'torch.float64'can't be supported by this op 'abs'\n"
        "FAILED benchmark/test_abs.py::test_abs - ValueError: Given dtype(s) 'torch.float64'can't be supported by this op 'abs'\n"
    )
    f = extract(log)
    assert f.dtype_error
    assert f.signature.startswith("ValueError: Given dtype(s)")


def test_torch_not_implemented_for_half_is_a_dtype_error():
    assert is_dtype_error('RuntimeError: "abs_kernel" not implemented for \'Half\'')
    assert is_dtype_error("NotImplementedError: xxx not implemented for 'BFloat16'")
    assert is_dtype_error("TypeError: unsupported dtype torch.complex64")
    assert is_dtype_error("RuntimeError: dtype float64 is not supported on this device")
    assert not is_dtype_error("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert not is_dtype_error("AssertionError: mismatch in float32 results")
    assert not is_dtype_error(None)


def test_dtype_error_on_any_e_line_counts():
    log = (
        "E       Traceback ...\n"
        "E       RuntimeError: \"sin_kernel\" not implemented for 'Half'\n"
        "E       During handling\n"
        "E       RuntimeError: wrapped failure\n"
    )
    f = extract(log)
    assert f.error == "RuntimeError: wrapped failure"
    assert f.dtype_error


def test_from_log_reads_tail(tmp_path):
    p = tmp_path / "run.log"
    p.write_text("x" * 10 + "\n" + PYTEST_FAIL)
    assert from_log(p).kind == "E"
    assert from_log(tmp_path / "missing.log") is None
    assert from_log(tmp_path / "missing.log", status="timeout").signature == "timeout"


def test_dtypes_from_expr():
    assert dtypes_from_expr("consts.FLOAT_DTYPES") == ["float16", "float32", "bfloat16"]
    assert dtypes_from_expr("consts.FLOAT_DTYPES + consts.INT_DTYPES") == [
        "float16",
        "float32",
        "bfloat16",
        "int16",
        "int32",
    ]
    assert dtypes_from_expr("[torch.float32, torch.bool]") == ["float32", "bool"]
    assert dtypes_from_expr("BOOL_DTYPES") == ["bool"]
    assert dtypes_from_expr("['float16', 'float64']") == ["float16", "float64"]
    assert dtypes_from_expr(None) == []
    assert dtypes_from_expr("some_helper()") == []


def test_level2_candidates_requested_first():
    assert level2_candidates(["float64", "float16"], ["float16", "float32"]) == ["float64", "float16", "float32"]
    assert level2_candidates(None, ["float16"]) == ["float16"]
