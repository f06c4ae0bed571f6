#!/usr/bin/env bash
# GPU cost probes (random ~1B target / ~100M draft, batch 1..128; rejection-sampler throughput).
# No network and no model files needed. Usage:  benchmarks/cuda.sh OUT_DIR [--small] [--device cuda:0] ...
# Writes OUT_DIR/cuda_bench.json; finishes in under 8 minutes on one GPU (measurements stop at --budget-s).
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT_DIR [--small] [--device DEVICE] [--dtype float32|float16|bfloat16] [--budget-s S]" >&2
    exit 2
fi
OUT="$1"; shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python}"
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$HERE/.."
exec "$PYTHON" benchmarks/cuda_bench.py --out "$OUT" "$@"
