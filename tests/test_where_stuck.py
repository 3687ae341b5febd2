"""Where a timed-out child was, from the faulthandler dump it prints on SIGTERM."""

from __future__ import annotations

from opscreen.op.run import where_stuck

DUMP = """\
benchmark/test_mm.py Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 89 in _worker
  File "/usr/lib/python3.12/threading.py", line 1012 in run
  File "/usr/lib/python3.12/threading.py", line 1075 in _bootstrap_inner
  File "/usr/lib/python3.12/threading.py", line 1032 in _bootstrap

Current thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.12/ast.py", line 406 in visit
  File "/site/triton/backends/nvidia/compiler.py", line 431 in make_cubin
  File "/site/triton/compiler/compiler.py", line 320 in compile
  File "/suite/src/flag_gems/utils/libentry.py", line 700 in __call__
  File "/suite/benchmark/base.py", line 210 in run
  File "/suite/benchmark/test_mm.py", line 82 in test_mm_self_transpose_benchmark
  File "<frozen runpy>", line 198 in _run_module_as_main
"""


def test_main_thread_innermost_frame_and_the_suite_frame():
    lines = DUMP.splitlines(True)
    assert where_stuck(lines, "/suite") == (
        "make_cubin (nvidia/compiler.py:431), from __call__ (utils/libentry.py:700)")
    assert where_stuck(lines, "/suite/benchmark") == (
        "make_cubin (nvidia/compiler.py:431), from run (benchmark/base.py:210)")
    assert where_stuck(lines) == "make_cubin (nvidia/compiler.py:431)"


def test_a_suite_frame_behind_standard_library_frames_is_named_once():
    dump = ("Current thread 0x00007f0000000003 (most recent call first):\n"
            '  File "/usr/lib/python3.12/selectors.py", line 415 in select\n'
            '  File "/suite/benchmark/test_x.py", line 9 in test_x\n'
            '  File "<frozen runpy>", line 198 in _run_module_as_main\n')
    assert where_stuck(dump.splitlines(True), "/suite") == "test_x (benchmark/test_x.py:9)"


def test_no_dump_no_answer():
    assert where_stuck(["SUCCESS 1.0 2.0\n", "  File \"x.py\", line 3 in f\n"]) is None
