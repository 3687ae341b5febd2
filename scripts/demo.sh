#!/usr/bin/env bash
# Create .venv, install, and show what opscreen sees on this machine.
source "$(dirname "$0")/_venv.sh"
cd "$ROOT"
echo "== opscreen backends"
opscreen backends
echo
echo "== opscreen devices"
opscreen devices
