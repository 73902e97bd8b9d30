#!/usr/bin/env bash
# Builds and runs capsule's speed checks in a Release build (./build-torch, -O2): the eager runtime
# against LibTorch (capsule_bench_torch), then the planning and loading targets of capsule_bench.
# Installs the Debian packages it needs (only those missing) first. See docs/benchmarks.md.
#
#   tools/bench.sh [--torch-only] [capsule_bench_torch flags...]
#
# Flags other than --torch-only go to capsule_bench_torch (--capsule_quick, --capsule_strict,
# --capsule_only=NAME). Everything runs with one BLAS and one OpenMP thread.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

torch_only=0
torch_args=()
for arg in "$@"; do
  case "$arg" in
    --torch-only) torch_only=1 ;;
    *) torch_args+=("$arg") ;;
  esac
done

# The packages tools/setup.sh installs, plus LibTorch and the pthread build of OpenBLAS (the BLAS
# that Debian's libtorch runs through the libblas.so.3 alternative).
packages=(cmake make g++ clang libclang-rt-14-dev ccache
          libtomlplusplus-dev libboost-program-options-dev doctest-dev libbenchmark-dev
          libtorch-dev libopenblas0-pthread)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "capsule bench: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if command -v update-alternatives >/dev/null; then
  echo "capsule bench: libblas.so.3 -> $(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null |
                                         sed -n 's/^Value: //p')"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-torch -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
      -DCAPSULE_BENCHMARKS=ON -DCAPSULE_TORCH_BENCH=ON >/dev/null
targets=(capsule_bench_torch)
[ "$torch_only" -eq 1 ] || targets+=(capsule_bench)
cmake --build build-torch -j"$jobs" --target "${targets[@]}"

# One thread everywhere: OpenBLAS reads OPENBLAS_NUM_THREADS when it loads, before main runs.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The peer at its best: OpenBLAS 0.3.21 does not know newer CPU models and runs its Haswell (AVX2)
# kernels on AVX-512 CPUs it cannot name. Name the core from the CPU's flags, unless the caller
# chose one; the benchmark's header prints the core OpenBLAS then runs.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  case " $flags " in
    *" avx512_bf16 "*) export OPENBLAS_CORETYPE=Cooperlake ;;
    *" avx512f "*) export OPENBLAS_CORETYPE=SkylakeX ;;
  esac
fi
[ -n "${OPENBLAS_CORETYPE:-}" ] && echo "capsule bench: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
./build-torch/tools/bench/capsule_bench_torch "${torch_args[@]}"
if [ "$torch_only" -eq 0 ]; then
  ./build-torch/tools/bench/capsule_bench --capsule_targets_only
fi
