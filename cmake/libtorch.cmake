# Decides whether the LibTorch provider is built (CAPSULE_LIBTORCH = AUTO | ON | OFF) and says so
# once at configure time when it is not. Sets CAPSULE_HAVE_LIBTORCH; handlers/CMakeLists.txt adds
# the target, and each program that registers handlers links it through capsule_link_libtorch().
set(CAPSULE_HAVE_LIBTORCH OFF)
string(TOUPPER "${CAPSULE_LIBTORCH}" capsule_libtorch_mode)
if(NOT capsule_libtorch_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "CAPSULE_LIBTORCH is `${CAPSULE_LIBTORCH}`; expected AUTO, ON or OFF")
endif()
if(capsule_libtorch_mode STREQUAL "OFF")
  message(STATUS "LibTorch provider: off (CAPSULE_LIBTORCH=OFF)")
elseif(CAPSULE_SANITIZE OR CAPSULE_FUZZ)
  # LibTorch is not built with the sanitizers; instrumented code calling into it reports noise.
  if(capsule_libtorch_mode STREQUAL "ON")
    message(FATAL_ERROR "CAPSULE_LIBTORCH=ON cannot be combined with CAPSULE_SANITIZE or CAPSULE_FUZZ")
  endif()
  message(STATUS "LibTorch provider: off (sanitizer or fuzz build)")
else()
  find_package(Torch QUIET)
  if(Torch_FOUND)
    set(CAPSULE_HAVE_LIBTORCH ON)
    message(STATUS "LibTorch provider: on (LibTorch ${Torch_VERSION})")
  elseif(capsule_libtorch_mode STREQUAL "ON")
    message(FATAL_ERROR "CAPSULE_LIBTORCH=ON but find_package(Torch) failed; install libtorch-dev or set Torch_DIR")
  else()
    message(STATUS "LibTorch provider: off (find_package(Torch) found no LibTorch; install libtorch-dev)")
  endif()
endif()

# Links the LibTorch provider into a program that registers handlers, and defines
# CAPSULE_HAVE_LIBTORCH there (never in the engine) so it calls register_libtorch_handlers.
function(capsule_link_libtorch target)
  if(CAPSULE_HAVE_LIBTORCH)
    target_link_libraries(${target} PRIVATE capsule::handlers_libtorch)
    target_compile_definitions(${target} PRIVATE CAPSULE_HAVE_LIBTORCH=1)
  endif()
endfunction()
