"""Merging the per-dtype output of a level-2 dtype fallback into the op's directory.

After a level-2 fallback each dtype ran alone in ``<op dir>/dtypes/<name>/`` (one
run_op directory per dtype). The passing dtypes' ``run.log`` and ``record.log``
are merged into the op dir's own (the level-0/1 failure stays under
``attempts/``), with the identity and child config of the first passing dtype;
when none passed, the summary is appended to the op dir's ``run.log``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable


def merge_level2(op_dir: Path, passed: list[str], failed: dict[str, str], dirname: Callable[[str], str]) -> dict:
    """Merge the passing dtypes' logs into ``op_dir``; ``dirname(dtype)`` names a
    dtype's sub directory under ``dtypes/``. Returns result.json's dtype fields."""
    lines = [
        f"[opscreen] dtype fallback level 2: each dtype alone; passed: {','.join(passed) or 'none'}"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + "\n"
    ]
    record: list[str] = []
    first_ok: Path | None = None
    for d in passed:
        sub = op_dir / "dtypes" / dirname(d)
        first_ok = first_ok or sub
        lines.append(f"[opscreen] ===== dtype {d} (from dtypes/{dirname(d)}/run.log) =====\n")
        lines.append(_read(sub / "run.log"))
        rec = _read(sub / "record.log")
        if rec:
            record.append(rec if rec.endswith("\n") else rec + "\n")
    for d, err in failed.items():
        lines.append(f"[opscreen] ===== dtype {d}: not kept: {err} (see dtypes/{dirname(d)}/run.log) =====\n")
    if passed:
        # the level-0/1 failure is kept under attempts/; the op dir shows the kept results
        _write(op_dir / "run.log", "".join(lines))
        _write(op_dir / "record.log", "".join(record))
        for name in ("run_identity.json", "child_config.json"):
            if first_ok is not None and (first_ok / name).is_file():
                shutil.copyfile(first_ok / name, op_dir / name)
    else:
        with open(op_dir / "run.log", "a", encoding="utf-8") as fh:
            fh.write("".join(lines))
    return {"dtypes_passed": list(passed), "dtypes_failed": dict(failed)}


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
