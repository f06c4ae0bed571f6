#!/usr/bin/env bash
# CI, second job: the oracle, the proofs and the rule-level suite in a venv WITHOUT torch, installed as a
# user would (`pip install .`, not editable) and run from a directory outside the checkout; before them, the format
# and lint pass (ruff), the types (mypy) and the import layers (import-linter's contracts in pyproject.toml).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$repo"
"$work/venv/bin/pip" install -q "mypy>=1.10" "import-linter>=2.1" "ruff==0.17.6"
# Format and lint (`[tool.ruff]`: 100 columns, a complexity limit per function) on the checkout itself.
"$work/venv/bin/ruff" format --check --quiet "$repo" || { echo "ruff format: run 'ruff format .' (above: the files)" >&2; exit 1; }
"$work/venv/bin/ruff" check --quiet "$repo"
cd "$work"
if "$work/venv/bin/python" -c "import torch" 2>/dev/null; then echo "torch-free job: torch is installed" >&2; exit 1; fi
# The type check (the package ships py.typed): the public modules as installed; mypy cannot follow an editable
# install. It runs in the venv that holds exactspec, so it needs no --python-executable; any error fails the job.
"$work/venv/bin/mypy" --config-file "$repo/pyproject.toml" -p exactspec.reference -p exactspec.stat_tests \
    -p exactspec.conformance -p exactspec.proofs -m exactspec.errors -m exactspec
# The layers (`[tool.importlinter]`): grimp reads the package as installed here (it cannot follow an editable install).
"$work/venv/bin/lint-imports" "$repo/pyproject.toml"
"$work/venv/bin/exactspec" reference-demo
"$work/venv/bin/exactspec" proofs
cp "$repo/examples/my_rule.py" .
"$work/venv/bin/pytest" --pyargs exactspec.conformance --exactspec-impl my_rule:Verifier --exactspec-profile quick -p no:cacheprovider
