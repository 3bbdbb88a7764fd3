#!/usr/bin/env bash
# Create .venv and install what the project needs; check (and, as root, install) the
# system packages. Safe to run again: it does nothing when everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.installed"
PYTHON=${PYTHON:-python3}
UV=uv==0.13.10

say() { printf '[setup] %s\n' "$*"; }

# --- System packages -------------------------------------------------------------
# name of the Debian package -> a file or command that shows it is there
declare -A probe=(
    [iverilog]="cmd:iverilog"
    [g++]="cmd:g++"
    [make]="cmd:make"
    [liblz4-dev]="file:/usr/include/lz4.h"
    [zlib1g-dev]="file:/usr/include/zlib.h"
    [ccache]="cmd:ccache"
)
missing=()
for pkg in "${!probe[@]}"; do
    kind=${probe[$pkg]%%:*}; what=${probe[$pkg]#*:}
    if [ "$kind" = cmd ]; then command -v "$what" >/dev/null 2>&1 || missing+=("$pkg")
    else [ -e "$what" ] || missing+=("$pkg"); fi
done
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    missing+=("python3-venv")
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "error: missing system packages: ${missing[*]}" >&2
        echo "install them with:  sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# --- Python packages --------------------------------------------------------------
want=$(sha1sum pyproject.toml | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
    exit 0
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: Python 3.11 or newer is needed (found $("$PYTHON" --version 2>&1));" \
         "set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
# uv (pinned) installs the same pinned packages as pip, several at a time
# (docs/toolchain.md); pip stays the fallback.
say "installing Python packages into $VENV (about 10 s the first time)"
if ! { "$VENV/bin/python" -m pip install -q "$UV" \
       && "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode -e .; \
     } > "$VENV/uv-install.log" 2>&1
then
    say "uv could not install them (see $VENV/uv-install.log); installing with pip (about 20 s)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e .
fi
echo "$want" > "$STAMP"
say "done"
