# Decides whether the CUDA providers (handlers/cuda: the device runtime, cuBLAS and cuDNN) are
# built (CAPSULE_CUDA = AUTO | ON | OFF) and says so in one configure-time message. Sets
# CAPSULE_HAVE_CUDA; handlers/CMakeLists.txt adds the target, and each program that registers
# handlers links it through capsule_link_cuda(). The toolkit is found where Debian's or NVIDIA's
# packages put it (/usr/local/cuda) even when nvcc is not on PATH.
set(CAPSULE_HAVE_CUDA OFF)
string(TOUPPER "${CAPSULE_CUDA}" capsule_cuda_mode)
if(NOT capsule_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "CAPSULE_CUDA is `${CAPSULE_CUDA}`; expected AUTO, ON or OFF")
endif()

function(capsule_cuda_off reason)
  if(capsule_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "CAPSULE_CUDA=ON but ${reason}")
  endif()
  message(STATUS "CUDA providers: off (${reason})")
endfunction()

if(capsule_cuda_mode STREQUAL "OFF")
  message(STATUS "CUDA providers: off (CAPSULE_CUDA=OFF)")
elseif(CAPSULE_SANITIZE OR CAPSULE_FUZZ)
  # No nvcc work in the instrumented builds: the CUDA libraries are not instrumented either.
  capsule_cuda_off("this is a sanitizer or fuzz build")
else()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(CAPSULE_NVCC nvcc HINTS ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin NO_CACHE)
    if(CAPSULE_NVCC)
      # Through CUDACXX, not CMAKE_CUDA_COMPILER: check_language then tries this nvcc in a test
      # project (it skips the test when CMAKE_CUDA_COMPILER is already set), so an nvcc that
      # cannot build with this host compiler turns the providers off instead of failing configure.
      set(ENV{CUDACXX} "${CAPSULE_NVCC}")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND DEFINED ENV{CUDACXX})
    capsule_cuda_off("nvcc at $ENV{CUDACXX} cannot build a CUDA test project with this host compiler; the result is cached: remove CMAKE_CUDA_COMPILER from CMakeCache.txt to try again")
  elseif(NOT CMAKE_CUDA_COMPILER)
    capsule_cuda_off("no nvcc found; install the CUDA Toolkit or set CMAKE_CUDA_COMPILER")
  else()
    # The language's own architectures before it is enabled, where nothing set them: ours
    # (CAPSULE_CUDA_ARCHITECTURES, CMakeLists.txt), so CMake's compiler checks build for them too.
    # Our targets take CAPSULE_CUDA_ARCHITECTURES per target (handlers/cuda/CMakeLists.txt):
    # LibTorch's CMake package, found first (cmake/libtorch.cmake), may set the normal variable
    # CMAKE_CUDA_ARCHITECTURES to OFF (the first GPU run's fingerprint said "architectures OFF"),
    # and CMake may have cached nvcc's default in it (the second said 75).
    set(capsule_one_architecture "[0-9]+[a-z]?(-real|-virtual)?")
    if(NOT CAPSULE_CUDA_ARCHITECTURES MATCHES
       "^(all|all-major|native|${capsule_one_architecture}(;${capsule_one_architecture})*)$")
      message(FATAL_ERROR "CAPSULE_CUDA_ARCHITECTURES is `${CAPSULE_CUDA_ARCHITECTURES}`; expected a CUDA "
                          "architecture list such as 90, 80;90 or 90-real, or all, all-major or native")
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "${CAPSULE_CUDA_ARCHITECTURES}")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_path(CAPSULE_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(CAPSULE_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublas)
      capsule_cuda_off("nvcc ${CMAKE_CUDA_COMPILER_VERSION} was found, but not the CUDA Toolkit's cuBLAS")
    elseif(NOT CAPSULE_CUDNN_INCLUDE_DIR OR NOT CAPSULE_CUDNN_LIBRARY)
      capsule_cuda_off("the CUDA Toolkit ${CUDAToolkit_VERSION} was found, but not cuDNN (cudnn.h and libcudnn)")
    else()
      set(CAPSULE_HAVE_CUDA ON)
      if(CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
        set(CMAKE_CUDA_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")
      endif()
      message(STATUS "CUDA providers: on (CUDA ${CUDAToolkit_VERSION}, architectures ${CAPSULE_CUDA_ARCHITECTURES}, "
                     "cuDNN ${CAPSULE_CUDNN_LIBRARY})")
    endif()
  endif()
endif()

# Links the CUDA providers into a program that registers handlers, and defines CAPSULE_HAVE_CUDA
# there (never in the engine) so it calls register_cuda_handlers.
function(capsule_link_cuda target)
  if(CAPSULE_HAVE_CUDA)
    target_link_libraries(${target} PRIVATE capsule::handlers_cuda)
    target_compile_definitions(${target} PRIVATE CAPSULE_HAVE_CUDA=1)
  endif()
endfunction()
