"""opscreen publish (src/opscreen/store/publish.py): the site's pages, their links and permalinks,
a site replaced whole and never over someone's folder, served by a static host, and read in
headless Chromium from file:// (skipped, with the reason, where no Chromium is installed)."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest

from storesynth import commit, floors_table, screens

CASE = ("abs", "float16", 1)
HREF = re.compile(r'href="([^"]+)"')


def step(i, op, dtype, si):
    return 1.10 if (op, dtype, si) == CASE and i >= 5 else 1.0


@pytest.fixture
def site(tmp_path, cli):
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    assert cli("store", "add", *screens(tmp_path, 8, factor=step), "--db", url).returncode == 0
    floors = floors_table(tmp_path / "f.json", 0.006)
    out = tmp_path / "site"
    res = cli("publish", "--out", out, "--db", url, "--floors", floors)
    assert res.returncode == 0, res.stderr
    assert "3 ops" in res.stdout and "1 open change points" in res.stdout
    return {"out": out, "url": url, "floors": floors, "tmp": tmp_path}


def links(page: Path) -> list[str]:
    return [h for h in HREF.findall(page.read_text()) if not h.startswith(("http:", "https:"))]


def test_the_site_has_an_index_a_page_per_op_and_its_data(site):
    out = site["out"]
    assert sorted(p.name for p in (out / "ops").iterdir()) == ["abs.html", "add.html", "mm.html"]
    index = (out / "index.html").read_text()
    assert index.count('<tr data-op="') == 3 and "history.json" in index
    row = re.search(r'<tr data-op="abs">.*?</tr>', index, re.S).group(0)
    assert re.search(r'<td class="n">1</td>', row) and commit(5)[:12] in row
    assert re.search(r">-(8\.[6-9]|9\.[0-6])% float16 ", row)  # the library 10 % slower: the speedup -9.1 %
    page = (out / "ops" / "abs.html").read_text()
    assert page.count('<div class="case" id="case-') == 8 and page.count("<svg") == 8
    assert f"{commit(4)[:12]}..{commit(5)[:12]}" in page and "the band ±1.95%" in page
    assert "<p>none</p>" in (out / "ops" / "add.html").read_text()  # no change point in an untouched op


def test_every_link_resolves_to_a_file_and_an_anchor(site):
    out = site["out"]
    for page in [out / "index.html", *(out / "ops").glob("*.html")]:
        for href in links(page):
            assert not href.startswith("/") and "://" not in href, (page, href)  # relative: file:// and any host
            path, _, anchor = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert target.is_file(), (page.name, href)
            if anchor:
                assert f'id="{anchor}"' in target.read_text(), (page.name, href)


def test_permalinks_stay_across_publishes(site, cli):
    out, tmp = site["out"], site["tmp"]
    before = set(re.findall(r'id="(case-[0-9a-f]+)"', (out / "ops" / "abs.html").read_text()))
    more = screens(tmp / "more", 2, factor=step, first=8)
    assert cli("store", "add", *more, "--db", site["url"]).returncode == 0
    (out / "ops" / "stale.html").write_text("from an older publish")
    res = cli("publish", "--out", out, "--db", site["url"], "--floors", site["floors"])
    assert res.returncode == 0, res.stderr
    assert "10 runs" in res.stdout
    after = set(re.findall(r'id="(case-[0-9a-f]+)"', (out / "ops" / "abs.html").read_text()))
    assert before == after and len(after) == 8
    assert not (out / "ops" / "stale.html").exists()  # the site is replaced whole
    assert not [p for p in tmp.iterdir() if p.name.startswith(".site.")]  # no temp folder left


def test_publish_never_writes_over_a_folder_it_did_not_make(site, cli, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    res = cli("publish", "--out", mine, "--db", site["url"])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "did not write" in res.stderr
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]
    res = cli("publish", "--out", tmp_path / "new-site", "--db", tmp_path / "missing.sqlite")
    assert res.returncode == 2 and "no results store" in res.stderr
    assert not (tmp_path / "new-site").exists()


def test_a_static_host_serves_it(site):
    """Every page and every link of it over HTTP from a plain static server on the loopback."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site["out"]))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        seen, todo = set(), ["index.html"]
        while todo and len(seen) < 20:
            rel = todo.pop()
            if rel in seen:
                continue
            seen.add(rel)
            with urllib.request.urlopen(base + rel, timeout=10) as resp:
                assert resp.status == 200
                body = resp.read().decode()
            if rel.endswith(".html"):
                folder = rel.rpartition("/")[0]
                for href in HREF.findall(body):
                    path = href.partition("#")[0]
                    if path:
                        todo.append(str(Path(folder, path)).replace("\\", "/").replace("ops/../", ""))
        assert {"index.html", "history.json", "ops/abs.html", "ops/add.html", "ops/mm.html"} <= seen
    finally:
        server.shutdown()
        server.server_close()


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_dom(url: str) -> str:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if exe is None:
        pytest.skip("no Chromium to read the site in (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="opscreen-chromium-") as profile:
        res = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                              "--virtual-time-budget=5000", url], capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    assert res.returncode == 0 and "<html" in res.stdout, res.stderr[-2000:]
    return res.stdout


def test_chromium_reads_it_from_file_urls(site):
    out = site["out"]
    dom = chromium_dom((out / "index.html").as_uri() + "?q=ab")
    assert '<span id="shown">1 of 3 ops</span>' in dom  # the page's script ran from file://
    assert len(re.findall(r'<tr data-op="[^"]+" class="hidden">', dom)) == 2
    anchor = re.search(r'href="(ops/abs\.html#case-[0-9a-f]+)"', dom).group(1)
    page = chromium_dom((out / anchor.partition("#")[0]).resolve().as_uri() + "#" + anchor.partition("#")[2])
    assert page.count("<circle") == 8 * 8  # 8 cases, 8 runs each
    assert f'id="{anchor.partition("#")[2]}"' in page
