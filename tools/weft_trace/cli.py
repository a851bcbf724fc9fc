"""The command line of weft-trace: the subcommands and their options
(argparse), and the exit statuses: 0, 1 for `check` on a broken trace, 2
for bad input or usage, reported as one line `weft-trace: error: <file or
dir>: <what>` on stderr and never as a traceback (WEFT_TRACE_DEBUG=1 shows
one for a bug of the tool). The command tools/weft-trace calls main().
"""

import argparse
import os
import sys

from .check import cmd_check
from .format import TraceError
from .lb import cmd_lb
from .migrations import cmd_migrations
from .mpi import cmd_mpi
from .perfetto import cmd_perfetto, parse_flows
from .plots import cmd_profile, cmd_timeline, parse_pes
from .reader import Issues
from .summary import cmd_summary


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line `weft-trace: error: ...`, exit 2."""

    def error(self, message):
        where = self.prog[len("weft-trace "):] if self.prog.startswith("weft-trace ") else "usage"
        print("weft-trace: error: %s: %s (see %s --help)" % (where, message, self.prog), file=sys.stderr)
        sys.exit(2)


def build_parser():
    p = Parser(prog="weft-trace", description="Read the trace files of weft's trace layer "
               "(--weft:trace=DIR; format: docs/design/trace-format.md).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    s = sub.add_parser("perfetto", help="Chrome/Perfetto trace-event JSON (ui.perfetto.dev)",
                       description="Write a Chrome/Perfetto trace-event JSON file: one process per node, "
                       "one thread per PE (and comm thread), slices for handlers, entries, tasks, regions, "
                       "idle, progress, flushes and lb phases, instants, counters, and message flow arrows.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="output JSON file")
    s.add_argument("--flows", type=parse_flows, default=1, metavar="all|none|N",
                   help="message arrows: all (default), none, or every Nth matched message")
    s.set_defaults(func=cmd_perfetto)

    s = sub.add_parser("summary", help="text report: time per name, per PE, imbalance",
                       description="Time per entry method / handler / region / task name, per PE "
                       "busy/idle/overhead, and the imbalance. Reads full and summary mode.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("--all", action="store_true", help="every name, not the top 30")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text (every name)")
    s.set_defaults(func=cmd_summary)

    s = sub.add_parser("profile", help="PNG: busy/overhead/idle %% over time, all PEs",
                       description="Stacked area of useful (busy), overhead and idle time as a percentage "
                       "of PE time, over wall-clock bins. Reads full and summary mode.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="output PNG file")
    s.add_argument("--bins", type=int, default=200, metavar="N", help="time bins (default 200)")
    s.set_defaults(func=cmd_profile)

    s = sub.add_parser("timeline", help="PNG: one row per PE, busy slices by name",
                       description="One row per PE: the outermost busy slices colored by entry method / "
                       "handler name (top 10, the rest 'other'), idle light grey, overhead white. "
                       "Full mode only.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="output PNG file")
    s.add_argument("--pes", type=parse_pes, default=None, metavar="RANGE",
                   help="PEs to draw, e.g. 0-3 or 0,2,5-7 (default all)")
    s.add_argument("--from-ms", type=float, default=None, metavar="X", help="start of the window (ms)")
    s.add_argument("--to-ms", type=float, default=None, metavar="Y", help="end of the window (ms)")
    s.set_defaults(func=cmd_timeline)

    s = sub.add_parser("migrations", help="per thread: its CPU over time, migrations (text, PNG)",
                       description="The CPU each thread (PE, comm thread) ran on over time, from the cpu "
                       "records (format version 3): per thread its CPU set at the start, samples, "
                       "migrations and time share per CPU on stdout; with -o a PNG of one step plot per "
                       "thread. Full mode only.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("-o", "--output", default=None, metavar="FILE", help="output PNG file (default: text only)")
    s.add_argument("--pes", type=parse_pes, default=None, metavar="RANGE",
                   help="PEs to report, e.g. 0-3 or 0,2,5-7 (default every thread)")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text (with each "
                   "thread's steps)")
    s.set_defaults(func=cmd_migrations)

    s = sub.add_parser("mpi", help="per MPI rank and call: count, time, waiting, bytes (mpiP-style)",
                       description="The MPI calls of each rank of a program linked by weft-mpicc, from "
                       "the mpi records (format version 3): per call over all ranks and per rank its "
                       "count, total, mean and max time, the time waited inside (suspended, its PE free "
                       "for other ranks) and the bytes of its point-to-point operations. Full mode only.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("--calls", action="store_true", help="also each rank's table of calls")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text")
    s.set_defaults(func=cmd_mpi)

    s = sub.add_parser("lb", help="per balancing step: load before and after, predicted vs measured gain",
                       description="The load-balancing steps (format version 3's lb records): per step "
                       "its time and phases (collection, strategy, migration), migrations and bytes, "
                       "the PEs' busy max/avg between the steps before and after it, and the gain "
                       "measured beside the strategy's prediction. Full mode only.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text (with each "
                   "step's moves)")
    s.set_defaults(func=cmd_lb)

    s = sub.add_parser("check", help="validate a trace; exit 0 valid, 1 not",
                       description="Validate a trace against the spec and list every problem: headers, "
                       "ticks, begin/end pairs and nesting, and per PE busy + idle + overhead = the node's "
                       "wall time within 1%. Exit 0 if valid, 1 if not, 2 if unreadable.")
    s.add_argument("dir", metavar="DIR", help="trace directory")
    s.set_defaults(func=cmd_check)
    return p


def main(argv=None):
    try:
        sys.stdout.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError):
        pass
    args = build_parser().parse_args(argv)
    issues = Issues(checking=False)
    try:
        rc = args.func(args, issues)
        issues.finish()
        sys.stdout.flush()
        return rc
    except TraceError as e:
        print("weft-trace: error: %s: %s" % (e.where, e.what), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `weft-trace summary DIR | head`: not an error of ours.
        try:
            sys.stdout = None
        except Exception:
            pass
        return 0
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        print("weft-trace: error: %s: out of memory" % getattr(args, "dir", "?"), file=sys.stderr)
        return 2
    except Exception as e:      # a bug of ours: still one line, WEFT_TRACE_DEBUG=1 for the traceback
        if os.environ.get("WEFT_TRACE_DEBUG"):
            raise
        print("weft-trace: error: %s: internal error %s: %s (a bug of weft-trace; WEFT_TRACE_DEBUG=1 "
              "shows where)" % (getattr(args, "dir", "?"), type(e).__name__, e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
