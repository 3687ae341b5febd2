# Sourced by test.sh and demo.sh: create .venv when absent and install opscreen into it.
#
# Both scripts share one .venv with one install: opscreen (editable) with the `suite`
# extra (pytest, torch, numpy: the bundled sample suite runs under this interpreter)
# and the `test` extra. torch is pinned to the CPU build that lies on these machines
# (an unpinned torch pulls a multi-GB CUDA build); the pin is given in the same pip
# command as the extras, so the extras' plain `torch` can only resolve to it. The
# harness itself never imports torch.
#
# A stamp in .venv records what was installed (the torch pin, the extras, and a hash
# of pyproject.toml and this script); pip runs again only when one of those changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
TORCH_SPEC="${OPSCREEN_TORCH_SPEC:-torch==2.13.0}"
EXTRAS="suite,test"
if [ ! -x .venv/bin/python ]; then
    echo "opscreen: creating .venv with $($PY --version 2>&1)"
    "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"
stamp=".venv/.opscreen-installed"
want="$TORCH_SPEC [$EXTRAS] $(cat pyproject.toml scripts/_venv.sh | cksum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "opscreen: installing opscreen[$EXTRAS] and $TORCH_SPEC into .venv"
    rm -f "$stamp"
    "$VPY" -m pip install -q --disable-pip-version-check "$TORCH_SPEC" -e ".[$EXTRAS]" 2>&1 | grep -v "^WARNING: Location" || true
    "$VPY" -c "import opscreen, yaml, rich, pytest, numpy, torch" || { echo "opscreen: installing opscreen[$EXTRAS] with $TORCH_SPEC into .venv failed" >&2; exit 1; }
    printf '%s\n' "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
