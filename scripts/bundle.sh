#!/usr/bin/env bash
# Builds the GPU-machine bundle: ../shared/tools/gpu-bundle, plus the `workloads` bench binary
# (the bundle tool skips bench targets) and PyTorch's reference script for side-by-side timing.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/tools/gpu-bundle "$@"
bench=$(cargo bench --no-run --bench workloads --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "workloads":
        print(m["executable"])')
cp "$bench" .gpu-bundle/bin/workloads && strip .gpu-bundle/bin/workloads
cp ../shared/bench/pytorch_reference.py .gpu-bundle/
# An earlier build of the bench, for before/after profiles (scripts/gpu-machine.sh profile).
if [ -n "${BASE_BENCH:-}" ]; then
  cp "$BASE_BENCH" .gpu-bundle/bin/workloads-base && strip .gpu-bundle/bin/workloads-base
fi
echo "bundle: + workloads, pytorch_reference.py ($(du -sm .gpu-bundle | cut -f1) MiB)"
