#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ../shared/tools/gpu-bundle built
# .gpu-bundle here (the device has no Rust toolchain). One call does everything that belongs
# together, so device time is spent once:
#   bash scripts/gpu-machine.sh [tests|sanitize|example|bench|bench-opencl|bench-cpu|torch|profile|all]...
#   bash scripts/gpu-machine.sh profile profile-opencl   (not in all: roofline tables, CUDA then OpenCL)
#   bash scripts/gpu-machine.sh [hip-shim|hip-shim-run|hip-shim-sanitize]
#   bash scripts/gpu-machine.sh racecheck     (not in all: compute-sanitizer racecheck over the
#                                              persistent sequence kernels, CUDA only)
#   bash scripts/gpu-machine.sh multi-gpu     (on nvidia-h200-x2/-x4: NCCL data parallel; not in all)
#   bash scripts/gpu-machine.sh grid          (not in all: the recurrent shape grid, PyTorch and
#                                              rnn on cuda:0 and NVIDIA OpenCL, into $OUT/grid.md;
#                                              $GRID_POINTS: another points file)
#   bash scripts/gpu-machine.sh grid-bf16     (not in all: the points named by $GRID_ONLY, default
#                                              h1024, in bf16: PyTorch autocast and rnn on cuda:0)
#   bash scripts/gpu-machine.sh grid-boundary (not in all: ours on cuda:0 at the shapes of
#                                              benches/recurrent_boundary.points, automatic and
#                                              with persistent and gemm forced)
#   bash scripts/gpu-machine.sh grid-ncu      (not in all: Nsight Compute over the training loop at
#                                              each point of $GRID_NCU_POINTS, a roofline table
#                                              per point into $OUT/grid-ncu.md)
#   bash scripts/gpu-machine.sh grid-algos    (not in all: ours only, each point of $GRID_ALGOS_ONLY
#                                              under each recurrent algorithm of $GRID_ALGOS (default
#                                              all), on cuda:0 and NVIDIA OpenCL, into
#                                              $OUT/grid-algos-{cuda,opencl}.log)
#   bash scripts/gpu-machine.sh grid-pair     (not in all: ours only at the bidirectional points
#                                              of the grid and a few more, both directions in one
#                                              launch and (RNN_RECURRENT_PAIR=0) one after the
#                                              other, on cuda:0 and NVIDIA OpenCL, into
#                                              $OUT/grid-pair-{cuda,opencl}-{on,off}.log)
#   bash scripts/gpu-machine.sh recurrent-check (not in all: the op suites of the recurrent
#                                              kernels and thin GEMMs on every GPU backend, memcheck
#                                              over them on CUDA and HIP-through-NVRTC, the
#                                              recurrent-state tests; each part within
#                                              $CHECK_TIMEOUT seconds, default 200)
#   bash scripts/gpu-machine.sh hgemm-grid    (not in all: bf16/f16 products over a grid of
#                                              shapes, cuBLAS on and off, on cuda:0 and NVIDIA
#                                              OpenCL, into $OUT/hgemm-grid-{cuda,opencl}.log)
#   bash scripts/gpu-machine.sh stream        (not in all: a step from memory against one from a
#                                              DataStream, batches gathered on the host and on
#                                              the device, cuda:0 and NVIDIA OpenCL)
#   bash scripts/gpu-machine.sh cold-start    (not in all: time to context, first training step and
#                                              the whole example, empty and warm kernel cache, on
#                                              cuda:0, NVIDIA OpenCL and HIP through the shim)
#   bash scripts/gpu-machine.sh generate      (not in all: tokens/s of char_lstm's model drawn with
#                                              a Stepper and by the window re-run, on cuda:0 and
#                                              NVIDIA OpenCL, next to PyTorch's nn.LSTM stepping
#                                              a carried (h, c), into $OUT/generate.md; and
#                                              char_lstm's stepper checked on cuda:0)
# Logs go to $OUT. Backends required: cuda, opencl, and the HIP sources through NVRTC.
# `profile` runs Nsight Compute over two training steps of each figure ($PROFILE_FIGURES) and
# writes $OUT/ncu-<figure>.csv and $OUT/roofline.md. `profile-opencl` times the same steps on the
# NVIDIA OpenCL device with the backend's own kernel timer (RNN_PROFILE_KERNELS=1; Nsight Compute
# cannot profile OpenCL) into $OUT/profile-opencl.log, and scripts/opencl_roofline.py joins each
# figure with $OUT/ncu-<figure>.csv where `profile` wrote one (bytes and FLOPs from ncu, the
# OpenCL kernel's fraction of the device's bound) into $OUT/roofline-opencl.md.
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
# scripts/bundle.sh packs the binaries into one archive to stay within the carry limit.
if [ -f .gpu-bundle/bin.tar.xz ] && [ ! -d .gpu-bundle/bin ]; then
  tar -C .gpu-bundle -xJf .gpu-bundle/bin.tar.xz || { echo "!!! cannot unpack the bundle"; exit 1; }
fi
# The prebuilt HIP-runtime shim (scripts/bundle.sh): the runtime tests use it instead of building
# one, which needs a C compiler this machine may lack.
[ -d .gpu-bundle/hipshim ] && export RNN_HIPSHIM_DIR=${RNN_HIPSHIM_DIR:-$PWD/.gpu-bundle/hipshim}
# The CUDA toolkit's libOpenCL.so.1 comes first in the loader cache there and ignores the ICD
# directory run.sh prepares; point opencl3 at the system's ocl-icd loader, which honours it.
for l in /lib/x86_64-linux-gnu/libOpenCL.so.1 /usr/lib/x86_64-linux-gnu/libOpenCL.so.1; do
  [ -e $l ] && { export OPENCL_DYLIB_PATH=$l; break; }
done
# RNN_GPU_HIDE_POCL=1: the GPU machine's PoCL 5.0 (CPU OpenCL) aborts long test binaries now
# and then (`pocl_release_dlhandle_cache: Assertion 'found->ref_count > 0'`, its bug, not a
# test's); with this set, its ICD file is moved aside for this run (and put back at exit), so
# OpenCL means NVIDIA's OpenCL on the GPU. PoCL itself is tested in CI (PoCL 3.1).
# multi-gpu hides it by default: its tests need CUDA and NCCL only, and a parallel run of them
# on a fresh machine (PoCL compiling its kernels for the first time) once aborted with SIGABRT.
case " $* " in *" multi-gpu "*) RNN_GPU_HIDE_POCL=${RNN_GPU_HIDE_POCL:-1} ;; esac
if [ "${RNN_GPU_HIDE_POCL:-0}" = 1 ] && [ -e /etc/OpenCL/vendors/pocl.icd ]; then
  mv /etc/OpenCL/vendors/pocl.icd /tmp/pocl.icd.hidden
  trap 'mv /tmp/pocl.icd.hidden /etc/OpenCL/vendors/pocl.icd' EXIT
  echo "PoCL hidden for this run (RNN_GPU_HIDE_POCL=1)"
fi
status=0
step() { echo; echo "##### $*"; }
for what in "${@:-all}"; do
  case $what in
    tests|all)
      step "tests (RNN_REQUIRE_BACKENDS=$RNN_REQUIRE_BACKENDS)"
      bash $run tests || status=1 ;;&
    racecheck)
      # Shared-memory hazards of the persistent Elman/LSTM/GRU kernels (their blocks exchange
      # state through global memory, at row barriers or as tagged words, which racecheck does
      # not model; this covers their shared-memory staging and partial sums). The CUDA dialect only: the HIP sources
      # through NVRTC (hip_on_cuda) run the step-kernel loop, and took the 300 s alone.
      step "compute-sanitizer racecheck over the CUDA sequence kernels"
      RNN_BACKENDS=cuda RNN_REQUIRE_BACKENDS=cuda timeout ${SANITIZE_TIMEOUT:-300} \
        compute-sanitizer --tool racecheck --racecheck-report hazard \
        .gpu-bundle/bin/ops backend_suite::cuda::gpu_rnn_sequence \
        backend_suite::cuda::gpu_gated_sequence --test-threads=1 \
        > "$OUT/racecheck-ops.log" 2>&1; rc=$?
      grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result|FAILED" "$OUT/racecheck-ops.log" | tail -5
      [ $rc = 0 ] || { echo "!!! racecheck exit $rc"; status=1; } ;;&
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
    hgemm-grid)
      # Not in `all`: benches/workloads.rs --hgemm-grid (the dense forward, input-gradient and
      # weight-gradient products over M x N x K points, each with its route, cuBLAS on and off).
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      for dev in cuda:0 $ocl; do
        kind=${dev%%:*}
        step "hgemm grid on $dev"
        bash $run exec workloads --device "$dev" --hgemm-grid 2>&1 | tee "$OUT/hgemm-grid-$kind.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! hgemm grid on $dev failed"; status=1; }
      done
      [ -n "$ocl" ] || { echo "!!! no NVIDIA OpenCL device"; status=1; } ;;&
    stream)
      # Not in `all`: a training step reading batches from memory and from a DataStream (shard
      # files, the next batch copied while the step runs), on cuda:0 and NVIDIA OpenCL.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      for dev in cuda:0 $ocl; do
        for batch in 256 1024; do
          for gather in host device; do
            step "stream against memory on $dev, batch $batch, gathered on the $gather"
            # The debug lines say, per epoch, how long the loop waited for batches and what
            # the reading and gathering threads achieved.
            RUST_LOG=rnn::nn::stream_feed=debug bash $run exec stream --device "$dev" --batch $batch \
              --epochs 5 --repeat 3 --gather $gather 2>&1 | grep -E "^device|stream" | tail -n 60 | tee -a "$OUT/stream.log"
          done
        done
      done ;;&
    generate)
      # Not in `all`: benches/generate.rs (a Stepper, one token a call from the carried state,
      # against re-running the 48-token window; hidden 128 and 512, batch 1 and 32) on cuda:0
      # and NVIDIA OpenCL, scripts/generate_reference.py (the same model in PyTorch, eager and
      # its step as a CUDA graph), the table of both, then char_lstm on cuda:0, whose stepper
      # must draw the window re-run's characters while the context fits the window. The
      # step_graph lines show each shape of step recorded once as a CUDA graph.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "generation: rnn on cuda:0 (stepper and window re-run)"
      RUST_LOG=warn,rnn::nn::step_graph=debug bash $run exec generate --device cuda:0 2>&1 \
        | cut -c1-200 | tee "$OUT/generate-rnn-cuda.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! generate on cuda:0 failed"; status=1; }
      if [ -n "$ocl" ]; then
        step "generation: rnn on NVIDIA OpenCL ($ocl)"
        bash $run exec generate --device "$ocl" 2>&1 | tee "$OUT/generate-rnn-opencl.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! generate on $ocl failed"; status=1; }
      else
        echo "!!! no NVIDIA OpenCL device"; status=1
      fi
      step "generation: PyTorch cuda (eager and CUDA graph)"
      python3 scripts/generate_reference.py cuda 2>&1 | tee "$OUT/generate-torch.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! generate_reference.py failed"; status=1; }
      python3 scripts/generate_reference.py table "$OUT/generate-rnn-cuda.log" \
        "$OUT/generate-torch.log" | tee "$OUT/generate.md"
      step "char_lstm on cuda:0 (3 epochs): the stepper against the window re-run"
      bash $run exec char_lstm --device cuda:0 --epochs 3 2>&1 | tail -n 8 | tee "$OUT/generate-char-lstm.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! char_lstm on cuda:0 failed"; status=1; } ;;&
    bench-opencl|all)
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "benchmarks: rnn on NVIDIA OpenCL ($ocl)"
      torch=(); [ -s "$OUT/bench-torch-cuda.log" ] && torch=(--torch "$OUT/bench-torch-cuda.log")
      [ -n "$ocl" ] && bash $run exec workloads --device "$ocl" "${torch[@]}" 2>&1 | tee "$OUT/bench-rnn-opencl.log"
      step "real_gpu_neural_network on $ocl"
      [ -n "$ocl" ] && bash $run exec real_gpu_neural_network --device "$ocl" 2>&1 | tail -n 6 ;;&
    grid)
      # The recurrent shape grid (benches/recurrent_grid.points): PyTorch eager and _graph, ours
      # on cuda:0 and on NVIDIA OpenCL, joined into $OUT/grid.md. Not in `all`.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      points=${GRID_POINTS:-.gpu-bundle/recurrent_grid.points}
      step "recurrent grid: PyTorch cuda (eager and _graph, train and inference)"
      python3 .gpu-bundle/recurrent_grid.py cuda --points $points 2>&1 | tee "$OUT/grid-torch.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid.py failed"; status=1; }
      step "recurrent grid: rnn on cuda:0"
      bash $run exec recurrent_grid --device cuda:0 --points $points 2>&1 | tee "$OUT/grid-rnn-cuda.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid on cuda:0 failed"; status=1; }
      opencl=()
      if [ -n "$ocl" ]; then
        step "recurrent grid: rnn on NVIDIA OpenCL ($ocl)"
        bash $run exec recurrent_grid --device "$ocl" --points $points 2>&1 | tee "$OUT/grid-rnn-opencl.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid on $ocl failed"; status=1; }
        opencl=(--opencl "$OUT/grid-rnn-opencl.log")
      else
        echo "!!! no NVIDIA OpenCL device"; status=1
      fi
      python3 .gpu-bundle/recurrent_grid_table.py --torch "$OUT/grid-torch.log" \
        --cuda "$OUT/grid-rnn-cuda.log" "${opencl[@]}" > "$OUT/grid.md" \
        || { echo "!!! recurrent_grid_table.py failed"; status=1; }
      cat "$OUT/grid.md" ;;&
    grid-bf16)
      # The grid points whose names contain GRID_ONLY (default h1024) in bf16: PyTorch under
      # autocast (eager and _graph) and ours with --precision bf16 on cuda:0, joined into
      # $OUT/grid-bf16.md (issue 28's hidden-1024 rows). Not in `all`.
      points=.gpu-bundle/recurrent_grid.points
      only=${GRID_ONLY:-h1024}
      step "recurrent grid in bf16 ($only): PyTorch autocast"
      python3 .gpu-bundle/recurrent_grid.py cuda --points $points --only "$only" --autocast bf16 \
        2>&1 | tee "$OUT/grid-bf16-torch.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid.py --autocast bf16 failed"; status=1; }
      step "recurrent grid in bf16 ($only): rnn on cuda:0"
      bash $run exec recurrent_grid --device cuda:0 --points $points --only "$only" --precision bf16 \
        2>&1 | tee "$OUT/grid-bf16-rnn-cuda.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid --precision bf16 failed"; status=1; }
      python3 .gpu-bundle/recurrent_grid_table.py --torch "$OUT/grid-bf16-torch.log" \
        --cuda "$OUT/grid-bf16-rnn-cuda.log" > "$OUT/grid-bf16.md" \
        || { echo "!!! recurrent_grid_table.py failed"; status=1; }
      cat "$OUT/grid-bf16.md" ;;&
    recurrent-check)
      # Not in `all`: what a change to the recurrent kernels or the thin GEMMs must pass on the
      # GPU, in one short call (each part bounded, its log kept whole in $OUT).
      step "recurrent and thin-GEMM op suites (RNN_REQUIRE_BACKENDS=$RNN_REQUIRE_BACKENDS)"
      timeout ${CHECK_TIMEOUT:-200} bash $run exec ops gpu_gemm_thin gpu_rnn gpu_gated gpu_sequence \
        gpu_dense_ops > "$OUT/recurrent-check-ops.log" 2>&1 || { echo "!!! op suites failed (exit $?; 124: timed out)"; status=1; }
      grep -E "test result|FAILED|panicked" "$OUT/recurrent-check-ops.log" | head -20
      step "memcheck over the thin GEMMs, block-local and paired suites (cuda, hip-nvrtc)"
      RNN_BACKENDS=cuda RNN_REQUIRE_BACKENDS=cuda,hip-nvrtc timeout ${CHECK_TIMEOUT:-200} \
        compute-sanitizer --tool memcheck --report-api-errors no .gpu-bundle/bin/ops gpu_gemm_thin \
        gpu_rnn_sequence_block_local gpu_gated_sequence_block_local gpu_sequence_pair --test-threads=1 \
        > "$OUT/recurrent-check-memcheck.log" 2>&1 || { echo "!!! memcheck failed (exit $?; 124: timed out)"; status=1; }
      grep -E "ERROR SUMMARY|test result|FAILED" "$OUT/recurrent-check-memcheck.log" | head
      step "recurrent state, stacked/bidirectional and padded layers against the CPU (every GPU backend)"
      timeout ${CHECK_TIMEOUT:-200} bash $run exec nn recurrent_state stack_follows_cpu gpu_padded_batch > "$OUT/recurrent-check-nn.log" 2>&1 \
        || { echo "!!! recurrent-state tests failed (exit $?; 124: timed out)"; status=1; }
      grep -E "test result|FAILED|panicked" "$OUT/recurrent-check-nn.log" | head ;;&
    grid-algos)
      # Recurrent algorithms forced in turn (recurrent_grid --algos $GRID_ALGOS) at the small-hidden
      # points where the choice matters, ours only (about 4 minutes a device): one line per
      # (point, algorithm), `# ... cannot run` where the algorithm does not fit. Not in `all`.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      points=.gpu-bundle/recurrent_grid.points
      only=${GRID_ALGOS_ONLY:-lstm_h64_b64_t128_l1_uni,gru_h64_b64_t128_l1_uni,gru_h128_b64_t128_l1_uni,lstm_h128_b64_t128_l1_uni,elman_h64_b64_t128_l1_uni,elman_h128_b64_t128_l1_uni,lstm_h64_b256_t32_l2_uni,lstm_h64_b16_t32_l1_bi,elman_h64_b16_t32_l2_bi,gru_h128_b1_t512_l2_bi,elman_h512_b64_t128_l1_uni}
      for dev in cuda:0 $ocl; do
        name=cuda; [ "$dev" = cuda:0 ] || name=opencl
        step "recurrent grid, algorithms ${GRID_ALGOS:-all}: rnn on $dev"
        bash $run exec recurrent_grid --device "$dev" --points $points --only "$only" --algos "${GRID_ALGOS:-all}" \
          2>&1 | tee "$OUT/grid-algos-$name.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid --algos ${GRID_ALGOS:-all} on $dev failed"; status=1; }
      done
      [ -n "$ocl" ] || { echo "!!! no NVIDIA OpenCL device"; status=1; } ;;&
    grid-pair)
      # Not in `all`: the paired launch of a bidirectional layer's directions against the two
      # launches it replaces, ours only, at the grid's bidirectional points and shapes outside
      # the grid (small batches, where pairing should matter; large, where it should not).
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      points="$OUT/pair.points"
      { grep -E " bi( quick)?$" .gpu-bundle/recurrent_grid.points
        printf '%s\n' "lstm 96 8 64 1 bi" "gru 48 4 100 2 bi" "elman 200 32 64 1 bi" \
          "elman 100 128 64 2 bi" "lstm 100 300 48 1 bi"; } > "$points"
      for dev in cuda:0 $ocl; do
        name=cuda; [ "$dev" = cuda:0 ] || name=opencl
        for pair in on off; do
          step "bidirectional points, RNN_RECURRENT_PAIR=$pair: rnn on $dev"
          RNN_RECURRENT_PAIR=$pair bash $run exec recurrent_grid --device "$dev" --points "$points" \
            2>&1 | tee "$OUT/grid-pair-$name-$pair.log"
          [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid on $dev (pair $pair) failed"; status=1; }
        done
      done
      [ -n "$ocl" ] || { echo "!!! no NVIDIA OpenCL device"; status=1; } ;;&
    grid-boundary)
      # Not in `all`: ours on cuda:0 at the shapes of benches/recurrent_boundary.points, chosen
      # automatically, then with the persistent kernels and the per-step GEMMs forced, into
      # $OUT/grid-boundary.log: whether the automatic choice takes the faster side.
      points=.gpu-bundle/recurrent_boundary.points
      step "recurrent boundary shapes: rnn on cuda:0, automatic and forced"
      { bash $run exec recurrent_grid --device cuda:0 --points $points &&
        bash $run exec recurrent_grid --device cuda:0 --points $points --algos persistent,gemm; } \
        2>&1 | tee "$OUT/grid-boundary.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! recurrent_grid over the boundary shapes failed"; status=1; } ;;&
    grid-ncu)
      # Not in `all`: Nsight Compute over a window of 300 launches of the training loop at each
      # point of $GRID_NCU_POINTS (`;`-separated lines of benches/recurrent_grid.points; the
      # recurrence forced with RNN_RECURRENT_ALGO where set), then scripts/roofline.py per point
      # (steps counted by the optimizer's launches) into $OUT/grid-ncu.md.
      metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
      metrics+=,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum
      metrics+=,sm__sass_thread_inst_executed_op_fmul_pred_on.sum
      metrics+=,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
      tables=()
      IFS=';' read -ra ncu_points <<< "${GRID_NCU_POINTS:-gru 2048 1 32 1 uni;lstm 128 64 128 1 uni;elman 128 64 128 1 uni;gru 128 1 512 2 bi}"
      for point in "${ncu_points[@]}"; do
        name=$(echo $point | awk '{print $1"_h"$2"_b"$3"_t"$4"_l"$5"_"$6}')
        echo "$point" > "$OUT/ncu-$name.points"
        step "ncu: $name${RNN_RECURRENT_ALGO:+ (forced $RNN_RECURRENT_ALGO)}"
        ncu --clock-control none --csv --metrics "$metrics" --launch-skip 400 --launch-count 300 \
          .gpu-bundle/bin/recurrent_grid --device cuda:0 --points "$OUT/ncu-$name.points" \
          > "$OUT/ncu-$name.csv" 2> "$OUT/ncu-$name.err" || { tail -5 "$OUT/ncu-$name.err"; status=1; }
        tables+=("$OUT/ncu-$name.csv" auto)
      done
      python3 scripts/roofline.py "${tables[@]}" 2>&1 | tee "$OUT/grid-ncu.md" ;;&
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
    profile-opencl)
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      if [ -z "$ocl" ]; then echo "!!! no NVIDIA OpenCL device"; status=1; continue; fi
      : > "$OUT/profile-opencl.log"
      for fig in ${PROFILE_FIGURES:-w1_mlp_b256_step w1_mlp_b4096_step w2_rnn_step w5_lstm_step w6_gru_step}; do
        step "OpenCL kernel times: $fig on $ocl"
        RNN_PROFILE_KERNELS=1 bash $run exec workloads --device "$ocl" --only "$fig" --profile 2 2>&1 \
          | tee -a "$OUT/profile-opencl.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! OpenCL profile of $fig failed"; status=1; }
      done
      python3 scripts/opencl_roofline.py "$OUT/profile-opencl.log" --ncu-dir "$OUT" --ncu-steps 2 2>&1 \
        | tee "$OUT/roofline-opencl.md"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! opencl_roofline.py failed"; status=1; } ;;&
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
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! torch_compare failed"; status=1; }
      # Half-precision checkpoints both ways: ours (Network::save_as) into bf16/f16 torch
      # models with strict=True, and PyTorch's own half checkpoints loaded and predicted here
      # against PyTorch's forward in that precision (1e-2 relative).
      step "half-precision checkpoints between rnn and PyTorch"
      for d in "${dirs[@]}"; do
        dev=cuda:0; [ "$d" = /tmp/torch-cmp/opencl ] && dev=$ocl
        python3 scripts/torch_half.py "$d" 2>&1 | grep -v -i numpy | tee -a "$OUT/torch-half.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! torch_half failed on $d"; status=1; }
        bash $run exec torch_export --device "$dev" --out "$d" --check-half 2>&1 \
          | grep -E "PASS|FAIL|torch_export|rror" | tee -a "$OUT/torch-half.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! check-half failed on $dev"; status=1; }
      done ;;&
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
    cold-start)
      # benches/cold_start.rs: each figure in a fresh process, cold (empty RNN_CACHE_DIR) then
      # warm, with the op-set modules built on first use and prefetched; the example binary is
      # found next to the bench in .gpu-bundle/bin.
      ocl=$(bash $run exec devices 2>/dev/null | grep -oE "opencl:[0-9]+:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
      step "cold start: cuda:0 and ${ocl:-no NVIDIA OpenCL device}"
      [ -n "$ocl" ] || { echo "!!! no NVIDIA OpenCL device"; status=1; }
      bash $run exec cold_start --device cuda:0 ${ocl:+--device "$ocl"} 2>&1 | tee "$OUT/cold-start.log"
      [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! cold_start failed"; status=1; }
      # Which modules a cold prefetching run builds, when, and what the example waits for: the
      # example once per device with empty caches and RUST_LOG=rnn=debug (module, epoch, end lines).
      for dev in cuda:0 $ocl; do
        step "cold start: module timeline on $dev"
        cache=$(mktemp -d); driver_cache=$(mktemp -d); t0=$(date +%s.%N)
        env RNN_CACHE_DIR="$cache" CUDA_CACHE_PATH="$driver_cache" RUST_LOG=rnn=debug \
          bash $run exec real_gpu_neural_network --device "$dev" --no-progress \
          > "$OUT/cold-modules-${dev//:/_}.log" 2>&1 || { echo "!!! example on $dev failed"; status=1; }
        awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "whole process: %.2f s\n", b - a }' \
          | tee -a "$OUT/cold-modules-${dev//:/_}.log"
        grep -E "op-set module|epoch 1/|seconds=|^\(" "$OUT/cold-modules-${dev//:/_}.log" | cut -c1-160
        rm -rf "$cache" "$driver_cache"
      done
      shim=$PWD/.gpu-bundle/hipshim
      step "cold start: hip:0 through the shim (tests/hip-shim)"
      if [ -f "$shim/rocm6/libamdhip64.so" ]; then
        env RNN_HIP_LIBRARY="$shim/rocm6/libamdhip64.so" RNN_HIPSHIM_DIR="$shim" RNN_BACKENDS=hip \
          bash $run exec cold_start --device hip:0 2>&1 | tee "$OUT/cold-start-hip.log"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "!!! cold_start on hip:0 failed"; status=1; }
      else
        echo "!!! $shim/rocm6/libamdhip64.so missing: build the bundle with scripts/bundle.sh"; status=1
      fi
      step "devices --warm-cache (every device, into an empty cache)"
      RNN_CACHE_DIR=/tmp/rnn-cache-warm-cmd bash $run exec devices --warm-cache 2>&1 \
        | sed -n '/^Warm cache/,$p' | tee "$OUT/warm-cache.log"
      rm -rf /tmp/rnn-cache-warm-cmd ;;
    multi-gpu)
      # NVLink multicast stays off on these shared hosts (KINDS.md): keep it so for every
      # process started here, rnn's and torchrun's.
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      # NCCL from the PyTorch install (its nvidia-nccl-cu12/-cu13 wheel, site-packages/nvidia/
      # nccl/lib), so rnn and DDP use the same one.
      site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
      nccl="$site/nvidia/nccl/lib"
      if [ ! -e "$nccl/libnccl.so.2" ] && [ -n "$site" ]; then
        nccl=$(dirname "$(find "$site/nvidia" -maxdepth 4 -name 'libnccl.so.2*' 2>/dev/null | head -1)")
      fi
      if [ -e "$nccl/libnccl.so.2" ]; then
        export LD_LIBRARY_PATH="$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      else
        echo "!!! libnccl.so.2 not found in the PyTorch install"; status=1
      fi
      gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
      step "multi-gpu: $gpus GPU(s), NCCL from ${nccl:-nowhere}"
      nvidia-smi topo -m 2>/dev/null | head -n $((gpus + 2))
      bash $run exec devices 2>&1 | sed -n '/^Collectives/,/^$/p' | tee "$OUT/multi-devices.log"
      step "correctness: N replicas with batch B/N == one GPU with batch B (RNN_REQUIRE_BACKENDS=cuda,nccl)"
      RNN_REQUIRE_BACKENDS=cuda,nccl timeout 300 .gpu-bundle/bin/nn data_parallel nccl_loop --nocapture \
        > "$OUT/multi-tests.log" 2>&1 || {
          status=1; echo "!!! data_parallel tests FAILED (the log's end, unfiltered:)"
          tail -n 25 "$OUT/multi-tests.log"; }
      grep -E "^test |rel err|NCCL|SKIP|panicked|test result" "$OUT/multi-tests.log"
      step "MNIST example, one process per GPU through torchrun (rendezvous + ncclCommInitRank)"
      if command -v torchrun >/dev/null; then
        timeout 300 torchrun --standalone --nproc_per_node 2 --no-python .gpu-bundle/bin/data_parallel \
          --epochs 5 2>&1 | tail -n 8 | tee "$OUT/multi-mnist-torchrun.log" || status=1
      fi
      step "throughput: rnn (one process, a thread per GPU) and PyTorch DDP (torchrun), samples/s"
      counts="1"; [ "$gpus" -ge 2 ] && counts+=" 2"; [ "$gpus" -ge 4 ] && counts+=" 4"
      for spec in "mlp4096 16384 16" "w2 4096 8"; do
        set -- $spec
        for n in $counts; do
          devs=$(seq -s, -f 'cuda:%g' 0 $((n - 1)))
          timeout 300 .gpu-bundle/bin/data_parallel --bench "$1" --batch "$2" --steps "$3" --epochs 5 \
            --devices "$devs" 2>&1 | grep -E "^bench=|^allreduce|error" | tee -a "$OUT/multi-bench.log" || status=1
          timeout 300 torchrun --standalone --nproc_per_node "$n" scripts/ddp_reference.py "$1" "$2" 2>&1 \
            | grep -E "^ddp=|Error" | tee -a "$OUT/multi-bench.log"
          if [ "$n" -ge 2 ]; then
            # Each layer's all-reduce overlapping the backward of the layers before it.
            timeout 300 .gpu-bundle/bin/data_parallel --bench "$1" --batch "$2" --steps "$3" --epochs 5 \
              --devices "$devs" --overlap 2>&1 | grep -E "^bench=|error" | tee -a "$OUT/multi-bench.log" || status=1
          fi
        done
        if [ "$gpus" -ge 2 ]; then
          # The multi-process path (rendezvous, one process per GPU) on the same workload.
          RNN_RENDEZVOUS_PORT=29655 timeout 300 torchrun --standalone --nproc_per_node 2 --no-python \
            .gpu-bundle/bin/data_parallel --bench "$1" --batch "$2" --steps "$3" --epochs 5 2>&1 | grep -E "^bench=|error" \
            | sed 's/^/multi-process /' | tee -a "$OUT/multi-bench.log"
        fi
      done
      python3 - "$OUT/multi-bench.log" <<'PY' | tee "$OUT/multi-summary.md"
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r"(multi-process )?(bench|ddp)=(\S+) gpus=(\d+) batch=(\d+) samples_per_sec=(\d+)", line)
    if m:
        who = ("rnn-mp" if m.group(1) else "rnn") if m.group(2) == "bench" else "ddp"
        rows[(m.group(3), who, int(m.group(4)))] = float(m.group(6))
print("| workload | who | gpus | samples/s | scaling vs 1 GPU | rnn / DDP |")
print("|---|---|---|---|---|---|")
for (w, who, n), v in sorted(rows.items()):
    plain = w.split("+")[0]
    base = rows.get((plain, "ddp" if who == "ddp" else "rnn", 1))
    ddp = rows.get((plain, "ddp", n))
    scale = f"{v / base:.2f}x" if base else "-"
    ratio = f"{v / ddp:.2f}" if ddp and who != "ddp" else "-"
    print(f"| {w} | {who} | {n} | {v:.0f} | {scale} | {ratio} |")
PY
      ;;
    *) ;;
  esac
done
exit $status
