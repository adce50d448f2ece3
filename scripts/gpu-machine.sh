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
# The CUDA toolkit's libOpenCL.so.1 comes first in the loader cache there and ignores the ICD
# directory run.sh prepares; point opencl3 at the system's ocl-icd loader, which honours it.
for l in /lib/x86_64-linux-gnu/libOpenCL.so.1 /usr/lib/x86_64-linux-gnu/libOpenCL.so.1; do
  [ -e $l ] && { export OPENCL_DYLIB_PATH=$l; break; }
done
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
        # API errors are not reported: the suite provokes CUDA_ERROR_OUT_OF_MEMORY on purpose.
        RNN_BACKENDS=cuda RNN_REQUIRE_BACKENDS=cuda,hip-nvrtc timeout ${SANITIZE_TIMEOUT:-300} \
          compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
          .gpu-bundle/bin/$t gpu_ --test-threads=1 > "$OUT/sanitize-$t.log" 2>&1; rc=$?
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
    bench-opencl|all)
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "benchmarks: rnn on NVIDIA OpenCL ($ocl)"
      [ -n "$ocl" ] && bash $run exec workloads --device "$ocl" 2>&1 | tee "$OUT/bench-rnn-opencl.log"
      step "real_gpu_neural_network on $ocl"
      [ -n "$ocl" ] && bash $run exec real_gpu_neural_network --device "$ocl" 2>&1 | tail -n 6 ;;&
    bench-cpu|all)
      step "CPU backend vs PyTorch CPU, both pinned to 2 cores (taskset -c 0,1)"
      taskset -c 0,1 .gpu-bundle/bin/workloads --device cpu 2>&1 | tee "$OUT/bench-rnn-cpu.log"
      taskset -c 0,1 python3 .gpu-bundle/pytorch_reference.py cpu 2 2>&1 | tee "$OUT/bench-torch-cpu.log" ;;&
    *) ;;
  esac
done
exit $status
