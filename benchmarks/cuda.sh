#!/usr/bin/env bash
# The GPU checks as one prepared script, every result as JSON under OUT_DIR:
#   1. the CUDA tests (tests/test_gpu_cuda.py)                       -> counts in OUT/summary.json
#   2. the rule-level certification at profile quick of the CUDA adapters TorchCUDA (race, the CUDA default)
#      and TorchCUDAInverseCDF, side by side                         -> OUT/cert_TorchCUDA*.json
#   3. v(k+1)/decode(1) and c over batch 1..128 on a random ~1B/~100M pair, and the sampler throughput
#      (benchmarks/cuda_bench.py)                                    -> OUT/cuda_bench.json
#   and OUT/summary.json (each step's exit code, seconds, verdicts), OUT/log.txt.
# Each step has its own time limit (90 + 200 + 290 s), so the whole run stays under 10 minutes (one device call).
#
# Usage:  benchmarks/cuda.sh OUT_DIR [--small] [--only tests,certify,bench]
#   --small: on the CPU, tiny shapes, the sampler tests of step 1 run on the CPU (EXACTSPEC_CUDA_TEST_DEVICE=cpu)
#            and step 2 certifies TorchCPU on two cases: a check of this script in about a minute.
# Python: $PYTHON if set, else .venv/bin/python when it imports exactspec, else python3 (the one holding
# torch, numpy, scipy, transformers) with this checkout installed offline into $EXACTSPEC_SITE (default
# /tmp/exactspec-site; pip --target --no-index --no-deps --no-build-isolation) put on PYTHONPATH.
set -uo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT_DIR [--small] [--only tests,certify,bench]" >&2
    exit 2
fi
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"; shift
SMALL=0; ONLY="tests,certify,bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --small) SMALL=1 ;;
        --only) ONLY="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
SCRATCH="$(mktemp -d)"  # certificate folders, junit XML, step records: only JSON and the log go to OUT
LOG="$OUT/log.txt"; : > "$LOG"; STEPS="$SCRATCH/steps"; : > "$STEPS"
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

pick_python() {  # sets PY (and PYTHONPATH when it installs the checkout)
    if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; return; fi
    if [ -x .venv/bin/python ] && .venv/bin/python -c "import exactspec.gpu_impl" 2>/dev/null; then PY=.venv/bin/python; return; fi
    local site="${EXACTSPEC_SITE:-/tmp/exactspec-site}"
    say "installing this checkout into $site (offline)"
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$site" . >>"$LOG" 2>&1 \
        || say "warning: pip install --target failed (see log)"
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    PY=python3
}

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, record exit code and seconds
    local name="$1" limit="$2"; shift 2
    local start=$SECONDS
    say "step $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "$name $rc $((SECONDS - start))" >> "$STEPS"
    say "step $name: exit $rc after $((SECONDS - start))s"
}

pick_python
say "python $PY; out $OUT; small=$SMALL; only=$ONLY"
"$PY" -c "import torch, exactspec; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tee -a "$LOG"

if [[ ",$ONLY," == *",tests,"* ]]; then
    if [ "$SMALL" = 1 ]; then
        EXACTSPEC_CUDA_TEST_DEVICE=cpu step tests 150 "$PY" -m pytest tests/test_gpu_cuda.py -q -k "not tiny_model" \
            --junitxml="$SCRATCH/junit.xml" -p no:cacheprovider
    else
        step tests 90 "$PY" -m pytest tests/test_gpu_cuda.py -q --junitxml="$SCRATCH/junit.xml" -p no:cacheprovider
    fi
fi

if [[ ",$ONLY," == *",certify,"* ]]; then
    ADAPTERS="TorchCUDA TorchCUDAInverseCDF"; EXTRA=(--workers 4)
    if [ "$SMALL" = 1 ]; then ADAPTERS="TorchCPU"; EXTRA=(--workers 1 --no-hypothesis --cases near_1e-12,cumsum_below_one_trailing_zeros); fi
    for name in $ADAPTERS; do
        ( step "certify_$name" 200 "$PY" -m exactspec.cli certify --impl "exactspec.conformance.adapters.gpu_impl:$name" \
              --profile quick --no-progress --level rule --out "$SCRATCH/cert_$name" "${EXTRA[@]}"
          cp "$SCRATCH/cert_$name/certificate.json" "$OUT/cert_$name.json" 2>/dev/null ) &
    done
    wait
fi

if [[ ",$ONLY," == *",bench,"* ]]; then
    if [ "$SMALL" = 1 ]; then
        step bench 200 "$PY" benchmarks/cuda_bench.py --out "$OUT" --small
    else
        step bench 290 "$PY" benchmarks/cuda_bench.py --out "$OUT" --budget-s 200
    fi
fi

"$PY" benchmarks/cuda_summary.py "$OUT" "$SCRATCH" 2>&1 | tee -a "$LOG"
rm -rf "$SCRATCH"
