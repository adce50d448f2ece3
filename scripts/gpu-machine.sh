#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ../shared/tools/gpu-bundle built
# .gpu-bundle here (the device has no Rust toolchain). One call does everything that belongs
# together, so device time is spent once:
#   bash scripts/gpu-machine.sh [tests|sanitize|example|bench|bench-opencl|bench-cpu|torch|profile|all]...
#   bash scripts/gpu-machine.sh [hip-shim|hip-shim-run|hip-shim-sanitize]
# Logs go to $OUT. Backends required: cuda, opencl, and the HIP sources through NVRTC.
# `hip-shim` (not part of `all`) runs the HIP backend itself (its libamdhip64/hiprtc FFI, not the
# hip-nvrtc path) on the NVIDIA GPU through tests/hip-shim, the HIP runtime over CUDA that
# scripts/bundle.sh puts in .gpu-bundle/hipshim: its C self-test, every test binary with
# RNN_REQUIRE_BACKENDS=hip (a `hip:N` device from the HIP runtime), the out-of-memory test, the
# example on hip:0, `devices` (hip-shim-run), and the op suite under compute-sanitizer
# (hip-shim-sanitize); `hip-shim` is both.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export RNN_REQUIRE_BACKENDS=${RNN_REQUIRE_BACKENDS:-cuda,opencl,hip-nvrtc,nvrtc}
export RNN_CACHE_DIR=${RNN_CACHE_DIR:-/tmp/rnn-cache}
run=.gpu-bundle/run.sh
# The prebuilt HIP-runtime shim (scripts/bundle.sh): the runtime tests use it instead of building
# one, which needs a C compiler this machine may lack.
[ -d .gpu-bundle/hipshim ] && export RNN_HIPSHIM_DIR=${RNN_HIPSHIM_DIR:-$PWD/.gpu-bundle/hipshim}
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
      step "benchmarks: PyTorch cuda (eager and _graph), then rnn on cuda:0 with ratios"
      python3 .gpu-bundle/pytorch_reference.py cuda 2>&1 | tee "$OUT/bench-torch-cuda.log"
      bash $run exec workloads --device cuda:0 --torch "$OUT/bench-torch-cuda.log" 2>&1 \
        | tee "$OUT/bench-rnn-cuda.log" ;;&
    bench-opencl|all)
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "benchmarks: rnn on NVIDIA OpenCL ($ocl)"
      torch=(); [ -s "$OUT/bench-torch-cuda.log" ] && torch=(--torch "$OUT/bench-torch-cuda.log")
      [ -n "$ocl" ] && bash $run exec workloads --device "$ocl" "${torch[@]}" 2>&1 | tee "$OUT/bench-rnn-opencl.log"
      step "real_gpu_neural_network on $ocl"
      [ -n "$ocl" ] && bash $run exec real_gpu_neural_network --device "$ocl" 2>&1 | tail -n 6 ;;&
    profile)
      # One graph-replayed training step of each workload under Nsight Compute, then the
      # roofline table per workload (scripts/roofline.py). With .gpu-bundle/bin/workloads-base
      # (a build of an earlier commit), the same for it: a window of launches in the middle of
      # its timed loop, steps counted by its optimizer launches.
      metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
      metrics+=,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum
      metrics+=,sm__sass_thread_inst_executed_op_fmul_pred_on.sum
      metrics+=,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
      ncu=(ncu --clock-control none --csv --metrics "$metrics")
      tables=()
      for fig in ${PROFILE_FIGURES:-w1_mlp_b256_step w1_mlp_b4096_step w2_rnn_step w5_lstm_step w6_gru_step}; do
        step "ncu: $fig"
        "${ncu[@]}" --profile-from-start off .gpu-bundle/bin/workloads --device cuda:0 --only "$fig" \
          --profile 2 > "$OUT/ncu-$fig.csv" 2> "$OUT/ncu-$fig.err" || { tail -5 "$OUT/ncu-$fig.err"; status=1; }
        tables+=("$OUT/ncu-$fig.csv" 2)
      done
      if [ -x .gpu-bundle/bin/workloads-base ]; then
        for spec in "w1 300 250 base-w1_b256" "w1 6000 250 base-w1_b4096" "w2 300 300 base-w2"; do
          set -- $spec
          step "ncu: earlier build, $4"
          "${ncu[@]}" --launch-skip "$2" --launch-count "$3" .gpu-bundle/bin/workloads-base \
            --device cuda:0 --only "$1" > "$OUT/ncu-$4.csv" 2> "$OUT/ncu-$4.err" || tail -5 "$OUT/ncu-$4.err"
          tables+=("$OUT/ncu-$4.csv" auto)
        done
      fi
      python3 scripts/roofline.py "${tables[@]}" 2>&1 | tee "$OUT/roofline.md" ;;&
    torch|all)
      # Our checkpoints of stacked/bidirectional recurrent models (with dropout, LayerNorm,
      # embedding) written on cuda:0 and on NVIDIA OpenCL, loaded into torch.nn with strict=True
      # and compared with PyTorch's forward (f64 on the CPU) at 1e-4 relative.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "PyTorch comparison: checkpoints from cuda:0 and ${ocl:-no NVIDIA OpenCL device}"
      rm -rf /tmp/torch-cmp; dirs=(/tmp/torch-cmp/cuda)
      # The step-graph lines show each training step was recorded as a CUDA graph (no host
      # traffic inside a step) rather than run op by op.
      RUST_LOG=warn,rnn::nn::step_graph=debug bash $run exec torch_export --device cuda:0 \
        --out /tmp/torch-cmp/cuda 2>&1 | grep -E "graph|torch_export|rror" | cut -c1-200
      if [ -n "$ocl" ]; then
        bash $run exec torch_export --device "$ocl" --out /tmp/torch-cmp/opencl 2>&1 | grep -E "torch_export|rror"
        dirs+=(/tmp/torch-cmp/opencl)
      else
        echo "!!! no NVIDIA OpenCL device"; status=1
      fi
      python3 scripts/torch_compare.py "${dirs[@]}" 2>&1 | grep -v -i numpy | tee "$OUT/torch-compare.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! torch_compare failed"; status=1; } ;;&
    bench-cpu|all)
      step "CPU backend vs PyTorch CPU, both pinned to 2 cores (taskset -c 0,1)"
      taskset -c 0,1 .gpu-bundle/bin/workloads --device cpu 2>&1 | tee "$OUT/bench-rnn-cpu.log"
      taskset -c 0,1 python3 .gpu-bundle/pytorch_reference.py cpu 2 2>&1 | tee "$OUT/bench-torch-cpu.log" ;;&
    hip-shim|hip-shim-run|hip-shim-sanitize)
      shim=$PWD/.gpu-bundle/hipshim
      if [ ! -f "$shim/rocm6/libamdhip64.so" ]; then
        echo "!!! $shim/rocm6/libamdhip64.so missing: build the bundle with scripts/bundle.sh"
        status=1; continue
      fi
      # Only the HIP backend is probed (the CUDA and OpenCL suites run in `tests`); hip-shim in
      # the requirement makes the runtime tests use the prebuilt fixture or fail.
      hip_env=(env RNN_HIP_LIBRARY="$shim/rocm6/libamdhip64.so" RNN_HIPSHIM_DIR="$shim"
        RNN_BACKENDS=hip RNN_REQUIRE_BACKENDS=hip,hip-shim RNN_CACHE_DIR=/tmp/rnn-cache-hipshim) ;;&
    hip-shim|hip-shim-run)
      step "hip-shim: C self-test, ROCm 6 and ROCm 5 flavours"
      for flavour in rocm6 rocm5; do
        "$shim/selftest" "$shim/$flavour/libamdhip64.so" 2>&1 | tee "$OUT/hipshim-selftest-$flavour.log" | tail -3
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! selftest $flavour failed"; status=1; }
      done
      step "hip-shim: devices"
      "${hip_env[@]}" bash $run exec devices 2>&1 | tee "$OUT/hipshim-devices.log"
      step "hip-shim: every test binary on hip:0 (RNN_REQUIRE_BACKENDS=hip)"
      "${hip_env[@]}" OUT="$OUT/hipshim" bash $run tests || status=1
      step "hip-shim: out-of-memory recovery (alone: it takes all device memory)"
      "${hip_env[@]}" .gpu-bundle/bin/ops backend_suite::hip::gpu_oom_recovery --exact --ignored \
        --test-threads=1 > "$OUT/hipshim-oom.log" 2>&1 || { echo "!!! oom"; status=1; }
      grep -E "^test |test result|panicked" "$OUT/hipshim-oom.log" | tail -5
      step "hip-shim: real_gpu_neural_network on hip:0"
      "${hip_env[@]}" bash $run exec real_gpu_neural_network --device hip:0 2>&1 | tail -n 25 \
        | tee "$OUT/hipshim-example.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! example on hip:0 failed"; status=1; } ;;&
    hip-shim|hip-shim-sanitize)
      step "hip-shim: compute-sanitizer memcheck over the op suite on hip:0"
      # API errors are not reported: the suite provokes out-of-memory on purpose.
      "${hip_env[@]}" timeout ${SANITIZE_TIMEOUT:-400} compute-sanitizer --tool memcheck \
        --leak-check full --report-api-errors no .gpu-bundle/bin/ops backend_suite::hip:: \
        --test-threads=1 > "$OUT/hipshim-sanitize-ops.log" 2>&1; rc=$?
      grep -E "ERROR SUMMARY|test result|FAILED" "$OUT/hipshim-sanitize-ops.log" | tail -5
      [ $rc = 0 ] || { echo "!!! sanitize hip exit $rc"; status=1; } ;;
    *) ;;
  esac
done
exit $status
