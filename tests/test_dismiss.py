"""The dismiss list: load_dismiss and `opscreen dismiss check`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from opscreen.assets.dismiss import DismissEntry, load_dismiss
from opscreen.commands import dismiss as dismiss_cmd
from opscreen.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "src" / "opscreen" / "sample_suite"

GOOD = """\
# a comment
- op: abs
  reason: >
    measured elsewhere;
    kept out of the screen
  evidence: runs/x/ops/abs/run.log
  date: 2026-08-21
- op: mm
  reason: "autotuning exceeds any sane timeout on this vendor"
  date: '2026-11-29'
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "dismiss.yaml"
    p.write_text(text)
    return p


def run_command(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="opscreen dismiss")
    dismiss_cmd.add_arguments(p)
    try:
        return dismiss_cmd.run(p.parse_args(list(argv)))
    except UsageError:
        return 2


def test_good_file(tmp_path):
    entries = load_dismiss(write(tmp_path, GOOD), None)
    assert list(entries) == ["abs", "mm"]
    assert entries["abs"] == DismissEntry("abs", "measured elsewhere; kept out of the screen", "runs/x/ops/abs/run.log", "2026-08-21", 2)
    assert entries["mm"].evidence is None and entries["mm"].date == "2026-11-29" and entries["mm"].line == 8
    assert load_dismiss(write(tmp_path, GOOD), {"abs", "mm", "add"}) == entries


@pytest.mark.parametrize(
    "text, message",
    [
        ("- op: abs\n  date: 2026-01-01\n", r"dismiss.yaml:1: entry 1 \(op 'abs'\): 'reason' is missing"),
        ("- op: abs\n  reason: '  '\n  date: 2026-01-01\n", "'reason' is missing or empty"),
        ("- op: abs\n  reason: r\n", "'date' is missing"),
        ("- op: abs\n  reason: r\n  date: 2026-13-01\n", r"bad date '2026-13-01'"),
        ("- op: abs\n  reason: r\n  date: 21.08.2026\n", "bad date"),
        ("- op: abs\n  reason: r\n  date: 2026-01-01 10:00:00\n", "bad date"),
        ("- reason: r\n  date: 2026-01-01\n", r"entry 1: 'op' is missing"),
        ("- op: 'a b'\n  reason: r\n  date: 2026-01-01\n", "is not an op"),
        ("- op: abs\n  reason: r\n  evidence: [1, 2]\n  date: 2026-01-01\n", "'evidence' must be text"),
        ("- op: abs\n  reasn: r\n  date: 2026-01-01\n", "unknown field"),
        (GOOD + "- op: abs\n  reason: again\n  date: 2026-01-02\n", r"dismiss.yaml:11: entry 3 \(op 'abs'\): duplicate: 'abs' is already dismissed at line 2"),
        ("op: abs\n", "a YAML list"),
        ("- abs\n", "entry 1: not a mapping"),
        ("- op: [\n", r"dismiss file .*dismiss.yaml:2: not valid YAML: "),
    ],
)
def test_bad_entries(tmp_path, text, message):
    with pytest.raises(UsageError, match=message) as info:
        load_dismiss(write(tmp_path, text), None)
    assert "\n" not in str(info.value)


def test_unknown_op_when_known_ops_given(tmp_path):
    with pytest.raises(UsageError, match=r"entry 2 \(op 'mm'\): unknown op"):
        load_dismiss(write(tmp_path, GOOD), {"abs"})


def test_empty_and_missing(tmp_path):
    assert load_dismiss(write(tmp_path, ""), None) == {}
    assert load_dismiss(write(tmp_path, "# nothing\n[]\n"), set()) == {}
    with pytest.raises(UsageError, match="cannot read"):
        load_dismiss(tmp_path / "nope.yaml", None)


def test_shipped_list_is_valid():
    assert load_dismiss(REPO / "ops" / "dismiss.yaml", None) == {}


def test_command(tmp_path, capsys):
    assert run_command("check") == 0  # the repository's ops/dismiss.yaml
    assert "0 dismissed op(s)" in capsys.readouterr().out
    good = write(tmp_path, GOOD)
    assert run_command("check", str(good)) == 0
    out = capsys.readouterr().out
    assert "2 dismissed op(s)" in out
    assert any(line.split()[:2] == ["abs", "2026-08-21"] and line.endswith("runs/x/ops/abs/run.log") for line in out.splitlines())
    assert run_command("check", str(good), "--suite", str(SAMPLE)) == 0  # abs and mm are sample ops
    bad = write(tmp_path, GOOD.replace("op: mm", "op: no_such_op"))
    assert run_command("check", str(bad), "--suite", str(SAMPLE)) == 2
    assert run_command("check", str(bad)) == 0  # without a suite, any op name goes
    assert run_command("check", str(tmp_path / "missing.yaml")) == 2
