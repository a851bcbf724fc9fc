# Transport plugins of the shared libraries (src/net/plugin.hpp), one check
# per MODE (cmake -P):
#
#   -DMODE=needed -DLIBS=<lib;...> [-DPLUGINS=<module;...>]
#       no library of LIBS needs MPI, UCX, PMIx or libdw, directly or
#       through another (ldd); each module of PLUGINS exists.
#   -DMODE=missing -DLIB=<shared lib> -DPROGRAM=<program> -DTRANSPORT=<name>
#       -DWORK_DIR=<scratch> [-DENV=<VAR=v;...>]
#       PROGRAM, loading LIB from a directory without weft/ beside it, asked
#       for TRANSPORT, fails (exit 3) with the error that names the missing
#       plugin and the Debian packages.
#   -DMODE=library_missing ... (as missing) -DC_COMPILER=<cc>
#       as missing, but weft/weft-net-<transport>.so is there and needs a
#       library that is not: the error names the library dlopen missed and
#       the Debian packages.
cmake_minimum_required(VERSION 3.22)

# The Debian packages each transport's plugin needs (scripts/install-deps.sh).
set(packages_mpi "openmpi-bin libopenmpi-dev")
set(packages_ucx "libucx-dev libpmix-dev")

if(MODE STREQUAL "needed")
  foreach(lib IN LISTS LIBS)
    execute_process(COMMAND ldd ${lib} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "ldd ${lib} failed (exit ${rc}): ${err}")
    endif()
    if(out MATCHES "(libmpi[^ ]*|libopen-(pal|rte)[^ ]*|libuc[pstm][^ ]*|libpmix[^ ]*)")
      message(FATAL_ERROR "${lib} needs ${CMAKE_MATCH_1}; a transport library must be "
                          "loaded by its plugin only:\n${out}")
    endif()
    # libdw is dlopen()ed by the watchdog's symbolizer (src/base/symbolize.hpp).
    if(out MATCHES "(libdw[^ ]*|libelf[^ ]*)")
      message(FATAL_ERROR "${lib} needs ${CMAKE_MATCH_1}; libdw must be loaded by the "
                          "watchdog's symbolizer only:\n${out}")
    endif()
    message(STATUS "${lib}: no MPI, UCX, PMIx or libdw among:\n${out}")
  endforeach()
  foreach(module IN LISTS PLUGINS)
    if(NOT EXISTS ${module})
      message(FATAL_ERROR "the transport plugin ${module} was not built")
    endif()
  endforeach()
  return()
endif()

if(NOT MODE MATCHES "^(missing|library_missing)$")
  message(FATAL_ERROR "transport_plugins.cmake: MODE=${MODE}: accepted: needed, missing, library_missing")
endif()
foreach(v LIB PROGRAM TRANSPORT WORK_DIR)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "transport_plugins.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# The library under its SONAME: the program's NEEDED entry finds this copy
# first (LD_LIBRARY_PATH comes before the program's RUNPATH).
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE dyn)
if(NOT dyn MATCHES "\\(SONAME\\)[^\n]*\\[([^]]+)\\]")
  message(FATAL_ERROR "${LIB} has no SONAME:\n${dyn}")
endif()
set(soname ${CMAKE_MATCH_1})
file(COPY_FILE ${LIB} ${WORK_DIR}/${soname})

set(expect_regex "weft: fatal: the ${TRANSPORT} transport is a plugin, and ${WORK_DIR}/weft/weft-net-${TRANSPORT}.so does not exist[^\n]*Debian packages: ${packages_${TRANSPORT}}")
if(MODE STREQUAL "library_missing")
  # A module that needs libweft_gone.so, which is removed once it is linked.
  if(NOT C_COMPILER)
    set(C_COMPILER cc)
  endif()
  file(MAKE_DIRECTORY ${WORK_DIR}/weft)
  file(WRITE ${WORK_DIR}/gone.c "int weft_gone(void) { return 1; }\n")
  file(WRITE ${WORK_DIR}/module.c "int weft_gone(void);\nint weft_net_plugin_v1(void) { return weft_gone(); }\n")
  foreach(step "${C_COMPILER};-shared;-fPIC;${WORK_DIR}/gone.c;-o;${WORK_DIR}/libweft_gone.so"
               "${C_COMPILER};-shared;-fPIC;${WORK_DIR}/module.c;-o;${WORK_DIR}/weft/weft-net-${TRANSPORT}.so;-L${WORK_DIR};-lweft_gone")
    execute_process(COMMAND ${step} RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "building the stand-in module failed: ${err}")
    endif()
  endforeach()
  file(REMOVE ${WORK_DIR}/libweft_gone.so)
  set(expect_regex "weft: fatal: the ${TRANSPORT} transport needs [^\n]*, which did not load \\([^\n]*libweft_gone\\.so: cannot open shared object file[^\n]*install the Debian packages ${packages_${TRANSPORT}}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${WORK_DIR}
                        WEFT_TRANSPORT=${TRANSPORT} ${ENV} ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc EQUAL 3)
  message(FATAL_ERROR "${PROGRAM} with WEFT_TRANSPORT=${TRANSPORT} exited ${rc}, expected 3 "
                      "(fatal):\n${all}")
endif()
if(NOT all MATCHES "${expect_regex}")
  message(FATAL_ERROR "${PROGRAM} with WEFT_TRANSPORT=${TRANSPORT}: no match for\n"
                      "  ${expect_regex}\nin:\n${all}")
endif()
message(STATUS "ok: ${all}")
