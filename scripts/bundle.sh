#!/usr/bin/env bash
# Builds the GPU-machine bundle: ../shared/tools/gpu-bundle, plus the `workloads` bench binary
# (the bundle tool skips bench targets), PyTorch's reference script for side-by-side timing, and
# the tests/hip-shim HIP runtime over CUDA (.gpu-bundle/hipshim/{rocm6,rocm5}/libamdhip64.so and
# its selftest), built here because the GPU machine may have no C compiler
# (scripts/gpu-machine.sh hip-shim).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# The tool refuses (exit 1) a bundle over its size limit after writing it whole; the binaries are
# packed into one xz archive below, which scripts/gpu-machine.sh unpacks on the GPU machine.
../shared/tools/gpu-bundle "$@" || [ -x .gpu-bundle/run.sh ]
# The executable cargo built for bench target $1.
bench_exe() {
  cargo bench --no-run --bench "$1" --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
cp "$(bench_exe workloads)" .gpu-bundle/bin/workloads && strip .gpu-bundle/bin/workloads
# Cold and warm start (scripts/gpu-machine.sh cold-start); finds the example next to it in bin/.
cp "$(bench_exe cold_start)" .gpu-bundle/bin/cold_start && strip .gpu-bundle/bin/cold_start
# The recurrent shape grid (scripts/gpu-machine.sh grid).
cp "$(bench_exe recurrent_grid)" .gpu-bundle/bin/recurrent_grid && strip .gpu-bundle/bin/recurrent_grid
# A training step from memory against one from a DataStream (scripts/gpu-machine.sh stream).
cp "$(bench_exe stream)" .gpu-bundle/bin/stream && strip .gpu-bundle/bin/stream
# Tokens/s of a Stepper against the window re-run (scripts/gpu-machine.sh generate).
cp "$(bench_exe generate)" .gpu-bundle/bin/generate && strip .gpu-bundle/bin/generate
cp ../shared/bench/pytorch_reference.py .gpu-bundle/
# The grid, PyTorch's side of it and the table script.
cp benches/recurrent_grid.points benches/recurrent_boundary.points scripts/recurrent_grid.py scripts/recurrent_grid_table.py .gpu-bundle/
# An earlier build of the bench, for before/after profiles (scripts/gpu-machine.sh profile).
# Build it in its own clone with its own CARGO_TARGET_DIR: cargo's dep-info paths are relative,
# so a target directory shared with another tree takes that tree's artifacts as fresh.
if [ -n "${BASE_BENCH:-}" ]; then
  cp "$BASE_BENCH" .gpu-bundle/bin/workloads-base && strip .gpu-bundle/bin/workloads-base
fi
bash tests/hip-shim/build.sh .gpu-bundle/hipshim
strip --strip-unneeded .gpu-bundle/hipshim/rocm*/libamdhip64.so .gpu-bundle/hipshim/selftest
tar -C .gpu-bundle -cJf .gpu-bundle/bin.tar.xz bin && rm -rf .gpu-bundle/bin
echo "bundle: + workloads, cold_start, recurrent_grid, stream, generate, hipshim, pytorch_reference.py ($(du -sm .gpu-bundle | cut -f1) MiB)"
