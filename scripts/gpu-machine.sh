#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ../shared/tools/gpu-bundle built
# .gpu-bundle here (the device has no Rust toolchain). One call does everything that belongs
# together, so device time is spent once:
#   bash scripts/gpu-machine.sh [tests|sanitize|example|bench|all]...
# Logs go to $OUT. Backends required: cuda, opencl, and the HIP sources through NVRTC.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export RNN_REQUIRE_BACKENDS=${RNN_REQUIRE_BACKENDS:-cuda,opencl,hip-nvrtc,nvrtc}
export RNN_CACHE_DIR=${RNN_CACHE_DIR:-/tmp/rnn-cache}
run=.gpu-bundle/run.sh
status=0
step() { echo; echo "##### $*"; }
for what in "${@:-all}"; do
  case $what in
    tests|all)
      step "tests (RNN_REQUIRE_BACKENDS=$RNN_REQUIRE_BACKENDS)"
      bash $run tests || status=1 ;;&
    sanitize|all)
      step "compute-sanitizer memcheck over the CUDA and HIP-on-CUDA op suite"
      for t in ops; do
        RNN_BACKENDS=cuda RNN_REQUIRE_BACKENDS=cuda,hip-nvrtc timeout ${SANITIZE_TIMEOUT:-300} bash $run sanitize $t gpu_ --test-threads=1 > "$OUT/sanitize-$t.log" 2>&1; rc=$?
        grep -E "ERROR SUMMARY|test result|FAILED" "$OUT/sanitize-$t.log" | tail -5
        [ $rc = 0 ] || { echo "!!! sanitize $t exit $rc"; status=1; }
      done ;;&
    example|all)
      step "real_gpu_neural_network on cuda:0"
      bash $run exec real_gpu_neural_network --device cuda:0 2>&1 | tail -n 25 | tee "$OUT/example-cuda.log"
      step "simple_gpu_demo"
      bash $run exec simple_gpu_demo 2>&1 | tail -n 40 | tee "$OUT/demo.log"
      step "devices"
      bash $run exec devices 2>&1 | tee "$OUT/devices.log" ;;&
    bench|all)
      step "benchmarks: rnn on cuda:0, then PyTorch cuda"
      bash $run exec workloads --device cuda:0 2>&1 | tee "$OUT/bench-rnn-cuda.log"
      python3 .gpu-bundle/pytorch_reference.py cuda 2>&1 | tee "$OUT/bench-torch-cuda.log" ;;&
    *) ;;
  esac
done
exit $status
