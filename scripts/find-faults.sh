#!/usr/bin/env bash
# Runs each CUDA op-suite test in its own process (a sticky CUDA fault in one test poisons every
# other test sharing the context) and, for each that fails, reruns it under compute-sanitizer
# memcheck to name the faulting kernel. Usage: bash scripts/find-faults.sh [FILTER]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export RNN_BACKENDS=${RNN_BACKENDS:-cuda} RNN_REQUIRE_BACKENDS=${RNN_REQUIRE_BACKENDS:-cuda}
export RNN_CACHE_DIR=${RNN_CACHE_DIR:-/tmp/rnn-cache}
bin=.gpu-bundle/bin/${BIN:-ops}
for t in $($bin --list 2>/dev/null | grep -E ": test$" | sed 's/: test$//' | grep -E "${1:-::cuda::}"); do
  if timeout 120 $bin "$t" --exact --test-threads=1 > "$OUT/one.log" 2>&1; then
    echo "ok   $t"
  else
    echo "FAIL $t"; grep -E "panicked|error" "$OUT/one.log" | head -3
    timeout 240 compute-sanitizer --tool memcheck --report-api-errors no --print-limit 3 \
      $bin "$t" --exact --test-threads=1 2>&1 | grep -E "Invalid|at .*in |by thread|Address|ERROR SUMMARY" | head -12
  fi
done
