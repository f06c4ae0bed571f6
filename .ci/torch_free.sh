#!/usr/bin/env bash
# CI, second job: the oracle, the proofs and the rule-level suite in a venv WITHOUT torch, installed as a
# user would (`pip install .`, not editable) and run from a directory outside the checkout.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$repo"
cd "$work"
if "$work/venv/bin/python" -c "import torch" 2>/dev/null; then echo "torch-free job: torch is installed" >&2; exit 1; fi
"$work/venv/bin/exactspec" reference-demo
"$work/venv/bin/exactspec" proofs
cp "$repo/examples/my_rule.py" .
"$work/venv/bin/pytest" --pyargs exactspec.conformance --exactspec-impl my_rule:Verifier --exactspec-profile quick -p no:cacheprovider
