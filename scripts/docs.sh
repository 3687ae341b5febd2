#!/usr/bin/env bash
# Build the docs site into site/ (git-ignored): install the `docs` extra (MkDocs and its
# Material theme) into .venv, then `mkdocs build --strict`, so a broken link, a page
# missing from the nav or a missing README section fails. .ci/run runs it after the tests.
#
# .venv is the one scripts/_venv.sh makes for demo.sh and test.sh; when it is absent this
# script creates a bare one (the site needs no torch). A stamp records what was installed;
# pip runs again only when pyproject.toml or this script changes. Extra arguments go to
# `mkdocs build` (e.g. --verbose).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "opscreen docs: creating .venv with $($PY --version 2>&1)"
    "$PY" -m venv .venv
fi
stamp=".venv/.opscreen-docs-installed"
want="[docs] $(cat pyproject.toml scripts/docs.sh | cksum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "opscreen docs: installing opscreen[docs] into .venv"
    rm -f "$stamp"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[docs]" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -c "import mkdocs, material" || { echo "opscreen docs: installing opscreen[docs] into .venv failed" >&2; exit 1; }
    printf '%s\n' "$want" > "$stamp"
fi
export NO_MKDOCS_2_WARNING=1  # Material's notice about its successor, printed on every build
.venv/bin/python -m mkdocs build --strict -d site "$@"
echo "site: $ROOT/site/index.html"
