"""Terminal tables (opscreen.tables, rich): aligned columns in every command that prints
one; off a terminal plain, unwrapped text; on a terminal its width, colour unless NO_COLOR."""

from __future__ import annotations

import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import fcntl
from pathlib import Path

import pytest

from opscreen.cli import main
from synth import make_run

ROOT = Path(__file__).resolve().parent.parent
ESC = re.compile(r"\x1b\[[0-9;]*m")


def table_rows(text: str, first: str) -> list[str]:
    """The header line whose first cell is ``first`` and the rows under it (up to the
    first line that is blank or indented less)."""
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.split()[:1] == [first])
    indent = len(lines[i]) - len(lines[i].lstrip())
    out = [lines[i]]
    for line in lines[i + 1:]:
        if not line.strip() or len(line) - len(line.lstrip()) < indent:
            break
        out.append(line)
    return out


def assert_aligned(rows: list[str], columns: list[str]) -> None:
    """Every row has each column's cell where the header has that column: left-aligned
    cells start under the column name, right-aligned ones (``name>``) end under it."""
    header, body = rows[0], rows[1:]
    assert body, rows
    spans, at = [], 0
    for c in columns:
        name = c.rstrip(">")
        start = header.index(name, at)
        spans.append((start, start + len(name), c.endswith(">")))
        at = start + len(name)
    for row in body:
        for start, end, right in spans:
            if right:
                assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (row, header)
            else:
                assert row[start] != " " and row[start - 1] == " ", (row, header)


def test_shapes_check_columns_line_up(cli):
    # suite:UnaryPointwiseBenchmark (29 characters) is wider than the 28 the hand-made
    # layout gave its column: the shapes of those rows started one column later
    res = cli("shapes", "check")
    assert res.returncode == 0, res.stderr
    listing = res.stdout[res.stdout.index("what the merged file gives"):].splitlines()[1:-1]
    ops = [line for line in listing if line.split()[0] != "op"]
    assert len(ops) == 16
    # the third cell (the shapes) starts at one column in every row
    assert len({line.index(" " + line.split()[2]) for line in ops}) == 1, ops
    rows = table_rows(res.stdout, "op")
    assert len(rows) == 1 + 16
    assert_aligned(rows, ["op", "from", "shapes"])
    assert any("suite:UnaryPointwiseBenchmark" in r for r in rows) and any("curated:add" in r for r in rows)


def test_off_a_terminal_tables_are_plain_and_never_wrapped(cli):
    # a narrow COLUMNS and a FORCE_COLOR must not wrap, cut or colour a piped table
    env = {"COLUMNS": "30", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    res = cli("shapes", "check", env=env)
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout
    assert "  abs             suite:UnaryPointwiseBenchmark  262144  64x64  512x512  16x128x128\n" in res.stdout
    assert all(line == line.rstrip() for line in res.stdout.splitlines())


def test_dismiss_check_columns_line_up(tmp_path, cli):
    f = tmp_path / "dismiss.yaml"
    f.write_text(
        "- op: abs\n  reason: measured elsewhere [see issue 12]\n  evidence: runs/x/ops/abs/run.log\n  date: 2026-08-21\n"
        "- op: layer_norm\n  reason: autotuning exceeds any timeout\n  date: 2026-11-29\n"
    )
    res = cli("dismiss", "check", f)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout, "op")
    assert_aligned(rows, ["op", "date", "reason", "evidence"])
    assert "measured elsewhere [see issue 12]" in rows[1]  # literal text, not rich markup


def test_devices_table(cli):
    res = cli("devices", "--backend", "cpu")
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout, "index")[:2]  # cpu: one device, then a note
    assert_aligned(rows, ["index>", "name", "source"])


def test_compare_tables_line_up_with_long_names(tmp_path, capsys):
    names = ["op0", "an_op_with_a_rather_long_marker_name", "op2", "op3"]
    kw = dict(n_ops=4, seed=3, op_names=names, statuses={n: "passed" for n in names})
    make_run(tmp_path / "a", **kw)
    make_run(tmp_path / "b", perturb=lambda op, dt, si, ms: ms * (2.0 if op == names[1] else 1.0), **kw)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert_aligned(table_rows(out[out.index("top regressions"):], "change"),
                   ["change>", "band>", "op", "dtype", "A>", "B>", "shape"])
    assert_aligned(table_rows(out[out.index("per-op geometric"):], "op"), ["op", "B/A>", "rows>", "slower>", "faster>"])


def test_summary_tables_line_up(tmp_path, capsys):
    make_run(tmp_path / "r", n_ops=3, seed=2)
    assert main(["summary", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out, "dtype")
    assert rows[-1].split()[0] == "overall"
    assert_aligned(rows, ["dtype", "geomean>", "rows>"])


def _on_a_terminal(args: list[str], env: dict, cols: int = 60) -> str:
    """Output of ``opscreen ARGS`` run on a pseudo-terminal ``cols`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR")}
    full.update(PYTHONPATH=str(ROOT / "src"), TERM="xterm-256color", **env)
    p = subprocess.Popen([sys.executable, "-m", "opscreen", *args], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=subprocess.DEVNULL, env=full)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 120)
        if not r:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    assert p.returncode == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_on_a_terminal_tables_fit_its_width_and_colour_unless_no_color():
    out = _on_a_terminal(["shapes", "check"], {})
    plain = ESC.sub("", out)
    rows = table_rows(plain, "op")
    assert all(len(r) <= 60 for r in rows), rows  # wrapped to the terminal, not cut
    assert "16x128x128" in plain and "curated:add" in plain  # long cells fold, none is cut
    assert "\x1b[1m" in out  # a bold header
    quiet = _on_a_terminal(["shapes", "check"], {"NO_COLOR": "1"})
    assert not re.search(r"\x1b\[[0-9;]*(3[0-9]|38;[0-9;]+)m", quiet)
    assert ESC.sub("", quiet) == plain


def test_a_capped_list_names_its_first_items_and_counts_the_rest():
    from opscreen.tables import first
    assert first([], 3) == ""
    assert first(["a", "b"], 3) == "a, b"
    assert first(["a", "b", "c"], 3) == "a, b, c"
    assert first(iter(["a", "b", "c", "d", "e"]), 2) == "a, b, and 3 more"
    assert first([1, 2, 3], 1, "; ") == "1; and 2 more"

