#!/usr/bin/env bash
# Installs the Debian packages capsule builds with (only those missing), then configures and
# builds the main tree in ./build. Sourced by tools/run.sh and tools/test.sh; safe to re-run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(cmake make g++ clang libclang-rt-14-dev ccache
          libtomlplusplus-dev libboost-program-options-dev doctest-dev libbenchmark-dev
          libtorch-dev libopenblas0-pthread)
# zsh and fish: only to syntax-check the completion scripts `capsule completions` prints (CTest
# cli.completions_zsh / cli.completions_fish, which SKIP with the reason when they are missing);
# with --no-install-recommends they are a few MB.
packages+=(zsh fish)
# libopenblas0-pthread: Debian's LibTorch calls whichever libblas.so.3 the alternatives select,
# which is netlib's reference BLAS unless OpenBLAS is installed; the LibTorch provider and the
# benchmark peer should run the BLAS a user would (docs/benchmarks.md).
# Graphviz's `dot` renders the plan's DOT output in the test cli.dot_renders (skipped without it).
packages+=(graphviz)
# Node.js runs the schema checks (tools/schema-check, CTest label `schemas`); any node >= 18 on
# PATH will do, Debian's otherwise.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "capsule setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The schema checker's pinned npm packages, reinstalled only when package-lock.json changed.
lock=tools/schema-check/package-lock.json
stamp=tools/schema-check/node_modules/.capsule-lock-sha256
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "capsule setup: npm ci --prefix tools/schema-check"
  npm ci --prefix tools/schema-check --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" > "$stamp"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAPSULE_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
