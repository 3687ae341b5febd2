"""The README's screenshot of the demo's report is made by one command and stays honest.

``.venv/bin/python bench/report_screenshot.py --readme`` writes docs/img/report-demo.png
(headless Chromium, so it is not run here). What runs without Chromium: the README and
the site's front page show that file and name that command, the script takes the flag and
writes where they point, and the PNG itself is the size the script makes, small, and
records (PNG text chunks) that command and a demo of the sample suite as it is now: every
op passed, as many ops as the suite has and as the README's alt text says.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from benchload import load_bench
from conftest import ROOT

README = ROOT / "README.md"
INDEX = ROOT / "docs" / "index.md"
SUITE = ROOT / "src" / "opscreen" / "sample_suite" / "benchmark"
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def shot():
    return load_bench("report_screenshot")


def png_facts(path: Path) -> tuple[int, int, dict[str, str]]:
    """(width, height, text chunks) of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, size, text = 8, None, {}
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"tEXt":
            k, _, v = body.partition(b"\0")
            text[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"zTXt":
            k, _, v = body.partition(b"\0")
            text[k.decode("latin-1")] = zlib.decompress(v[1:]).decode("latin-1")
        pos += 12 + n
    assert size is not None, f"{path}: no IHDR"
    return size[0], size[1], text


def images(page: Path) -> list[tuple[str, Path]]:
    """(alt text, file) of each Markdown image of a page, the file resolved from the page."""
    return [(alt, (page.parent / src).resolve()) for alt, src in _IMAGE.findall(page.read_text())]


def sample_suite_ops() -> set[str]:
    return {m for p in SUITE.glob("test_*.py") for m in re.findall(r"^@pytest\.mark\.(\w+)\s*$", p.read_text(), re.M)}


def test_readme_and_front_page_show_the_file_the_command_writes(shot):
    png = (ROOT / shot.README_PNG).resolve()
    for page in (README, INDEX):
        shown = [f for _, f in images(page) if f.name.startswith("report-")]
        assert shown == [png], f"{page.name} shows {shown}, the script writes {png}"
        assert shot.README_COMMAND in " ".join(page.read_text().split()), f"{page.name} does not name the command"
    assert shot.README_COMMAND in (ROOT / "bench" / "README.md").read_text()
    assert shot.README_COMMAND == ".venv/bin/python bench/report_screenshot.py --readme"


def test_the_script_takes_the_flag_the_readme_names():
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "report_screenshot.py"), "--help"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "--readme" in res.stdout and "docs/img/report-demo.png" in " ".join(res.stdout.split())


def test_chromium_starts_headless_and_offline(shot):
    flags = set(shot.CHROMIUM_FLAGS)
    assert {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"} <= flags  # fmt: skip
    assert not any(f.startswith("--user-data-dir") for f in flags), "each call gets a fresh profile"


def test_the_png_is_what_the_command_makes_of_the_demo(shot):
    png = ROOT / shot.README_PNG
    w, h, text = png_facts(png)
    assert (w, h) == tuple(shot.README_SIZE), f"{png.name} is {w} x {h}: not made by {shot.README_COMMAND}"
    assert png.stat().st_size <= shot.README_MAX_BYTES
    assert text.get("Software") == shot.README_COMMAND, text
    m = re.fullmatch(r"opscreen \S+ report of (\S+): (\d+) ops, (\d+) passed, (\d+) rows", text.get("Source", ""))
    assert m, text
    name, ops, passed = m.group(1), int(m.group(2)), int(m.group(3))
    assert name == Path(shot.README_RUN).name
    assert ops == passed == len(sample_suite_ops()), (
        f"the screenshot shows {passed} of {ops} ops passed; the sample suite has {len(sample_suite_ops())}: "
        f"run {shot.README_COMMAND}")
    for page in (README, INDEX):
        alt = next(a for a, f in images(page) if f == png.resolve())
        assert f"all {ops} ops passed" in alt, f"{page.name}'s alt text does not say what the picture shows"
