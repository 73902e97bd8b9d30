# capsule as a CMake package (docs/cmake-package.md): `cmake --install` puts the public headers,
# the static libraries of the exported targets, the JSON Schemas, the LICENSE and
# lib/cmake/capsule/{capsuleConfig,capsuleConfigVersion,capsuleTargets}.cmake under the prefix.
# A consumer writes find_package(capsule CONFIG REQUIRED) and links capsule::engine,
# capsule::runtime, capsule::handlers_reference or capsule::checkers; the LibTorch provider is the
# `libtorch` component, exported in a file of its own so that only a consumer asking for it loads
# LibTorch's CMake configuration.
#
# Not exported: capsule::examples (the demos behind `capsule run`; their API serves the CLI),
# capsule::build_info (generated per build: it names this checkout's commit, not a consumer's),
# the CLI library and the warning flags (a consumer's warnings are its own).
include(CMakePackageConfigHelpers)

set(CAPSULE_CMAKE_SUBDIR "${CMAKE_INSTALL_LIBDIR}/cmake/capsule")
set(CAPSULE_SCHEMAS_SUBDIR "${CAPSULE_DATA_SUBDIR}/schemas")

install(TARGETS capsule_engine capsule_runtime capsule_handlers_reference capsule_checkers
        EXPORT capsuleTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
# engine/include holds the engine's and the runtime's headers; each handler library has its own
# include folder. None of them includes toml++, a handler's sources or LibTorch.
install(DIRECTORY engine/include/ handlers/reference/include/ handlers/checkers/include/
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.hpp")
install(EXPORT capsuleTargets NAMESPACE capsule:: DESTINATION "${CAPSULE_CMAKE_SUBDIR}")

# Components the package can load, each only where this build has it.
set(CAPSULE_PACKAGE_COMPONENTS "")
if(CAPSULE_HAVE_LIBTORCH)
  list(APPEND CAPSULE_PACKAGE_COMPONENTS libtorch)
  install(TARGETS capsule_handlers_libtorch
          EXPORT capsuleLibtorchTargets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  install(DIRECTORY handlers/libtorch/include/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.hpp")
  install(EXPORT capsuleLibtorchTargets NAMESPACE capsule:: DESTINATION "${CAPSULE_CMAKE_SUBDIR}")
endif()

configure_package_config_file(cmake/capsuleConfig.cmake.in "${PROJECT_BINARY_DIR}/capsuleConfig.cmake"
  INSTALL_DESTINATION "${CAPSULE_CMAKE_SUBDIR}"
  PATH_VARS CAPSULE_DATA_SUBDIR CAPSULE_SCHEMAS_SUBDIR)
# 0.x: a minor release may break the API, so 0.1.y satisfies a request for 0.1.x only
# (docs/decisions.md, "A consumable library"). The check also compares pointer sizes: the
# libraries are compiled code for one architecture.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/capsuleConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/capsuleConfig.cmake" "${PROJECT_BINARY_DIR}/capsuleConfigVersion.cmake"
        DESTINATION "${CAPSULE_CMAKE_SUBDIR}")

install(DIRECTORY tools/schemas/ DESTINATION "${CAPSULE_SCHEMAS_SUBDIR}" FILES_MATCHING PATTERN "*.schema.json")
install(FILES LICENSE DESTINATION "${CMAKE_INSTALL_DOCDIR}")
