# TP_VERSION_H: a header, rewritten at every build only when it changes, that defines
# TP_VERSION_STRING as "0.9.0" (project(... VERSION)) with " (git 1a2b3c4)" added when the
# source is a git checkout (cmake/VersionGen.cmake). The targets that print it depend on
# the target tp_version and have ${PROJECT_BINARY_DIR}/generated on their include path.
set(TP_VERSION_H ${PROJECT_BINARY_DIR}/generated/tp_version.h)
find_package(Git QUIET)
add_custom_target(tp_version
  COMMAND ${CMAKE_COMMAND} -DOUT=${TP_VERSION_H} -DVERSION=${PROJECT_VERSION}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR} "-DGIT=${GIT_EXECUTABLE}"
          -P ${PROJECT_SOURCE_DIR}/cmake/VersionGen.cmake
  BYPRODUCTS ${TP_VERSION_H}
  COMMENT "Version header"
  VERBATIM)
