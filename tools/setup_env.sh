#!/usr/bin/env bash
# Install the Debian packages vispe needs (as root; otherwise print the command), create the virtual
# environment (if missing) and install vispe with its test dependencies, optionally under a pip constraints file
# (`make test-min` installs the oldest versions vispe supports: tests/floors.txt).
# Idempotent: re-installs only when pyproject.toml (or the constraints file) changed since the last run.
# Usage: bash tools/setup_env.sh [VENV_DIR [CONSTRAINTS_FILE]]   (default .venv, no constraints)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
constraints="${2:-}"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "vispe needs Python >= 3.11; $python is $("$python" --version 2>&1). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

# Debian packages the project needs: Fashion-MNIST (real data for training and evaluation, offline), the
# library open3d's CPU wheel links against, and the BSD test meshes of assimp (the mv-scenes objects).
debian_packages=(dataset-fashion-mnist libusb-1.0-0 assimp-testmodels)
missing=()
for package in "${debian_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian packages: ${missing[*]}"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "vispe needs Debian packages that are not installed; run: sudo apt-get install -y ${missing[*]}" >&2
  fi
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "Creating virtual environment in $venv"
  "$python" -m venv "$venv"
fi

stamp="$venv/.vispe-installed"
want="$(cat pyproject.toml $constraints | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "Installing vispe and its dependencies into $venv (first run: several minutes, torch is large)"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet ${constraints:+-c "$constraints"} -e '.[all,dev]'
  # nuScenes' devkit for its detection evaluation, without its numpy<2 pin (see pyproject.toml, extra "nuscenes").
  "$venv/bin/python" -m pip install --quiet --no-deps nuscenes-devkit==1.2.0
  echo "$want" > "$stamp"
fi
