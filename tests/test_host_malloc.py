"""The host allocator held steady: in a fresh process, a loop that makes and frees a few
1 MiB blocks pays page faults on every round under glibc's own thresholds (the heap's top
is given back), and none once ``steady`` holds them. Real processes, real faults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opscreen.child import host_malloc

SRC = Path(__file__).resolve().parent.parent / "src"

ROUNDS = r"""
import ctypes, json, resource, sys
sys.path.insert(0, sys.argv[1])
from opscreen.child import host_malloc
did = host_malloc.apply(sys.argv[2], {})
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
MIB = 1 << 20

def one_round():  # four 1 MiB temporaries, touched and freed: a torch op's intermediates
    blocks = [libc.malloc(MIB) for _ in range(4)]
    for b in blocks:
        ctypes.memset(b, 1, MIB)
    for b in reversed(blocks):
        libc.free(b)

for _ in range(3):
    one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    one_round()
print(json.dumps({"faults_per_round": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20,
                  "did": did}))
"""


def _rounds(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", ROUNDS, str(SRC), mode], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(host_malloc._libc() is None, reason="glibc only: the thresholds are glibc's")
def test_steady_thresholds_stop_the_page_faults_of_temporaries():
    system, steady = _rounds("system"), _rounds("steady")
    assert system["did"]["applied"] is False and steady["did"]["applied"] is True
    assert steady["did"]["libc"] and "32 MiB" in steady["did"]["why"]
    # 4 MiB freed at the heap's top is over glibc's trim threshold: given back, faulted in again
    assert system["faults_per_round"] > 200
    assert steady["faults_per_round"] < 10


def test_the_environment_wins_and_other_modes_change_nothing():
    did = host_malloc.apply("steady", {"MALLOC_TRIM_THRESHOLD_": "0"})
    assert did["applied"] is False and "MALLOC_TRIM_THRESHOLD_=0" in did["why"]
    assert did["env"] == {"MALLOC_TRIM_THRESHOLD_": "0"}
    assert host_malloc.applied() == did
    did = host_malloc.apply("system", {})
    assert did["applied"] is False and did["why"].startswith("system")
