"""The ``opscreen`` command line: one subcommand per module under ``commands/``.

Each command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Errors the user can fix are one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
import threading

from . import __version__
from .contracts import ContractError
from .errors import OpscreenError, UsageError
from .fsio import is_storage_error, write_error


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        sys.stderr.write(f"opscreen: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def command_names() -> list[str]:
    """The command modules' names under ``commands/``, without importing any of them."""
    from . import commands

    return sorted(i.name for i in pkgutil.iter_modules(commands.__path__) if not i.name.startswith("_"))


def command_modules(only: str | None = None):
    """The command modules in their ``ORDER`` (``only``: that one alone, when it is one)."""
    from . import commands

    mods = []
    for name in command_names():
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f"{commands.__name__}.{name}")
        if hasattr(mod, "run") and hasattr(mod, "add_arguments") and (only is None or mod.NAME == only):
            mods.append(mod)
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 100))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; for an ``argv`` that starts with a command's name, of
    that command alone. Each command module imports what its command needs (``run`` the
    scheduler, ``history`` the store), and importing all of them took 0.25 s of every
    invocation (bench/results/2026-12-03-store-scale.md); one command's parser, help and
    errors are the same either way (tests/test_cli_args.py)."""
    parser = _Parser(prog="opscreen", description="Screen an operator library's performance suite, one op per process.")
    parser.add_argument("--version", action="version", version=f"opscreen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    first = argv[0] if argv else None
    mods = command_modules(first) if first in command_names() else []
    for mod in mods or command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """The words before the first ``--`` and those after it (None without a ``--``).

    argparse cannot be trusted with the tail: with an optional positional in front
    (``opscreen op [OP] [-- PYTEST_ARGS]``) it took ``op -- --warmup 25`` as op
    ``--warmup`` and refused ``op abs --timer direct -- --warmup 25`` outright.
    """
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; the words after ``--`` become ``args.pytest_args`` of a command
    that takes them (op, run) and are an error for any other."""
    head, tail = split_passthrough(argv)
    args = parser.parse_args(head)
    sub = getattr(args, "_parser", parser)
    if hasattr(args, "pytest_args"):
        if args.pytest_args:  # words before -- that no option or positional took
            sub.error(f"unrecognized arguments: {' '.join(args.pytest_args)} (extra pytest arguments go after --)")
        args.pytest_args = tail or []
    elif tail is not None:
        sub.error(f"unrecognized arguments: -- {' '.join(tail)}".rstrip())
    return args


def sigint_default() -> None:
    """Ctrl-C (SIGINT) stops every command, even when it was started with SIGINT
    ignored, as a shell starts the background jobs of a script: opscreen's children
    run in sessions of their own, so a harness deaf to SIGINT would leave them running
    (``op`` and ``run`` then install handlers of their own that stop them cleanly)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    sigint_default()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parse_args(parser, argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        rc = int(args._run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return rc
    except BrokenPipeError:  # an OSError too: caught first
        return _broken_pipe()
    except UsageError as exc:
        sys.stderr.write(f"opscreen {args.command}: {exc}\n")
        return exc.exit_code
    except (OpscreenError, ContractError) as exc:
        sys.stderr.write(f"opscreen {args.command}: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"opscreen {args.command}: interrupted\n")
        return 130
    except OSError as exc:
        if not is_storage_error(exc):
            raise
        # a full disk, a quota or a read-only filesystem under an output: one line, not a traceback
        sys.stderr.write(f"opscreen {args.command}: {write_error(exc, '.')}\n")
        return 1


#: The exit status of a command whose reader went away (``opscreen backends | head -1``):
#: 128 + SIGPIPE, what the shell reports for any tool SIGPIPE ends (``yes | head -1``),
#: so ``set -o pipefail`` sees that not all output was read, and ``run | head`` never
#: reads as "every op passed".
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def _broken_pipe() -> int:
    """The reader of stdout went away: no traceback, no message; stdout now points at
    /dev/null so the interpreter's own last flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return BROKEN_PIPE_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
