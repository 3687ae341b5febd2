"""MkDocs hook (mkdocs.yml `hooks:`): publish the repository files that the docs link to.

The pages link files outside docs/ by their path in the repository (`../bench/results/X.md`,
`../src/opscreen/settings.py`), so the same Markdown works when it is read in the
repository (a code forge, an editor) and on the site. MkDocs sees only docs/ and would
report each such link as broken; this hook adds every linked repository file to the build
under `repo/<its path>` (Markdown as a page, anything else copied as is), and the links are
then checked and rewritten like any other. A link to a file that does not exist, or that
lies outside the repository, is left alone: `mkdocs build --strict` still fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

# the target of an inline Markdown link: ](target) or ](<target>), up to a title or anchor
_LINK = re.compile(r"\]\(\s*<?([^)\s>#]+)")
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.M | re.S)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _targets(text: str):
    for target in _LINK.findall(_FENCE.sub("", text)):
        if not _SCHEME.match(target) and not target.startswith("/"):
            yield target


def on_files(files, config):
    docs = Path(config.docs_dir).resolve()
    root = docs.parent
    todo = [f for f in files if f.is_documentation_page()]
    while todo:
        page = todo.pop()
        for target in _targets(Path(page.abs_src_path).read_text(encoding="utf-8")):
            uri = posixpath.normpath(posixpath.join(posixpath.dirname(page.src_uri), target))
            if not uri.startswith("../") or files.get_file_from_path(uri) is not None:
                continue
            path = (docs / uri).resolve()
            if not path.is_file() or root not in path.parents or docs in path.parents:
                continue
            rel = path.relative_to(root).as_posix()
            f = File(uri, str(docs), config.site_dir, config.use_directory_urls)
            if f.is_documentation_page():
                stem = rel[: -len(".md")]
                f.dest_uri = f"repo/{stem}/index.html" if config.use_directory_urls else f"repo/{stem}.html"
                todo.append(f)
            else:
                f.dest_uri = f"repo/{rel}"
            f.inclusion = InclusionLevel.NOT_IN_NAV
            files.append(f)
    return files
