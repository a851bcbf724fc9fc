#!/usr/bin/env bash
# Installs the Debian packages weft needs to build, test and benchmark.
# Idempotent: asks dpkg what is already there and prints nothing when all is.
set -euo pipefail

packages=(
  g++ cmake ninja-build make pkg-config
  gfortran                  # Fortran OpenMP programs against libweft-omp (tests/omp/fortran_api.f90)
  libhwloc-dev hwloc        # topology and binding
  libmimalloc-dev           # scalable allocator
  libabsl-dev               # flat hash maps (objects: element and location tables)
  openmpi-bin libopenmpi-dev # MPI: the mpi transport, launch by mpirun, bench/pingpong/mpi.cpp
  libucx-dev libpmix-dev    # the ucx transport (UCP), and PMIx for its address exchange
  libboost-context-dev      # user-level threads (fibers) for libweft-omp's team members
  libdw-dev                 # elfutils' libdwfl headers: the watchdog's backtraces name hidden frames (dlopen()ed, no link)
  nlohmann-json3-dev        # JSON strings escaped as valid UTF-8 (base: trace metadata, bench --json)
  libgtest-dev              # unit tests
  libbenchmark-dev          # micro-benchmarks
  libtbb-dev                # oneTBB: bench/tasks_overhead's tbb::parallel_for baseline
  libmetis-dev              # graph partitioning: the 'comm' load-balancing strategy
  python3 python3-matplotlib # tools/ (reports, plots)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
