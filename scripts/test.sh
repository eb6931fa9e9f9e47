#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test this machine can run
# (labels fast, mpi, gui), then checks that no test ran zero cases or skipped unexpectedly.
# Other suites by name:
#   scripts/test.sh gpu         tests that need a GPU (label gpu)
#   scripts/test.sh validation  predictions vs published measurements (label validation)
#   scripts/test.sh ci          what CI runs (.ci/run): the above, then the release build
#                               (warnings are errors) and its fast tests, the fast and mpi labels
#                               under AddressSanitizer + UBSan, and clang-tidy on changed files
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export QT_QPA_PLATFORM=offscreen
jobs=$(nproc)

# The default configuration: build, every local test, the zero-tests/skips check.
default_suite() {
  scripts/setup.sh default
  ctest --preset default -j "$jobs"
  scripts/check_test_log.sh build
}

# Release as users build it, with warnings as errors: build and run the fast label. CUDA is off
# here to keep CI within its budget: the default build already compiles it for sm_80 and sm_90.
release_suite() {
  cmake --preset ci-release
  cmake --build --preset ci-release -j "$jobs"
  ctest --preset ci-release -L fast -j "$jobs"
  scripts/check_test_log.sh build-release
}

# AddressSanitizer + UBSan: only what the fast and mpi labels need (no GUI, bench, CUDA, fuzz).
# The bf16 twins of the mpi layout cases run the same runtime code as their fp32 cases (the bf16
# kernels are covered under the sanitizers by the fast op test), so they are left out here to keep
# CI within its time budget.
asan_suite() {
  cmake --preset debug-asan
  cmake --build --preset debug-asan -j "$jobs"
  # Leaks in third-party libraries only (Open MPI, OpenBLAS): see the suppressions file. Their
  # allocation stacks need the slow unwinder (the libraries have no frame pointers) and Open MPI's
  # components kept loaded, or the frames read "<unknown module>" and no suppression matches.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions="$PWD/tests/sanitizers/lsan.supp":print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  OMPI_MCA_memory=^patcher OMPI_MCA_mca_base_component_disable_dlclose=1 \
    ctest --preset debug-asan -j "$jobs" -E '^executor_mpi_.*_bf16$'
  scripts/check_test_log.sh build-asan
}

case "${1:-}" in
  gpu|validation) scripts/setup.sh default; ctest --test-dir build -L "$1" --output-on-failure ;;
  "") default_suite ;;
  ci)
    default_suite
    release_suite
    asan_suite
    scripts/tidy.sh -b build
    ;;
  *) echo "usage: scripts/test.sh [gpu|validation|ci]" >&2; exit 2 ;;
esac
