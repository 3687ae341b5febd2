from __future__ import annotations

import os
import stat
import threading

from opscreen.fsio import atomic_write_json, atomic_write_text, read_json


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "sub" / "x.json"
    atomic_write_json(p, {"a": 1})
    atomic_write_json(p, {"a": 2}, fsync=True)
    assert read_json(p) == {"a": 2}
    assert sorted(os.listdir(p.parent)) == ["x.json"]
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~_umask()


def _umask():
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_special_destination_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    atomic_write_text(fifo, "hello\n")
    reader.join(5)
    assert got == ["hello\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced by a regular file"


def test_read_json_missing_or_bad(tmp_path):
    assert read_json(tmp_path / "nope.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert read_json(tmp_path / "bad.json") is None
