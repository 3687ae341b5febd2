# Sourced by test.sh and demo.sh: create .venv when absent and install opscreen.
# torch is pinned to the CPU build that lies on these machines (an unpinned torch
# pulls a multi-GB CUDA build); it is only for the bundled sample suite, which runs
# under this interpreter. The harness itself never imports torch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
TORCH_SPEC="${OPSCREEN_TORCH_SPEC:-torch==2.13.0}"
if [ ! -x .venv/bin/python ]; then
    echo "opscreen: creating .venv with $($PY --version 2>&1)"
    "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"
EXTRAS="${1:-}"
stamp=".venv/.opscreen-installed${EXTRAS:+-$EXTRAS}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$VPY" -m pip install -q --disable-pip-version-check "$TORCH_SPEC" 2>&1 | grep -v "^WARNING: Location" || true
    "$VPY" -c "import torch" || { echo "opscreen: installing $TORCH_SPEC failed" >&2; exit 1; }
    "$VPY" -m pip install -q --disable-pip-version-check -e ".${EXTRAS:+[$EXTRAS]}" 2>&1 | grep -v "^WARNING: Location" || true
    "$VPY" -c "import opscreen, yaml, rich" || { echo "opscreen: installing the package failed" >&2; exit 1; }
    touch "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
