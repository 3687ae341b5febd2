"""Child plugin (CUDA only): a sticky device error ends the process at once.

After a device-fatal error (illegal address, device-side assert, launch
failure) every later CUDA call in the process fails the same way, so the rest
of the op's tests would only produce noise. This plugin classifies each failed
test's exception (``opscreen.child.fatal``, precise markers) and synchronizes
the device after each test; a fatal verdict prints one ``OPSCREEN-FATAL:`` line
and exits with status 86, so the batch runner restarts the op in a fresh process.
The plan loads it on CUDA only (``capabilities.cuda_workarounds``).
"""

from __future__ import annotations

import sys

import pytest

from . import fatal as errors


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.excinfo is None:
        return
    verdict = errors.classify(call.excinfo.value)
    if verdict.fatal:
        sys.stdout.write(f"E   {call.excinfo.typename}: {str(call.excinfo.value).splitlines()[0] if str(call.excinfo.value) else ''}\n")
        sys.stdout.write(f"FAILED {item.nodeid} - device-fatal error, ending the process\n")
        sys.stdout.flush()
        errors.exit_if_fatal(call.excinfo.value)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # a sticky error surfaced at the sync
        errors.exit_if_fatal(exc)
