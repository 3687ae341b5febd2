"""Render `opscreen report` for a run dir and screenshot it with headless Chromium.

    .venv/bin/python bench/report_screenshot.py [RUN_DIR] [--against OTHER_RUN] [--png FILE]
        [--size W,H] [--screens N] [--query 'verdict=slower&sort=change'] [--html FILE]
    .venv/bin/python bench/report_screenshot.py --synth timeouts --png t.png
    .venv/bin/python bench/report_screenshot.py --readme          # docs/img/report-demo.png

Without RUN_DIR it synthesises (tests/synth.py) either ``--synth pair`` (default): a
baseline A and a candidate B with a few ops made slower/faster, one op timing out, a
newer suite commit, and screenshots B's report against A; or ``--synth timeouts``: a
screen whose every op timed out after a few cases (no "ok" anywhere, no geometric mean).

``--screens N`` takes one tall screenshot (W x N*H) and cuts it into N files
``FILE-1.png`` .. ``FILE-N.png`` of one screen each (Pillow, matplotlib's own dependency).
``--query`` loads the page with that query string, which the page's script reads as
filter and sort settings (``verdict=slower&sort=judged``), optionally then ``#op-NAME``,
which opens that op's section with its cases (take it with ``--screens``: a one-screen
shot of a page scrolled to an anchor comes out blank in headless Chromium). The script
also prints how many rows of the cases table Chromium shows after the page's script ran
(``--dump-dom``), the check that the script works.

The run dirs are only read: the report goes to ``--html`` (default: beside the PNG, FILE.html;
RUN_DIR/report.html with ``--in-place``), and summaries are built in memory. Needs
Debian's `chromium` (apt-get install -y chromium). Chromium starts headless with a fresh
profile and nothing that reaches the network (--no-sandbox --disable-gpu --disable-quic
--no-first-run --disable-background-networking --disable-component-update --disable-sync).

``--readme`` makes the README's screenshot, ``docs/img/report-demo.png``: the top screen
(1280 x 900) of the demo's report (``runs/demo``; ``bash scripts/demo.sh`` screens it first
when it is absent), reduced to a 256-colour palette with Pillow. The PNG records the
command that made it and the run it shows (text chunks that tests/test_readme_screenshot.py
reads). The one command that regenerates it:

    .venv/bin/python bench/report_screenshot.py --readme
"""

from __future__ import annotations

import argparse
import os
import re
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
from opscreen.results.summary import load_or_build  # noqa: E402
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


def _timeouts_run(base: Path) -> Path:
    d = base / "all-timeout"
    make_run(d, n_ops=3, seed=5, shapes=(4, 4), statuses={f"op{i:04d}": "timeout" for i in range(3)})
    return d


#: how Chromium starts: headless, no sandbox (root, containers), nothing that reaches the
#: network, no scrollbars in the shot; a fresh --user-data-dir is added per call.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
)  # fmt: skip

#: the README's screenshot: what ``--readme`` makes, and from which run dir
README_COMMAND = ".venv/bin/python bench/report_screenshot.py --readme"
README_PNG = "docs/img/report-demo.png"
README_SIZE = (1280, 900)
README_RUN = "runs/demo"
README_MAX_BYTES = 300_000


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    raise SystemExit("no chromium found: apt-get update && apt-get install -y chromium")


def _chromium(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    exe = find_chromium()
    with tempfile.TemporaryDirectory(prefix="opscreen-chromium-") as profile:
        cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _url(html: Path, query: str = "") -> str:
    """The page's URL; ``query`` is a query string, then optionally ``#anchor``."""
    q, _, anchor = query.partition("#")
    return html.resolve().as_uri() + (f"?{q}" if q else "") + (f"#{anchor}" if anchor else "")


def screenshot(html: Path, png: Path, size: str = "1400,2400", timeout: float = 180.0, query: str = "") -> None:
    proc = _chromium([f"--screenshot={png}", f"--window-size={size}", "--virtual-time-budget=5000", _url(html, query)],
                     timeout)
    if proc.returncode != 0 or not png.is_file():
        sys.stderr.write(proc.stderr[-2000:])
        raise SystemExit(f"chromium failed (rc {proc.returncode})")


def screens(html: Path, png: Path, size: str, n: int, query: str = "") -> list[Path]:
    """One screenshot n screens tall, cut into n PNGs of one screen each."""
    from PIL import Image

    w, h = (int(x) for x in size.split(","))
    tall = png.with_name(png.stem + "-tall.png")
    screenshot(html, tall, f"{w},{h * n}", query=query)
    out = []
    with Image.open(tall) as im:
        for i in range(n):
            part = png.with_name(f"{png.stem}-{i + 1}.png")
            im.crop((0, i * h, w, min((i + 1) * h, im.height))).save(part)
            out.append(part)
    tall.unlink()
    return out


def visible_cases(html: Path, query: str = "", timeout: float = 180.0) -> tuple[int, int]:
    """(rows of the cases table Chromium shows after the page's script ran, rows in all)."""
    proc = _chromium(["--dump-dom", "--virtual-time-budget=5000", _url(html, query)], timeout)
    dom = proc.stdout
    i = dom.find('id="cases-table"')
    if proc.returncode != 0 or i < 0:
        sys.stderr.write(proc.stderr[-2000:])
        raise SystemExit(f"chromium --dump-dom failed (rc {proc.returncode})")
    body = dom[i : dom.index("</table>", i)]
    rows = re.findall(r"<tr\b[^>]*>", body)[1:]  # less the header row
    return sum(1 for r in rows if " hidden" not in r), len(rows)


def optimise_png(png: Path, text: dict[str, str]) -> None:
    """Reduce a screenshot to a 256-colour palette (a page of flat colours and text loses
    nothing a reader sees) and record ``text`` as PNG text chunks."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    for k, v in text.items():
        info.add_text(k, v)
    with Image.open(png) as im:
        pal = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    pal.save(png, optimize=True, pnginfo=info)


def readme_shot(run_dir: Path | None, png: Path | None) -> int:
    """The README's screenshot: the demo's report, top screen, optimised (see ``--readme``)."""
    run_dir = run_dir or ROOT / README_RUN
    png = png or ROOT / README_PNG
    if not (run_dir / "ops_status.csv").is_file():
        print(f"no screen in {run_dir}: running scripts/demo.sh", flush=True)
        env = dict(os.environ, OPSCREEN_DEMO_DIR=str(run_dir))
        if subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], cwd=ROOT, env=env).returncode != 0:
            raise SystemExit("scripts/demo.sh failed: no screenshot")
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="opscreen-readme-shot-") as tmp:
        html = Path(tmp) / "report.html"
        s = _report(run_dir, None, html)
        screenshot(html, png, ",".join(map(str, README_SIZE)))
    from opscreen import __version__

    passed = sum(1 for o in s.ops if o.status in ("passed", "passed_own_dtypes"))
    optimise_png(png, {
        "Software": README_COMMAND,
        "Source": f"opscreen {__version__} report of {run_dir.name}: {len(s.ops)} ops, {passed} passed, {len(s.rows)} rows",
    })  # fmt: skip
    size = png.stat().st_size
    print(f"{png} ({size / 1024:.0f} KiB, {README_SIZE[0]} x {README_SIZE[1]}) from {run_dir}")
    if size > README_MAX_BYTES:
        raise SystemExit(f"{png} is {size} bytes, over {README_MAX_BYTES}: the README's image stays small")
    return 0


def _report(run_dir: Path, against: Path | None, html: Path):
    s, _ = load_or_build(run_dir, rebuild=True)  # in memory: the run dirs are only read
    comp = None
    if against is not None:
        a, _ = load_or_build(against, rebuild=True)
        chk = check_caliber(a.caliber, s.caliber)
        if not chk.ok:
            raise SystemExit(chk.refusal_text())
        comp = compare_summaries(a, s, check=chk)
    write_report(s, html, comp)
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", help="run dir (default: synthesise one, see --synth)")
    ap.add_argument("--against", help="baseline run dir for the comparison view")
    ap.add_argument("--synth", choices=("pair", "timeouts"), default="pair", help="what to synthesise without RUN_DIR")
    ap.add_argument("--png", default="report.png", help="screenshot file (default report.png)")
    ap.add_argument("--html", help="report file (default: the PNG's name with .html; RUN_DIR/report.html with --in-place)")
    ap.add_argument("--in-place", action="store_true", help="write the report as RUN_DIR/report.html")
    ap.add_argument("--size", default="1400,2400", help="window size W,H (default 1400,2400)")
    ap.add_argument("--screens", type=int, default=1, help="screens of the page to take, one PNG each (default 1)")
    ap.add_argument("--query", default="", help="query string the page's script reads (filters, sort), and "
                    "#op-NAME to open that op's section")
    ap.add_argument("--readme", action="store_true", help=f"the README's screenshot: {README_PNG} from the demo's "
                    f"report ({README_RUN}, or RUN_DIR), top screen, optimised; --png overrides the file")
    args = ap.parse_args()
    if args.readme:
        return readme_shot(Path(args.run_dir) if args.run_dir else None,
                           Path(args.png) if args.png != "report.png" else None)
    tmp = Path(tempfile.mkdtemp(prefix="opscreen-report-shot-"))
    try:
        if args.run_dir:
            run_dir, against = Path(args.run_dir), (Path(args.against) if args.against else None)
        elif args.synth == "timeouts":
            run_dir, against = _timeouts_run(tmp), None
        else:
            against, run_dir = _demo_runs(tmp)
        html = Path(args.html) if args.html else (run_dir / "report.html" if args.in_place else Path(args.png).with_suffix(".html"))
        _report(run_dir, against, html)
        png = Path(args.png)
        pngs = screens(html, png, args.size, args.screens, args.query) if args.screens > 1 else (
            screenshot(html, png, args.size, query=args.query) or [png])  # fmt: skip
        shown, total = visible_cases(html, args.query)
        print(f"report {html} ({html.stat().st_size / 1024:.0f} KiB) -> " + ", ".join(
            f"{p} ({p.stat().st_size / 1024:.0f} KiB)" for p in pngs))
        print(f"cases table after the page's script{' with ?' + args.query if args.query else ''}: {shown} of {total} rows shown")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
