#!/usr/bin/env bash
# Runs every benchmark and writes the tables for docs/benchmarks.md.
#
# usage: bench/run_all.sh BUILD_DIR OUT_DIR REPORT_MD
#
# Each benchmark in BUILD_DIR/bench/ runs with --json --repeat 5; its JSON
# lines go to OUT_DIR/<name>.jsonl (replaced, not appended across runs).
# kneighbor runs once with no variant option (the default, every payload;
# its --weft:print-config output is recorded as a "default_config" row, on
# which report.py judges the verdicts), then once per other variant (queue x
# bind x alloc, 8 variants in all), all into kneighbor.jsonl; each run
# measures the core and the objects level side by side. The objects
# layer's benchmarks (entry_overhead, reduction_latency) follow, then the
# tasks layer's (tasks_overhead: weft::parallel_for's empty loop beside
# libgomp and oneTBB; tasks_imbalance: a chare array with trailing heavy
# elements, each scheme against the ideal step time), then
# mpi_pingpong under mpirun -n 2 (the plain MPI baseline for the
# transports), then the runs of several processes ("nodes") on this host,
# under mpirun --oversubscribe --bind-to none (see "multi-process runs"
# below): pingpong_nodes (weft's pingpong over each transport beside plain
# MPI, mpi_pingpong, and plain UCX, ucx_pingpong: the three programs of
# bench/pingpong/, interleaved per round), one_to_all, kneighbor_modes,
# comm_modes, persistent; then
# trace_overhead (kneighbor with --weft:trace off, full and
# summary, interleaved per round). A missing binary is skipped with a note; a benchmark that
# fails is reported and the others still run; the report is written from
# whatever was collected, and the exit status is 1 if anything failed or a
# verdict of the report could not be computed (report.py exits 3 and names it).
# Then: python3 bench/report.py OUT_DIR > REPORT_MD (`make bench` does all this).
set -uo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR REPORT_MD" >&2
  exit 2
fi
build_dir=$1
out_dir=$2
report_md=$3
bin_dir=$build_dir/bench
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repeat=5
# Runs of several processes: each program measures --repeat $mp_repeat
# times; runs that are compared are made one after another, interleaved,
# $mp_rounds times (round 1: a, b, c; round 2: a, b, c; ...), and each JSON
# line gets the "round" it came from, so report.py forms a ratio per round.
mp_repeat=3
mp_rounds=5
# pingpong_nodes decides the 8-byte latency verdicts, and on a VM each run
# of a program is a draw: the same binary's 8 B one-way time moved by up
# to 1.5x between runs started seconds apart, while the runs of one
# process agreed within a few percent. Its runs are short (the 25 runs of
# 5 rounds take ~16 s), so it takes more rounds, for a median over the
# rounds that a few unlucky draws do not decide.
pp_rounds=15
# trace_overhead's rounds are as short (a second or so each) and its ratios
# as noisy (kNeighbor's message-only iteration is a third of a
# microsecond): 25 rounds.
trace_rounds=25
# Each such run ends within this many seconds, or it is killed and reported.
mp_limit=240

if [[ ! -d $bin_dir ]]; then
  echo "run_all: no $bin_dir (build first: make build-release)" >&2
  exit 2
fi
mkdir -p "$out_dir" "$(dirname "$report_md")" || exit 2

# Fixed order first (cheap micro-benchmarks, then workloads), then any other
# benchmark binary found in bin_dir.
known=(alloc_scaling pe_private wakeup queues fiber_switch pingpong kneighbor entry_overhead
       reduction_latency tasks_overhead tasks_imbalance omp_empty_loop omp_oversub omp_tasks
       omp_wavefront
       mpi_pingpong pingpong_nodes one_to_all kneighbor_modes comm_modes persistent
       trace_overhead)
names=("${known[@]}")
for f in "$bin_dir"/*; do
  n=$(basename "$f")
  [[ -f $f && -x $f ]] || continue
  [[ " ${known[*]} " == *" $n "* ]] && continue
  # The two builds of each bench/omp program run under their pair's name.
  [[ $n == omp_empty_loop_* || $n == omp_oversub_* || $n == omp_tasks_* ||
     $n == omp_wavefront_* ]] && continue
  # ucx_pingpong runs under mpirun inside pingpong_nodes, not on its own.
  [[ $n == ucx_pingpong ]] && continue
  names+=("$n")
done
# RUN_ALL_ONLY="a b": just these steps (in the order above), e.g. to
# remeasure what a change touched; the report then has their sections only.
if [[ -n ${RUN_ALL_ONLY:-} ]]; then
  only=()
  for n in "${names[@]}"; do
    [[ " $RUN_ALL_ONLY " == *" $n "* ]] && only+=("$n")
  done
  for n in $RUN_ALL_ONLY; do
    [[ " ${names[*]} " == *" $n "* ]] || { echo "run_all: RUN_ALL_ONLY: no step '$n' (steps: ${names[*]})" >&2; exit 2; }
  done
  names=("${only[@]}")
fi

# ---- multi-process runs ----------------------------------------------------------------
# Open MPI must be told it may run as root. --bind-to none: weft binds its
# PEs itself, and the processes of a host split its CPUs among them.
have_mpirun=0
command -v mpirun >/dev/null 2>&1 && have_mpirun=1
# Appends stdin's JSON lines to $1, each with "round":$2 added (and the
# fields in $3, e.g. "trace":"full", when given).
tag_round() {
  local extra=${3:+,$3}
  sed -e '/^{.*}$/!d' -e "s/}\$/,\"round\":$2$extra}/" >>"$1"
}
# The network transports this build has (shm, mpi, ucx), as the persistent
# benchmark (which links the transports alone) lists them.
net_transports=()
if [[ -x $bin_dir/persistent ]]; then
  for t in $("$bin_dir/persistent" --list-transports | tr ',' ' '); do
    # On one host a composite (shm+mpi, shm+ucx) is shm: not measured twice.
    [[ $t == local || $t == *+* ]] || net_transports+=("$t")
  done
fi
has_transport() { [[ " ${net_transports[*]} " == *" $1 "* ]]; }
# What every weft run of several processes gets: unbound, no startup line, a
# watchdog that turns a hang into an abort with a per-PE dump.
weft_mp=(--weft:quiet --weft:timeout=$((mp_limit - 20)))
mp_bytes=8,64,512,4096,32768,65536,262144,1048576,4194304
# mp_run LABEL OUT ROUND N PROGRAM ARGS...: one run, under mpirun -n N (N=0:
# one process, no launcher); its JSON lines tagged with the round and
# appended to OUT; a failure is recorded, the other runs go on.
# Each such run starts a fresh copy of its program: on this virtual machine
# the physical pages behind a binary's code, fixed for as long as the file
# stays in the page cache, moved an 8-byte ping-pong by up to 2x between
# byte-identical copies (and changed after dropping the page cache). With a
# copy per run every round is a fresh draw, which the median over the
# rounds evens out, instead of one draw deciding the whole report.
mp_run() {
  local label=$1 out=$2 round=$3 n=$4 copy_dir
  shift 4
  copy_dir=$(mktemp -d "${TMPDIR:-/tmp}/weft-bench-exe.XXXXXX") &&
    cp "$1" "$copy_dir/" || { echo "run_all: $label: cannot copy $1" >&2; exit 2; }
  local exe_copy
  exe_copy=$copy_dir/$(basename "$1")
  shift
  if [[ $n -eq 0 ]]; then
    timeout -k 10 "$mp_limit" "$exe_copy" "$@" | tag_round "$out" "$round"
  else
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout -k 10 "$mp_limit" mpirun --oversubscribe --bind-to none -n "$n" "$exe_copy" "$@" |
      tag_round "$out" "$round"
  fi
  local rc=${PIPESTATUS[0]}
  rm -rf "$copy_dir"
  if [[ $rc -ne 0 ]]; then
    echo "run_all: $label (round $round) failed (exit $rc)" >&2
    failed+=("$label#$round")
  fi
}

failed=()
total=${#names[@]}
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  exe=$bin_dir/$name
  case $name in
    pingpong_nodes) exe=$bin_dir/pingpong ;;
    kneighbor_modes | trace_overhead) exe=$bin_dir/kneighbor ;;
    omp_empty_loop | omp_oversub | omp_tasks | omp_wavefront) exe=$bin_dir/${name}_weft ;;
  esac
  out=$out_dir/$name.jsonl
  case $name in
    pingpong_nodes | one_to_all | kneighbor_modes | comm_modes | persistent)
      if [[ $have_mpirun -eq 0 ]]; then
        echo "run_all: [$i/$total] $name: no mpirun on PATH, skipped" >&2
        rm -f "$out"
        continue
      fi
      ;;
  esac
  if [[ ! -x $exe ]]; then
    echo "run_all: [$i/$total] $name: no binary at $exe, skipped" >&2
    rm -f "$out"
    continue
  fi
  : >"$out"
  if [[ $name == kneighbor ]]; then
    echo "run_all: [$i/$total] kneighbor: the default (as --weft:print-config reports it) with every payload, then the other variants of queue mpsc|spsc-pairs x bind compact|none x alloc mimalloc|system; core and objects levels" >&2
    # The default is what a user gets with no option: run so, and record
    # what the program itself says it resolved to (report.py judges the
    # verdicts on that variant, never on a constant of its own).
    cfg=$out_dir/kneighbor.config.txt
    if "$exe" --json --repeat "$repeat" --level=both --payload=all --weft:print-config \
         >"$cfg" 2>&1; then
      sed -e '/^{.*}$/!d' "$cfg" >>"$out"
      dq=$(sed -n 's/^  queue *= *\([^ ]*\).*/\1/p' "$cfg")
      db=$(sed -n 's/^  bind *= *\([^ ]*\).*/\1/p' "$cfg")
      da=$(sed -n 's/^  alloc *= *\([^ ]*\).*/\1/p' "$cfg")
      if [[ -n $dq && -n $db && -n $da ]]; then
        printf '{"bench":"kneighbor","metric":"default_config","queue":"%s","bind":"%s","alloc":"%s","source":"--weft:print-config"}\n' \
          "$dq" "$db" "$da" >>"$out"
      else
        echo "run_all: kneighbor --weft:print-config: no queue/bind/alloc lines in $cfg" >&2
        failed+=("kneighbor(print-config)")
      fi
    else
      echo "run_all: kneighbor (default configuration) failed" >&2
      failed+=("kneighbor(default)")
      dq="" db="" da=""
    fi
    for queue in mpsc spsc-pairs; do
      for bind in compact none; do
        for alloc in mimalloc system; do
          [[ $queue/$bind/$alloc == $dq/$db/$da ]] && continue  # the default, run above
          if ! "$exe" --json --repeat "$repeat" --level=both --payload=span \
               --weft:queue="$queue" --weft:bind="$bind" --weft:alloc="$alloc" >>"$out"; then
            echo "run_all: kneighbor --weft:queue=$queue --weft:bind=$bind --weft:alloc=$alloc failed" >&2
            failed+=("kneighbor($queue,$bind,$alloc)")
          fi
        done
      done
    done
  elif [[ $name == mpi_pingpong ]]; then
    # The plain MPI baseline: two ranks on this host, under the launcher
    # (Open MPI needs to be told it may run as root).
    echo "run_all: [$i/$total] mpi_pingpong: 2 ranks under mpirun" >&2
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
         mpirun --oversubscribe -n 2 "$exe" --json --repeat "$repeat" >"$out"; then
      echo "run_all: mpi_pingpong failed" >&2
      failed+=("mpi_pingpong")
    fi
  elif [[ $name == omp_empty_loop || $name == omp_oversub || $name == omp_tasks ||
          $name == omp_wavefront ]]; then
    # libweft-omp and libgomp builds of one program, interleaved per round
    # (report.py forms gomp / weft per round). libgomp's threads spin after
    # a region: a pause between the runs keeps them off the next one.
    echo "run_all: [$i/$total] $name: libweft-omp and libgomp builds, $mp_rounds rounds" >&2
    omp_args=(--json --repeat "$repeat")
    [[ $name == omp_oversub ]] && omp_args+=(--weft:threads=2)
    for r in $(seq 1 "$mp_rounds"); do
      for runtime in gomp weft; do
        [[ -x $bin_dir/${name}_$runtime ]] || continue
        mp_run "$name($runtime)" "$out" "$r" 0 "$bin_dir/${name}_$runtime" "${omp_args[@]}"
        sleep 0.2
      done
    done
  elif [[ $name == pingpong_nodes ]]; then
    # weft's pingpong between two processes over each transport, beside
    # plain MPI (mpi_pingpong, bench/pingpong/mpi.cpp, the same MPI) and plain
    # UCX (ucx_pingpong, bench/pingpong/ucx.cpp, UCP active messages, the same
    # UCX), interleaved per round.
    # --touch=true on all: every payload is written whole and read whole,
    # so a transport that lends its buffers moves the data like one that
    # copies (without it shm's large messages would be a descriptor's
    # round trip).
    echo "run_all: [$i/$total] pingpong_nodes: 2 processes, plain-mpi, plain-ucx and weft over ${net_transports[*]}, $pp_rounds rounds" >&2
    for r in $(seq 1 "$pp_rounds"); do
      if [[ -x $bin_dir/mpi_pingpong ]]; then
        mp_run "pingpong_nodes(plain-mpi)" "$out" "$r" 2 "$bin_dir/mpi_pingpong" --json \
          --repeat "$mp_repeat" --iters=2000 --bytes="$mp_bytes" --touch=true
      fi
      if [[ -x $bin_dir/ucx_pingpong ]]; then
        mp_run "pingpong_nodes(plain-ucx)" "$out" "$r" 2 "$bin_dir/ucx_pingpong" --json \
          --repeat "$mp_repeat" --iters=2000 --bytes="$mp_bytes" --touch=true
      fi
      for t in "${net_transports[@]}"; do
        mp_run "pingpong_nodes($t)" "$out" "$r" 2 "$exe" --json --repeat "$mp_repeat" \
          --iters=2000 --bytes="$mp_bytes" --touch=true --weft:transport="$t" --weft:threads=1 "${weft_mp[@]}"
      done
    done
  elif [[ $name == one_to_all ]]; then
    echo "run_all: [$i/$total] one_to_all: 2 and 4 processes over ${net_transports[*]}" >&2
    for n in 2 4; do
      for t in "${net_transports[@]}"; do
        mp_run "one_to_all($t,-n $n)" "$out" 1 "$n" "$exe" --json --repeat "$repeat" \
          --iters=1000 --touch=true --weft:transport="$t" --weft:threads=1 "${weft_mp[@]}"
      done
    done
  elif [[ $name == kneighbor_modes ]]; then
    # The seeds' three configurations on one host, at 2 and at 4 PEs: SMP
    # (one process of P PEs), non-SMP over shm (P processes of one PE, the
    # PXSHM mode) and non-SMP over mpi (through the kernel); core level.
    echo "run_all: [$i/$total] kneighbor_modes: smp | nonsmp-shm | nonsmp-mpi at 2 and 4 PEs, $mp_rounds rounds" >&2
    kn_args=(--json --repeat "$mp_repeat" --level=core --touch=both --iters=1000)
    for r in $(seq 1 "$mp_rounds"); do
      for p in 2 4; do
        mp_run "kneighbor_modes(smp,$p)" "$out" "$r" 0 "$exe" "${kn_args[@]}" \
          --weft:threads="$p" --weft:quiet
        for t in shm mpi; do
          has_transport "$t" || continue
          mp_run "kneighbor_modes(nonsmp-$t,$p)" "$out" "$r" "$p" "$exe" "${kn_args[@]}" \
            --weft:transport="$t" --weft:threads=1 "${weft_mp[@]}"
        done
      done
    done
  elif [[ $name == trace_overhead ]]; then
    # What --weft:trace costs: kneighbor (both levels) at 2 PEs with the
    # trace off, full, summary and sampled (--weft:trace-sample=16), one
    # process each, interleaved per round
    # (the VM's phases move a lone run's time by 3x; report.py forms the
    # ratio to "off" per round). The trace goes to a directory of its own
    # in /dev/shm (memory: what the runtime costs, not what this VM's disk
    # does; docs/tracing.md has both), removed afterwards.
    echo "run_all: [$i/$total] trace_overhead: kneighbor with --weft:trace off|full|summary|sample16, $trace_rounds rounds" >&2
    trace_root=/dev/shm
    [[ -d $trace_root && -w $trace_root ]] || trace_root=${TMPDIR:-/tmp}
    trace_dir=$(mktemp -d "$trace_root/weft-bench-trace.XXXXXX")
    for r in $(seq 1 "$trace_rounds"); do
      for mode in off full summary sample16; do
        targs=()
        case $mode in
          full | summary) targs=(--weft:trace="$trace_dir" --weft:trace-mode="$mode") ;;
          sample16) targs=(--weft:trace="$trace_dir" --weft:trace-sample=16) ;;
        esac
        timeout -k 10 "$mp_limit" "$exe" --json --repeat "$mp_repeat" --level=both \
          --touch=false --iters=1000 --bytes=16,256,4096,65536 --weft:threads=2 --weft:quiet \
          "${targs[@]}" | tag_round "$out" "$r" "\"trace\":\"$mode\""
        if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
          echo "run_all: trace_overhead ($mode, round $r) failed" >&2
          failed+=("trace_overhead($mode)#$r")
        fi
      done
    done
    rm -rf "$trace_dir"
  elif [[ $name == comm_modes ]]; then
    # Who drives the network: a dedicated comm thread, the workers, or both;
    # on kneighbor (core) and on a compute-heavy kernel, 2 processes of one
    # PE over shm, the modes interleaved per round.
    echo "run_all: [$i/$total] comm_modes: comm=thread|workers|hybrid on kneighbor and a compute kernel, $mp_rounds rounds" >&2
    for r in $(seq 1 "$mp_rounds"); do
      for c in thread workers hybrid; do
        if [[ -x $bin_dir/kneighbor ]]; then
          mp_run "comm_modes(kneighbor,$c)" "$out" "$r" 2 "$bin_dir/kneighbor" --json \
            --repeat "$mp_repeat" --level=core --touch=false --iters=1000 --bytes=16,1024,65536 \
            --weft:comm="$c" --weft:transport=shm --weft:threads=1 "${weft_mp[@]}"
        fi
        mp_run "comm_modes(compute,$c)" "$out" "$r" 2 "$exe" --json --repeat "$mp_repeat" \
          --iters=300 --weft:comm="$c" --weft:transport=shm --weft:threads=1 "${weft_mp[@]}"
      done
    done
  elif [[ $name == persistent ]]; then
    # At the transport level: ordinary vs persistent-channel messages within
    # each run; over ucx, pooled vs per-message-registered buffers in two
    # runs interleaved per round; shm and mpi (no cheaper persistent path:
    # their channels send through send()) once.
    echo "run_all: [$i/$total] persistent: ucx pool=on|off, $mp_rounds rounds; shm and mpi once" >&2
    for r in $(seq 1 "$mp_rounds"); do
      if has_transport ucx; then
        for pool in on off; do
          mp_run "persistent(ucx,pool=$pool)" "$out" "$r" 2 "$exe" --json --repeat "$mp_repeat" \
            --transport=ucx --pool="$pool"
        done
      fi
      if [[ $r -eq 1 ]]; then
        for t in shm mpi; do
          has_transport "$t" || continue
          mp_run "persistent($t)" "$out" "$r" 2 "$exe" --json --repeat "$mp_repeat" --transport="$t"
        done
      fi
    done
  else
    echo "run_all: [$i/$total] $name" >&2
    if ! "$exe" --json --repeat "$repeat" >"$out"; then
      echo "run_all: $name failed" >&2
      failed+=("$name")
    fi
  fi
done

python3 "$here/report.py" "$out_dir" >"$report_md.tmp"
report_rc=$?
if [[ $report_rc -eq 0 || $report_rc -eq 3 ]]; then
  mv "$report_md.tmp" "$report_md"
  echo "run_all: report written to $report_md" >&2
  # 3: written, but some verdict could not be computed (report.py listed
  # which and why above): the run does not pass.
  [[ $report_rc -eq 3 ]] && failed+=("report.py(verdicts not measured)")
else
  rm -f "$report_md.tmp"
  echo "run_all: report.py failed; $report_md left unchanged" >&2
  failed+=("report.py")
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_all: FAILED: ${failed[*]}" >&2
  exit 1
fi
