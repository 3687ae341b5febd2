"""Device-fatal versus recoverable errors, by precise markers in the error text.

Three classes:

``fatal``
    the device context is unusable (illegal memory access, device-side assert,
    launch failure, ...). Every later call returns the same error, so the only
    cure is a fresh process: :func:`exit_if_fatal` prints one
    ``OPSCREEN-FATAL: <kind>: <message>`` line and ends the process with status 86.
``capture``
    graph capture was refused or invalidated (a host sync, a host-device copy,
    an un-capturable library call during capture). The context is fine; the
    graph timer falls back to the direct timer for that shape.
``other``
    anything else (a Python error, out of memory, a bad argument).

Why precise: newer torch appends the same hint lines to EVERY CUDA error,
among them "Compile with `TORCH_USE_CUDA_DSA` to enable device-side
assertions." and "CUDA kernel errors might be asynchronously reported at some
other API call ...". A loose marker such as "device-side assert" or
"asynchronously reported" matches every capture error too (it once disabled
the graph fallback entirely), so the fatal markers are the runtime's own error
strings ("device-side assert triggered") and error names (``cudaErrorAssert``),
tested against real texts in tests/fixtures/cuda_errors/.

The strings are the CUDA runtime's ``cudaGetErrorString`` texts as torch
prints them (``CUDA error: <text>``, c10/cuda/CUDAException.cpp), HIP's
(hipified: ``HIP error: <text>``), Triton's driver errors (``Triton Error
[CUDA]: <text>``) and thrust/CUB (``<name>: <text>``). A runtime text is only
matched behind such a prefix, so a Python message that happens to contain
"misaligned address" is not taken for a device fault; error names match anywhere.

Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

FATAL = "fatal"
CAPTURE = "capture"
OTHER = "other"
CLASSES = (FATAL, CAPTURE, OTHER)

# (kind, runtime error strings, error names). Names cover the runtime API
# (cudaError*), the driver API (CUDA_ERROR_*) and HIP (hipError*).
_FATAL: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("illegal-address", ("an illegal memory access was encountered",),
     ("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorIllegalAddress")),
    ("device-assert", ("device-side assert triggered",),
     ("cudaErrorAssert", "CUDA_ERROR_ASSERT", "hipErrorAssert")),
    ("launch-failure", ("unspecified launch failure",),
     ("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure")),
    ("misaligned-address", ("misaligned address",),
     ("cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS")),
    ("illegal-instruction", ("an illegal instruction was encountered",),
     ("cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION")),
    ("hardware-stack-error", ("hardware stack error",),
     ("cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR")),
    ("invalid-pc", ("invalid program counter",),
     ("cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC")),
    ("address-space", ("operation not supported on global/shared address space",),
     ("cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE")),
    ("launch-timeout", ("the launch timed out and was terminated",),
     ("cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT", "hipErrorLaunchTimeOut")),
    ("ecc-uncorrectable", ("uncorrectable ECC error encountered",),
     ("cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "hipErrorECCNotCorrectable")),
)

# Capture errors: runtime strings (behind a device-error prefix) and names, plus
# torch's own capture messages (matched anywhere: they name graph capture).
_CAPTURE: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("capture-unsupported", ("operation not permitted when stream is capturing",),
     ("cudaErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "hipErrorStreamCaptureUnsupported")),
    ("capture-invalidated", ("operation failed due to a previous error during capture",),
     ("cudaErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "hipErrorStreamCaptureInvalidated")),
    ("capture-implicit", ("operation would make the legacy stream depend on a capturing blocking stream",),
     ("cudaErrorStreamCaptureImplicit", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "hipErrorStreamCaptureImplicit")),
    ("captured-event", ("operation not permitted on an event last recorded in a capturing stream",),
     ("cudaErrorCapturedEvent", "CUDA_ERROR_CAPTURED_EVENT", "hipErrorCapturedEvent")),
    ("capture-unmatched", ("capture was not initiated in this stream",),
     ("cudaErrorStreamCaptureUnmatched", "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "hipErrorStreamCaptureUnmatched")),
    ("capture-unjoined", ("capturing stream has unjoined work",),
     ("cudaErrorStreamCaptureUnjoined", "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "hipErrorStreamCaptureUnjoined")),
    ("capture-merge", ("operation would result in a merge of two independent capture sequences",),
     ("cudaErrorStreamCaptureMerge", "CUDA_ERROR_STREAM_CAPTURE_MERGE", "hipErrorStreamCaptureMerge")),
    ("capture-isolation", ("dependency created on uncaptured work in another stream",),
     ("cudaErrorStreamCaptureIsolation", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "hipErrorStreamCaptureIsolation")),
    ("capture-wrong-thread", ("attempt to terminate a thread-local capture sequence from another thread",),
     ("cudaErrorStreamCaptureWrongThread", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "hipErrorStreamCaptureWrongThread")),
)
_TORCH_CAPTURE: tuple[tuple[str, str], ...] = (
    # aten/src/ATen/native/cuda/Copy.cu
    ("capture-host-copy", "Cannot copy between CPU and CUDA tensors during CUDA graph capture"),
    # aten/src/ATen/cuda/CUDAGeneratorImpl.cpp: a generator left in capture mode
    ("capture-rng", "Offset increment outside graph capture encountered unexpectedly"),
    ("capture-rng", "Attempt to increase offset for a CUDA generator not in capture mode"),
    # aten/src/ATen/cuda/CUDAGraph.cpp
    ("capture-default-stream", "must be captured on a non-default stream"),
    ("capture-stream-mismatch", "Capture must end on the same stream it began on"),
    # at::cuda::assertNotCapturing: "<what> during CUDA graph capture. If you need ..."
    ("capture-forbidden", "during CUDA graph capture"),
    ("capture-forbidden", "is not supported during graph capture"),
    ("capture-forbidden", "cudaStreamCaptureStatusActive"),
)

# "CUDA error: <text>", "HIP error: <text>", "MUSA error: <text>", "Triton Error [CUDA]: <text>",
# thrust/CUB "...: cudaErrorX: <text>", NCCL "Cuda failure '<text>'", driver "CUDA driver error: <text>".
_PREFIX = (
    r"(?:\b(?:CUDA|HIP|MUSA|Cuda|cuda|hip)(?:\s+driver)?\s+error\s*:\s*"
    r"|Triton Error \[[A-Za-z]+\]\s*:\s*"
    r"|\b(?:cuda|hip|CUDA_ERROR|hipError)\w*\s*:\s*"
    r"|\bCuda failure\s+(?:\d+\s+)?')"
)


@dataclass(frozen=True)
class _Rule:
    cls: str
    kind: str
    pattern: "re.Pattern[str]"


def _rules() -> list[_Rule]:
    rules: list[_Rule] = []
    for cls, table in ((FATAL, _FATAL), (CAPTURE, _CAPTURE)):
        for kind, texts, names in table:
            alts = [_PREFIX + re.escape(t) for t in texts]
            alts += [r"\b" + re.escape(n) + r"\b" for n in names]
            rules.append(_Rule(cls, kind, re.compile("|".join(alts), re.IGNORECASE)))
    for kind, text in _TORCH_CAPTURE:
        rules.append(_Rule(CAPTURE, kind, re.compile(re.escape(text))))
    return rules


_RULES = _rules()


@dataclass(frozen=True)
class Verdict:
    """What an error text says: its class, a short kind, and the line that said it."""

    cls: str
    kind: Optional[str]
    message: str

    @property
    def fatal(self) -> bool:
        return self.cls == FATAL

    @property
    def capture(self) -> bool:
        return self.cls == CAPTURE


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start: end if end >= 0 else len(text)].strip()
    # drop pytest's "E   " and traceback-group "|" decorations
    return re.sub(r"^(?:E\s+|\|\s*)+", "", line).strip()


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def classify_text(text: str) -> Verdict:
    """Classify an error text. Fatal markers win over capture markers (an illegal
    address reported during a capture is still fatal); among the rules of a
    class, the earliest in the tables wins."""
    text = text or ""
    for cls in (FATAL, CAPTURE):
        for rule in _RULES:
            if rule.cls != cls:
                continue
            m = rule.pattern.search(text)
            if m:
                return Verdict(cls, rule.kind, _line_at(text, m.start()))
    return Verdict(OTHER, None, _first_line(text))


def exception_texts(exc: BaseException) -> Iterable[tuple]:
    """``(type name, message)`` of ``exc``, its causes/contexts and (for exception
    groups) members, outermost first."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        try:
            msg = str(e)
        except Exception:
            msg = ""
        yield type(e).__name__, msg
        todo.extend(getattr(e, "exceptions", None) or ())
        todo.append(e.__cause__)
        todo.append(e.__context__)


def classify(error: "BaseException | str") -> Verdict:
    """Classify an exception (with its chain) or a text."""
    if isinstance(error, BaseException):
        texts = list(exception_texts(error))
        verdict = classify_text("\n".join(msg for _, msg in texts))
        if verdict.cls == OTHER and texts:
            name, msg = texts[0]
            return Verdict(OTHER, None, f"{name}: {_first_line(msg)}" if msg.strip() else name)
        return verdict
    return classify_text(str(error))


def is_fatal(error: "BaseException | str") -> bool:
    return classify(error).fatal


def exit_if_fatal(error: "BaseException | str", exit_fn=None) -> Verdict:
    """Print the fatal line and end the process when ``error`` is device-fatal;
    otherwise return its verdict. ``exit_fn(kind, message)`` replaces
    ``config.fatal_exit`` (tests)."""
    verdict = classify(error)
    if verdict.fatal:
        if exit_fn is None:
            from . import config

            exit_fn = config.fatal_exit
        exit_fn(verdict.kind or "device-fatal", verdict.message)
    return verdict
