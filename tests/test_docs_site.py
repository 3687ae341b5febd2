"""The docs site holds together without MkDocs installed: every page of docs/ is in the nav
of mkdocs.yml, every relative link of README.md and docs/*.md names a file that exists,
and every README section that a page includes (pymdownx.snippets) is there.

`bash scripts/docs.sh` (run by .ci/run) builds the site with `mkdocs build --strict`, which
checks the same and the anchors too; this test says which link broke without it, in the
test suite's run.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))

_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# an inline link or image: ](target) or ](<target>), with an optional title
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"\s*$', re.M)


def _prose(text: str) -> str:
    """The text outside fenced code blocks, inline code and HTML comments."""
    return _CODE.sub("", _FENCE.sub("", _COMMENT.sub("", text)))


def relative_links(text: str) -> list[str]:
    """The relative link targets of a Markdown text (no URLs, no pure anchors), without anchors."""
    out = []
    for target in _LINK.findall(_prose(text)):
        if _SCHEME.match(target) or target.startswith(("#", "/")):
            continue
        out.append(target.split("#", 1)[0])
    return out


def nav_pages(nav) -> list[str]:
    """Every page a MkDocs nav names, depth first."""
    out = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out.extend(nav_pages(value) if isinstance(value, list) else [value])
    return out


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page(config):
    nav = nav_pages(config["nav"])
    names = {p.name for p in PAGES}
    assert sorted(set(nav) - names) == [], "mkdocs.yml's nav names pages that docs/ lacks"
    assert sorted(names - set(nav)) == [], "docs pages missing from mkdocs.yml's nav"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert nav[0] == "index.md"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve_to_files(page):
    broken = [t for t in relative_links(page.read_text()) if not (page.parent / t).is_file()]
    assert broken == [], f"{page.relative_to(ROOT)}: links to files that do not exist: {broken}"


_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (MkDocs) gives a heading: its text, lower case,
    punctuation dropped, runs of spaces and hyphens as one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in _HEADING.findall(_FENCE.sub("", page.read_text()))}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_anchors_of_links_between_docs_pages_exist(page):
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        path, _, anchor = target.partition("#")
        if not anchor or _SCHEME.match(target):
            continue
        dest = page if not path else page.parent / path
        if dest.suffix == ".md" and dest.parent == DOCS and dest.is_file() and anchor not in anchors(dest):
            broken.append(target)
    assert broken == [], f"docs/{page.name}: links to headings that do not exist: {broken}"


def test_readme_links_the_docs_pages_it_replaced():
    linked = {(README.parent / t).resolve() for t in relative_links(README.read_text())}
    # index.md and flaggems.md are README's own sections, included on the site
    missing = [p.name for p in PAGES if p.resolve() not in linked and p.name not in ("index.md", "flaggems.md")]
    assert missing == [], f"README.md does not link these docs pages: {missing}"


def _section(text: str, name: str) -> str | None:
    m = re.search(rf"--8<-- \[start:{re.escape(name)}\](.*?)--8<-- \[end:{re.escape(name)}\]", text, re.S)
    return m.group(1) if m else None


def test_included_sections_exist_and_hold_no_relative_links(config):
    ext = [e for e in config["markdown_extensions"] if isinstance(e, dict) and "pymdownx.snippets" in e]
    assert ext and ext[0]["pymdownx.snippets"]["base_path"] == ["."], "snippets resolve from the repository root"
    seen = 0
    for page in PAGES:
        for ref in _SNIPPET.findall(page.read_text()):
            seen += 1
            path, _, name = ref.partition(":")
            text = (ROOT / path).read_text()
            body = _section(text, name)
            assert body is not None, f"{page.name} includes {ref!r}: {path} has no section {name!r}"
            # the same text is read from the root (README) and from docs/: a relative
            # link would be right in only one of them
            assert relative_links(body) == [], f"{path} section {name!r} holds relative links"
    assert seen >= 3, "docs/index.md, flaggems.md and glossary.md include README sections"


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 300, "README.md is a front page: the manual lives in docs/"
    for jargon in (r"\bissue \d+", r"\blease\b", r"pip install opscreen"):
        assert not re.search(jargon, text), jargon
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text


def test_the_site_is_built_in_ci():
    assert "/site/" in (ROOT / ".gitignore").read_text().split()
    assert "bash scripts/docs.sh" in (ROOT / ".ci" / "run").read_text()
    docs_sh = (ROOT / "scripts" / "docs.sh").read_text()
    assert "mkdocs build --strict -d site" in docs_sh and '".[docs]"' in docs_sh
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["name"] == "material"
    assert all((ROOT / h).is_file() for h in config.get("hooks", []))


def test_link_finder():
    text = (
        "[a](usage.md) [b](usage.md#x 'title') ![c](img/x.png) [d](https://e.org/x.md)\n"
        "[e](#anchor) `[f](nope.md)` <!-- [g](nope.md) -->\n```text\n[h](nope.md)\n```\n[i](<../bench/y.md>)\n"
    )
    assert relative_links(text) == ["usage.md", "usage.md", "img/x.png", "../bench/y.md"]
    assert slug("`opscreen run`: the batch screen") == "opscreen-run-the-batch-screen"
    assert slug("graph (`opscreen.child.graph`)") == "graph-opscreenchildgraph"
    assert slug("Power limit: idle time between samples") == "power-limit-idle-time-between-samples"
