#!/usr/bin/env bash
# README command 1: install dependencies, build, make `import tensorjit`
# work for the system python3, run the demo.
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh build
bash scripts/install_python.sh
bash scripts/demo.sh build
