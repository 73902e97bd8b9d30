#!/usr/bin/env bash
# Builds the project with AddressSanitizer + UndefinedBehaviorSanitizer (-DCAPSULE_SANITIZE=ON)
# in build-asan/ and runs every CTest test except the gpu and fuzz labels.
#
#   tools/dev/sanitize.sh                 # configure, build, test
#   tools/dev/sanitize.sh -R gallery      # extra arguments go to ctest
#
# Environment: BUILD_DIR (default build-asan), JOBS (default 2), CXX (compiler, default the
# system's), CMAKE_ARGS (extra configure arguments). Any sanitizer report fails the run:
# UBSan aborts on the first error (-fno-sanitize-recover=undefined) and ASan halts on errors and
# reports leaks at exit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-build-asan}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
jobs="${JOBS:-2}"

configure=(-S "$root" -B "$build" -DCAPSULE_SANITIZE=ON -DCAPSULE_BENCHMARKS=OFF -DCAPSULE_LIBTORCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [[ -n "${CXX:-}" ]]; then configure+=("-DCMAKE_CXX_COMPILER=$CXX"); fi
# shellcheck disable=SC2206  # CMAKE_ARGS is a space-separated list on purpose
if [[ -n "${CMAKE_ARGS:-}" ]]; then configure+=($CMAKE_ARGS); fi

echo "== configure $build"
cmake "${configure[@]}"
echo "== build ($jobs jobs)"
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

echo "== test (labels gpu and fuzz excluded)"
cd "$build"
ctest --output-on-failure -j "$jobs" -LE '^(gpu|fuzz)$' "$@"
