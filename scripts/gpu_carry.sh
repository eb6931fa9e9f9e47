#!/usr/bin/env bash
# Packs what scripts/gpu_checks.sh needs on a GPU machine that has the CUDA toolkit but not our
# Debian packages into one compressed archive (a device call carries at most 64 MiB; OpenBLAS
# alone is 36 MB): the release build's GPU binaries (debug info stripped) under gpu-build/, the shared
# libraries they need except the CUDA ones (the GPU machine's toolkit provides those; libcublasLt
# alone is 517 MB) in gpu-build/gpu-libs/ (the tests' data travels with the checkout, tests/data).
# On the GPU machine: tar -xzf gpu-carry/bundle.tgz; scripts/gpu_checks.sh gpu-build ...
# Usage: scripts/gpu_carry.sh BUILD
# Build first (docs/cuda.md): cmake --preset release -B build-gpu -DPARALLAX_CUDA=ON \
#   -DPARALLAX_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DPARALLAX_GUI=OFF, then the targets below.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:?build dir}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dest=$stage/gpu-build
bins=(cli/parallax tests/executor/executor_cuda_probe_test tests/executor/executor_backend_ops_test
      tests/executor/executor_cuda_gpu_test bench/bench_cuda tests/planner/planner_validation_test
      tests/profiler/profiler_device_tracer_test)
mkdir -p "$dest/gpu-libs"
# The tests find their data (tests/data) through the source directory compiled into them:
# gpu_checks.sh links that path to the checkout on the GPU machine.
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$b/CMakeCache.txt" > "$dest/source_dir.txt"
# Not libstdc++ and libgcc_s: the GPU machine's are newer and serve as well.
for f in "${bins[@]}"; do
  mkdir -p "$dest/$(dirname "$f")"
  strip --strip-debug -o "$dest/$f" "$b/$f"  # symbols kept: stacks of a hang name our functions
  ldd "$b/$f" | awk '/=>/ {print $3}' |
    { grep -vE 'libcuda\.|libcudart|libcublas|libnccl|libcupti|libnvrtc|libnvJitLink|/libc\.so|/libm\.so|ld-linux|libpthread|libdl\.|librt\.|libstdc\+\+|libgcc_s' || true; } |
    while read -r lib; do cp -Ln "$lib" "$dest/gpu-libs/"; done
done
mkdir -p gpu-carry
tar -czf gpu-carry/bundle.tgz -C "$stage" gpu-build
du -sh "$dest" gpu-carry/bundle.tgz
