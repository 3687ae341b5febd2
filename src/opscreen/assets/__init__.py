"""Op assets: inventories, curated shapes, the dismiss list.

The default assets ship inside the package, in ``opscreen/assets/data/``, so an
installed opscreen (a wheel, ``pip install .``) finds them as a checkout does; in a
checkout, ``ops/`` is a link to that folder:

- ``shapes.yaml``: the curated shapes for ``SHAPE_MODE=curated`` (FlagGems, accelerator-sized);
- ``shapes.sample.yaml``: the same ops, CPU-sized, for the bundled sample suite;
- ``dismiss.yaml``: the default dismiss list of ``opscreen run`` and ``opscreen dismiss check``;
- ``flaggems-inventory.yaml``: the inventory of FlagGems ed2508b (``--inventory``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "default_asset"]

#: The default assets shipped with the package (``ops/`` of a checkout links here).
DATA_DIR = Path(__file__).resolve().parent / "data"


def default_asset(name: str) -> Path | None:
    """``DATA_DIR / name`` when that file exists, else None (an installation that lacks it)."""
    path = DATA_DIR / name
    return path if path.is_file() else None
