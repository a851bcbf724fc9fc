# The README names only what exists (cmake -P):
#   cmake -DSOURCE_DIR=<weft source tree> -P readme_paths.cmake
# Every path of the source tree it names (docs/..., tools/..., examples/...,
# and the other top-level folders; placeholders such as src/<layer>/ aside)
# and every DESIGN.md it points to must exist, and the Makefile must have the
# targets of its quick start.
cmake_minimum_required(VERSION 3.22)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "readme_paths.cmake: -DSOURCE_DIR=... is required")
endif()
file(READ ${SOURCE_DIR}/README.md readme)

string(REGEX MATCHALL "(^|[ `(\n])(docs|tools|examples|scripts|bench|tests|include|src|cmake)/[A-Za-z0-9_./<>*+-]*"
       found "${readme}")
set(missing "")
set(checked 0)
foreach(token IN LISTS found)
  string(REGEX REPLACE "^[ `(\n]" "" path "${token}")
  string(REGEX REPLACE "[.]$" "" path "${path}")  # a sentence's full stop
  if(path MATCHES "[<>*]")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  if(NOT EXISTS ${SOURCE_DIR}/${path})
    list(APPEND missing ${path})
  endif()
endforeach()
string(REGEX MATCHALL "[A-Za-z0-9_./-]*DESIGN\\.md" designs "${readme}")
foreach(path IN LISTS designs)
  if(NOT EXISTS ${SOURCE_DIR}/${path})
    list(APPEND missing ${path})
  endif()
endforeach()
if(missing)
  list(REMOVE_DUPLICATES missing)
  string(REPLACE ";" ", " missing "${missing}")
  message(FATAL_ERROR "README.md names what the source tree does not have: ${missing}")
endif()

file(READ ${SOURCE_DIR}/Makefile makefile)
foreach(target run test)
  if(readme MATCHES "make ${target}" AND NOT makefile MATCHES "\n${target}:")
    message(FATAL_ERROR "README.md says 'make ${target}', which the Makefile lacks")
  endif()
endforeach()
message(STATUS "README.md: ${checked} paths, all there")
