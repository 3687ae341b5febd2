"""The same inputs in every process: seeds the random generators a suite draws its inputs from.

Loaded with ``-p opscreen.child.inputs``. A suite such as FlagGems draws each case's
inputs with ``torch.randn`` and friends and seeds nothing, so every process measures
other values. For most kernels the values do not matter; for a kernel whose work
depends on them (a median, a sort, a selection, ``nonzero``, a gcd, atomics on random
indices) they do: on an H200 ``nanmedian_out``'s rows read up to 3.6 % apart between two
processes, in either direction, and made 159 of the 237 false calls of the floors
table's out-of-sample evaluation (bench/results/2026-12-06-input-seeds.md).

With the child config's ``input_seed`` a whole number S, torch's generators (every
device's: ``torch.manual_seed``), Python's ``random`` and NumPy's global generator
are seeded with S

* before every test (``pytest_runtest_setup``, first, before its fixtures), so a test's
  first case draws the same inputs in a fresh process, a warm worker's tenth op and
  another run; and
* after every measurement (:func:`reseed`, called by ``opscreen.child.timing`` when the
  replaced timing call returns), so a later case's inputs do not depend on how many
  times the timer called an op that itself draws random numbers (``dropout``,
  ``normal_``): the timer's sample count adapts to the noise and differs between
  processes.

``off`` (``--input-seed off``) leaves the suite's generators alone, as runs made
before the setting existed did. A test that seeds itself is not affected: its own
seed comes after this one. Standard library, pytest and torch only.
"""

from __future__ import annotations

import random
import sys
from typing import Optional

import pytest

from . import config as _config

OFF = "off"

_SEED: list = [None]  # the configured seed (int), or None: off or outside opscreen


def configured_seed(cfg: dict) -> Optional[int]:
    """The child config's ``input_seed`` as an int, or None (``off``, absent, unreadable)."""
    raw = str(cfg.get("input_seed") or OFF).strip().lower()
    if raw == OFF:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def seed_all(seed: int) -> None:
    """Seed torch (every device), Python's ``random`` and NumPy's global generator where
    the process has them; a generator that refuses is left as it was."""
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed(seed)
        except Exception:  # noqa: BLE001 - a NumPy without the legacy generator
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.manual_seed(seed)
        except Exception:  # noqa: BLE001 - a device whose generator cannot be seeded now
            pass


def reseed() -> None:
    """Seed again with the configured seed (nothing when it is off)."""
    if _SEED[0] is not None:
        seed_all(_SEED[0])


def pytest_configure(config):
    try:
        _SEED[0] = configured_seed(_config.load())
    except _config.ConfigError as exc:
        raise pytest.UsageError(f"opscreen.child.inputs: {exc}") from exc


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    reseed()


def pytest_unconfigure(config):
    _SEED[0] = None
