# The installed-package test (cmake -P): install the build tree into a fresh
# prefix, then build and run programs that see nothing but that prefix, by
# the README's two recipes and nothing else (no flags of their own, no C++
# standard of their own).
#
#   cmake -DWEFT_BUILD_DIR=<built weft tree> -DWORK_DIR=<scratch dir>
#         -DCONSUMER_DIR=<tests/api/consumer> -DGENERATOR=<generator>
#         [-DMAKE_PROGRAM=<ninja>] [-DCXX_COMPILER=<c++>] [-DC_COMPILER=<cc>]
#         [-DBUILD_TYPE=<type>] -P install_and_build.cmake
#
# Steps: (a) cmake --install into WORK_DIR/prefix: headers, CMake package,
# the three .pc files, static libraries, the shared ones with their
# versioned SONAMEs and their transport plugins in lib/weft/; (b) configure the consumer project with
# CMAKE_PREFIX_PATH=prefix (find_package(weft)); (c) build it -- no link line
# may force -rdynamic; (d) run consumer (weft::weft + weft::omp: objects,
# parallel_for, OpenMP on the PEs), consumer_shared (weft::shared: the same
# without OpenMP, on libweft.so) and plain_omp (weft::omp_shared: a plain
# OpenMP program on libweft-omp.so, without libgomp); (e) the same three
# built with pkg-config's flags alone (weft, weft-shared, weft-omp);
# (f) run the installed weft-topo; (g) the installed weft-trace reads a
# trace of the consumer, also from a moved copy.
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
file(STRINGS ${WEFT_BUILD_DIR}/CMakeCache.txt version_line REGEX "^CMAKE_PROJECT_VERSION:")
if(NOT version_line MATCHES "=([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "install: no CMAKE_PROJECT_VERSION in ${WEFT_BUILD_DIR}/CMakeCache.txt")
endif()
set(version ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3})
set(soversion ${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
foreach(f include/weft/weft.hpp include/weft/config.hpp lib/cmake/weft/weftConfig.cmake
          lib/cmake/weft/weftConfigVersion.cmake lib/cmake/weft/weftTargets.cmake
          lib/pkgconfig/weft.pc lib/pkgconfig/weft-shared.pc lib/pkgconfig/weft-omp.pc
          lib/libweft_core.a lib/libweft_tasks.a lib/libweft_threads.a lib/libweft_omp.a lib/libweft_lb.a
          lib/libweft.so lib/libweft.so.${soversion} lib/libweft.so.${version}
          lib/libweft-omp.so lib/libweft-omp.so.${soversion} lib/libweft-omp.so.${version})
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install: ${prefix}/${f} is missing")
  endif()
endforeach()

# The dynamic section of an ELF file (readelf -d), to check SONAME and NEEDED.
find_program(READELF NAMES readelf)
if(NOT READELF)
  message(FATAL_ERROR "readelf: not found (binutils, which gcc needs)")
endif()
function(dynamic_section file out)
  execute_process(COMMAND ${READELF} -d ${file} RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed: ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
foreach(lib weft weft-omp)
  dynamic_section(${prefix}/lib/lib${lib}.so.${version} dyn)
  if(NOT dyn MATCHES "\\(SONAME\\)[^\n]*\\[lib${lib}\\.so\\.${soversion}\\]")
    message(FATAL_ERROR "install: lib${lib}.so.${version} has no SONAME lib${lib}.so.${soversion}:\n${dyn}")
  endif()
endforeach()
message(STATUS "shared libraries: SONAMEs libweft.so.${soversion}, libweft-omp.so.${soversion}")
# The transport plugins the shared libraries load from lib/weft/ (the build
# tree's lib/weft/ holds those this build made).
file(GLOB built_plugins RELATIVE ${WEFT_BUILD_DIR}/lib/weft ${WEFT_BUILD_DIR}/lib/weft/weft-net-*.so)
foreach(plugin IN LISTS built_plugins)
  if(NOT EXISTS ${prefix}/lib/weft/${plugin})
    message(FATAL_ERROR "install: the transport plugin ${prefix}/lib/weft/${plugin} is missing")
  endif()
endforeach()
message(STATUS "transport plugins installed: ${built_plugins}")

# Runs a built program; every regex of EXPECT must match its output, and no
# NEEDED entry of its dynamic section may match FORBID_NEEDED.
function(run_program step program)
  cmake_parse_arguments(R "" "FORBID_NEEDED" "ARGS;ENV;EXPECT;NEEDED" ${ARGN})
  dynamic_section(${program} dyn)
  foreach(lib IN LISTS R_NEEDED)
    if(NOT dyn MATCHES "\\(NEEDED\\)[^\n]*\\[${lib}\\]")
      message(FATAL_ERROR "${step}: ${program} does not need ${lib}:\n${dyn}")
    endif()
  endforeach()
  if(R_FORBID_NEEDED AND dyn MATCHES "\\(NEEDED\\)[^\n]*\\[(${R_FORBID_NEEDED})")
    message(FATAL_ERROR "${step}: ${program} needs ${CMAKE_MATCH_1}:\n${dyn}")
  endif()
  run_step("${step}" ${CMAKE_COMMAND} -E env ${R_ENV} ${program} ${R_ARGS})
  foreach(regex IN LISTS R_EXPECT)
    if(NOT step_output MATCHES "${regex}")
      message(FATAL_ERROR "${step}: no '${regex}' in:\n${step_output}")
    endif()
  endforeach()
endfunction()

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
if(C_COMPILER)
  list(APPEND configure_args -DCMAKE_C_COMPILER=${C_COMPILER})
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

# Nothing exported may force -rdynamic (--export-dynamic) on a consumer.
foreach(flag -rdynamic --export-dynamic -export-dynamic)
  string(FIND "${step_output}" " ${flag}" forced)
  if(NOT forced EQUAL -1)
    message(FATAL_ERROR "build consumer: a link line has ${flag}:\n${step_output}")
  endif()
endforeach()

# (d) run ---------------------------------------------------------------------------
foreach(threads 1 3)
  run_program("run consumer (${threads} PEs)" ${consumer_build}/consumer
              ARGS --weft:threads=${threads} --weft:bind=none
              EXPECT "consumer: objects and parallel_for ok\n"
                     "consumer: openmp ok: team of ${threads} on the PEs\n"
                     "consumer ok: ${threads} PEs"
              FORBID_NEEDED "libgomp|libweft")
endforeach()
run_program("run consumer_shared" ${consumer_build}/consumer_shared
            ARGS --weft:threads=2 --weft:bind=none
            EXPECT "consumer: objects and parallel_for ok\n" "consumer ok: 2 PEs"
            NEEDED libweft.so.${soversion})
run_program("run plain_omp" ${consumer_build}/plain_omp
            ENV OMP_NUM_THREADS=2 WEFT_THREADS=2 WEFT_BIND=none WEFT_QUIET=0
            EXPECT "weft: node 0: 2 PEs" "plain_omp ok: team of 2"
            NEEDED libweft-omp.so.${soversion} FORBID_NEEDED libgomp)

# (e) pkg-config --------------------------------------------------------------------
find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "pkg-config: not found (it is a build dependency of weft)")
endif()
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
get_filename_component(real_prefix ${prefix} REALPATH)
# pkg_flags(<module> <--cflags|--libs> <out>): the flags as a list; the paths
# must lead into the prefix wherever it is (the files are relocatable).
function(pkg_flags module what out)
  run_step("pkg-config ${what} ${module}" ${PKG_CONFIG_EXECUTABLE} ${what} ${module})
  string(STRIP "${step_output}" flags)
  separate_arguments(list UNIX_COMMAND "${flags}")
  foreach(flag IN LISTS list)
    if(flag MATCHES "^-[IL](.*)$")
      get_filename_component(dir "${CMAKE_MATCH_1}" REALPATH)
      if(dir MATCHES "^${real_prefix}/" AND NOT dir MATCHES "^${real_prefix}/include(/|$)" AND
         NOT dir STREQUAL "${real_prefix}/lib")
        message(FATAL_ERROR "pkg-config ${what} ${module}: ${flag} is not in ${prefix}/include or /lib")
      endif()
    endif()
  endforeach()
  set(${out} "${list}" PARENT_SCOPE)
endfunction()
pkg_flags(weft --cflags weft_cflags)
pkg_flags(weft --libs weft_libs)
set(seen_include FALSE)
set(seen_libdir FALSE)
foreach(flag IN LISTS weft_cflags weft_libs)
  if(flag MATCHES "^-([IL])(.*)$")
    set(kind ${CMAKE_MATCH_1})
    get_filename_component(dir "${CMAKE_MATCH_2}" REALPATH)
    if(kind STREQUAL "I" AND dir STREQUAL "${real_prefix}/include")
      set(seen_include TRUE)
    elseif(kind STREQUAL "L" AND dir STREQUAL "${real_prefix}/lib")
      set(seen_libdir TRUE)
    endif()
  endif()
endforeach()
if(NOT seen_include OR NOT seen_libdir)
  message(FATAL_ERROR "pkg-config: '${weft_cflags} ${weft_libs}' does not name ${prefix}/include "
                      "and ${prefix}/lib")
endif()
# Every library of weft::weft (the README's parallel_for needs tasks, threads
# and Boost.Context), and no -rdynamic.
foreach(lib -lweft_lb -lweft_objects -lweft_tasks -lweft_threads -lweft_core -lweft_trace -lweft_net
            -lweft_base -lboost_context -lmimalloc)
  if(NOT lib IN_LIST weft_libs)
    message(FATAL_ERROR "pkg-config --libs weft: no ${lib} in '${weft_libs}'")
  endif()
endforeach()
if("-rdynamic" IN_LIST weft_libs)
  message(FATAL_ERROR "pkg-config --libs weft forces -rdynamic: '${weft_libs}'")
endif()
set(compiler ${CXX_COMPILER})
if(NOT compiler)
  set(compiler c++)
endif()
set(c_compiler ${C_COMPILER})
if(NOT c_compiler)
  set(c_compiler cc)
endif()
# The README's pkg-config recipe: compile with --cflags (and -fopenmp, which
# its #pragma omp needs), link with --libs.
run_step("compile with pkg-config weft" ${compiler} -fopenmp ${weft_cflags} -c
         ${CONSUMER_DIR}/main.cpp -o ${WORK_DIR}/consumer-pkgconfig.o)
run_step("link with pkg-config weft" ${compiler} ${WORK_DIR}/consumer-pkgconfig.o ${weft_libs}
         -o ${WORK_DIR}/consumer-pkgconfig)
run_program("run pkg-config weft build" ${WORK_DIR}/consumer-pkgconfig
            ARGS --weft:threads=2 --weft:bind=none
            EXPECT "consumer: objects and parallel_for ok\n"
                   "consumer: openmp ok: team of 2 on the PEs\n" "consumer ok: 2 PEs"
            FORBID_NEEDED "libgomp|libweft")
pkg_flags(weft-shared "--cflags;--libs" shared_flags)
run_step("build with pkg-config weft-shared" ${compiler} ${CONSUMER_DIR}/main.cpp ${shared_flags}
         -o ${WORK_DIR}/consumer-pkgconfig-shared)
run_program("run pkg-config weft-shared build" ${WORK_DIR}/consumer-pkgconfig-shared
            ARGS --weft:threads=2 --weft:bind=none ENV LD_LIBRARY_PATH=${prefix}/lib
            EXPECT "consumer ok: 2 PEs" NEEDED libweft.so.${soversion})
pkg_flags(weft-omp --cflags omp_cflags)
pkg_flags(weft-omp --libs omp_libs)
run_step("compile with pkg-config weft-omp" ${c_compiler} ${omp_cflags} -c
         ${CONSUMER_DIR}/plain_omp.c -o ${WORK_DIR}/plain_omp-pkgconfig.o)
run_step("link with pkg-config weft-omp" ${c_compiler} ${WORK_DIR}/plain_omp-pkgconfig.o
         ${omp_libs} -o ${WORK_DIR}/plain_omp-pkgconfig)
run_program("run pkg-config weft-omp build" ${WORK_DIR}/plain_omp-pkgconfig
            ENV LD_LIBRARY_PATH=${prefix}/lib OMP_NUM_THREADS=2 WEFT_THREADS=2 WEFT_BIND=none
                WEFT_QUIET=0
            EXPECT "weft: node 0: 2 PEs" "plain_omp ok: team of 2"
            NEEDED libweft-omp.so.${soversion} FORBID_NEEDED libgomp)

# (e2) the installed MPI (where libweft-mpi is built): weft-mpicc, pkg-config
# weft-mpi and CMake's FindMPI with MPI_C_COMPILER=weft-mpicc each build
# tests/mpi/ring.c, which then runs as 3 ranks on 2 PEs.
if(EXISTS ${prefix}/bin/weft-mpicc)
  set(ring_source ${CONSUMER_DIR}/../../mpi/ring.c)
  foreach(f lib/pkgconfig/weft-mpi.pc lib/libweft-mpi-main.a include/weft/mpi/mpi.h
            bin/weft-mpicxx)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "install: ${prefix}/${f} is missing")
    endif()
  endforeach()
  run_step("build with the installed weft-mpicc" ${prefix}/bin/weft-mpicc -O2 ${ring_source}
           -o ${WORK_DIR}/ring-mpicc)
  pkg_flags(weft-mpi --cflags mpi_cflags)
  pkg_flags(weft-mpi --libs mpi_libs)
  run_step("build with pkg-config weft-mpi" ${c_compiler} ${mpi_cflags} ${ring_source} ${mpi_libs}
           -o ${WORK_DIR}/ring-pkgconfig)
  set(mpi_configure_args -S ${CONSUMER_DIR}/../consumer_mpi -B ${WORK_DIR}/consumer-mpi-build
      -G ${GENERATOR} -DMPI_C_COMPILER=${prefix}/bin/weft-mpicc -DRING_SOURCE=${ring_source})
  if(MAKE_PROGRAM)
    list(APPEND mpi_configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
  if(C_COMPILER)
    list(APPEND mpi_configure_args -DCMAKE_C_COMPILER=${C_COMPILER})
  endif()
  # FindMPI keeps the wrapper's libraries and flags but not a sanitizer's
  # -fsanitize, whose runtime must come first: a sanitizer build of weft
  # gives it to the consumer as its own link flag, as a user of such a
  # build would.
  file(STRINGS ${WEFT_BUILD_DIR}/CMakeCache.txt sanitize_line REGEX "^WEFT_SANITIZE:")
  if(sanitize_line MATCHES "=address$")
    list(APPEND mpi_configure_args "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
  elseif(sanitize_line MATCHES "=thread$")
    list(APPEND mpi_configure_args "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread")
  endif()
  run_step("configure an MPI program with FindMPI and weft-mpicc" ${CMAKE_COMMAND}
           ${mpi_configure_args})
  run_step("build it" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-mpi-build)
  foreach(ring ring-mpicc ring-pkgconfig consumer-mpi-build/ring_findmpi)
    run_program("run ${ring}" ${WORK_DIR}/${ring}
                ARGS --weft:threads=2 --weft:bind=none --weft:quiet --weft:vp=3
                ENV LD_LIBRARY_PATH=${prefix}/lib EXPECT "ring: ok 3 ranks")
  endforeach()
endif()

# (f) the installed tool --------------------------------------------------------------
if(EXISTS ${prefix}/bin/weft-topo)
  run_step("installed weft-topo" ${prefix}/bin/weft-topo --weft:threads=2)
  if(NOT step_output MATCHES "\nPE 1 -> ")
    message(FATAL_ERROR "installed weft-topo: no 'PE 1 -> ' line in:\n${step_output}")
  endif()
endif()

# (g) the installed weft-trace (tools/, unless WEFT_BUILD_TOOLS=OFF): the
# launcher finds its package in lib/weft/python (no __pycache__ installed),
# reads a trace that the installed consumer writes, and still does from a
# copy of the two moved elsewhere.
file(STRINGS ${WEFT_BUILD_DIR}/CMakeCache.txt tools_line REGEX "^WEFT_BUILD_TOOLS:BOOL=")
if(NOT tools_line MATCHES "=(OFF|0|FALSE|NO)$")
  foreach(f bin/weft-trace lib/weft/python/weft_trace/__init__.py lib/weft/python/weft_trace/cli.py
            lib/weft/python/weft_trace/format.py)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "install: ${prefix}/${f} is missing")
    endif()
  endforeach()
  file(GLOB_RECURSE python_files RELATIVE ${prefix}/lib/weft/python ${prefix}/lib/weft/python/*)
  foreach(f IN LISTS python_files)
    if(NOT f MATCHES "^weft_trace/[a-z_]+\\.py$")
      message(FATAL_ERROR "install: ${prefix}/lib/weft/python/${f} installed (expected the package's .py files only)")
    endif()
  endforeach()
  if(EXISTS ${prefix}/lib/weft/python/weft_trace/__pycache__)
    message(FATAL_ERROR "install: ${prefix}/lib/weft/python/weft_trace/__pycache__ installed")
  endif()
  run_step("run pkg-config weft build with a trace" ${WORK_DIR}/consumer-pkgconfig
           --weft:threads=2 --weft:bind=none --weft:trace=${WORK_DIR}/trace)
  run_step("installed weft-trace check" ${prefix}/bin/weft-trace check ${WORK_DIR}/trace)
  if(NOT step_output MATCHES "\nresult: OK")
    message(FATAL_ERROR "installed weft-trace check: no 'result: OK' line in:\n${step_output}")
  endif()
  file(COPY ${prefix}/bin/weft-trace DESTINATION ${WORK_DIR}/moved/bin)
  file(COPY ${prefix}/lib/weft/python DESTINATION ${WORK_DIR}/moved/lib/weft)
  run_step("moved weft-trace summary" ${WORK_DIR}/moved/bin/weft-trace summary ${WORK_DIR}/trace)
  if(NOT step_output MATCHES "\nPer PE ")
    message(FATAL_ERROR "moved weft-trace summary: no 'Per PE' line in:\n${step_output}")
  endif()
endif()

message(STATUS "installed package: ok (${prefix})")
