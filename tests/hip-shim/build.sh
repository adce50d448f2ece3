#!/usr/bin/env bash
# Builds the hipshim test fixture (see README.md) with the system C compiler; no CUDA SDK needed.
#
#   tests/hip-shim/build.sh OUT_DIR
#
# OUT_DIR/rocm6/libamdhip64.so  presents ROCm 6's ABI (hipGetDevicePropertiesR0600 + legacy layout)
# OUT_DIR/rocm5/libamdhip64.so  presents ROCm 5's (the pre-6 hipDeviceProp_t only)
# OUT_DIR/selftest              C self-test of the shim (selftest.c)
# kernels-hip/nvrtc_prelude.h is embedded in both libraries. Files are replaced by rename, so a
# concurrent build never leaves a half-written library behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: tests/hip-shim/build.sh OUT_DIR}
cc=${CC:-cc}
prelude=$root/kernels-hip/nvrtc_prelude.h
[ -f "$prelude" ] || { echo "build.sh: $prelude not found" >&2; exit 1; }
case $prelude in *'"'* | *'\'*) echo "build.sh: unusable path $prelude" >&2; exit 1 ;; esac

flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -O2 -fPIC -Wall -Wextra -Werror -Wmissing-prototypes
  -Wshadow -Wstrict-prototypes -fvisibility=hidden -I"$here")
srcs=()
for f in loader errors device exec hiprtc; do srcs+=("$here/$f.c"); done

mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for major in 6 5; do
  "$cc" "${flags[@]}" -shared -DHIPSHIM_ROCM_MAJOR=$major -DHIPSHIM_PRELUDE_PATH="\"$prelude\"" \
    -Wl,-z,defs -Wl,-Bsymbolic -Wl,-soname,libamdhip64.so -o "$tmp/libamdhip64-rocm$major.so" "${srcs[@]}" \
    -ldl -lpthread
done
"$cc" "${flags[@]}" -o "$tmp/selftest" "$here/selftest.c" -ldl

for major in 6 5; do
  mkdir -p "$out/rocm$major"
  mv -f "$tmp/libamdhip64-rocm$major.so" "$out/rocm$major/libamdhip64.so"
done
mv -f "$tmp/selftest" "$out/selftest"
echo "hipshim: built $out/rocm6/libamdhip64.so, $out/rocm5/libamdhip64.so, $out/selftest"
