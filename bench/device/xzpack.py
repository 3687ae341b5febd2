"""Pack a folder into .tar.xz parts that the device tool brings back, and unpack them again.

    python3 bench/device/xzpack.py pack DIR PREFIX [--part-mb 15] [--max-mb 40]
    python3 bench/device/xzpack.py unpack PREFIX DIR

``pack`` writes DIR's contents as ``PREFIX.part-aa``, ``-ab``, ... (the device tool brings back
files of 16 MiB at most) and prints the packed size; when the whole is ``--max-mb`` or more it
writes nothing and exits 3 (it could not be carried into the next call). ``unpack`` reads
``PREFIX`` itself when it is a file (``.fg/FlagGems.tar.xz``), else ``PREFIX.part-*`` in order,
into DIR. Python's tarfile and lzma, not the ``xz`` program, which a device image need not have.
Members that would land outside DIR are refused (the ``data`` filter).
"""

from __future__ import annotations

import argparse
import io
import string
import sys
import tarfile
from pathlib import Path

MIB = 1 << 20


def _suffixes():
    for a in string.ascii_lowercase:
        for b in string.ascii_lowercase:
            yield a + b


def pack(folder: Path, prefix: Path, part_mb: float, max_mb: float) -> int:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=6) as tar:
        for p in sorted(folder.iterdir()):
            tar.add(p, arcname=p.name)
    data = buf.getvalue()
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    if len(data) >= max_mb * MIB:
        print(f"{folder}: {files} files, {len(data) / MIB:.1f} MiB packed, not under --max-mb {max_mb:g}: not written")
        return 3
    for old in prefix.parent.glob(prefix.name + ".part-*"):
        old.unlink()
    step = int(part_mb * MIB)
    for k, suffix in zip(range(0, max(1, len(data)), step), _suffixes()):
        Path(f"{prefix}.part-{suffix}").write_bytes(data[k:k + step])
    print(f"{folder}: {files} files, {len(data) / MIB:.1f} MiB packed into {prefix}.part-*")
    return 0


def unpack(prefix: Path, folder: Path) -> int:
    parts = [prefix] if prefix.is_file() else sorted(prefix.parent.glob(prefix.name + ".part-*"))
    if not parts:
        print(f"{prefix}: no such file, and no {prefix.name}.part-* beside it", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts)), mode="r:xz") as tar:
        tar.extractall(folder, filter="data")
    print(f"{folder}: {sum(1 for p in folder.rglob('*') if p.is_file())} files from {len(parts)} part(s) of {prefix}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("folder", type=Path)
    p.add_argument("prefix", type=Path)
    p.add_argument("--part-mb", type=float, default=15)
    p.add_argument("--max-mb", type=float, default=40)
    u = sub.add_parser("unpack")
    u.add_argument("prefix", type=Path)
    u.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        if not a.folder.is_dir():
            print(f"{a.folder}: not a folder", file=sys.stderr)
            return 2
        return pack(a.folder, a.prefix, a.part_mb, a.max_mb)
    return unpack(a.prefix, a.folder)


if __name__ == "__main__":
    sys.exit(main())
