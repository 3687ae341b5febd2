"""bench/device/xzpack.py: a folder packed into parts the device tool brings back (16 MiB a
file), unpacked again byte for byte; a pack over the limit writes nothing; an archive whose
member would land outside the target folder is refused."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from benchload import load_bench

xzpack = load_bench("device/xzpack")


def test_pack_in_parts_and_unpack_round_trip(tmp_path, capsys):
    src = tmp_path / "cache"
    (src / "ab" / "cd").mkdir(parents=True)
    blob = os.urandom(2_500_000)  # random: xz cannot shrink it, so it takes three parts of 1 MiB
    (src / "ab" / "cd" / "kernel.cubin").write_bytes(blob)
    (src / "ab" / "kernel.ptx").write_text("// ptx\n" * 1000)
    prefix = tmp_path / "out" / "kcache-gpu.tar.xz"
    prefix.parent.mkdir()
    (prefix.parent / "kcache-gpu.tar.xz.part-zz").write_bytes(b"stale")  # an earlier pack's part goes
    assert xzpack.main(["pack", str(src), str(prefix), "--part-mb", "1", "--max-mb", "5"]) == 0
    parts = sorted(p.name for p in prefix.parent.iterdir())
    assert parts == ["kcache-gpu.tar.xz.part-aa", "kcache-gpu.tar.xz.part-ab", "kcache-gpu.tar.xz.part-ac"]
    assert all((prefix.parent / p).stat().st_size <= 1 << 20 for p in parts)
    assert "2 files" in capsys.readouterr().out
    dst = tmp_path / "back"
    assert xzpack.main(["unpack", str(prefix), str(dst)]) == 0
    assert (dst / "ab" / "cd" / "kernel.cubin").read_bytes() == blob
    assert (dst / "ab" / "kernel.ptx").read_text() == "// ptx\n" * 1000
    # over --max-mb: nothing written, exit 3
    again = tmp_path / "again" / "k.tar.xz"
    again.parent.mkdir()
    assert xzpack.main(["pack", str(src), str(again), "--max-mb", "2"]) == 3
    assert list(again.parent.iterdir()) == []
    assert xzpack.main(["unpack", str(again), str(dst)]) == 2  # nothing there to unpack


def test_unpack_reads_a_single_archive_and_refuses_escapes(tmp_path):
    single = tmp_path / "FlagGems.tar.xz"
    with tarfile.open(single, "w:xz") as tar:
        data = b"print('hi')\n"
        info = tarfile.TarInfo("FlagGems/src/x.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert xzpack.main(["unpack", str(single), str(tmp_path / "fg")]) == 0
    assert (tmp_path / "fg" / "FlagGems" / "src" / "x.py").read_bytes() == data
    evil = tmp_path / "evil.tar.xz"
    with tarfile.open(evil, "w:xz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.FilterError):
        xzpack.main(["unpack", str(evil), str(tmp_path / "in")])
    assert not (tmp_path / "outside.txt").exists()
