#!/usr/bin/env bash
# tools/gpu-check.sh where there is no GPU: its usage, its argument errors, a bundle of the built
# capsule_gpu_tests (what is carried, what is left to the GPU machine), and the run's refusal
# without a device, naming the reason, with the environment phase written and no ledger.
# Also the binary's own refusal to write a ledger without a device. Skips (77) where a device is
# usable, since the refusal cannot be seen there.
# Usage: gpu_check_script_check.sh SOURCE_DIR WORK_DIR CAPSULE_GPU_TESTS
set -euo pipefail
source_dir=$1
work=$2
binary=$3
script=$source_dir/tools/gpu-check.sh
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
expect_status() {  # expected actual what
  [[ $1 == "$2" ]] || fail "$3: exit status $2, expected $1"
}
expect_in() {  # file text what
  grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$3: \`$2\` not in $1"; }
}

if "$binary" --probe >"$work/probe.txt" 2>&1; then
  echo "SKIP: a CUDA device is usable here: $(cat "$work/probe.txt")"
  exit 77
fi
expect_in "$work/probe.txt" "no usable CUDA device: " "capsule_gpu_tests --probe"

status=0
"$binary" --ledger "$work/ledger.json" >"$work/ledger.out" 2>&1 || status=$?
expect_status 1 "$status" "capsule_gpu_tests --ledger without a device"
expect_in "$work/ledger.out" "capsule_gpu_tests --ledger: no usable CUDA device: " "capsule_gpu_tests --ledger"
[[ ! -e $work/ledger.json ]] || fail "capsule_gpu_tests wrote a ledger without a device"

bash "$script" --help >"$work/help.txt"
expect_in "$work/help.txt" "usage: tools/gpu-check.sh --bundle" "--help"
expect_in "$work/help.txt" "--quick" "--help"

status=0
bash "$script" --frobnicate >"$work/bad.out" 2>&1 || status=$?
expect_status 2 "$status" "an unknown argument"
expect_in "$work/bad.out" "gpu-check: unknown argument \`--frobnicate\`" "an unknown argument"

status=0
bash "$script" --out >"$work/noval.out" 2>&1 || status=$?
expect_status 1 "$status" "--out without a folder"
expect_in "$work/noval.out" "gpu-check: --out needs a folder" "--out without a folder"

# The bundle of the binary already built (no nested build from a test).
build_dir=$(cd "$(dirname "$binary")/../.." && pwd)
CAPSULE_BUILD_DIR=$build_dir bash "$script" --bundle "$work/bundle" --no-build >"$work/bundle.out" 2>&1 ||
  { cat "$work/bundle.out" >&2; fail "--bundle failed"; }
[[ -x $work/bundle/bin/capsule_gpu_tests ]] || fail "the bundle has no bin/capsule_gpu_tests"
expect_in "$work/bundle/BUNDLE.txt" "carried: " "BUNDLE.txt"
expect_in "$work/bundle/BUNDLE.txt" "libtomlplusplus" "BUNDLE.txt (toml++ is carried)"
expect_in "$work/bundle/BUNDLE.txt" "resolved on the GPU machine: " "BUNDLE.txt"
expect_in "$work/bundle/BUNDLE.txt" "libcublas" "BUNDLE.txt (cuBLAS is left to the GPU machine)"
# Boost's .debs for phase 3's CLI: carried when apt could download them, else the bundle says
# that phase 3 will build no CLI.
if [[ -d $work/bundle/debs ]]; then
  compgen -G "$work/bundle/debs/libboost-program-options*.deb" >/dev/null || fail "debs/ has no Boost.Program_options"
  expect_in "$work/bundle/BUNDLE.txt" "boost (debs/: " "BUNDLE.txt (Boost's .debs are carried)"
else
  expect_in "$work/bundle.out" "phase 3 will build no CLI" "--bundle without Boost's .debs"
fi
for lib in "$work"/bundle/lib/*; do
  case "$(basename "$lib")" in
    libcuda* | libcublas* | libcudnn* | libc.so* | libm.so*) fail "the bundle carries $(basename "$lib")" ;;
    libboost*) fail "the bundle carries Boost ($(basename "$lib")): capsule_gpu_tests must not link it" ;;
  esac
done

# The torch-free libraries' objects for phase 3 (cmake/gpu_prebuilt.cmake), with their manifest.
# --no-build carries them only when no source they cover is newer than they are, else says why.
if [[ ! -d $work/bundle/prebuilt ]]; then
  expect_in "$work/bundle.out" "no prebuilt objects carried: " "--bundle --no-build after a source changed"
  expect_in "$work/bundle.out" "changed after" "--bundle --no-build after a source changed"
  echo "note: the build's objects are older than a source, so the bundle carries none; the prebuilt checks are not run"
else
  for key in compiler flags build_type cuda cuda_architectures commit; do
    grep -q "^$key=." "$work/bundle/prebuilt/manifest.txt" || fail "prebuilt/manifest.txt has no $key= line"
  done
  grep -qE '^sources=[0-9a-f]{64}$' "$work/bundle/prebuilt/manifest.txt" || fail "prebuilt/manifest.txt has no sources digest"
  for target in capsule_engine capsule_runtime capsule_handlers_reference capsule_checkers capsule_handlers_cuda \
    capsule_examples capsule_libtorch_parity_tables; do
    [[ -n $(find "$work/bundle/prebuilt/$target" -name '*.o' 2>/dev/null) ]] || fail "prebuilt/ has no objects of $target"
  done
  # The GPU machine's configure: it takes the objects of this tree, and refuses them when one is
  # missing, when they were built for other CUDA architectures, or when the tree is not theirs,
  # naming the cause.
  prebuilt_configure() {  # expected-status what ... (cmake arguments)
    local expected=$1 what=$2 status=0
    shift 2
    cmake -S "$source_dir" -B "$work/prebuilt-build" -DCAPSULE_GPU_TESTS_ONLY=ON -DCAPSULE_CUDA=ON \
      -DCAPSULE_LIBTORCH=OFF -DBUILD_TESTING=OFF "$@" >"$work/prebuilt-configure.out" 2>&1 || status=$?
    rm -rf "$work/prebuilt-build"
    # CMake wraps its messages at about 80 columns, where a path's length puts the breaks: the
    # checks read the output as one line, its runs of spaces squeezed.
    tr '\n' ' ' <"$work/prebuilt-configure.out" | tr -s ' ' >"$work/prebuilt-configure.flat"
    expect_status "$expected" "$status" "$what"
  }
  prebuilt_configure 0 "the bundle's own objects" -DCAPSULE_GPU_PREBUILT_DIR="$work/bundle/prebuilt"
  expect_in "$work/prebuilt-configure.flat" "GPU tests only: capsule_engine" "the bundle's own objects"
  cp -R "$work/bundle/prebuilt" "$work/prebuilt-short"
  rm "$work/prebuilt-short/capsule_examples/src/examples.cpp.o"
  prebuilt_configure 1 "a prebuilt folder missing an object" -DCAPSULE_GPU_PREBUILT_DIR="$work/prebuilt-short"
  expect_in "$work/prebuilt-configure.flat" "has no object of capsule_examples's \`src/examples.cpp\`" \
    "a prebuilt folder missing an object"
  prebuilt_configure 1 "prebuilt objects of other CUDA architectures" \
    -DCAPSULE_GPU_PREBUILT_DIR="$work/bundle/prebuilt" -DCAPSULE_CUDA_ARCHITECTURES=80
  expect_in "$work/prebuilt-configure.flat" "the prebuilt objects' CUDA architectures are \`90\`; this build's CAPSULE_CUDA_ARCHITECTURES is \`80\`" \
    "prebuilt objects of other CUDA architectures"
  cp -R "$work/bundle/prebuilt" "$work/prebuilt-other"
  sed -i 's/^sources=.*/sources=0000000000000000000000000000000000000000000000000000000000000000/' \
    "$work/prebuilt-other/manifest.txt"
  prebuilt_configure 1 "prebuilt objects of another tree" -DCAPSULE_GPU_PREBUILT_DIR="$work/prebuilt-other"
  expect_in "$work/prebuilt-configure.flat" \
    "were compiled from sources 0000000000000000000000000000000000000000000000000000000000000000, and this tree's are" \
    "prebuilt objects of another tree"
fi

# A folder that is not a bundle is never overwritten.
mkdir -p "$work/precious"
echo keep >"$work/precious/file"
status=0
CAPSULE_BUILD_DIR=$build_dir bash "$script" --bundle "$work/precious" --no-build >"$work/precious.out" 2>&1 || status=$?
expect_status 1 "$status" "--bundle into a folder that is not a bundle"
expect_in "$work/precious.out" "not overwriting it" "--bundle into a folder that is not a bundle"
[[ -f $work/precious/file ]] || fail "--bundle removed a folder that was not a bundle"

# The run: no device here, so phase 1 says why and nothing else runs.
status=0
bash "$script" --quick --out "$work/out" --bundle-dir "$work/bundle" >"$work/run.out" 2>&1 || status=$?
expect_status 1 "$status" "a run without a device"
expect_in "$work/run.out" "gpu-check: no usable CUDA device: " "a run without a device"
expect_in "$work/out/phase-1-environment.log" "no usable CUDA device: " "phase-1-environment.log"
expect_in "$work/out/summary.txt" "phase 1 environment: failed: no usable CUDA device: " "summary.txt"
[[ ! -e $work/out/gpu-ledger.json && ! -e $work/out/phase-2-parity.log ]] || fail "a run without a device went past phase 1"

# Without a bundle, the run says how to make one.
status=0
bash "$script" --quick --out "$work/out2" --bundle-dir "$work/no-bundle" >"$work/nobundle.out" 2>&1 || status=$?
expect_status 1 "$status" "a run without a bundle"
expect_in "$work/nobundle.out" "run \`tools/gpu-check.sh --bundle\` on the build machine first" "a run without a bundle"
echo "PASS: tools/gpu-check.sh refuses without a device and bundles without Boost or CUDA's libraries"
