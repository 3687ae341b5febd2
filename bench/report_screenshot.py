"""Render `opscreen report` for a run dir and screenshot it with headless Chromium.

    .venv/bin/python bench/report_screenshot.py [RUN_DIR] [--against OTHER_RUN] [--png FILE]

Without RUN_DIR it synthesises two runs (tests/synth.py: a baseline A and a
candidate B with a few ops made slower/faster, one op timing out, a newer suite
commit) and screenshots B's report against A. Needs Debian's `chromium`
(apt-get install -y chromium); run as root it passes --no-sandbox.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # synth.py: synthetic run dirs

from opscreen.results.compare import check_caliber, compare_summaries  # noqa: E402
from opscreen.results.report import write_report  # noqa: E402
from opscreen.results.summary import ensure_summary  # noqa: E402
from synth import make_run  # noqa: E402


def _demo_runs(base: Path) -> tuple[Path, Path]:
    def perturb(op: str, dtype: str, si: int, lib_ms: float) -> float:
        if op in ("op0007", "op0019") and dtype == "float16":
            return lib_ms * 1.25  # a regression
        if op == "op0031" and si < 4:
            return lib_ms * 0.8  # an improvement
        if op == "op0042" and dtype == "bfloat16" and si == 2:
            return lib_ms * 1.004  # small: inside the noise band
        return lib_ms

    a, b = base / "run-A", base / "run-B"
    make_run(a, n_ops=120, seed=7)
    make_run(b, n_ops=120, seed=7, perturb=perturb, statuses={"op0050": "timeout"},
             caliber={"suite_commit": "4f1c2e9d0b7a6c5e3d2f1a0b9c8d7e6f5a4b3c2d"})
    return a, b


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    raise SystemExit("no chromium found: apt-get update && apt-get install -y chromium")


def screenshot(html: Path, png: Path, size: str = "1400,2400", timeout: float = 180.0) -> None:
    exe = find_chromium()
    with tempfile.TemporaryDirectory(prefix="opscreen-chromium-") as profile:
        cmd = [
            exe, "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={size}", html.resolve().as_uri(),
        ]  # fmt: skip
        if os.geteuid() == 0:
            cmd.insert(1, "--no-sandbox")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not png.is_file():
            sys.stderr.write(proc.stderr[-2000:])
            raise SystemExit(f"chromium failed (rc {proc.returncode})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", help="run dir (default: synthesise a demo pair)")
    ap.add_argument("--against", help="baseline run dir for the comparison view")
    ap.add_argument("--png", default="report.png", help="screenshot file (default report.png)")
    ap.add_argument("--html", help="report file (default RUN_DIR/report.html)")
    ap.add_argument("--size", default="1400,2400", help="window size W,H (default 1400,2400)")
    args = ap.parse_args()
    tmp = None
    if args.run_dir:
        run_dir = Path(args.run_dir)
        against = Path(args.against) if args.against else None
    else:
        tmp = Path(tempfile.mkdtemp(prefix="opscreen-demo-"))
        against, run_dir = _demo_runs(tmp)
    try:
        s = ensure_summary(run_dir, rebuild=True)
        comp = None
        if against is not None:
            a = ensure_summary(against, rebuild=True)
            chk = check_caliber(a.caliber, s.caliber)
            if not chk.ok:
                raise SystemExit(chk.refusal_text())
            comp = compare_summaries(a, s, check=chk)
        html = Path(args.html) if args.html else run_dir / "report.html"
        write_report(s, html, comp)
        png = Path(args.png)
        screenshot(html, png, args.size)
        print(f"report {html} ({html.stat().st_size / 1024:.0f} KiB) -> screenshot {png} ({png.stat().st_size / 1024:.0f} KiB)")
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
