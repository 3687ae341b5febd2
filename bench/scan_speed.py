"""Time the AST marker scan of a suite: cold (no cache) and warm (cached).

    python bench/scan_speed.py [SUITE_ROOT] [--repeat N]

SUITE_ROOT defaults to $FLAGGEMS_ROOT, else the bundled sample suite. Targets for
FlagGems (~700 files): cold well under 2 s, warm under 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.providers.markers import op_index, scan_suite  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("FLAGGEMS_ROOT") or str(Path(__file__).resolve().parent.parent / "src" / "opscreen" / "sample_suite")
    p.add_argument("root", nargs="?", default=default)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    root = Path(args.root)
    cold, warm = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            t0 = time.perf_counter()
            files = scan_suite(root, cache_dir=Path(cache))
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            again = scan_suite(root, cache_dir=Path(cache))
            warm.append(time.perf_counter() - t0)
            assert again == files
    idx = op_index(files)
    tests = sum(len(f.tests) for f in files)
    print(f"suite: {root}")
    print(f"files: {len(files)}  tests: {tests}  distinct markers: {len(idx)}  scan errors: {sum(1 for f in files if f.error)}")
    print(f"cold scan: median {statistics.median(cold):.3f} s  (min {min(cold):.3f}, max {max(cold):.3f}, n={len(cold)})")
    print(f"warm scan: median {statistics.median(warm):.3f} s  (min {min(warm):.3f}, max {max(warm):.3f}, n={len(warm)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
