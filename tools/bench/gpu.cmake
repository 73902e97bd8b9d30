# The GPU benchmarks, plain programs (no Google Benchmark, no Boost) that run on a bare GPU image
# next to the parity tests (tools/gpu-check.sh); each says why and exits 2 without a device.
# Included by tools/bench/CMakeLists.txt and, in a GPU machine's build (CAPSULE_GPU_TESTS_ONLY), by
# the top-level CMakeLists.txt (its programs are then in the build folder itself), so paths are
# relative to this file.
#
# capsule_gpu_bench: our session against cuBLAS (matmul) and cuDNN (conv2d, its graph API built
# once by cudnn_direct_conv.cpp) called directly (docs/cuda.md, docs/benchmarks.md).
if(CAPSULE_HAVE_CUDA)
  add_executable(capsule_gpu_bench ${CMAKE_CURRENT_LIST_DIR}/gpu_bench.cpp ${CMAKE_CURRENT_LIST_DIR}/cudnn_direct_conv.cpp)
  target_include_directories(capsule_gpu_bench SYSTEM PRIVATE ${CAPSULE_CUDNN_INCLUDE_DIR})
  target_link_libraries(capsule_gpu_bench PRIVATE capsule::engine capsule::runtime capsule::handlers_cuda CUDA::cudart
                                                  CUDA::cublas ${CAPSULE_CUDNN_LIBRARY} capsule_warnings)
  target_compile_definitions(capsule_gpu_bench PRIVATE CAPSULE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
# capsule_gpu_bench_libtorch: LibTorch on CUDA through our session against ATen called directly
# (matmul, conv2d, scaled dot-product attention, naming the SDPA backend ATen picked); only where
# LibTorch has CUDA (docs/libtorch.md, "LibTorch on CUDA").
if(CAPSULE_HAVE_LIBTORCH_CUDA)
  add_executable(capsule_gpu_bench_libtorch ${CMAKE_CURRENT_LIST_DIR}/gpu_bench_libtorch.cpp)
  target_link_libraries(capsule_gpu_bench_libtorch PRIVATE capsule::engine capsule::runtime capsule::handlers_cuda
                                                           capsule_warnings)
  capsule_link_libtorch(capsule_gpu_bench_libtorch)
  target_compile_definitions(capsule_gpu_bench_libtorch PRIVATE CAPSULE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
