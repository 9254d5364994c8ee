#!/usr/bin/env bash
# Makes `import tensorjit` work for the system's python3 (/usr/bin/python3)
# without copying anything: a tensorjit.pth in its user site-packages names
# this checkout's python/ folder, and the package finds the library of the
# build tree beside it (or TENSORJIT_LIBRARY). Idempotent and quiet.
set -eu
py=/usr/bin/python3
[ -x "$py" ] || { echo "tensorjit: no $py; skipping the Python package"; exit 0; }
root=$(cd "$(dirname "$0")/.." && pwd)
site=$("$py" -m site --user-site)
mkdir -p "$site"
pth="$site/tensorjit.pth"
if [ ! -f "$pth" ] || [ "$(cat "$pth")" != "$root/python" ]; then
  printf '%s\n' "$root/python" > "$pth"
fi
