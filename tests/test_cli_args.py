"""The command line's ``-- PYTEST_ARGS`` tail (issue 14 item 2): every form of
``opscreen op [OP] [options] -- ARGS`` and ``opscreen run [options] -- ARGS`` reaches the
child, through one mechanism (cli.parse_args splits at the first ``--``)."""

from __future__ import annotations

import json

import pytest

from opscreen.cli import build_parser, parse_args

FAST = {"OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3", "OPSCREEN_MAX_SAMPLES": "10", "OPSCREEN_WARMUP_CALLS": "1"}


@pytest.mark.parametrize(
    "argv,op,tail",
    [
        (["op", "abs", "--", "--warmup", "25", "--iter", "100"], "abs", ["--warmup", "25", "--iter", "100"]),
        (["op", "--", "--warmup", "25"], None, ["--warmup", "25"]),  # op from $OP
        (["op", "abs", "--timer", "wallclock", "--", "--warmup", "25"], "abs", ["--warmup", "25"]),
        (["op", "--timer", "wallclock", "abs", "--", "--iter", "7"], "abs", ["--iter", "7"]),
        (["op", "--timer", "wallclock", "--", "abs"], None, ["abs"]),
        (["op", "abs", "--"], "abs", []),
        (["op", "abs"], "abs", []),
        (["op", "abs", "--", "-k", "x", "--", "y"], "abs", ["-k", "x", "--", "y"]),  # only the first -- splits
    ],
)
def test_op_tail_after_double_dash(argv, op, tail):
    args = parse_args(build_parser(), argv)
    assert args.op == op and args.pytest_args == tail


@pytest.mark.parametrize(
    "argv,tail",
    [
        (["run", "--ops", "abs", "--", "--warmup", "25"], ["--warmup", "25"]),
        (["run", "--", "--iter", "3"], ["--iter", "3"]),
        (["run", "--ops", "abs"], []),
    ],
)
def test_run_tail_after_double_dash(argv, tail):
    args = parse_args(build_parser(), argv)
    assert args.pytest_args == tail


@pytest.mark.parametrize(
    "args,needle",
    [
        (["op", "abs", "add"], "unrecognized arguments: add (extra pytest arguments go after --)"),
        (["run", "--ops", "abs", "stray"], "unrecognized arguments: stray"),
        (["summary", "x", "--", "-k"], "unrecognized arguments: -- -k"),
        (["backends", "--"], "unrecognized arguments: --"),
    ],
)
def test_words_outside_the_tail_are_one_line_usage_errors(cli, tmp_path, args, needle):
    res = cli(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_help_shows_the_tail(cli):
    for cmd in ("op", "run"):
        res = cli(cmd, "--help")
        assert res.returncode == 0 and "[-- PYTEST_ARGS ...]" in res.stdout


def _argv(out):
    return json.loads((out / "child_config.json").read_text())["argv"]


@pytest.mark.parametrize(
    "args,env",
    [
        (["op", "abs", "--timer", "wallclock", "--dtypes", "float32", "--out", "o", "--", "--warmup", "1", "--iter", "2"], {}),
        (["op", "--dtypes", "float32", "--out", "o", "--", "--warmup", "1", "--iter", "2"], {"OP": "abs"}),
    ],
)
def test_op_passes_the_tail_to_the_child(cli, tmp_path, args, env):
    res = cli(*args, env={**FAST, **env}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    argv = _argv(tmp_path / "o")
    assert argv[-4:] == ["--warmup", "1", "--iter", "2"] and "abs" in " ".join(argv)
    assert "Operator: abs  Performance Test" in (tmp_path / "o" / "run.log").read_text()


def test_run_passes_the_tail_to_every_child(cli, tmp_path):
    res = cli("run", "--ops", "abs,relu", "--devices", "0", "--plain", "--dtypes", "float32", "--out", "r",
              "--", "--warmup", "1", "--iter", "2", env=FAST, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    cfgs = sorted((tmp_path / "r").rglob("child_config.json"))
    assert len(cfgs) == 2
    for cfg in cfgs:
        assert json.loads(cfg.read_text())["argv"][-4:] == ["--warmup", "1", "--iter", "2"]


def _subparsers(parser):
    import argparse

    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_one_commands_parser_is_that_of_the_whole_command_line():
    """``build_parser(argv)`` builds only the command argv names: its help, and so its options,
    are those the full parser has for it; a word that names no command gets the full parser."""
    from opscreen.cli import command_names

    full = _subparsers(build_parser())
    assert sorted(full) == command_names()
    for name in command_names():
        alone = _subparsers(build_parser([name, "--help"]))
        assert list(alone) == [name]
        assert alone[name].format_help() == full[name].format_help(), name
    assert sorted(_subparsers(build_parser(["histroy"]))) == command_names()
    assert sorted(_subparsers(build_parser(["--version"]))) == command_names()


def test_a_command_imports_no_other_command_module():
    import subprocess
    import sys

    code = ("import sys, opscreen.cli as c; c.build_parser(sys.argv[1:]); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('opscreen.commands.'))))")

    def loaded(*argv):
        res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
        return set(res.stdout.split())

    # history shares store's --db option; neither loads the scheduler's run, nor report
    assert loaded("history", "--json") == {"opscreen.commands._common", "opscreen.commands.history",
                                           "opscreen.commands.store"}
    assert "opscreen.commands.history" not in loaded("backends")
    assert len(loaded("--help")) > 10


def test_a_mistyped_command_is_one_line_naming_the_choices(cli, tmp_path):
    res = cli("histroy", cwd=tmp_path)
    assert res.returncode == 2 and "invalid choice: 'histroy'" in res.stderr, res.stderr
    assert "history" in res.stderr and len(res.stderr.strip().splitlines()) == 1
