# Prebuilt torch-free libraries for the GPU machine's build (docs/cuda.md, "The GPU check").
#
# tools/gpu-check.sh --bundle carries the object files of the libraries that need no LibTorch
# (CAPSULE_GPU_PREBUILT_TARGETS), compiled here, to the GPU machine. Its phase 3 configures
# CAPSULE_GPU_TESTS_ONLY with CAPSULE_GPU_PREBUILT_DIR naming them: each of those targets is then
# archived from the carried objects instead of compiled again, so only the torch-dependent part
# compiles there (issue 13). Each target keeps its own definition, usage requirements included;
# only its sources change. manifest.txt beside the objects says which compiler, flags and
# architectures made them; the fingerprint records it (build.prebuilt, docs/fingerprint.md).
set(CAPSULE_GPU_PREBUILT_DIR "" CACHE PATH
    "Object files of the torch-free libraries, compiled elsewhere (tools/gpu-check.sh phase 3 only)")
set(CAPSULE_GPU_PREBUILT_TARGETS capsule_engine capsule_runtime capsule_handlers_reference capsule_checkers
                                 capsule_handlers_cuda capsule_examples capsule_libtorch_parity_tables)
set(CAPSULE_GPU_PREBUILT "")
set(CAPSULE_GPU_PREBUILT_FLAGS "")
if(CAPSULE_GPU_PREBUILT_DIR)
  if(NOT CAPSULE_GPU_TESTS_ONLY)
    message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR is for the GPU machine's build (CAPSULE_GPU_TESTS_ONLY=ON) only")
  endif()
  set(capsule_prebuilt_manifest "${CAPSULE_GPU_PREBUILT_DIR}/manifest.txt")
  if(NOT EXISTS "${capsule_prebuilt_manifest}")
    message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR: no manifest.txt in `${CAPSULE_GPU_PREBUILT_DIR}`")
  endif()
  file(STRINGS "${capsule_prebuilt_manifest}" capsule_prebuilt_lines)
  foreach(key compiler flags commit cuda_architectures)
    set(capsule_prebuilt_${key} "")
    foreach(line IN LISTS capsule_prebuilt_lines)
      if(line MATCHES "^${key}=(.*)$")
        set(capsule_prebuilt_${key} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(capsule_prebuilt_${key} STREQUAL "")
      message(FATAL_ERROR "${capsule_prebuilt_manifest} has no `${key}=` line")
    endif()
  endforeach()
  # Kernels built for other architectures than this build's would not be what it reports.
  # The manifest writes a list such as 80;90 as 80,90 (tools/fingerprint/CMakeLists.txt).
  string(REPLACE ";" "," capsule_cuda_architectures_text "${CAPSULE_CUDA_ARCHITECTURES}")
  if(NOT capsule_prebuilt_cuda_architectures STREQUAL capsule_cuda_architectures_text)
    message(FATAL_ERROR "the prebuilt objects' CUDA architectures are `${capsule_prebuilt_cuda_architectures}`; "
                        "this build's CAPSULE_CUDA_ARCHITECTURES is `${capsule_cuda_architectures_text}`")
  endif()
  string(REPLACE ";" " " capsule_prebuilt_names "${CAPSULE_GPU_PREBUILT_TARGETS}")
  set(CAPSULE_GPU_PREBUILT "${capsule_prebuilt_names}: compiled by ${capsule_prebuilt_compiler} from commit "
                           "${capsule_prebuilt_commit}")
  string(REPLACE ";" "" CAPSULE_GPU_PREBUILT "${CAPSULE_GPU_PREBUILT}")
  set(CAPSULE_GPU_PREBUILT_FLAGS "${capsule_prebuilt_flags}")
  message(STATUS "GPU tests only: ${CAPSULE_GPU_PREBUILT}, from ${CAPSULE_GPU_PREBUILT_DIR}")
endif()

# add_library(NAME STATIC SOURCES...), or, for a prebuilt target, the same library archived from
# its carried objects: one per source, else the bundle is not this tree's and configure stops.
function(capsule_add_static_library name)
  if(NOT CAPSULE_GPU_PREBUILT_DIR OR NOT name IN_LIST CAPSULE_GPU_PREBUILT_TARGETS)
    add_library(${name} STATIC ${ARGN})
    return()
  endif()
  file(GLOB_RECURSE objects LIST_DIRECTORIES false "${CAPSULE_GPU_PREBUILT_DIR}/${name}/*.o")
  set(sources ${ARGN})
  list(FILTER sources INCLUDE REGEX "\\.(cpp|cu)$")
  list(LENGTH objects object_count)
  list(LENGTH sources source_count)
  if(NOT object_count EQUAL source_count)
    message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR holds ${object_count} objects of ${name}, which has "
                        "${source_count} sources: the bundle was not made from this tree; make it again")
  endif()
  add_library(${name} STATIC ${objects})
  # Only objects: CMake cannot tell the archive's language from them.
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
endfunction()
