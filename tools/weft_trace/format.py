"""The trace format's tables (docs/design/trace-format.md): the file
layout (header and record structs), the event kinds and which of them pair
up as begin and end, the flag bits and reserved ids, the ways a run ends;
and TraceError, what every module raises for input that breaks the format.

The numbers are copies of the runtime's C++ headers (trace/hooks.hpp,
trace/session.hpp). They are written out here rather than parsed from the
headers at run time, so that the tool needs nothing but itself (an
installed tool has no source tree); tests/trace/check_tables.py loads this
file on its own and fails when a table and the headers differ. That is why
this module imports nothing of the package: it must load alone.
"""

import struct


FORMAT = "weft-trace"
SUMMARY_FORMAT = "weft-trace-summary"
VERSION = 3                   # what this tool reads: 1, 2 and 3
VERSIONS = (1, 2, 3)
MAGIC = b"WEFTTRC\0"
HEADER = struct.Struct("<8sIIiiII")      # magic, version, record bytes, node, PE, kind, 0
RECORD = struct.Struct("<QIIII")         # w = tick << 8 | kind; a, b, c, d
HEADER_BYTES = HEADER.size               # 32
RECORD_BYTES = RECORD.size               # 24

KIND_NAMES = {
    1: "handler_begin", 2: "handler_end", 3: "entry_begin", 4: "entry_end",
    5: "send", 6: "idle_begin", 7: "idle_end", 8: "task_begin", 9: "task_end",
    10: "steal", 11: "reduction", 12: "migrate_out", 13: "migrate_in",
    14: "lb_begin", 15: "lb_end", 16: "progress_begin", 17: "progress_end",
    18: "mark", 19: "region_begin", 20: "region_end", 21: "counter",
    22: "flush_begin", 23: "flush_end", 24: "end", 25: "cpu",
    26: "mpi_begin", 27: "mpi_end", 28: "mpi_wait_begin", 29: "mpi_wait_end",
    30: "lb_phase_begin", 31: "lb_phase_end",
    32: "dropped",
    34: "ult_begin", 35: "ult_end",
}
# The kinds each version's files may hold: version 1 has no end record,
# versions 1 and 2 no cpu record nor MPI records.
KINDS_OF_VERSION = {1: frozenset(k for k in KIND_NAMES if k < 24),
                    2: frozenset(k for k in KIND_NAMES if k < 25),
                    3: frozenset(KIND_NAMES)}
SEND, COUNTER, END, CPU = 5, 21, 24, 25
# An MPI rank's call and its waits (tools/weft_trace/mpi.py): each names the
# rank in `a`; they pair per rank, not per track.
MPI_BEGIN, MPI_END, MPI_WAIT_BEGIN, MPI_WAIT_END = 26, 27, 28, 29
# Events a track dropped while its writer fell behind: a, b the count (low,
# high), c, d the tick it began dropping (low, high).
DROPPED = 32
# The end record's `a` and the metadata's end.how.
END_HOWS = {0: "exit", 1: "fatal", 2: "timeout", 3: "signal"}
SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 9: "SIGKILL", 15: "SIGTERM"}
STEAL, REDUCTION, MIGRATE_OUT, MIGRATE_IN, MARK = 10, 11, 12, 13, 18
# A balancing step (tools/weft_trace/lb.py): each PE's part and its phases;
# they pair per collection and step, not with the track's slices.
LB_BEGIN, LB_END, LB_PHASE_BEGIN, LB_PHASE_END = 14, 15, 30, 31
LB_PHASES = {0: "collection", 1: "strategy", 2: "migration"}
# migrate_out / migrate_in d: bytes (bits 0-29), moved by pointer, by the balancer.
MIGRATE_BYTES, MIGRATE_BY_POINTER, MIGRATE_BY_BALANCER = (1 << 30) - 1, 1 << 30, 1 << 31

# Paired kinds: begin kind -> pair name, end kind -> pair name.
BEGINS = {1: "handler", 3: "entry", 6: "idle", 8: "task",
          16: "progress", 19: "region", 22: "flush", 34: "ult"}
ENDS = {2: "handler", 4: "entry", 7: "idle", 9: "task",
        17: "progress", 20: "region", 23: "flush", 35: "ult"}
# Pairs whose end repeats the begin's `a` as an id: an end must match it.
# (progress_end and flush_end carry a count in `a`, not an id.)
ID_PAIRS = frozenset(("handler", "entry", "region", "ult"))
# The spec's classification: busy is time inside an outermost one of these.
BUSY_PAIRS = frozenset(("handler", "task", "region"))
# Name spaces reported per name by `summary` (pair -> space of the summary file).
# A logical thread's time switched in ("ult": an MPI rank, an OpenMP
# thread) is named in the user names ("MPI rank 3").
NAMED_PAIRS = {"handler": "handler", "entry": "entry", "region": "user", "task": "task",
               "ult": "user"}

MAIN_ID = 0xFFFFFFFF
TIMER_ID = 0xFFFFFFFE

HQ_NODE_QUEUE = 1 << 8        # handler_begin d: came through a node queue
HQ_REMOTE = 1 << 9            # handler_begin d: came from another node
SEND_TO_NODE = 1 << 8         # send d: `a` is a node
SEND_BROADCAST = 1 << 9
SEND_REMOTE = 1 << 10

REDUCTION_STEPS = {0: "contribution", 1: "combined part sent up", 2: "result delivered"}


class TraceError(Exception):
    """Bad input: reported as one line and exit status 2."""

    def __init__(self, where, what):
        super().__init__(what)
        self.where = where
        self.what = what


def i32(x):
    """The same 32 bits read as signed (the spec's `i32` fields)."""
    return x - 0x100000000 if x & 0x80000000 else x


def clean(text):
    """A string from a trace, safe to write as UTF-8: JSON may carry lone
    surrogates (\\ud800), which no UTF-8 file can hold; they become U+FFFD."""
    if not isinstance(text, str):
        return str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
