# The installed-package test (cmake -P): install the build tree into a fresh
# prefix, then build and run programs that see nothing but that prefix.
#
#   cmake -DWEFT_BUILD_DIR=<built weft tree> -DWORK_DIR=<scratch dir>
#         -DCONSUMER_DIR=<tests/api/consumer> -DGENERATOR=<generator>
#         [-DMAKE_PROGRAM=<ninja>] [-DCXX_COMPILER=<c++>] [-DBUILD_TYPE=<type>]
#         -P install_and_build.cmake
#
# Steps: (a) cmake --install into WORK_DIR/prefix; (b) configure the consumer
# project with CMAKE_PREFIX_PATH=prefix (find_package(weft), weft::weft only);
# (c) build it; (d) run it; (e) check weft.pc: pkg-config must resolve it
# from the prefix, and a program compiled with only its flags must link and
# run; (f) run the installed weft-topo.
cmake_minimum_required(VERSION 3.22)

foreach(v WEFT_BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "install_and_build.cmake: -D${v}=... is required")
  endif()
endforeach()

# Runs a command; on failure stops with the step, the command and its output.
function(run_step step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${ARGN}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (exit ${rc})\ncommand: ${shown}\n"
                        "---- stdout ----\n${out}\n---- stderr ----\n${err}")
  endif()
  message(STATUS "${step}: ok")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# (a) install ---------------------------------------------------------------------
set(install_config "")
if(BUILD_TYPE)
  set(install_config --config ${BUILD_TYPE})
endif()
run_step("install" ${CMAKE_COMMAND} --install ${WEFT_BUILD_DIR} --prefix ${prefix} ${install_config})
foreach(f include/weft/weft.hpp include/weft/config.hpp lib/cmake/weft/weftConfig.cmake
          lib/cmake/weft/weftConfigVersion.cmake lib/cmake/weft/weftTargets.cmake
          lib/pkgconfig/weft.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install: ${prefix}/${f} is missing")
  endif()
endforeach()

# (b) configure the consumer against the prefix only --------------------------------
set(configure_args -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix}
    # Only the prefix: no user package registry, no build tree exported there.
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_COMPILER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
if(BUILD_TYPE)
  list(APPEND configure_args -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
run_step("configure consumer" ${CMAKE_COMMAND} ${configure_args})
file(STRINGS ${consumer_build}/CMakeCache.txt weft_dir_line REGEX "^weft_DIR:")
if(NOT weft_dir_line MATCHES "=(.*)$" OR NOT CMAKE_MATCH_1 STREQUAL "${prefix}/lib/cmake/weft")
  message(FATAL_ERROR "configure consumer: weft was found at '${weft_dir_line}', "
                      "not in the installed prefix ${prefix}/lib/cmake/weft")
endif()

# (c) build -------------------------------------------------------------------------
run_step("build consumer" ${CMAKE_COMMAND} --build ${consumer_build} --verbose)
# The consumer must compile against the installed headers, not the source or
# build tree's.
get_filename_component(weft_source_include ${CONSUMER_DIR}/../../../include ABSOLUTE)
foreach(tree_include ${weft_source_include} ${WEFT_BUILD_DIR}/include)
  string(FIND "${step_output}" "${tree_include}" leak)
  if(NOT leak EQUAL -1)
    message(FATAL_ERROR "build consumer: the compile line names ${tree_include}, not the "
                        "installed headers:\n${step_output}")
  endif()
endforeach()

# (d) run ---------------------------------------------------------------------------
foreach(threads 1 3)
  run_step("run consumer (${threads} PEs)" ${consumer_build}/consumer --weft:threads=${threads}
           --weft:bind=none)
  if(NOT step_output MATCHES "consumer ok: ${threads} PEs")
    message(FATAL_ERROR "run consumer: no 'consumer ok: ${threads} PEs' in:\n${step_output}")
  endif()
endforeach()

# (e) pkg-config --------------------------------------------------------------------
find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "pkg-config: not found (it is a build dependency of weft)")
endif()
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run_step("pkg-config" ${PKG_CONFIG_EXECUTABLE} --cflags --libs weft)
string(STRIP "${step_output}" pc_flags)
# The paths must lead into the prefix wherever it is (the file is relocatable).
get_filename_component(real_prefix ${prefix} REALPATH)
separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
set(seen_include FALSE)
set(seen_libdir FALSE)
foreach(flag IN LISTS pc_list)
  if(flag MATCHES "^-I(.*)$")
    get_filename_component(dir "${CMAKE_MATCH_1}" REALPATH)
    if(dir STREQUAL "${real_prefix}/include")
      set(seen_include TRUE)
    endif()
  elseif(flag MATCHES "^-L(.*)$")
    get_filename_component(dir "${CMAKE_MATCH_1}" REALPATH)
    if(dir STREQUAL "${real_prefix}/lib")
      set(seen_libdir TRUE)
    endif()
  endif()
endforeach()
if(NOT seen_include OR NOT seen_libdir)
  message(FATAL_ERROR "pkg-config: '${pc_flags}' does not name ${prefix}/include and "
                      "${prefix}/lib")
endif()
set(compiler ${CXX_COMPILER})
if(NOT compiler)
  set(compiler c++)
endif()
run_step("build with pkg-config flags" ${compiler} ${CONSUMER_DIR}/main.cpp ${pc_list}
         -o ${WORK_DIR}/consumer-pkgconfig)
run_step("run pkg-config build" ${WORK_DIR}/consumer-pkgconfig --weft:threads=2 --weft:bind=none)
if(NOT step_output MATCHES "consumer ok: 2 PEs")
  message(FATAL_ERROR "run pkg-config build: no 'consumer ok: 2 PEs' in:\n${step_output}")
endif()

# (f) the installed tool --------------------------------------------------------------
if(EXISTS ${prefix}/bin/weft-topo)
  run_step("installed weft-topo" ${prefix}/bin/weft-topo --weft:threads=2)
  if(NOT step_output MATCHES "\nPE 1 -> ")
    message(FATAL_ERROR "installed weft-topo: no 'PE 1 -> ' line in:\n${step_output}")
  endif()
endif()

message(STATUS "installed package: ok (${prefix})")
