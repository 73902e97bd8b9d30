# Shared by the install tests run with `cmake -P`: capsule_scratch_dir(OUT NAME) sets OUT to an
# emptied directory under the system's temporary directory, outside every git work tree as a real
# installation is (see install_check.cmake). Its path is fixed per build folder (BUILD_DIR) rather
# than random, so compile lines repeat from run to run and ccache can reuse them.
function(capsule_scratch_dir out name)
  if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
    set(scratch "$ENV{TMPDIR}")
  else()
    set(scratch "/tmp")
  endif()
  string(SHA256 build_key "${BUILD_DIR}")
  string(SUBSTRING "${build_key}" 0 16 build_key)
  set(dir "${scratch}/${name}-${build_key}")
  file(REMOVE_RECURSE "${dir}")
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()
