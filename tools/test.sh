#!/usr/bin/env bash
# Sets everything up and passes the tests: the main build's CTest suite, then its GPU-labelled
# tests (each reports a skip and the reason on a machine without a CUDA device, and they are
# counted apart), the same engine tests under AddressSanitizer and
# UndefinedBehaviorSanitizer, and two bounded libFuzzer runs over the loaders (clang): one by
# runs on short inputs, one by time on long inputs (nesting and length blow-ups need length).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
log=$(mktemp)
gpu_log=$(mktemp)
trap 'rm -f "$log" "$gpu_log"' EXIT

echo "== tests (main build)"
(cd build && ctest --output-on-failure -j"$jobs" -LE 'gpu|fuzz') | tee -a "$log"

# The GPU parity cases (label gpu) need a CUDA device. Without one each reports a skip, saying
# why; they are shown apart and left out of the closing count, since a skip is not a pass.
echo "== GPU-labelled tests (without a usable CUDA device each reports a skip and the reason)"
if ! (cd build && ctest --output-on-failure -j"$jobs" -L gpu) >"$gpu_log" 2>&1; then
  cat "$gpu_log"
  exit 1
fi
gpu_total=$(awk '/tests passed, [0-9]+ tests failed out of/ {print $NF}' "$gpu_log")
gpu_skipped=$(grep -c '(Skipped)' "$gpu_log" || true)
gpu_reason=$(grep -m1 -o 'capsule-skip: .*' build/Testing/Temporary/LastTest.log || true)
echo "gpu: ${gpu_total:-0} tests, ${gpu_skipped} skipped${gpu_reason:+ (${gpu_reason#capsule-skip: })}"

echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
JOBS="$jobs" bash tools/dev/sanitize.sh | tee -a "$log"

echo "== bounded libFuzzer runs over the loaders: 20,000 short inputs, then 90 s of inputs up to 256 KiB; 200,000 runs of the JSON reader"
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAPSULE_FUZZ=ON \
  -DCAPSULE_BENCHMARKS=OFF -DCAPSULE_LIBTORCH=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target capsule_fuzz_loaders capsule_fuzz_json
fuzz_log=$(mktemp)
if ! (cd build-fuzz && ctest --output-on-failure -V -L fuzz) >"$fuzz_log" 2>&1; then
  cat "$fuzz_log"
  exit 1
fi
# The verbose log is long; keep libFuzzer's final statistics and the verdict.
grep -E 'stat::number_of_executed_units|tests passed' "$fuzz_log" | tee -a "$log"
executions=$(awk '/stat::number_of_executed_units/ {n += $NF} END {print n + 0}' "$fuzz_log")
rm -f "$fuzz_log"
echo "fuzz: $executions executions over the loaders, every renderer and the JSON reader, 0 crashes (ASan + UBSan)"

# One closing line over all three stages (each stage already stopped the script on a failure).
read -r total failed < <(awk '/tests passed, [0-9]+ tests failed out of/ {f += $4; t += $NF} END {print t + 0, f + 0}' "$log")
echo "all stages: $((total - failed)) passed, $failed failed"
