"""Fatal versus recoverable classification on real CUDA error texts.

tests/fixtures/cuda_errors/ holds pytest output and exception texts from an
H200 (FlagGems --mode cudagraph, 2026-11-29) and error strings in the formats
torch, HIP, Triton, thrust and NCCL print them; expected.json gives each its
class and kind (and where the text comes from).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opscreen.child import config
from opscreen.child import fatal as errors

FIXTURES = Path(__file__).parent / "fixtures" / "cuda_errors"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
SRC = Path(__file__).resolve().parent.parent / "src"

DSA_HINT = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
ASYNC_HINT = ("CUDA kernel errors might be asynchronously reported at some other API call, "
              "so the stacktrace below might be incorrect.")


def test_every_fixture_has_an_expected_class():
    files = {p.name for p in FIXTURES.iterdir() if p.name != "expected.json"}
    assert files == set(EXPECTED)
    assert {e["class"] for e in EXPECTED.values()} == set(errors.CLASSES)
    for e in EXPECTED.values():
        assert e["class"] in errors.CLASSES and e["source"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_classification(name):
    text = (FIXTURES / name).read_text(encoding="utf-8", errors="replace")
    verdict = errors.classify_text(text)
    want = EXPECTED[name]
    assert (verdict.cls, verdict.kind) == (want["class"], want["kind"]), verdict.message
    if verdict.cls != errors.OTHER:
        assert "\n" not in verdict.message and verdict.message


def test_h200_survey_files_are_classified_as_observed():
    assert errors.classify_text((FIXTURES / "index_select_cudagraph.trimmed.out").read_text()).fatal
    for op in ("nonzero", "unique_consecutive", "mode", "bincount"):
        verdict = errors.classify_text((FIXTURES / f"{op}_cudagraph.out").read_text())
        assert verdict.capture and not verdict.fatal, op


def test_hint_lines_alone_are_not_fatal():
    # every CUDA error carries these lines; a loose marker once made every capture error fatal
    for text in (DSA_HINT, ASYNC_HINT, "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                 "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions."):
        assert errors.classify_text(text).cls == errors.OTHER
    capture = (FIXTURES / "h200_nonzero_capture_unsupported.txt").read_text()
    assert DSA_HINT in capture and ASYNC_HINT in capture
    assert not errors.is_fatal(capture)


def test_fatal_wins_over_capture_in_one_text():
    text = ("CUDA error: operation failed due to a previous error during capture\n"
            "CUDA error: an illegal memory access was encountered\n")
    v = errors.classify_text(text)
    assert v.fatal and v.kind == "illegal-address"
    assert v.message == "CUDA error: an illegal memory access was encountered"


def test_runtime_phrase_needs_a_device_prefix_but_names_match_anywhere():
    assert not errors.is_fatal("buffer has a misaligned address for dtype float64")
    assert errors.is_fatal("CUDA error: misaligned address")
    assert errors.is_fatal("kernel failed: cudaErrorMisalignedAddress")
    assert errors.is_fatal("HIP error: an illegal memory access was encountered")
    assert errors.is_fatal("MUSA error: unspecified launch failure")


def test_exception_chain_and_groups_are_searched():
    try:
        try:
            raise RuntimeError((FIXTURES / "h200_index_select_device_assert.txt").read_text())
        except RuntimeError as inner:
            raise AssertionError("Failed: the op failed") from inner
    except AssertionError as outer:
        v = errors.classify(outer)
    assert v.fatal and v.kind == "device-assert"
    plain = errors.classify(ValueError("bad shape\nsecond line"))
    assert plain.cls == errors.OTHER and plain.message == "ValueError: bad shape"
    if sys.version_info >= (3, 11):
        group = ExceptionGroup("teardown", [ValueError("x"), RuntimeError("CUDA error: unspecified launch failure")])  # noqa: F821
        assert errors.classify(group).kind == "launch-failure"


def test_exit_if_fatal_calls_the_exit_hook_only_for_fatal_errors():
    seen = []
    v = errors.exit_if_fatal(RuntimeError((FIXTURES / "h200_nonzero_capture_unsupported.txt").read_text()),
                             lambda k, m: seen.append((k, m)))
    assert v.capture and seen == []
    errors.exit_if_fatal(RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"),
                         lambda k, m: seen.append((k, m)))
    assert seen == [("illegal-address", "Triton Error [CUDA]: an illegal memory access was encountered")]


def test_fatal_line_format():
    line = config.fatal_line("device assert", "CUDA error: device-side assert triggered\nSearch for ...")
    assert line == "OPSCREEN-FATAL: device-assert: CUDA error: device-side assert triggered Search for ..."
    assert config.EXIT_DEVICE_FATAL == 86 and config.FATAL_PREFIX == "OPSCREEN-FATAL:"


def test_fatal_exit_prints_one_line_and_exits_86():
    env = dict(os.environ, PYTHONPATH=str(SRC))
    code = ("import sys; from opscreen.child import fatal as errors;"
            "print('before', flush=True);"
            "errors.exit_if_fatal(RuntimeError(open(sys.argv[1]).read()));"
            "print('not reached')")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "illegal_address_torch211.txt")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == config.EXIT_DEVICE_FATAL
    lines = proc.stdout.splitlines()
    assert lines == ["before", "OPSCREEN-FATAL: illegal-address: CUDA error: an illegal memory access was encountered"]
