# Prebuilt torch-free libraries for the GPU machine's build (docs/cuda.md, "The GPU check").
#
# tools/gpu-check.sh --bundle carries the object files of the libraries that need no LibTorch
# (CAPSULE_GPU_PREBUILT_TARGETS), compiled here, to the GPU machine. Its phase 3 configures
# CAPSULE_GPU_TESTS_ONLY with CAPSULE_GPU_PREBUILT_DIR naming them: each of those targets is then
# archived from the carried objects instead of compiled again, so only the torch-dependent part
# compiles there (issue 13). Each target keeps its own definition, usage requirements included;
# only its sources change. manifest.txt beside the objects says which compiler, flags, build
# type, nvcc and architectures made them, and from which sources (cmake/gpu_source_digest.cmake);
# configure stops unless those are this tree's, and the fingerprint records the rest
# (build.prebuilt, docs/fingerprint.md).
include("${CMAKE_CURRENT_LIST_DIR}/gpu_source_digest.cmake")
set(CAPSULE_GPU_PREBUILT_DIR "" CACHE PATH
    "Object files of the torch-free libraries, compiled elsewhere (tools/gpu-check.sh phase 3 only)")
set(CAPSULE_GPU_PREBUILT_TARGETS capsule_engine capsule_runtime capsule_handlers_reference capsule_checkers
                                 capsule_handlers_cuda capsule_examples capsule_libtorch_parity_tables)
set(CAPSULE_GPU_PREBUILT "")
set(CAPSULE_GPU_PREBUILT_FLAGS "")
# The architectures as the manifest writes them: a list such as 80;90 as 80,90, since a semicolon
# would split a -D argument (tools/fingerprint/CMakeLists.txt passes it on).
string(REPLACE ";" "," CAPSULE_CUDA_ARCHITECTURES_TEXT "${CAPSULE_CUDA_ARCHITECTURES}")
if(CAPSULE_GPU_PREBUILT_DIR)
  if(NOT CAPSULE_GPU_TESTS_ONLY)
    message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR is for the GPU machine's build (CAPSULE_GPU_TESTS_ONLY=ON) only")
  endif()
  set(capsule_prebuilt_manifest "${CAPSULE_GPU_PREBUILT_DIR}/manifest.txt")
  if(NOT EXISTS "${capsule_prebuilt_manifest}")
    message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR: no manifest.txt in `${CAPSULE_GPU_PREBUILT_DIR}`")
  endif()
  file(STRINGS "${capsule_prebuilt_manifest}" capsule_prebuilt_lines)
  foreach(key compiler flags build_type cuda cuda_architectures commit sources)
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
  # Objects of another tree would not be the code this build's sources say. Every file the digest
  # covers also reruns this configure when it changes, so an edit made after this configure
  # cannot slip past it either.
  capsule_gpu_source_digest("${PROJECT_SOURCE_DIR}" capsule_tree_sources)
  if(NOT capsule_tree_sources STREQUAL capsule_prebuilt_sources)
    message(FATAL_ERROR "the prebuilt objects in `${CAPSULE_GPU_PREBUILT_DIR}` were compiled from sources "
                        "${capsule_prebuilt_sources}, and this tree's are ${capsule_tree_sources}; make the bundle again, "
                        "or configure with -DCAPSULE_GPU_PREBUILT_DIR= to compile everything here")
  endif()
  capsule_gpu_source_files("${PROJECT_SOURCE_DIR}" capsule_tree_files)
  list(TRANSFORM capsule_tree_files PREPEND "${PROJECT_SOURCE_DIR}/")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${capsule_tree_files})
  # Kernels built for other architectures than this build's would not be what it reports.
  if(NOT capsule_prebuilt_cuda_architectures STREQUAL CAPSULE_CUDA_ARCHITECTURES_TEXT)
    message(FATAL_ERROR "the prebuilt objects' CUDA architectures are `${capsule_prebuilt_cuda_architectures}`; "
                        "this build's CAPSULE_CUDA_ARCHITECTURES is `${CAPSULE_CUDA_ARCHITECTURES_TEXT}`")
  endif()
  string(REPLACE ";" " " capsule_prebuilt_names "${CAPSULE_GPU_PREBUILT_TARGETS}")
  set(CAPSULE_GPU_PREBUILT "${capsule_prebuilt_names}: compiled by ${capsule_prebuilt_compiler} and nvcc "
                           "${capsule_prebuilt_cuda}, build type ${capsule_prebuilt_build_type}, from commit "
                           "${capsule_prebuilt_commit}")
  string(REPLACE ";" "" CAPSULE_GPU_PREBUILT "${CAPSULE_GPU_PREBUILT}")
  set(CAPSULE_GPU_PREBUILT_FLAGS "${capsule_prebuilt_flags}")
  message(STATUS "GPU tests only: ${CAPSULE_GPU_PREBUILT}, from ${CAPSULE_GPU_PREBUILT_DIR}")
endif()

# In a build whose objects may be carried (not the GPU machine's), each prebuilt target and the
# folder of its objects, a tab between, one per line: tools/gpu-check.sh --bundle reads them here
# rather than keeping its own list.
set(CAPSULE_GPU_PREBUILT_TARGETS_FILE "${PROJECT_BINARY_DIR}/gpu-prebuilt-targets.txt")
if(NOT CAPSULE_GPU_PREBUILT_DIR)
  file(WRITE "${CAPSULE_GPU_PREBUILT_TARGETS_FILE}" "")
endif()

# add_library(NAME STATIC SOURCES...), or, for a prebuilt target, the same library archived from
# its carried objects: each compiled source's object where the build laid it out
# (<target>/<source>.o), else configure stops. Objects of sources the tree no longer has are left
# out.
function(capsule_add_static_library name)
  if(NOT CAPSULE_GPU_PREBUILT_DIR OR NOT name IN_LIST CAPSULE_GPU_PREBUILT_TARGETS)
    add_library(${name} STATIC ${ARGN})
    if(NOT CAPSULE_GPU_PREBUILT_DIR AND name IN_LIST CAPSULE_GPU_PREBUILT_TARGETS)
      file(APPEND "${CAPSULE_GPU_PREBUILT_TARGETS_FILE}" "${name}\t${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${name}.dir\n")
    endif()
    return()
  endif()
  set(objects "")
  foreach(source IN LISTS ARGN)
    if(source MATCHES "\\.(h|hpp|inc|cuh)$")
      continue()
    endif()
    if(IS_ABSOLUTE "${source}")
      message(FATAL_ERROR "capsule_add_static_library(${name}): `${source}` is absolute; prebuilt objects are "
                          "found by each source's path from ${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
    set(object "${CAPSULE_GPU_PREBUILT_DIR}/${name}/${source}.o")
    if(NOT EXISTS "${object}")
      message(FATAL_ERROR "CAPSULE_GPU_PREBUILT_DIR has no object of ${name}'s `${source}` (`${object}`); make the "
                          "bundle again")
    endif()
    list(APPEND objects "${object}")
  endforeach()
  add_library(${name} STATIC ${objects})
  # Only objects: CMake cannot tell the archive's language from them.
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
endfunction()
