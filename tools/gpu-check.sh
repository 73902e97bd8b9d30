#!/usr/bin/env bash
# The GPU check: the CUDA providers' parity suites (and, in a full run, the GPU benchmarks) on a
# machine with a CUDA device, as one script. The GPU machine is bare (nvcc, CMake, ninja and pip's
# torch, nothing to download) and its time is short, so the work is split:
#
#   here:        tools/gpu-check.sh --bundle [DIR]
#                builds capsule_gpu_tests (no Boost: tests/gpu/CMakeLists.txt) in $CAPSULE_BUILD_DIR
#                (default build/) and copies it, stripped of debug info, with the shared libraries
#                it needs that are neither glibc nor CUDA's (toml++, libstdc++, libgcc_s) into DIR
#                (default gpu-bundle/, ignored by git; the device tool carries it), with what
#                phase 3's build there needs: toml++ and doctest under prefix/, and Boost's
#                Debian packages under debs/ (about 10 MB, downloaded with apt-get; unpacked there,
#                for the CLI; CAPSULE_GPU_BUNDLE_BOOST=0 leaves them out), and the torch-free
#                libraries' object files under prebuilt/ (about 8 MB; cmake/gpu_prebuilt.cmake).
#   GPU machine: tools/gpu-check.sh [--quick] [--out DIR] [--bundle-dir DIR]
#                from the repository root. Resolves the CUDA libraries there (/usr/local/cuda and
#                pip's nvidia/*/lib folders), then runs the phases below, writing each phase's
#                file into DIR (default gpu-check-out/) as soon as the phase ends:
#                  phase-1-environment.log  the device, driver, libraries resolved; exits 1 here
#                                           when there is no usable CUDA device
#                  phase-2-parity.log       the parity suites (cublas/cudnn .values and .vjps)
#                  gpu-ledger.json          their evidence ledger (docs/evidence-ledger.md)
#                  phase-3-libtorch-cuda.log  LibTorch on CUDA: configured and built there against
#                                           its torch (CAPSULE_GPU_TESTS_ONLY, in
#                                           $CAPSULE_GPU_TORCH_BUILD_DIR, default build-gpu-libtorch/),
#                                           compiling only the torch-dependent targets when the
#                                           tree is the one prebuilt/ came from, then the
#                                           libtorch.cuda suites
#                  gpu-ledger-libtorch-cuda.json  their ledger
#                  phase-3-check.log        `capsule check --profile libtorch_cuda` of that build
#                                           on that ledger, when the bundle carried Boost's .debs
#                  phase-3-libtorch-cuda-bench.log  full runs: capsule_gpu_bench_libtorch
#                  phase-4-bench.log        full runs only: capsule_gpu_bench when the bundle has one
#                  summary.txt              one line per phase
#                --quick runs phases 1 to 3; the full run adds phase 4. Phase 3 compiles for minutes,
#                so within one device call's limit it can go on its own: --no-libtorch skips it,
#                --libtorch-only runs phases 1 and 3 only. A rerun into the same DIR first removes
#                the earlier results of the phases it runs. Each program runs under a time limit of
#                $CAPSULE_GPU_PHASE_TIMEOUT seconds (default 300; exit 124 when it runs out; killed 30 s
#                after that if it ignores the stop signal).
#                Exit status: the parity suites of phases 2 and 3 decide it (phase 3 not run, for
#                want of torch or by --no-libtorch, does not fail it); a benchmark that only missed
#                a speed target (exit 3) is reported in summary.txt and does not fail the run.
#
# Back here, judge the capsules on both ledgers (`--ledger` is repeatable and merges in order),
# with the `capsule` of the same build the bundle came from (the ledger counts for a build only
# when its run recorded this build's provider library digests):
#   build/tools/cli/capsule check --profile vendor_cuda --ledger build/ledger.json --ledger gpu-check-out/gpu-ledger.json
#   build/tools/cli/capsule lint --ledger build/ledger.json --ledger gpu-check-out/gpu-ledger.json
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/gpu-check.sh --bundle [DIR] [--no-build]   (here) build capsule_gpu_tests and bundle it into DIR (gpu-bundle/)
       tools/gpu-check.sh [--quick] [--no-libtorch | --libtorch-only] [--out DIR] [--bundle-dir DIR]
                                                       (GPU machine) run the GPU check from the bundle (gpu-bundle/),
                                                       writing each phase's results into DIR (gpu-check-out/)
  --quick     the parity suites only; without it the benchmarks run too
  --no-libtorch    skip phase 3 (LibTorch on CUDA, which compiles here and takes minutes)
  --libtorch-only  phases 1 and 3 only (for a second device call after a run with --no-libtorch)
  --no-build  bundle the binary already built in $CAPSULE_BUILD_DIR (build/) without building it
EOF
}

die() {
  echo "gpu-check: $*" >&2
  exit 1
}

# HEAD of this checkout, "-dirty" when git lists a change, "unknown" outside git. (The status is
# captured whole: `grep -q` would stop reading early, and git's write into the closed pipe fail.)
tree_commit() {
  local head changes
  head=$(git -C "$root" rev-parse HEAD 2>/dev/null) || head=unknown
  changes=$(git -C "$root" status --porcelain 2>/dev/null) || changes=""
  echo "$head${changes:+-dirty}"
}

# The SHA-256 over the files the prebuilt objects are compiled from, computed by the same CMake
# code the GPU machine's configure runs (cmake/gpu_source_digest.cmake), so the two cannot differ.
source_digest() {
  cmake -DCAPSULE_SOURCE_ROOT="$root" -P "$root/cmake/gpu_source_digest.cmake"
}

# Seconds spent per target of a Ninja build, summed over its steps, from its .ninja_log (start and
# end in ms from the start of that ninja run, the output's path, the command's hash): an object file counts for the target named by its
# CMakeFiles/<target>.dir folder, any other step (a link with its post-build commands, a generated
# file) under its first output's path. A step with several outputs is logged once per output, so
# each step counts once.
summarize_build_times() {
  local ninja_log=$1/.ninja_log
  if [[ ! -f $ninja_log ]]; then
    echo "no .ninja_log in $1 (not a Ninja build)"
    return 0
  fi
  awk -F'\t' -v build="$1/" '!/^#/ && NF >= 5 && !seen[$1 FS $2 FS $5]++ {
      seconds = ($2 - $1) / 1000
      path = index($4, build) == 1 ? substr($4, length(build) + 1) : $4
      if (match(path, /CMakeFiles\/[^\/]+\.dir\//)) group = substr(path, RSTART + 11, RLENGTH - 16)
      else group = path
      sum[group] += seconds; steps[group]++; total += seconds; count++
    }
    END {
      for (group in sum) printf "  %-44s %4d steps %8.1f s\n", group, steps[group], sum[group]
      printf "  %-44s %4d steps %8.1f s\n", "all", count, total
    }' "$ninja_log" | sort -k4,4 -g -r
}

mode=run
quick=0
libtorch=run
build=1
out=gpu-check-out
bundle=gpu-bundle
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --quick) quick=1 ;;
    --no-libtorch) libtorch=skip ;;
    --libtorch-only) libtorch=only ;;
    --no-build) build=0 ;;
    --bundle)
      mode=bundle
      if [[ $# -gt 1 && "$2" != -* ]]; then bundle=$2; shift; fi ;;
    --out | --bundle-dir)
      [[ $# -gt 1 ]] || { usage >&2; die "$1 needs a folder"; }
      if [[ "$1" == --out ]]; then out=$2; else bundle=$2; fi
      shift ;;
    *) usage >&2; echo "gpu-check: unknown argument \`$1\`" >&2; exit 2 ;;
  esac
  shift
done

# Folders given relative to where the script was called from, then the repository root.
absolute() { if [[ $1 == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
out=$(absolute "$out")
bundle=$(absolute "$bundle")
# CAPSULE_BUILD_DIR, like --out and --bundle, is relative to the caller's folder.
[[ -n ${CAPSULE_BUILD_DIR:-} ]] && CAPSULE_BUILD_DIR=$(absolute "$CAPSULE_BUILD_DIR")
[[ -n ${CAPSULE_GPU_TORCH_BUILD_DIR:-} ]] && CAPSULE_GPU_TORCH_BUILD_DIR=$(absolute "$CAPSULE_GPU_TORCH_BUILD_DIR")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

# ---------------------------------------------------------------------------------------------
# Here: build and bundle.
if [[ $mode == bundle ]]; then
  build_dir=${CAPSULE_BUILD_DIR:-build}
  binary=$build_dir/tests/gpu/capsule_gpu_tests
  bench=$build_dir/tools/bench/capsule_gpu_bench
  if [[ $build == 1 ]]; then
    [[ -f $build_dir/CMakeCache.txt ]] || die "no configured build in $build_dir; run cmake -S . -B $build_dir first"
    cmake --build "$build_dir" -j2 --target capsule_gpu_tests
    # The benchmark exists where Google Benchmark was found (tools/bench); bundled when built.
    # The help text is captured first: `grep -q` would quit at the first match and, under
    # pipefail, the build tool's write into the closed pipe would fail the test.
    targets=$(cmake --build "$build_dir" --target help)
    if grep 'capsule_gpu_bench' <<<"$targets" >/dev/null; then
      cmake --build "$build_dir" -j2 --target capsule_gpu_bench
    fi
  fi
  [[ -x $binary ]] || die "$binary was not built: the CUDA providers are off in $build_dir (CMake says why: \"CUDA providers: off (...)\")"
  if [[ -e $bundle && ! -f $bundle/BUNDLE.txt && -n "$(ls -A "$bundle" 2>/dev/null)" ]]; then
    die "$bundle exists and is not a bundle (no BUNDLE.txt); not overwriting it"
  fi
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  programs=("$binary")
  [[ -x $bench ]] && programs+=("$bench")
  for program in "${programs[@]}"; do
    if command -v objcopy >/dev/null; then
      objcopy --strip-debug "$program" "$bundle/bin/$(basename "$program")"
    else
      cp "$program" "$bundle/bin/$(basename "$program")"
    fi
  done
  # What the GPU machine lacks: every needed library but glibc's and CUDA's (those it has, and
  # they must match its driver: they are resolved there).
  carried=()
  expected=()
  while read -r name path; do
    case "$name" in
      linux-vdso* | ld-linux* | */ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so*) ;;
      libcuda.so* | libcudart* | libcublas* | libcudnn* | libnvrtc* | libnvJitLink* | libnvblas*) expected+=("$name") ;;
      *)
        [[ -n "$path" && -f "$path" ]] || die "ldd cannot find $name, which $binary needs"
        cp -L "$path" "$bundle/lib/$name"
        carried+=("$name") ;;
    esac
  done < <(for program in "${programs[@]}"; do ldd "$program"; done | awk '/=>/ {print $1, ($3 == "not" ? "" : $3); next} {print $1, ""}' | sort -u)
  # Phase 3 compiles LibTorch on CUDA on the GPU machine, against its torch
  # (CAPSULE_GPU_TESTS_ONLY): the headers and CMake packages of toml++ and doctest, which that
  # machine lacks, go along under prefix/, laid out as their installed prefix so their
  # relocatable package files find them.
  carry_package() {  # <name> <its include folder's name> <its CMake package folder, from the build's cache>
    local name=$1 headers=$2 config=$3 base lib
    [[ -n $config && -d $config ]] || die "no CMake package folder for $name in $build_dir/CMakeCache.txt"
    config=$(readlink -f "$config")
    base=${config%%/lib/*}  # the install prefix: the folder above lib/
    [[ $base != "$config" && -d $base/include/$headers ]] || die "cannot find $name's headers beside $config"
    mkdir -p "$bundle/prefix/include" "$bundle/prefix/${config#"$base"/}"
    cp -R "$base/include/$headers" "$bundle/prefix/include/"
    cp -R "$config/." "$bundle/prefix/${config#"$base"/}/"
    lib=$(dirname "$(dirname "$config")")  # the library folder holding cmake/<name>/
    for file in "$lib"/lib"$name".so*; do
      [[ -e $file ]] && cp -L "$file" "$bundle/prefix/${lib#"$base"/}/"
    done
    carried_packages+=("$name")
  }
  cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
  carried_packages=()
  carry_package tomlplusplus toml++ "$(cache_value tomlplusplus_DIR)"
  carry_package doctest doctest "$(cache_value doctest_DIR)"
  # The torch-free libraries' objects, so that phase 3 compiles only the torch-dependent part
  # (cmake/gpu_prebuilt.cmake): each target's under prebuilt/<target>/ as the build laid them out,
  # stripped of debug info, with the manifest this build wrote (compiler, flags, CUDA
  # architectures), the commit, and the digest of the sources they came from.
  # The targets and their object folders, as the build's configure listed them.
  [[ -s $build_dir/gpu-prebuilt-targets.txt ]] || die "no gpu-prebuilt-targets.txt in $build_dir; configure it again"
  prebuilt_targets=()
  prebuilt_folders=()
  while IFS=$'\t' read -r target objects; do
    prebuilt_targets+=("$target")
    prebuilt_folders+=("$objects")
  done <"$build_dir/gpu-prebuilt-targets.txt"
  if [[ $build == 1 ]]; then
    cmake --build "$build_dir" -j2 --target "${prebuilt_targets[@]}"
  fi
  [[ -f $build_dir/gpu-prebuilt-manifest.txt ]] || die "no gpu-prebuilt-manifest.txt in $build_dir; configure it again"
  prebuilt_count=0
  oldest=""  # the oldest object carried, for the --no-build check below
  for index in "${!prebuilt_targets[@]}"; do
    target=${prebuilt_targets[$index]}
    objects=${prebuilt_folders[$index]}
    [[ -d $objects ]] || die "no $objects: build $target in $build_dir first"
    while IFS= read -r -d '' object; do
      relative=${object#"$objects"/}
      mkdir -p "$bundle/prebuilt/$target/$(dirname "$relative")"
      if command -v objcopy >/dev/null; then
        objcopy --strip-debug "$object" "$bundle/prebuilt/$target/$relative"
      else
        cp "$object" "$bundle/prebuilt/$target/$relative"
      fi
      prebuilt_count=$((prebuilt_count + 1))
      if [[ -z $oldest || $object -ot $oldest ]]; then oldest=$object; fi
    done < <(find "$objects" -name '*.o' -print0)
  done
  # The digest says which sources the objects are compiled from. A build just made them from this
  # tree; with --no-build nothing says so, so there a file the digest covers that is newer than the
  # oldest object means they may not be, and then none are carried (phase 3 compiles everything).
  prebuilt_note=""
  sources=$(source_digest) || sources=""
  if [[ ! $sources =~ ^[0-9a-f]{64}$ ]]; then
    prebuilt_note="cmake/gpu_source_digest.cmake gave no digest"
  elif [[ $build == 0 && -z $oldest ]]; then
    prebuilt_note="no object was found"
  elif [[ $build == 0 ]]; then
    while IFS= read -r file; do
      if [[ $root/$file -nt $oldest ]]; then
        prebuilt_note="$file changed after $oldest was compiled (--no-build)"
        break
      fi
    done < <(cmake -DCAPSULE_SOURCE_ROOT="$root" -DCAPSULE_PRINT_FILES=ON -P "$root/cmake/gpu_source_digest.cmake")
  fi
  if [[ -n $prebuilt_note ]]; then
    rm -rf "$bundle/prebuilt"
    prebuilt_count=0
    echo "gpu-check: no prebuilt objects carried: $prebuilt_note; phase 3 will compile everything" >&2
  else
    {
      cat "$build_dir/gpu-prebuilt-manifest.txt"
      echo "commit=$(tree_commit)"
      echo "sources=$sources"
    } >"$bundle/prebuilt/manifest.txt"
  fi
  # Boost.Program_options for phase 3's `capsule` (the CLI judges that build's own ledger there):
  # the Debian packages this build uses, as .deb files (the headers alone unpack to about 140 MB;
  # the .debs are about 10 MB). Phase 3 unpacks them into its build folder. Without them (apt
  # offline) phase 3 builds no CLI and says so.
  # The installed versions exactly (name=version); the download is bounded, so an offline machine
  # fails it in seconds. CAPSULE_GPU_BUNDLE_BOOST=0 skips it.
  boost_debs=""
  if [[ ${CAPSULE_GPU_BUNDLE_BOOST:-1} != 0 ]]; then
    boost_debs=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}=${Version}\n' 'libboost1.*-dev' \
      'libboost-program-options1.*' 2>/dev/null | awk '$1 == "ii" {print $2}' |
      grep -E '^libboost(1\.[0-9]+-dev|-program-options1\.[0-9]+(\.0|-dev))=' || true)
  fi
  if [[ -n $boost_debs ]] && mkdir -p "$bundle/debs" &&
    (cd "$bundle/debs" && timeout 120 apt-get -o Acquire::Retries=0 -o Acquire::http::Timeout=20 \
      download $boost_debs >/dev/null 2>&1); then
    carried_packages+=("boost (debs/: $(echo $boost_debs))")
  else
    rm -rf "$bundle/debs"
    echo "gpu-check: no Boost .debs carried (${boost_debs:-skipped or not installed here}); phase 3 will build no CLI" >&2
  fi
  {
    echo "capsule GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(tree_commit)"
    echo "build: $build_dir"
    echo "capsule_gpu_tests sha256 (unstripped): $(sha256sum "$binary" | cut -d' ' -f1)"
    echo "carried: ${carried[*]:-none}"
    echo "resolved on the GPU machine: ${expected[*]:-none}"
    echo "packages for phase 3's build (prefix/): ${carried_packages[*]}"
    if [[ -z $prebuilt_note ]]; then
      echo "prebuilt for phase 3's build (prebuilt/): $prebuilt_count objects of ${prebuilt_targets[*]}, sources $sources"
    else
      echo "prebuilt for phase 3's build: none ($prebuilt_note)"
    fi
  } >"$bundle/BUNDLE.txt"
  cat "$bundle/BUNDLE.txt"
  echo "gpu-check: bundled into $bundle ($(du -sh "$bundle" | cut -f1)); carry it to the GPU machine and run tools/gpu-check.sh --quick --out \$OUT there"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# GPU machine: run.
tests=$bundle/bin/capsule_gpu_tests
[[ -x $tests ]] || die "no $tests: run \`tools/gpu-check.sh --bundle\` on the build machine first and carry $bundle here"
mkdir -p "$out"
# A rerun into the same folder never leaves an earlier run's results beside this one's: a
# passing ledger from a run before a crash must not be merged as this run's.
# With --no-libtorch or --libtorch-only, the phases that do not run keep their earlier files and
# summary lines, so two calls into one folder add up to one full run's results.
summary=$out/summary.txt
kept=()
[[ $libtorch == skip ]] && kept+=("phase 3 ")
[[ $libtorch == only ]] && kept+=("phase 2 " "phase 4 ")
earlier=""
if [[ ${#kept[@]} -gt 0 && -f $summary ]]; then
  earlier=$(grep -F "${kept[@]/#/-e}" "$summary" || true)
fi
rm -f "$out"/phase-1-*.log "$summary"
[[ $libtorch != only ]] && rm -f "$out"/phase-2-*.log "$out"/phase-4-*.log "$out"/gpu-ledger.json
[[ $libtorch != skip ]] && rm -f "$out"/phase-3-*.log "$out"/gpu-ledger-libtorch-cuda.json
: >"$summary"
[[ -n $earlier ]] && echo "$earlier" >>"$summary"
note() { echo "$*" | tee -a "$summary"; }

# The CUDA libraries: the bundle's own, the toolkit's, then every lib folder of pip's nvidia
# packages (cuBLAS and cuDNN come with torch's wheels).
lib_path=$bundle/lib
cuda_lib_path=""  # the same folders without the bundle's own libraries (phase 3's binaries)
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $dir ]] && lib_path+=":$dir" && cuda_lib_path+="${cuda_lib_path:+:}$dir"
done
if command -v python3 >/dev/null; then
  while read -r dir; do
    [[ -n $dir ]] && lib_path+=":$dir" && cuda_lib_path+="${cuda_lib_path:+:}$dir"
  done < <(python3 - <<'EOF' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for base in list(nvidia.__path__):
    for lib in sorted(glob.glob(os.path.join(base, "*", "lib")) + glob.glob(os.path.join(base, "*", "*", "lib"))):
        print(lib)
EOF
  )
fi
# Every program runs with the bundle's library path before the caller's, under a time limit
# (a hung phase must not use up the machine's time; exit 124 says it ran out).
with_libs() { LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CAPSULE_SOURCE_ROOT="$root" "$@"; }
run_tests() { with_libs timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" "$tests" "$@"; }

# Phase 1: the environment, and whether there is a device at all.
log=$out/phase-1-environment.log
probe_ok=0
{
  echo "== bundle"; cat "$bundle/BUNDLE.txt" 2>/dev/null || echo "(no BUNDLE.txt)"
  echo "== nvidia-smi"
  if command -v nvidia-smi >/dev/null; then timeout 60 nvidia-smi || true; else echo "nvidia-smi: not found"; fi
  echo "== LD_LIBRARY_PATH"; echo "$lib_path" | tr ':' '\n'
  echo "== libraries"; with_libs ldd "$tests" || true
  echo "== probe"
  if run_tests --probe; then probe_ok=1; fi
} >"$log" 2>&1 || true
probe=$(grep -E '^(no usable CUDA device|CUDA device 0 is usable)' "$log" | tail -1 || true)
if [[ $probe_ok != 1 ]]; then
  note "phase 1 environment: failed: ${probe:-the probe did not run (see phase-1-environment.log: a missing library?)}"
  die "${probe:-the CUDA probe did not run}; nothing else ran (log: $log)"
fi
note "phase 1 environment: $probe"

# Phase 2: the parity suites, with their ledger.
log=$out/phase-2-parity.log
status=0
if [[ $libtorch != only ]]; then
  run_tests --ledger "$out/gpu-ledger.json" >"$log" 2>&1 || status=$?
  if [[ $status == 0 ]]; then
    note "phase 2 parity: passed; $(grep -E '^ledger: wrote' "$log" | tail -1)"
  else
    note "phase 2 parity: FAILED (exit $status); $(grep -E '^ledger: wrote' "$log" | tail -1 || echo 'no ledger written')"
  fi
fi

# Phase 3: LibTorch on CUDA. Its handlers need this machine's torch, so they are compiled here:
# the LibTorch provider, capsule_gpu_tests and the CLI from this checkout (CAPSULE_GPU_TESTS_ONLY,
# toml++ and doctest from the bundle's prefix/, the torch-free libraries archived from its
# prebuilt/ objects), then the libtorch.cuda suites run with their own ledger. The build folder
# stays out of $out (only results come back).
lt_status=2  # not run
if [[ $libtorch != skip ]]; then
  log=$out/phase-3-libtorch-cuda.log
  lt_status=0
  lt_build=${CAPSULE_GPU_TORCH_BUILD_DIR:-$root/build-gpu-libtorch}
  {
    echo "== torch"
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 || true
    torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
    # pip's cuDNN has no unversioned libcudnn.so and sits outside the toolkit: named explicitly.
    cudnn_root=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null || true)
    cudnn_args=()
    if [[ -n $cudnn_root && -f $cudnn_root/include/cudnn.h ]]; then
      cudnn_lib=$( (ls "$cudnn_root"/lib/libcudnn.so* 2>/dev/null || true) | head -1)
      cudnn_args=(-DCAPSULE_CUDNN_INCLUDE_DIR="$cudnn_root/include" ${cudnn_lib:+-DCAPSULE_CUDNN_LIBRARY="$cudnn_lib"})
    fi
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    # torch's CMake package finds nvcc itself, before ours, and from PATH only: put the toolkit's
    # there. TORCH_CUDA_ARCH_LIST spares its arch detection (a test program run on the GPU); 9.0
    # is the H200's, as CAPSULE_CUDA_ARCHITECTURES=90 in the bundle's build, and passed below
    # too: CMake caches nvcc's default (75) in CMAKE_CUDA_ARCHITECTURES once torch enables CUDA.
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    [[ -x $nvcc ]] && export PATH="$(dirname "$nvcc"):$PATH"
    # The carried packages by folder: the bundle's multiarch path is searched only on Debian-like
    # systems.
    # The torch-free libraries from the bundle, when they were compiled from this very tree.
    prebuilt_args=(-DCAPSULE_GPU_PREBUILT_DIR=)
    prebuilt_want=$(sed -n 's/^sources=//p' "$bundle/prebuilt/manifest.txt" 2>/dev/null || true)
    prebuilt_have=$(source_digest) || prebuilt_have="unavailable (cmake/gpu_source_digest.cmake failed)"
    if [[ -n $prebuilt_want && $prebuilt_want == "$prebuilt_have" ]]; then
      prebuilt_args=(-DCAPSULE_GPU_PREBUILT_DIR="$bundle/prebuilt")
      echo "prebuilt: used: the torch-free libraries are the bundle's objects (sources $prebuilt_have)"
    elif [[ -z $prebuilt_want ]]; then
      echo "prebuilt: not used: the bundle carries none; the torch-free libraries compile here"
    else
      echo "prebuilt: not used: this tree's torch-free sources ($prebuilt_have) are not the bundle's ($prebuilt_want); they compile here"
    fi
    package_args=()
    for package in "$bundle"/prefix/lib/cmake/doctest "$bundle"/prefix/lib/*/cmake/tomlplusplus; do
      [[ -d $package ]] && package_args+=(-D"$(basename "$package")_DIR=$package")
    done
    if [[ -z $torch_prefix ]]; then
      echo "no torch with a CMake prefix on this machine: nothing to build"
      lt_status=2
    else
      # Boost.Program_options from the bundle's .debs, unpacked into the build folder: with it
      # this build has the `capsule` CLI too, which judges this build's ledger below. Optional: a
      # failure here only means no CLI.
      boost_config=""
      if compgen -G "$bundle/debs/*.deb" >/dev/null && command -v dpkg >/dev/null; then
        boost_prefix=$lt_build/boost-prefix
        boost_ok=1
        rm -rf "$boost_prefix" && mkdir -p "$boost_prefix" || boost_ok=0
        for deb in "$bundle"/debs/*.deb; do
          [[ $boost_ok == 1 ]] || break
          dpkg -x "$deb" "$boost_prefix" || { echo "Boost: dpkg -x $deb failed"; boost_ok=0; }
        done
        [[ $boost_ok == 1 ]] && boost_config=$( (ls -d "$boost_prefix"/usr/lib/*/cmake/Boost-* 2>/dev/null || true) | head -1)
        [[ -n $boost_config ]] && package_args+=(-DBoost_DIR="$boost_config")
        echo "Boost: ${boost_config:-none usable in the carried .debs: no CLI in this build}"
      else
        echo "Boost: none carried (no debs/ in the bundle, or no dpkg here): no CLI in this build"
      fi
      echo "== configure ($lt_build)"
      timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" cmake -S "$root" -B "$lt_build" "${generator[@]}" \
        -DCMAKE_BUILD_TYPE=Release -DCAPSULE_GPU_TESTS_ONLY=ON -DCAPSULE_LIBTORCH=ON -DCAPSULE_CUDA=ON \
        -DCAPSULE_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$torch_prefix;$bundle/prefix" -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DTORCH_CUDA_ARCH_LIST=9.0 -DCAPSULE_CUDA_ARCHITECTURES=90 "${package_args[@]}" "${cudnn_args[@]}" "${prebuilt_args[@]}" || lt_status=$?
      if [[ $lt_status == 0 ]] && ! grep -q "CAPSULE_HAVE_LIBTORCH_CUDA:INTERNAL=ON" "$lt_build/CMakeCache.txt"; then
        echo "configured, but the LibTorch provider has no CUDA handlers (see \"LibTorch provider on CUDA\" above)"
        lt_status=1  # torch is here: a build without its CUDA handlers is a failure of this check
      fi
      if [[ $lt_status == 0 ]]; then
        echo "== build"
        # This phase's steps only, in the build-time summary at its end (a reused folder's log
        # holds earlier runs' steps too).
        rm -f "$lt_build/.ninja_log"
        build_started=$SECONDS
        timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" cmake --build "$lt_build" --target capsule_gpu_tests \
          -j "$(nproc)" || lt_status=$?
        echo "build time: $((SECONDS - build_started)) s (capsule_gpu_tests)"
      fi
      if [[ $lt_status == 0 ]]; then
        echo "== libtorch.cuda suites"
        # The machine's own C++ runtime (the binary was built here, maybe by a newer g++ than the
        # bundle's libstdc++), with the CUDA folders; the build tree's RPATH finds torch and toml++.
        LD_LIBRARY_PATH="$cuda_lib_path" CAPSULE_SOURCE_ROOT="$root" \
          timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" "$lt_build/tests/gpu/capsule_gpu_tests" \
          --evidence-suites libtorch.cuda. --ledger "$out/gpu-ledger-libtorch-cuda.json" || lt_status=$?
      fi
      # The ledger judged by the build that wrote it (a ledger counts only for its own build's
      # provider digests, so no other `capsule` can accept these entries). `libtorch_cuda` plans
      # native_cuda capsules too, which have no handlers and so no entries: its verdict is
      # "rejected" by design; the lines to read are the ledger's passed and missing counts. The
      # CLI is optional: built after the suites, its failure is reported and fails nothing.
      if [[ $lt_status == 0 ]] && grep -q "^CAPSULE_GPU_CLI:INTERNAL=ON" "$lt_build/CMakeCache.txt"; then
        echo "== capsule check --profile libtorch_cuda (phase-3-check.log)"
        check_status=0
        if timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" cmake --build "$lt_build" --target capsule -j "$(nproc)"; then
          LD_LIBRARY_PATH="$cuda_lib_path" timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" \
            "$lt_build/tools/cli/capsule" check --root "$root" --profile libtorch_cuda \
            --ledger "$out/gpu-ledger-libtorch-cuda.json" >"$out/phase-3-check.log" 2>&1 || check_status=$?
        else
          check_status=$?
          echo "capsule did not build (exit $check_status); see phase-3-libtorch-cuda.log" >"$out/phase-3-check.log"
        fi
        echo "check exit status: $check_status (1 expected while native_cuda's capsules have no handlers); $(grep -E '^ledger: [0-9]+ obligation' "$out/phase-3-check.log" | tail -1)"
      fi
      # Full runs: LibTorch on CUDA through our session against ATen directly, into its own log.
      if [[ $lt_status == 0 && $quick == 0 ]]; then
        echo "== bench (phase-3-libtorch-cuda-bench.log)"
        lt_bench_status=0
        { timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" cmake --build "$lt_build" --target capsule_gpu_bench_libtorch \
            -j "$(nproc)" &&
            LD_LIBRARY_PATH="$cuda_lib_path" timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" \
              "$lt_build/capsule_gpu_bench_libtorch" --source "$root"; } \
          >"$out/phase-3-libtorch-cuda-bench.log" 2>&1 || lt_bench_status=$?
        echo "bench exit status: $lt_bench_status (3: a speed target was missed)"
        # A bench that failed to build or run (not one that only missed a target) fails the phase.
        [[ $lt_bench_status == 0 || $lt_bench_status == 3 ]] || lt_status=$lt_bench_status
      fi
      # What this phase compiled, and for how long, by target (the wall time is the `build time`
      # line above): with prebuilt/ used, no torch-free library is among them.
      echo "== build times (from $lt_build/.ninja_log; seconds summed over steps, by target)"
      summarize_build_times "$lt_build"
    fi
  } >"$log" 2>&1
  case $lt_status in
    0) note "phase 3 libtorch-cuda: passed; $(grep -E '^ledger: wrote' "$log" | tail -1); $(grep -E '^prebuilt: ' "$log" | cut -d: -f1-2 | tail -1)$(grep -E '^(check|bench) exit status' "$log" | sed 's/^/; /' | tr -d '\n' || true)" ;;
    2) note "phase 3 libtorch-cuda: not run ($(tail -1 "$log"))" ;;
    *) note "phase 3 libtorch-cuda: FAILED (exit $lt_status; see phase-3-libtorch-cuda.log)" ;;
  esac
fi

# Phase 4 (full runs): the GPU benchmarks, when the bundle has a benchmark binary.
if [[ $quick == 0 && $libtorch != only ]]; then
  log=$out/phase-4-bench.log
  if [[ -x $bundle/bin/capsule_gpu_bench ]]; then
    bench_status=0
    with_libs timeout -k 30 "${CAPSULE_GPU_PHASE_TIMEOUT:-300}" "$bundle/bin/capsule_gpu_bench" --source "$root" >"$log" 2>&1 ||
      bench_status=$?
    case $bench_status in
      0) note "phase 4 bench: every target met (results in phase-4-bench.log)" ;;
      3) note "phase 4 bench: a speed target was missed (exit 3; results in phase-4-bench.log)" ;;
      124) note "phase 4 bench: timed out (exit 124; partial results in phase-4-bench.log)" ;;
      *) note "phase 4 bench: FAILED (exit $bench_status; see phase-4-bench.log)" ;;
    esac
  else
    echo "no capsule_gpu_bench in the bundle (the build had no Google Benchmark, so tools/bench was not built): no numbers were recorded." >"$log"
    note "phase 4 bench: not bundled; no numbers recorded"
  fi
fi

# Lines kept from an earlier run first: put the summary back in phase order.
sort -o "$summary" "$summary"

# The exit status: the parity suites decide it (their ledger is the evidence); a bench that failed
# to run (not one that only missed a speed target) fails the run too.
[[ $status == 0 ]] || die "the parity suites failed (exit $status$([[ $status == 124 ]] && echo ', timed out')); see $out/phase-2-parity.log"
[[ $lt_status == 0 || $lt_status == 2 ]] ||
  die "the LibTorch CUDA phase failed (exit $lt_status); see $out/phase-3-libtorch-cuda.log"
if [[ $quick == 0 && ${bench_status:-0} != 0 && ${bench_status:-0} != 3 ]]; then
  die "the benchmark failed (exit $bench_status); see $out/phase-4-bench.log"
fi
echo "gpu-check: done; results in $out"
