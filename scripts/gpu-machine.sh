#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ../shared/tools/gpu-bundle built
# .gpu-bundle here (the device has no Rust toolchain). One call does everything that belongs
# together, so device time is spent once:
#   bash scripts/gpu-machine.sh [tests|sanitize|example|bench|bench-opencl|bench-cpu|profile|all]...
#   bash scripts/gpu-machine.sh multi-gpu     (on nvidia-h200-x2/-x4: NCCL data parallel; not in all)
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
    bench-cpu|all)
      step "CPU backend vs PyTorch CPU, both pinned to 2 cores (taskset -c 0,1)"
      taskset -c 0,1 .gpu-bundle/bin/workloads --device cpu 2>&1 | tee "$OUT/bench-rnn-cpu.log"
      taskset -c 0,1 python3 .gpu-bundle/pytorch_reference.py cpu 2 2>&1 | tee "$OUT/bench-torch-cpu.log" ;;&
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
      RNN_REQUIRE_BACKENDS=cuda,nccl timeout 300 .gpu-bundle/bin/nn data_parallel --nocapture \
        > "$OUT/multi-tests.log" 2>&1 || { status=1; echo "!!! data_parallel tests FAILED"; }
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
