# One SHA-256 over the files the prebuilt torch-free objects are compiled from (their sources,
# headers and CMake files; cmake/gpu_prebuilt.cmake): the SHA-256 of the lines
# "<file's SHA-256>  <path from the source root>", sorted by path bytewise. tools/gpu-check.sh
# records it in the bundle and compares it on the GPU machine, and the GPU machine's configure
# compares it again, so a tree edited after the bundle was made never archives its objects.
# Included, it defines capsule_gpu_source_files(ROOT OUT_VAR) and capsule_gpu_source_digest(ROOT
# OUT_VAR); run as `cmake -DCAPSULE_SOURCE_ROOT=DIR -P cmake/gpu_source_digest.cmake`, it prints
# the digest, or with -DCAPSULE_PRINT_FILES=ON the files, one path from the root per line.
cmake_minimum_required(VERSION 3.25)

# The files, from the source root: also what a configure that uses the objects depends on.
function(capsule_gpu_source_files root out_var)
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${root}"
       "${root}/cmake/*" "${root}/engine/*" "${root}/examples/*" "${root}/handlers/reference/*"
       "${root}/handlers/checkers/*" "${root}/handlers/cuda/*" "${root}/tests/libtorch/*")
  list(APPEND files CMakeLists.txt handlers/CMakeLists.txt tests/CMakeLists.txt)
  list(SORT files)
  set(${out_var} "${files}" PARENT_SCOPE)
endfunction()

function(capsule_gpu_source_digest root out_var)
  capsule_gpu_source_files("${root}" files)
  set(lines "")
  foreach(file IN LISTS files)
    file(SHA256 "${root}/${file}" hash)
    string(APPEND lines "${hash}  ${file}\n")
  endforeach()
  string(SHA256 digest "${lines}")
  set(${out_var} "${digest}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT IS_DIRECTORY "${CAPSULE_SOURCE_ROOT}")
    message(FATAL_ERROR "gpu_source_digest.cmake: CAPSULE_SOURCE_ROOT is `${CAPSULE_SOURCE_ROOT}`; expected the source folder")
  endif()
  if(CAPSULE_PRINT_FILES)
    capsule_gpu_source_files("${CAPSULE_SOURCE_ROOT}" files)
    list(JOIN files "\n" text)
    execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${text}")
  else()
    capsule_gpu_source_digest("${CAPSULE_SOURCE_ROOT}" digest)
    execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${digest}")
  endif()
endif()
