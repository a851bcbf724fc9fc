"""weft_trace: the reader of the trace directories that weft's trace layer
writes (--weft:trace=DIR; format docs/design/trace-format.md), behind the
command tools/weft-trace. (Not to be confused with the C++ library of the
trace layer, whose CMake target has the same name.)

One module per concept; each imports only those above it in this list:
  format    the format's tables (record layout, event kinds and pairs, flag
            bits, reserved ids, end hows) and TraceError; loads on its own
  reader    Issues; a trace directory loaded: metadata, clocks, headers,
            event files or summary files; how a run that ended early ended
  walk      the one pass over a track's records (Visitor), per-PE times
  messages  sends matched to the handlers that ran them
  mpi       the MPI ranks' calls (rank_calls), and the subcommand mpi
  output    the output file checked before any work
  summary, perfetto, plots (profile and timeline), check, migrations, mpi:
            the subcommands
  cli       the command line: options, exit statuses, one-line errors

A package rather than one file: the command had grown to 1,962 lines that
held all of these. Not a pip distribution (setup.py, pyproject): weft is
built and installed by CMake, and the command must run from a source tree
without any install step, so the launcher finds the package by a path
relative to itself (beside it here; <libdir>/weft/python when installed,
tools/CMakeLists.txt). Standard library only; matplotlib is imported by the
plots alone, when one is drawn.
"""
