"""Every option of ``opscreen op`` and ``opscreen run``, declared once.

A :class:`Setting` names an option's flag(s), its environment variable (and the
commands that read it), its default, its parser/validator (a one-line
:class:`~opscreen.errors.UsageError`), its help, the commands that take it,
whether it belongs to the caliber (a resume that asks for another value is
refused) and the key it is recorded under in ``child_config.json`` /
``run_identity.json`` settings. Derived from these declarations:

- the argparse options of ``op`` and ``run`` (:func:`add_arguments`);
- the check that no option is given as '' and that a path can be looked up
  (:func:`check_given_values`);
- the precedence flag > environment > recorded run (resume or replay) > default,
  with provenance: where each value came from (:func:`resolve`);
- the resume clash check for caliber settings (:func:`caliber_clashes`), and the one
  between two recorded runs that are merged (:func:`recorded_clashes`);
- the settings dicts recorded for a replay or resume (:func:`record`).

Standard library only (and opscreen.errors): the foundation layer.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .errors import UsageError, check_given, check_path

OP, RUN = "op", "run"
BOTH = (OP, RUN)

TIMERS = ("auto", "graph", "profiler", "direct", "wallclock")
CPU_PINNING = ("auto", "off")  # opscreen.backends.cpusets.PINNING
ISOLATIONS = ("auto", "worker", "op")
#: What ``--isolation auto`` means per command: a fresh process per op for both, until an A/A
#: shows that a warm worker measures what a fresh process does (README "Warm workers": on an
#: H200, with every process settled and the worker's canary off, a worker's first op reads
#: like a fresh process, its later ops read kernels of 10 us and more alike (0.13 / 0.61 %) but
#: a few ops' small kernels apart (all graph rows 0.18 / 1.44 % against a target of 0.1 / 0.5 %;
#: bench/results/2026-12-01-h200-canary.md; 0.19-0.25 / 1.6-2.0 % on 35 more random ops,
#: -speedpair-rest.md). ``opscreen op`` keeps it in any case, so that ``--repeats`` measures the
#: spread between processes. A request records the mode "auto" meant (Setting.auto), and a
#: resume that asks "auto" asks for that mode.
AUTO_ISOLATION = MappingProxyType({RUN: "op", OP: "op"})
SHAPE_MODES = ("upstream", "curated")
MAX_REPEATS = 100
CPU_ALL_SLOTS = 2  # --devices all on cpu: slots 0..min(CPU_ALL_SLOTS, cores)-1
EXECUTORS = ("local", "ray")  # where the ops of a run execute (opscreen.batch.executor, opscreen.batch.ray_executor)

# -- the dtype vocabulary: torch names, one canonical spelling each --------------------

DTYPE_ALIASES = {
    "half": "float16", "float": "float32", "double": "float64", "short": "int16", "int": "int32", "long": "int64",
    "chalf": "complex32", "cfloat": "complex64", "cdouble": "complex128",
}
TORCH_DTYPES = frozenset(
    "float16 bfloat16 float32 float64 int8 int16 int32 int64 "
    "uint8 uint16 uint32 uint64 bool complex32 complex64 complex128 "
    "float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 "
    "qint8 quint8 qint32 quint4x2 quint2x4".split()
) | frozenset(DTYPE_ALIASES)
_NAME_RX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def canonical_dtype(name: str) -> str | None:
    """The canonical torch dtype name of ``name`` (``torch.half`` -> ``float16``); None if it is none."""
    name = name.strip().removeprefix("torch.")
    if not _NAME_RX.match(name) or name not in TORCH_DTYPES:
        return None
    return DTYPE_ALIASES.get(name, name)


def parse_dtypes(value: str | list[str] | None) -> list[str] | None:
    """``float16,bfloat16`` or ``float16 bfloat16`` or a list -> canonical names."""
    if value is None:
        return None
    items = value if isinstance(value, list) else re.split(r"[,\s]+", value)
    out: list[str] = []
    for raw in items:
        for item in re.split(r"[,\s]+", str(raw)):
            if not item.strip():
                continue
            name = canonical_dtype(item)
            if name is None:
                raise UsageError(f"bad dtype {item.strip().removeprefix('torch.')!r}: give torch dtype names such as float16,bfloat16")
            if name not in out:
                out.append(name)
    return out or None


# -- validators (each raises a one-line UsageError) --------------------------------------


#: The longest wait a setting may ask for (a year): longer ones overflow the system's
#: timers (``selectors`` turns 1e308 s into an OverflowError) and mean "never" anyway.
MAX_SECONDS = 365 * 24 * 3600


def check_timeout(value: float | None, name: str = "--timeout") -> float | None:
    """A finite number of seconds > 0, at most MAX_SECONDS (None: no limit)."""
    if value is not None:
        value = _float(value, name, "give a positive number of seconds")
        if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
            raise UsageError(f"{name} {value}: give a positive number of seconds, at most {MAX_SECONDS} (a year)")
    return value


def check_grace(value: float, name: str = "--grace") -> float:
    """A finite number of seconds >= 0, at most MAX_SECONDS."""
    value = _float(value, name, "give a number of seconds >= 0")
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise UsageError(f"{name} {value}: give a number of seconds >= 0, at most {MAX_SECONDS} (a year)")
    return value


def _float(value: Any, name: str, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} {value!r}: {what}") from None


def validate_repeats(value: Any, name: str = "--repeats") -> int:
    """An integer 1..MAX_REPEATS."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise UsageError(f"{name} {value!r}: give a whole number of processes per op, 1 to {MAX_REPEATS}") from None
    if not 1 <= n <= MAX_REPEATS:
        raise UsageError(f"{name} {n}: give a whole number of processes per op, 1 to {MAX_REPEATS}")
    return n


def _isolation(value: Any, name: str) -> str:
    v = str(value).strip().lower()
    if v not in ISOLATIONS:
        raise UsageError(f"{name} {value!r}: use worker (a warm process per device), op (a fresh process per op) or auto")
    return v


def _positive(message: str) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        try:
            n = int(str(value).strip())
        except ValueError:
            raise UsageError(message.format(name=name, value=value)) from None
        if n < 1:
            raise UsageError(message.format(name=name, value=value))
        return n

    return check


def validate_flag01(value: Any, name: str) -> str:
    v = str(value).strip()
    if v not in ("0", "1"):
        raise UsageError(f"{name} must be 0 or 1, not {value!r}")
    return v


#: The spellings Triton's ``env_bool`` knobs take (``triton.knobs``), as 1 or 0.
ENV_BOOL = {"1": "1", "true": "1", "yes": "1", "on": "1", "y": "1", "0": "0", "false": "0", "no": "0", "off": "0",
            "n": "0", "": "0"}


def validate_env_bool(value: Any, name: str) -> str:
    """A boolean environment knob of the suite's stack as 0 or 1 (Triton reads ``true``,
    ``yes``, ``on`` as set too)."""
    v = ENV_BOOL.get(str(value).strip().lower())
    if v is None:
        raise UsageError(f"{name} must be 0 or 1, not {value!r}")
    return v


def check_timer(value: Any, name: str = "--timer") -> str:
    if value not in TIMERS:
        raise UsageError(f"unknown timer '{value}'; use one of {', '.join(TIMERS)}")
    return value


def index_arg(text: str) -> int:
    """argparse type of a device index: ASCII digits only (``int()`` reads the Arabic-Indic
    ``١`` as 1 too, and the op then ran on device 1)."""
    t = str(text).strip()
    if not (t.isascii() and t.isdigit()):
        raise argparse.ArgumentTypeError(f"invalid device index {text!r}: give a whole number >= 0 in ASCII digits")
    return int(t)


def _at_least_zero(message: str) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        if int(value) < 0:
            raise UsageError(message.format(name=name, value=value))
        return int(value)

    return check


#: ``--input-seed``'s word for "leave the suite's random generators as they are"
INPUT_SEED_OFF = "off"


def check_input_seed(value: Any, name: str = "--input-seed") -> str:
    """``off``, or a whole number 0 .. 2**32 - 1 (NumPy's limit), as text."""
    v = str(value).strip().lower()
    if v == INPUT_SEED_OFF:
        return v
    try:
        n = int(v)
    except ValueError:
        n = -1
    if not 0 <= n < 2**32:
        raise UsageError(f"{name} {value!r}: give a whole number from 0 to 4294967295, or off")
    return str(n)


def _choice(words: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, name: str) -> str:
        v = str(value).strip().lower()
        if v not in words:
            raise UsageError(f"{name} {value!r}: use one of {', '.join(words)}")
        return v

    return check


def _dtypes(value: Any, name: str) -> list[str] | None:
    return parse_dtypes(value) if value is not None else None


def _shape_mode(value: Any, name: str) -> str:
    if value not in SHAPE_MODES:
        check_path(value, name)
    return value


def _dismiss(value: Any, name: str) -> str:
    if value.strip().lower() != "none":  # 'none': no dismiss list
        check_path(value, name)
    return value


def _executor(value: Any, name: str) -> str:
    if value not in EXECUTORS:
        raise UsageError(f"{name} {value!r}: use one of {', '.join(EXECUTORS)}")
    return value


def _names(value: Any, name: str) -> list[str]:
    """``A,B_*`` (or a list): variable names, each maybe ending in ``*`` (a prefix)."""
    items = list(value) if isinstance(value, (list, tuple)) else re.split(r"[,\s]+", str(value))
    out = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", item):
            raise UsageError(f"{name}: {item!r} is no variable name: give comma-separated NAME or PREFIX*")
        if item not in out:
            out.append(item)
    return out


def _args(value: Any, name: str) -> list[str]:
    return [str(a) for a in value or []]


# -- caches: where opscreen and its children keep what outlives a process ---------------

#: A warm worker's recycle bounds: knobs of the environment only (no flag), each a positive
#: number. On an H200 (bench/results/2026-11-30-h200-workers.md) a FlagGems worker held 0.8 GiB
#: after its first op and grew by a median 66 MiB per op (1.6 GiB after 16); an op could leave up
#: to 1 GiB of device memory allocated (a leak the hygiene cannot free). The host bound sits above
#: 100 ops of that growth. The canary's (a diagnostic, ``OPSCREEN_WORKER_CANARY=1``: device time
#: per kernel of a fixed graph of tiny kernels, opscreen.child.worker.canary_us): a worker whose
#: canary reads this fraction over its own reading after the imports is replaced. The state
#: found on an H200 (+19 %, 0.93 -> 1.11 us a kernel: a second stream's work, then the default
#: stream's) is now reached by every process before it measures (opscreen.child.persist.settle);
#: settled, the canary reads within 0.3 %.
WORKER_BOUNDS = MappingProxyType({
    "rss_mb": ("OPSCREEN_WORKER_MAX_RSS_MB", 8192.0),  # resident memory after an op (MiB)
    "device_mb": ("OPSCREEN_WORKER_MAX_DEVICE_MB", 2048.0),  # device memory still allocated after the hygiene (MiB)
    "canary_tol": ("OPSCREEN_WORKER_CANARY_TOL", 0.05),  # the canary's rise over its start (a fraction)
})


def _env_number(name: str, environ: Mapping[str, str]) -> tuple[str, float | None]:
    """``environ[name]`` stripped and as a number (-1.0 where it is none; None where unset or empty)."""
    text = (environ.get(name) or "").strip()
    if not text:
        return text, None
    try:
        return text, float(text)
    except ValueError:
        return text, -1.0


def positive_env(name: str, default: float, environ: Mapping[str, str]) -> float:
    """A positive number from ``environ[name]`` (unset or empty: ``default``); another value
    is a :class:`UsageError` that names the variable and its default."""
    text, value = _env_number(name, environ)
    if value is None:
        return default
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{name}={text!r} is not a positive number; set it to one (default {default:g}) or unset it")
    return value


#: How long one way of enumerating devices may take (s): knobs of the environment only,
#: each a positive number of seconds up to MAX_SECONDS.
ENUMERATION_TIMEOUTS = MappingProxyType({
    "cli": ("OPSCREEN_CLI_TIMEOUT", 5.0),  # a vendor CLI (nvidia-smi, ...)
    "probe": ("OPSCREEN_PROBE_TIMEOUT", 90.0),  # the torch probe in the suite's interpreter
})


def enumeration_timeout(key: str, environ: Mapping[str, str]) -> float:
    """:data:`ENUMERATION_TIMEOUTS`' ``key`` from ``environ``; a bad value is one line (a
    negative one made every probe time out at once: "no cpu devices found")."""
    name, default = ENUMERATION_TIMEOUTS[key]
    value = positive_env(name, default, environ)
    if value > MAX_SECONDS:
        raise UsageError(f"{name}={environ.get(name)!r} is more than {MAX_SECONDS} s (a year); "
                         f"set it to a positive number of seconds (default {default:g}) or unset it")
    return value


def enumeration_timeouts(environ: Mapping[str, str]) -> dict[str, float]:
    """Every enumeration timeout, read (and so checked) before anything is written."""
    return {key: enumeration_timeout(key, environ) for key in ENUMERATION_TIMEOUTS}


def worker_bounds(environ: Mapping[str, str]) -> dict[str, float]:
    """The recycle bounds (:data:`WORKER_BOUNDS`) from ``environ``: the commands read them before
    anything is written, so a bad value is one line and nothing else."""
    return {key: positive_env(env, default, environ) for key, (env, default) in WORKER_BOUNDS.items()}


#: The harness's device telemetry (opscreen.op.telemetry, docs/telemetry.md): milliseconds between
#: two readings of the device's clocks, power, temperature and clock-event reasons while an op's
#: child runs (NVML or amdsmi, from a thread of the harness, never inside the child); 0 turns the
#: sampling off (the device's state is still read once per op). 50 ms is a few library calls
#: twenty times a second, and still 20 readings in a measurement of one second.
TELEMETRY_MS = ("OPSCREEN_TELEMETRY_MS", 50.0)
TELEMETRY_MAX_MS = 60000.0


def telemetry_interval_ms(environ: Mapping[str, str]) -> float:
    """:data:`TELEMETRY_MS` from ``environ``: 0 (off) or 1 to 60000 ms; another value is one line."""
    name, default = TELEMETRY_MS
    text, value = _env_number(name, environ)
    if value is None:
        return default
    if not (value == 0 or 1 <= value <= TELEMETRY_MAX_MS):
        raise UsageError(f"{name}={text!r} is neither 0 (off) nor a number of milliseconds from 1 to "
                         f"{TELEMETRY_MAX_MS:g}; set one (default {default:g}) or unset it")
    return value


#: The root of opscreen's caches (the marker scan's, and the kernel caches' default).
CACHE_DIR_ENV = "OPSCREEN_CACHE_DIR"
#: Kernel caches every child gets: name -> the environment variable the library reads.
#: A value the user set wins; else ``<cache root>/<name>``, shared by every op, retry,
#: repeat, resume and the next screen, so compiled kernels are not compiled again.
KERNEL_CACHES = MappingProxyType({"triton": "TRITON_CACHE_DIR", "flaggems": "FLAGGEMS_CACHE_DIR"})


# These folders are computed here, not by platformdirs: its user_cache_dir and user_data_dir
# read os.environ, not the mapping these functions are given, and name the same folders on
# Linux (why, in full: docs/install.md, "Runtime dependencies"). The one rule of its XDG
# handling that matters here is kept: a relative XDG value is ignored (xdg_home).


def xdg_home(environ: Mapping[str, str], key: str, *default: str) -> str:
    """``environ[key]`` (an XDG base directory) when it is an absolute path, else
    ``~/<default>``: the XDG Base Directory spec (and platformdirs) ignore a relative value,
    which would name another folder for a child that runs in the suite's directory."""
    value = environ.get(key) or ""
    return value if os.path.isabs(value) else os.path.join(os.path.expanduser("~"), *default)


def cache_root(environ: Mapping[str, str]) -> str:
    """``$OPSCREEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/opscreen``, else ``~/.cache/opscreen``."""
    if environ.get(CACHE_DIR_ENV):
        return environ[CACHE_DIR_ENV]
    return os.path.join(xdg_home(environ, "XDG_CACHE_HOME", ".cache"), "opscreen")


FLOORS_DIR_ENV = "OPSCREEN_FLOORS_DIR"


def data_root(environ: Mapping[str, str]) -> str:
    """opscreen's data (floors tables, the results store): ``$XDG_DATA_HOME/opscreen``, else
    ``~/.local/share/opscreen``."""
    return os.path.join(xdg_home(environ, "XDG_DATA_HOME", ".local", "share"), "opscreen")


def floors_dir(environ: Mapping[str, str]) -> str:
    """The user's floors tables (``opscreen calibrate`` writes there, ``compare`` looks there
    first): ``$OPSCREEN_FLOORS_DIR``, else ``<data root>/floors``."""
    if environ.get(FLOORS_DIR_ENV):
        return environ[FLOORS_DIR_ENV]
    return os.path.join(data_root(environ), "floors")


PEAKS_DIR_ENV = "OPSCREEN_PEAKS_DIR"


def peaks_dir(environ: Mapping[str, str]) -> str:
    """The devices' peaks files (``opscreen devices --peaks`` writes there, ``summary`` reads
    them): ``$OPSCREEN_PEAKS_DIR``, else ``<data root>/peaks``."""
    if environ.get(PEAKS_DIR_ENV):
        return environ[PEAKS_DIR_ENV]
    return os.path.join(data_root(environ), "peaks")


STORE_DB_ENV = "OPSCREEN_DB"


def store_db(environ: Mapping[str, str]) -> str:
    """The results store's database URL (``opscreen store``, ``history``, ``publish``):
    ``$OPSCREEN_DB``, else the SQLite file ``<data root>/store.sqlite``."""
    if environ.get(STORE_DB_ENV):
        return environ[STORE_DB_ENV]
    return "sqlite:///" + os.path.join(data_root(environ), "store.sqlite")


def check_cache_dir(path: str | os.PathLike, name: str) -> str:
    """A cache folder: a name the system can look up that is not a file (it need not exist)."""
    check_path(path, name)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{name} {os.fspath(path)!r} is a file, not a folder: give a folder for the cache")
    return os.fspath(path)


def checked_cache_root(environ: Mapping[str, str]) -> str:
    """:func:`cache_root`, checked (:func:`check_cache_dir`) where the user set it."""
    root = cache_root(environ)
    if environ.get(CACHE_DIR_ENV):
        check_cache_dir(root, f"${CACHE_DIR_ENV}")
    return root


def kernel_caches(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """name -> ``{"env", "dir", "source"}`` (``user``: set in ``environ``; ``default``: under :func:`cache_root`)."""
    out = {}
    for name, key in KERNEL_CACHES.items():
        if environ.get(key):
            out[name] = {"env": key, "dir": environ[key], "source": "user"}
        else:
            out[name] = {"env": key, "dir": os.path.join(cache_root(environ), name), "source": "default"}
    return out


# -- declarations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One option, declared once. ``check(value, label) -> value`` parses and validates a
    value from any source; ``label`` names the option in its messages."""

    name: str  # attribute of the request, and argparse dest
    flags: tuple[str, ...]  # () for a positional
    help: str | Mapping[str, str]  # str, or command -> str
    commands: tuple[str, ...] = BOTH
    default: Any = None
    env: str | None = None
    env_commands: tuple[str, ...] = ()  # the commands that read ``env``
    check: Callable[[Any, str], Any] | None = None
    label: str | None = None  # the name in a validation message (default: the first flag)
    caliber: bool = False
    key: str | Mapping[str, str] | None = None  # recorded-settings key; None: not recorded
    empty: str | Mapping[str, str] | None = None  # hint when given as ''
    path: bool = False  # a path that must be lookable-up
    argparse: Mapping[str, Any] | None = None  # type, choices, nargs, metavar, action ...
    group: str | None = None  # a mutually exclusive group
    negative: str | None = None  # ``--no-x`` for a boolean
    auto: Mapping[str, Any] | None = None  # command -> what the value "auto" means (recorded resolved)
    before: Any = None  # what a recorded run made before this setting existed ran with (None: the default)

    def takes(self, command: str) -> bool:
        return command in self.commands

    def reads_env(self, command: str) -> bool:
        return self.env is not None and command in self.env_commands

    def key_for(self, command: str) -> str | None:
        return self.key.get(command) if isinstance(self.key, Mapping) else self.key

    def text(self, what: str | Mapping[str, str] | None, command: str) -> str | None:
        return what.get(command) if isinstance(what, Mapping) else what

    def help_for(self, command: str) -> str:
        """The help of this option for ``command``, ``{default}`` filled in."""
        text = self.text(self.help, command) or ""
        return text.format(default=self.default) if "{default" in text else text

    @property
    def display(self) -> str:
        return self.label or (self.flags[0] if self.flags else self.name.upper())

    def parse(self, value: Any) -> Any:
        return self.check(value, self.display) if self.check and value is not None else value

    def resolved(self, value: Any, command: str) -> Any:
        """``value`` with "auto" replaced by what it means for ``command`` (:attr:`auto`)."""
        return self.auto[command] if self.auto is not None and value == "auto" else value


def _m(**kw) -> MappingProxyType:
    return MappingProxyType(kw)


SETTINGS: tuple[Setting, ...] = (
    # where it runs (also taken by other commands: opscreen.commands._common.add_backend_arguments)
    Setting("backend", ("--backend",), "backend name or alias (default: $ZL_BACKEND, else auto-detected, else cpu)",
            env="ZL_BACKEND", env_commands=(OP,)),  # read by opscreen.backends.select; for run, a resumed run's wins
    Setting("cap", ("--cap",), "override a capability flag of the backend (repeatable; also $OPSCREEN_CAPS)",
            env="OPSCREEN_CAPS", argparse=_m(action="append", default=[], metavar="KEY=on|off")),  # read by backends.select
    # what to run
    Setting("op", (), "op name (a pytest marker of the suite); default $OP", commands=(OP,), env="OP",
            env_commands=(OP,), label="OP", empty="give an op name (a pytest marker of the suite)", argparse=_m(nargs="?")),
    Setting("op_file", ("--op-file",), "benchmark file that holds the op (default $OP_FILE; else found by marker scan)",
            commands=(OP,), env="OP_FILE", env_commands=(OP,), empty="give a benchmark file such as test_abs.py"),
    Setting("test_node", ("--test-node",), "a pytest node id passed through as given (default $TEST_NODE)",
            commands=(OP,), env="TEST_NODE", env_commands=(OP,), empty="give a pytest node id"),
    Setting("suite", ("--suite",), "suite root (default $FLAGGEMS_ROOT, else the bundled sample suite)", env="FLAGGEMS_ROOT",
            env_commands=(OP,), path=True,
            empty="give the suite root (leave --suite out for $FLAGGEMS_ROOT or the bundled sample suite)"),
    Setting("python", ("--python",), "the suite's Python interpreter (default: this one)", path=True,
            empty="give the suite's interpreter (leave --python out for this one)"),
    Setting("device", ("--device",), "device index (default 0)", commands=(OP,), default=0, key="device",
            check=_at_least_zero("{name} {value}: give a device index >= 0"), argparse=_m(type=index_arg)),
    Setting("devices", ("--devices", "--gpus"), "devices to use: 0,1,4-7 or 'all' (default all: the devices the backend "
            f"enumerates; on cpu, slots 0..min({CPU_ALL_SLOTS},cores)-1)", commands=(RUN,)),
    Setting("ops", ("--ops",), "comma-separated ops (markers) to run (default: every op of the suite)", commands=(RUN,),
            group="ops", empty="give comma-separated op names (leave --ops out for every op)"),
    Setting("ops_file", ("--ops-file",), "file with one op per line ('#' comments, blank lines ignored)",
            commands=(RUN,), group="ops", path=True, empty="give a file with one op per line"),
    Setting("inventory", ("--inventory",), "take the op list from an inventory file (opscreen inventory)",
            commands=(RUN,), group="ops", path=True, empty="give an inventory file"),
    Setting("changed_since", ("--changed-since",), "screen only the ops whose implementation or benchmark changed "
            "between REV and the suite checkout's HEAD (docs/gate.md)", commands=(RUN,), group="ops",
            argparse=_m(metavar="REV"), empty="give a commit, branch or tag of the suite's checkout"),
    Setting("write_ops", ("--write-ops",), "write the run's op list to FILE, one per line (an --ops-file for "
            "another run, such as the base of a pull request)", commands=(RUN,), path=True,
            argparse=_m(metavar="FILE"), empty="give a file to write the op list to"),
    Setting("out", ("--out",), {OP: "output directory (default runs/op/<op>)",
                                RUN: "run directory (default runs/run-<UTC time>); an existing one is resumed"}, path=True,
            empty={OP: "give an output directory (leave --out out for runs/op/<op>)",
                   RUN: "give a run directory (leave --out out for runs/run-<time>)"}),
    # how it is measured
    Setting("timer", ("--timer",), "timer (default auto: graph where capture is possible)", default="auto",
            check=check_timer, caliber=True, key={OP: "timer_requested", RUN: "timer"}, argparse=_m(choices=TIMERS)),
    Setting("dtypes", ("--dtypes",), "comma-separated dtypes passed to the suite (default $DTYPES, else each op's own)",
            env="DTYPES", env_commands=BOTH, check=_dtypes, caliber=True, key="dtypes",
            empty={OP: "give dtypes such as float16,bfloat16 (leave --dtypes out for the op's own)",
                   RUN: "give dtypes such as float16,bfloat16 (leave --dtypes out for each op's own)"}),
    Setting("shape_mode", ("--shape-mode",), "upstream (default, $SHAPE_MODE), curated, or a shape file path",
            default="upstream", env="SHAPE_MODE", env_commands=BOTH, check=_shape_mode, caliber=True, key="shape_mode",
            empty="give upstream, curated or a shape file"),
    Setting("level", ("--level",), "suite level (default {default})", default="core", caliber=True, key="level",
            empty="give the suite level (core or comprehensive)"),
    Setting("use_flagtune", ("--use-flagtune",), "USE_FLAGTUNE for the child (default $USE_FLAGTUNE, else 0)",
            default="0", env="USE_FLAGTUNE", env_commands=BOTH, check=validate_flag01, label="USE_FLAGTUNE",
            caliber=True, key="use_flagtune", argparse=_m(choices=("0", "1"))),
    Setting("use_flagtune_cost_model", ("--use-flagtune-cost-model",),
            "USE_FLAGTUNE_COST_MODEL for the child (default $USE_FLAGTUNE_COST_MODEL, else 0)", default="0",
            env="USE_FLAGTUNE_COST_MODEL", env_commands=BOTH, check=validate_flag01, label="USE_FLAGTUNE_COST_MODEL",
            caliber=True, key="use_flagtune_cost_model", argparse=_m(choices=("0", "1"))),
    Setting("triton_cache_autotuning", ("--triton-cache-autotuning",), "TRITON_CACHE_AUTOTUNING for the child: 1 "
            "stores the winners of every plain @triton.autotune in the Triton cache and reuses them in later "
            "processes (default $TRITON_CACHE_AUTOTUNING, else 0; docs/timing.md)", default="0",
            env="TRITON_CACHE_AUTOTUNING", env_commands=BOTH, check=validate_env_bool, label="TRITON_CACHE_AUTOTUNING",
            caliber=True, key="triton_cache_autotuning", argparse=_m(choices=("0", "1"))),
    Setting("input_seed", ("--input-seed",), "seed of torch's, Python's and NumPy's generators at the start of every "
            "test and after every measurement, so that every process draws the same inputs (default {default}, "
            "$OPSCREEN_INPUT_SEED; off: the suite's own randomness; docs/timing.md)", default="0",
            env="OPSCREEN_INPUT_SEED", env_commands=BOTH, check=check_input_seed, caliber=True, key="input_seed",
            empty="give a whole number, or off", before=INPUT_SEED_OFF),
    Setting("timeout", ("--timeout",), "seconds per op process before its process group is killed (default {default:g})",
            default=1800.0, check=check_timeout, key="timeout", argparse=_m(type=float)),
    Setting("grace", ("--grace",), "seconds between SIGTERM and SIGKILL of a child group (default {default:g})", default=10.0,
            check=check_grace, key="grace", argparse=_m(type=float)),
    Setting("cpu_pinning", ("--cpu-pinning",), "auto (default, $OPSCREEN_CPU_PINNING): each lane's children on CPUs "
            "of their own near their device, threads capped to them; off: where opscreen runs (docs/timing.md)",
            default="auto", env="OPSCREEN_CPU_PINNING", env_commands=BOTH, check=_choice(CPU_PINNING), key="cpu_pinning",
            argparse=_m(choices=CPU_PINNING), empty="give auto or off"),
    Setting("repeats", ("--repeats",), "runs per op (each a fresh process, or one warm worker with --isolation "
            "worker); >1 records per-case medians and the spread between runs (default {default}; docs/timing.md)", default=1, check=validate_repeats, caliber=True, key="repeats"),
    Setting("isolation", ("--isolation",), {
        RUN: "worker: one warm process per device runs op after op (faster; see docs/workers.md before trusting "
             "its small-kernel numbers), and an op that does not pass there runs again in a fresh process; "
             "op: a fresh process per op (default auto: op; $OPSCREEN_ISOLATION)",
        OP: "with --repeats: worker runs the repeats in one warm process, op in a fresh process each, so that "
            "their spread is the one between processes (default auto: op; $OPSCREEN_ISOLATION)"},
            default="auto", env="OPSCREEN_ISOLATION", env_commands=BOTH, check=_isolation, key="isolation",
            empty="give worker or op", argparse=_m(choices=ISOLATIONS), caliber=True, auto=AUTO_ISOLATION),
    Setting("max_ops_per_worker", ("--max-ops-per-worker",), "ops a warm worker runs before a fresh one takes over "
            "(default {default}; $OPSCREEN_MAX_OPS_PER_WORKER)", default=100, env="OPSCREEN_MAX_OPS_PER_WORKER",
            env_commands=BOTH, check=_positive("{name} {value!r}: give a whole number of ops >= 1"),
            key="max_ops_per_worker", empty="give a number of ops"),
    Setting("retries", ("--retries",), "extra attempts for a failed op, in fresh processes (default {default})", commands=(RUN,),
            default=2, check=_at_least_zero("{name} must be >= 0"), key="retries", argparse=_m(type=int)),
    Setting("fatal_threshold", ("--fatal-threshold",), "device-fatal exits in a row (distinct ops) that mark a device "
            "bad (default {default}; 0: never)", commands=(RUN,), default=3, check=_at_least_zero("{name} must be >= 0"),
            key="fatal_threshold", argparse=_m(type=int)),
    # where the ops execute: this machine, or every node of a Ray cluster (docs/batch.md)
    Setting("executor", ("--executor",), "where the ops run: local (this machine's devices, default) or ray (the "
            "accelerators of every node of a Ray cluster; pip install -e '.[ray]')", commands=(RUN,), default="local",
            check=_executor, key="executor", argparse=_m(choices=EXECUTORS)),
    Setting("address", ("--address",), "with --executor ray: the cluster, auto (the one this node joined with 'ray "
            "start') or HOST:PORT (default $RAY_ADDRESS, else a Ray instance started on this machine)", commands=(RUN,),
            key="address", empty="give auto or HOST:PORT (leave --address out for $RAY_ADDRESS or a local Ray instance)"),
    Setting("ray_env", ("--ray-env",), "with --executor ray: more variables of this environment that every node's "
            "ops get, comma-separated NAME or PREFIX* (always sent: PYTHONPATH, OPSCREEN_*, USE_FLAGTUNE*, TRITON_*, "
            "FLAGGEMS_*, GEMS_*; default $OPSCREEN_RAY_ENV)", commands=(RUN,), env="OPSCREEN_RAY_ENV",
            env_commands=(RUN,), default=(), check=_names, key="ray_env", empty="give variable names such as MY_VAR,MY_PREFIX_*"),
    Setting("steal", ("--steal",), "idle devices take queued ops from the busiest (default)", commands=(RUN,),
            default=True, key="steal", negative="--no-steal", argparse=_m(action="store_true")),
    Setting("placement_shift", ("--placement-shift",), "place each op K devices along from its hashed device "
            "(default {default}); opscreen calibrate screens its second fresh-process run with 1, so that every op "
            "of it runs on another chip than in the first", commands=(RUN,), default=0,
            check=_at_least_zero("{name} must be >= 0"), key="placement_shift", argparse=_m(type=int, metavar="K")),
    # runs to continue or repeat
    Setting("replay_from", ("--replay-from",), {
        OP: "an earlier op output dir: run again with its recorded settings (default $REPLAY_FROM)",
        RUN: "an earlier RUN_DIR: run its ops that did not pass (or --ops) with its recorded settings"},
        env="REPLAY_FROM", env_commands=(OP,), path=True,
        empty={OP: "give the output dir of an earlier 'opscreen op'", RUN: "give an earlier run directory"}),
    Setting("shard", ("--shard",), "I/N: run only the ops whose stable hash falls in shard I of N (0 <= I < N)",
            commands=(RUN,), empty="give I/N (leave --shard out for every op)"),
    Setting("resume", ("--resume",), "resume RUN_DIR (default when it exists)", commands=(RUN,),
            negative="--no-resume", argparse=_m(action="store_true")),
    Setting("dismiss", ("--dismiss",), "dismiss list (ops not to run, with reasons); 'none' disables the default list",
            commands=(RUN,), check=_dismiss, empty="give a dismiss file, or 'none'"),
    Setting("plain", ("--plain",), "plain lines even on a terminal (no live view)", commands=(RUN,), default=False,
            argparse=_m(action="store_true")),
    # everything after the first ``--``: cli.main splits the command line there before argparse
    # runs (argparse mixes a ``--`` tail into optional positionals such as ``opscreen op [OP]``),
    # so this positional only shows the syntax in --help and catches stray words before ``--``
    Setting("extra_args", (), "extra pytest arguments, after --: e.g. -- --warmup 25 --iter 100 (the suite's do_bench "
            "budgets: only --timer direct uses them; give an option's value in the same word, --output=PATH)", default=(), check=_args, caliber=True, key="extra_args",
            argparse=_m(dest="pytest_args", nargs="*", metavar="-- PYTEST_ARGS")),
)
BY_NAME: Mapping[str, Setting] = MappingProxyType({s.name: s for s in SETTINGS})
# A resume or replay that asks for other values of these is refused (besides backend, vendor and suite).
CALIBER = tuple(s.name for s in SETTINGS if s.caliber)
# What one op and a batch share: how each op is measured (a batch hands them to each op's request).
MEASURE = tuple(s.name for s in SETTINGS if s.key is not None and s.commands == BOTH)


def declared(command: str) -> list[Setting]:
    return [s for s in SETTINGS if s.takes(command)]


def default(name: str) -> Any:
    return copy.copy(BY_NAME[name].default)


def defaults(command: str) -> dict[str, Any]:
    """name -> default of the recorded settings ``command`` takes."""
    return {s.name: default(s.name) for s in declared(command) if s.key_for(command)}


def _dest(s: Setting) -> str:
    return (s.argparse or {}).get("dest", s.name)


# -- derived: the parser -----------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser, command: str, names: tuple[str, ...] | None = None) -> None:
    """The options ``command`` takes (or only ``names``), in declaration order."""
    groups: dict[str, Any] = {}
    for s in declared(command):
        if names is not None and s.name not in names:
            continue
        if s.group and s.group not in groups:
            groups[s.group] = p.add_mutually_exclusive_group()
        _add_argument(groups[s.group] if s.group else p, s, command)


def _add_argument(target, s: Setting, command: str) -> None:
    kw = dict(s.argparse or {})
    if s.negative:
        kw["default"] = None
    if not s.flags:
        target.add_argument(kw.pop("dest", s.name), help=s.help_for(command), **kw)
        return
    kw.setdefault("dest", s.name)
    target.add_argument(*s.flags, help=s.help_for(command), **kw)
    if s.negative:
        target.add_argument(s.negative, dest=s.name, action="store_false", help=f"the opposite of {s.flags[0]}")


# -- derived: given values ----------------------------------------------------------------


def given(args, command: str, name: str) -> Any:
    """The value given on the command line for ``name`` (None when not given)."""
    s = BY_NAME[name]
    v = getattr(args, _dest(s), None)
    if not s.flags and (s.argparse or {}).get("nargs") == "*":
        return list(v) if v else None
    return v


def check_given_values(args, command: str) -> None:
    """No option given as '' (no silent default) and every path lookable-up: one line."""
    for s in declared(command):
        hint = s.text(s.empty, command)
        if hint:
            check_given(given(args, command, s.name), s.display, hint)
    for s in declared(command):
        if s.path:
            check_path(given(args, command, s.name), s.display)


def env_value(s: Setting, command: str, environ: Mapping[str, str]) -> str | None:
    if not s.reads_env(command):
        return None
    v = environ.get(s.env)
    return v if v not in (None, "") else None


# -- derived: precedence with provenance --------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """Values after flag > environment > recorded > default, and where each came from
    (``flag``, ``env NAME``, ``recorded`` or ``default``)."""

    command: str
    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def __getitem__(self, name: str) -> Any:
        return copy.copy(self.values[name])

    def explicit(self, name: str) -> bool:
        return self.sources.get(name, "default").startswith(("flag", "env"))

    def provenance(self) -> dict[str, str]:
        return dict(self.sources)

    def over(self, recorded: Mapping[str, Any] | None) -> "Resolved":
        """These values over a recorded run's settings: each value still at its default
        takes the recorded one (parsed and validated) where there is one."""
        values, sources = dict(self.values), dict(self.sources)
        for name, source in self.sources.items():
            s = BY_NAME[name]
            key = s.key_for(self.command)
            if source == "default" and key and key in (recorded or {}):
                if recorded[key] is not None or s.default is None:
                    values[name], sources[name] = s.parse(recorded[key]), "recorded"
            elif source == "default" and key and recorded and s.before is not None:
                values[name], sources[name] = s.parse(s.before), "recorded"  # the run predates the setting
        return Resolved(self.command, MappingProxyType(values), MappingProxyType(sources))


def resolve(command: str, args, environ: Mapping[str, str], recorded: Mapping[str, Any] | None = None) -> Resolved:
    """The settings ``command`` takes, flag > environment (for the commands that read it) >
    ``recorded`` (a run resumed or replayed) > default: parsed, validated, with provenance."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in declared(command):
        flag = given(args, command, s.name)
        env = env_value(s, command, environ)
        if flag is not None:
            values[s.name], sources[s.name] = s.parse(flag), "flag"
        elif env is not None:
            values[s.name], sources[s.name] = s.parse(env), f"env {s.env}"
        else:
            values[s.name], sources[s.name] = copy.copy(s.default), "default"
    return Resolved(command, MappingProxyType(values), MappingProxyType(sources)).over(recorded)


def caliber_clashes(resolved: Resolved, recorded: Mapping[str, Any]) -> list[str]:
    """Caliber settings asked explicitly (flag or environment) with another value than the recorded run's."""
    out = []
    for name in CALIBER:
        s = BY_NAME[name]
        key = s.key_for(resolved.command)
        if key and key not in recorded and s.before is not None and recorded:
            recorded = {**recorded, key: s.before}  # a run made before the setting existed
        if name in resolved.values and resolved.explicit(name) and key in recorded:
            asked, had = s.resolved(resolved.values[name], resolved.command), recorded[key]
            if _json(asked) != _json(had):
                out.append(f"{key}: recorded {had!r}, asked {asked!r}")
    return out


def recorded_clashes(a: Mapping[str, Any], b: Mapping[str, Any], command: str = RUN) -> list[str]:
    """Caliber settings two recorded runs (their ``settings`` dicts) hold with different
    values (``opscreen merge``: shards of one screen are measured one way)."""
    out = []
    for name in CALIBER:
        key = BY_NAME[name].key_for(command)
        if key and (key in a or key in b) and _json(a.get(key)) != _json(b.get(key)):
            out.append(f"{key} {a.get(key)!r} vs {b.get(key)!r}")
    return out


def _json(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def record(command: str, obj: Any) -> dict[str, Any]:
    """The recorded settings of ``obj`` (an OpRequest or BatchConfig): key -> a JSON-ready copy."""
    out: dict[str, Any] = {}
    for s in declared(command):
        key = s.key_for(command)
        if key and hasattr(obj, s.name):
            out[key] = _json(copy.copy(getattr(obj, s.name)))
    return out
