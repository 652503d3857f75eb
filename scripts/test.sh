#!/usr/bin/env bash
# Sets up .venv (if needed) and runs the test suite. The README's test command and CI's entry point.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt

.venv/bin/python -m pytest --tb=native -q tests
