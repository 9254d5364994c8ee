#!/usr/bin/env bash
# README command 1: install dependencies, build, run the demo.
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh build
bash scripts/demo.sh build
