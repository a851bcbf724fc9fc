"""Loading a trace directory: each node's metadata (nodeN.json) and clock,
its event files (header checked, records kept as one buffer) or its
summary file, and the job they add up to (Trace); how a run that ended
early ended, and where each track stopped. Issues collects what breaks the
spec without making the trace unreadable.

An event file is read whole into one bytes object: the records are
unpacked later by one C-level pass (Track.records), and the kinds are
checked here from a slice of the buffer, without unpacking anything. A run
that ended early (a fatal error, --weft:timeout, a signal, SIGKILL) is read
as far as its files go: event files the metadata does not list are found
in the directory, a record cut off at the end of a file is left out, each
with a warning; in a finished run the same are errors (TraceError, exit 2).
"""

import json
import os
import re
import struct
import sys

from .format import (CPU, DROPPED, END, END_HOWS, FORMAT, HEADER, HEADER_BYTES, KIND_NAMES, KINDS_OF_VERSION, MAGIC,
                     MAIN_ID, RECORD, RECORD_BYTES, SIGNAL_NAMES, SUMMARY_FORMAT, TIMER_ID, VERSION,
                     VERSIONS, TraceError, clean)


# ---------------------------------------------------------------------------
# Diagnostics that are not fatal.

MAX_WARNINGS = 20             # per run, on stderr; `check` lists all of its own


class Issues:
    """Collects what breaks the spec without making the trace unreadable.

    `check` lists problems (exit 1) and warnings; the other commands print
    both as warnings on stderr, capped, and go on with what they can read.
    """

    def __init__(self, checking):
        self.checking = checking
        self.problems = []
        self.warnings = []
        self._printed = 0
        self._dropped = 0

    def problem(self, where, what):
        if self.checking:
            self.problems.append("%s: %s" % (where, what))
        else:
            self._print(where, what)

    def warning(self, where, what):
        if self.checking:
            self.warnings.append("%s: %s" % (where, what))
        else:
            self._print(where, what)

    def _print(self, where, what):
        if self._printed < MAX_WARNINGS:
            self._printed += 1
            print("weft-trace: warning: %s: %s" % (where, what), file=sys.stderr)
        else:
            self._dropped += 1

    def finish(self):
        if self._dropped:
            print("weft-trace: warning: %d more warnings not shown "
                  "(weft-trace check lists every problem)" % self._dropped, file=sys.stderr)


# ---------------------------------------------------------------------------
# Loading: metadata, clocks, headers.

def read_json(path, what):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise TraceError(path, "missing (expected %s)" % what)
    except OSError as e:
        raise TraceError(path, "cannot read: %s" % (e.strerror or e))
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TraceError(path, "invalid JSON: not UTF-8 at byte %d (expected %s)" % (e.start, what))
    except json.JSONDecodeError as e:
        raise TraceError(path, "invalid JSON: %s at line %d column %d (expected %s)"
                         % (e.msg, e.lineno, e.colno, what))
    except RecursionError:
        raise TraceError(path, "invalid JSON: nested too deeply (expected %s)" % what)
    if not isinstance(obj, dict):
        raise TraceError(path, "invalid: the top level is a JSON %s (expected an object: %s)"
                         % (type(obj).__name__, what))
    return obj


def field(obj, path, name, kinds, required=True, default=None):
    """obj[name] checked for type; `name` may be dotted ("clock.tick_end")."""
    cur = obj
    parts = name.split(".")
    for p in parts[:-1]:
        cur = cur.get(p) if isinstance(cur, dict) else None
        if not isinstance(cur, dict):
            raise TraceError(path, "missing object '%s' (expected it as in the spec)" % p)
    if parts[-1] not in cur or cur[parts[-1]] is None:
        if required:
            raise TraceError(path, "missing field '%s' (expected it as in the spec)" % name)
        return default
    v = cur[parts[-1]]
    # bool is an int in Python; a number field holding true is still wrong.
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        expected = " or ".join({int: "an integer", float: "a number", str: "a string",
                                list: "a list", dict: "an object", bool: "true or false"}[k]
                               for k in kinds)
        raise TraceError(path, "field '%s' is %s (expected %s)" % (name, json.dumps(v)[:40], expected))
    return v


COMM_TID_BASE = 100000        # tid of node N's comm thread: after every PE
_CPU_BYTE = bytes((CPU,))
_DROPPED_BYTE = bytes((DROPPED,))
_W_A = struct.Struct("<QI")    # a record's w and a
_W_A_B = struct.Struct("<QII")  # a record's w, a and b


class Track:
    """One event file: its header, records and where its events go."""

    def __init__(self, node, file, kind, pe):
        self.node = node
        self.file = file
        self.path = os.path.join(node.dir, file)
        self.kind = kind              # "pe" or "comm"
        self.pe = pe                  # global PE, -1 for a comm thread
        self.data = b""
        self.nrec = 0
        self.first_tick = None
        self.last_tick = None
        self.end = None               # (how, signal, tick) of its end record
        self.version = VERSION
        self.found = False            # found in the directory, not listed in the metadata
        self.cpus = None              # the CPUs its thread may run on (version 3), when listed
        self.dropped = 0              # events it dropped (its dropped records' counts)

    @property
    def tid(self):
        return self.pe if self.kind == "pe" else COMM_TID_BASE + self.node.n

    @property
    def label(self):
        return "PE %d" % self.pe if self.kind == "pe" else "comm thread"

    def records(self):
        """Every record as (w, a, b, c, d): one C-level unpack over the buffer."""
        return struct.iter_unpack("<QIIII", memoryview(self.data)[HEADER_BYTES:])

    def cpu_samples(self):
        """[(record index, tick, cpu)] of its cpu records, in record order.

        The kinds are every 24th byte of the buffer: finding the cpu records
        there unpacks nothing else (a track holds millions of records, a
        few of them cpu records)."""
        data = self.data
        if not data:
            return []
        kinds = data[HEADER_BYTES::RECORD_BYTES]
        out = []
        i = kinds.find(_CPU_BYTE)
        while i >= 0:
            w, a = _W_A.unpack_from(data, HEADER_BYTES + i * RECORD_BYTES)
            out.append((i, w >> 8, a))
            i = kinds.find(_CPU_BYTE, i + 1)
        return out


class Node:
    """One process of the job: nodeN.json, its clock and its tracks."""

    def __init__(self, directory, n):
        self.dir = directory
        self.n = n
        self.file = "node%d.json" % n
        self.path = os.path.join(directory, self.file)
        self.tracks = []
        self.summary = None
        self.sample = 1         # --weft:trace-sample: 1 message in this many traced
        self._names = {}        # (space, id) -> name, looked up once

    @property
    def unfinished(self):
        """The run did not reach its end: aborted, timed out, killed, or still running."""
        return self.aborted or not self.complete

    def ns(self, tick):
        """A tick of this node on the job's time line, in ns from the first node's start."""
        return self.off_ns + tick * self.k

    def name(self, space, ident):
        """The name of an id; `<space>#<id>` when its table does not have it."""
        key = (space, ident)
        v = self._names.get(key)
        if v is None:
            v = self._names[key] = self._lookup(space, ident)
        return v

    def _lookup(self, space, ident):
        if space == "handler":
            if ident == MAIN_ID:
                return "main"
            if ident == TIMER_ID:
                return "timer/condition"
        if space == "task":
            return "task"
        table = self.names.get(space)
        if isinstance(table, dict):
            v = table.get(str(ident))
            if isinstance(v, str):
                return v
        return "%s#%d" % (space, ident)


def load_node(directory, n, issues):
    node = Node(directory, n)
    what = "the trace metadata of the spec"
    meta = read_json(node.path, what)
    node.meta = meta
    p = node.path
    fmt = meta.get("format")
    if fmt != FORMAT:
        raise TraceError(p, "format is %s (expected \"%s\")" % (json.dumps(fmt), FORMAT))
    ver = meta.get("version")
    if isinstance(ver, bool) or ver not in VERSIONS:
        raise TraceError(p, "version is %s (expected %s; this tool reads versions %s)"
                         % (json.dumps(ver), " or ".join(map(str, VERSIONS)),
                            ", ".join(map(str, VERSIONS))))
    node.version = ver
    node.mode = field(meta, p, "mode", (str,))
    if node.mode not in ("full", "summary"):
        raise TraceError(p, "mode is \"%s\" (expected \"full\" or \"summary\")" % node.mode)
    # --weft:trace-sample: 1 in `sample` messages has its send and handler
    # records (absent in traces written before sampling: every message).
    node.sample = field(meta, p, "sample", (int,), required=False, default=1)
    if isinstance(node.sample, bool) or node.sample < 1:
        raise TraceError(p, "sample is %s (expected an integer >= 1)" % json.dumps(node.sample))
    node.node_field = field(meta, p, "node", (int,))
    if node.node_field != n:
        issues.problem(p, "field node is %d (expected %d, the number in the file name)"
                       % (node.node_field, n))
    node.nodes = field(meta, p, "nodes", (int,))
    node.first_pe = field(meta, p, "first_pe", (int,))
    node.pes = field(meta, p, "pes", (int,))
    node.total_pes = field(meta, p, "total_pes", (int,))
    if node.pes < 0 or node.first_pe < 0:
        raise TraceError(p, "first_pe %d, pes %d (expected numbers >= 0)" % (node.first_pe, node.pes))
    node.host = clean(field(meta, p, "host", (str,), required=False, default="?"))
    argv = field(meta, p, "argv", (list,), required=False, default=[])
    node.argv = [clean(a) for a in argv]
    node.complete = field(meta, p, "complete", (bool,), required=False, default=False)
    node.aborted = field(meta, p, "aborted", (bool,), required=False, default=False)
    # Version 2: how the run ended ("end", absent while it runs).
    node.end_how = node.end_message = node.end_tick = node.end_signal = None
    end = meta.get("end")
    if end is not None:
        if not isinstance(end, dict):
            raise TraceError(p, "field 'end' is %s (expected an object {\"how\", \"tick\", ...})"
                             % json.dumps(end)[:40])
        node.end_how = field(end, p, "how", (str,))
        if node.end_how not in END_HOWS.values():
            raise TraceError(p, "end.how is \"%s\" (expected %s)"
                             % (node.end_how, ", ".join(END_HOWS.values())))
        node.end_tick = field(end, p, "tick", (int,), required=False)
        node.end_message = clean(field(end, p, "message", (str,), required=False, default=""))
        node.end_signal = field(end, p, "signal", (int,), required=False)

    # The clock: the spec's "Time of a tick" paragraph.
    mono_base = field(meta, p, "clock.mono_ns_base", (int,))
    real_base = field(meta, p, "clock.real_ns_base", (int,))
    ns_per_tick = field(meta, p, "clock.ns_per_tick", (int, float))
    field(meta, p, "clock.tsc_base", (int,), required=False)
    tick_end = field(meta, p, "clock.tick_end", (int,), required=False)
    mono_end = field(meta, p, "clock.mono_ns_end", (int,), required=False)
    node.mono_ns_base = mono_base
    node.real_ns_base = real_base
    node.tick_end = tick_end
    if tick_end is not None and mono_end is not None:
        if tick_end <= 0 or mono_end < mono_base:
            raise TraceError(p, "clock end tick_end %d, mono_ns_end %d (expected tick_end > 0 "
                             "and mono_ns_end >= mono_ns_base %d)" % (tick_end, mono_end, mono_base))
        # The end measures the tick rate over the whole run: better than the
        # calibration at start, and what makes the PEs' records add up to wall.
        node.k = (mono_end - mono_base) / tick_end
        node.wall_ns = mono_end - mono_base
    else:
        if not ns_per_tick > 0:
            raise TraceError(p, "clock.ns_per_tick is %s (expected a number > 0)" % ns_per_tick)
        node.k = float(ns_per_tick)
        node.wall_ns = None      # unknown until the end is written
    names = meta.get("names", {})
    if not isinstance(names, dict):
        raise TraceError(p, "field 'names' is not an object (expected tables from id to name)")
    node.names = {sp: ({k: clean(v) if isinstance(v, str) else v for k, v in tb.items()}
                       if isinstance(tb, dict) else tb) for sp, tb in names.items()}
    counters = meta.get("counters", {})
    node.counters_meta = counters if isinstance(counters, dict) else {}

    if node.mode == "full":
        tracks = field(meta, p, "tracks", (list,))
        for i, t in enumerate(tracks):
            if not isinstance(t, dict):
                raise TraceError(p, "tracks[%d] is not an object (expected {\"file\", \"kind\", \"pe\"})" % i)
            tf = field(t, p, "file", (str,))
            tk = field(t, p, "kind", (str,))
            tp = field(t, p, "pe", (int,))
            if tk not in ("pe", "comm"):
                raise TraceError(p, "tracks[%d].kind is \"%s\" (expected \"pe\" or \"comm\")" % (i, tk))
            if os.path.basename(tf) != tf or tf in ("", ".", ".."):
                raise TraceError(p, "tracks[%d].file is \"%s\" (expected a file name in the "
                                 "trace directory)" % (i, tf))
            track = Track(node, tf, tk, tp)
            cpus = field(t, p, "cpus", (list,), required=False)
            if cpus is not None:
                if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
                    raise TraceError(p, "tracks[%d].cpus is %s (expected a list of CPU numbers >= 0)"
                                     % (i, json.dumps(cpus)[:40]))
                track.cpus = cpus
            node.tracks.append(track)
    else:
        node.summary_file = field(meta, p, "summary_file", (str,), required=False,
                                  default="node%d.summary.json" % n)
    return node


def load_track(track, issues):
    """Reads a whole event file, checks its framing and its header.

    A run that did not finish (killed, aborted) may have been stopped while
    a file was being written: a file shorter than its header is read as a
    track without records, and a record cut off at the end is left out,
    each with a warning. In a finished run both are errors.
    """
    path = track.path
    unfinished = track.node.unfinished
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if unfinished:
            issues.warning(path, "missing (listed in the tracks of %s; the run ended before it "
                                 "was written): read as empty" % track.node.file)
            data = b""
        else:
            raise TraceError(path, "missing (listed in the tracks of %s)" % track.node.file)
    except OSError as e:
        raise TraceError(path, "cannot read: %s" % (e.strerror or e))
    if len(data) < HEADER_BYTES:
        if not unfinished:
            raise TraceError(path, "%d bytes, shorter than its %d-byte header" % (len(data), HEADER_BYTES))
        if data:
            issues.warning(path, "%d bytes, shorter than its %d-byte header (the run ended while it "
                                 "was created): no records" % (len(data), HEADER_BYTES))
        track.data = b""
        track.nrec = 0
        return
    magic, version, rbytes, hnode, hpe, hkind, reserved = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise TraceError(path, "bad magic %r (expected %r)" % (magic, MAGIC))
    if version not in VERSIONS:
        raise TraceError(path, "header version %d (expected %s)" % (version, " or ".join(map(str, VERSIONS))))
    if version != track.node.version:
        issues.problem(path, "header version %d but %s is version %d (expected the same)"
                       % (version, track.node.file, track.node.version))
    track.version = version
    if rbytes != RECORD_BYTES:
        raise TraceError(path, "header record size %d (expected %d)" % (rbytes, RECORD_BYTES))
    body = len(data) - HEADER_BYTES
    nrec, trailing = divmod(body, RECORD_BYTES)
    if trailing:
        after = "record %d" % (nrec - 1) if nrec else "the header"
        if not unfinished:
            raise TraceError(path, "truncated: %d trailing bytes after %s (expected %d + %d*k bytes)"
                             % (trailing, after, HEADER_BYTES, RECORD_BYTES))
        issues.warning(path, "truncated: %d trailing bytes after %s, a record cut off as the run "
                             "ended; left out" % (trailing, after))
        data = data[:len(data) - trailing]
    # The kind is the low byte of each record's first little-endian word:
    # one slice of the buffer gives every kind without unpacking anything.
    kinds = data[HEADER_BYTES::RECORD_BYTES]
    allowed = KINDS_OF_VERSION[version]
    bad = set(kinds).difference(allowed)
    if bad:
        first = min(kinds.index(bytes((k,))) for k in bad)
        raise TraceError(path, "record %d: unknown event kind %d (expected 1..%d in a version %d file)"
                         % (first, kinds[first], max(allowed), version))
    track.data = data
    track.nrec = nrec
    # The writer fell behind: each dropped record counts what the track lost.
    track.dropped = 0
    i = kinds.find(_DROPPED_BYTE)
    while i >= 0:
        _, a, b = _W_A_B.unpack_from(data, HEADER_BYTES + i * RECORD_BYTES)
        track.dropped += a | (b << 32)
        i = kinds.find(_DROPPED_BYTE, i + 1)
    if nrec:
        track.first_tick = RECORD.unpack_from(data, HEADER_BYTES)[0] >> 8
        w, a, b, _, _ = RECORD.unpack_from(data, HEADER_BYTES + (nrec - 1) * RECORD_BYTES)
        track.last_tick = w >> 8
        if w & 0xFF == END:
            track.end = (END_HOWS.get(a, "how %d" % a), b, w >> 8)
        ends = kinds.count(bytes((END,)))
        if ends > (1 if track.end else 0):
            issues.problem(path, "an end record before the last record (expected one end record, "
                                 "the file's last)")

    # Header against the file name and the metadata.
    node = track.node
    want_kind = 0 if track.kind == "pe" else 1
    if hnode != node.n:
        issues.problem(path, "header node %d (expected %d, as in the file name and %s)"
                       % (hnode, node.n, node.file))
    if hkind != want_kind:
        issues.problem(path, "header track kind %d (expected %d for a %s track, as in %s)"
                       % (hkind, want_kind, track.kind, node.file))
    if reserved != 0:
        issues.problem(path, "header bytes 28-31 are %d (expected 0)" % reserved)
    # Header against metadata, metadata against file name: together they
    # also cover header against file name, without saying it twice.
    if hpe != track.pe:
        issues.problem(path, "header PE %d (expected %d, the track's pe in %s)" % (hpe, track.pe, node.file))
    m = re.fullmatch(r"node(\d+)\.(?:pe(\d+)|(comm))\.events", track.file)
    if not m:
        issues.problem(path, "file name does not follow nodeN.peL.events or nodeN.comm.events")
    else:
        if int(m.group(1)) != node.n:
            issues.problem(path, "file name names node %s (expected node %d, whose metadata lists it)"
                           % (m.group(1), node.n))
        if m.group(2) is not None:
            want_pe = node.first_pe + int(m.group(2))
            if track.kind != "pe":
                issues.problem(path, "a PE file listed as kind \"%s\" in %s" % (track.kind, node.file))
            if track.pe != want_pe:
                issues.problem(node.path, "track %s has pe %d (expected %d: first_pe + rank)"
                               % (track.file, track.pe, want_pe))
        elif track.kind != "comm":
            issues.problem(path, "a comm file listed as kind \"%s\" in %s" % (track.kind, node.file))
    if track.kind == "pe" and not node.first_pe <= track.pe < node.first_pe + node.pes:
        issues.problem(node.path, "track %s has pe %d (expected %d..%d, the node's PEs)"
                       % (track.file, track.pe, node.first_pe, node.first_pe + node.pes - 1))
    if track.kind == "comm" and track.pe != -1:
        issues.problem(node.path, "comm track %s has pe %d (expected -1)" % (track.file, track.pe))


class Trace:
    def __init__(self, directory, nodes):
        self.dir = directory
        self.nodes = nodes
        self.mode = nodes[0].mode
        self.sample = max(n.sample for n in nodes)
        self.argv = nodes[0].argv
        self.total_pes = nodes[0].total_pes
        self.open_at_end = {}   # id(track) -> slices open at its last record (after a walk)

    @property
    def tracks(self):
        return [t for n in self.nodes for t in n.tracks]

    @property
    def pe_tracks(self):
        return [t for n in self.nodes for t in n.tracks if t.kind == "pe"]

    @property
    def complete(self):
        return all(n.complete and not n.aborted for n in self.nodes)

    def end_ns(self):
        """The end of the job on the common time line: the last node's end."""
        end = 0.0
        for n in self.nodes:
            if n.wall_ns is not None:
                end = max(end, n.off_ns + n.wall_ns)
            for t in n.tracks:
                if t.last_tick is not None:
                    end = max(end, n.ns(t.last_tick))
            if n.summary:
                for pe in n.summary["pes"]:
                    end = max(end, n.off_ns + pe["wall_ns"])
        return end


def load_trace(directory, issues):
    if not os.path.exists(directory):
        raise TraceError(directory, "no such directory (expected a trace directory written by --weft:trace=DIR)")
    if not os.path.isdir(directory):
        raise TraceError(directory, "not a directory (expected a trace directory written by --weft:trace=DIR)")
    try:
        entries = os.listdir(directory)
    except OSError as e:
        raise TraceError(directory, "cannot list: %s" % (e.strerror or e))
    found = sorted(int(m.group(1)) for m in (re.fullmatch(r"node(\d+)\.json", e) for e in entries) if m)
    if not found:
        raise TraceError(directory, "no nodeN.json in it (expected the metadata files of a trace "
                                    "written by --weft:trace=DIR)")
    nodes = [load_node(directory, n, issues) for n in found]
    first = nodes[0]
    for node in nodes[1:]:
        if node.mode != first.mode:
            raise TraceError(node.path, "mode \"%s\" but %s has \"%s\" (expected one mode for the job)"
                             % (node.mode, first.file, first.mode))
        for key in ("nodes", "total_pes"):
            if getattr(node, key) != getattr(first, key):
                issues.problem(node.path, "%s is %d but %s says %d (expected the same in every node)"
                               % (key, getattr(node, key), first.file, getattr(first, key)))
    missing = [n for n in range(first.nodes) if n not in found]
    if missing:
        issues.warning(directory, "no metadata of node%s %s (the job had %d nodes; "
                       "reading the others)" % ("s" if len(missing) > 1 else "",
                                                ", ".join(map(str, missing)), first.nodes))
    extra = [n for n in found if n >= first.nodes]
    if extra:
        issues.problem(directory, "node%d.json present but the job had %d nodes" % (extra[0], first.nodes))
    if not missing and sum(n.pes for n in nodes) != first.total_pes:
        issues.problem(directory, "the nodes' pes add up to %d (expected total_pes %d)"
                       % (sum(n.pes for n in nodes), first.total_pes))
    ranges = sorted((n.first_pe, n.first_pe + n.pes, n) for n in nodes)
    for (a0, a1, na), (b0, b1, nb) in zip(ranges, ranges[1:]):
        if b0 < a1:
            issues.problem(nb.path, "PEs %d..%d overlap those of %s (%d..%d)" % (b0, b1 - 1, na.file, a0, a1 - 1))

    # One time line: a node's start is real_ns_base; the earliest is 0.
    t0 = min(n.real_ns_base for n in nodes)
    for node in nodes:
        node.off_ns = node.real_ns_base - t0

    if first.mode == "full":
        for node in nodes:
            listed = {t.file for t in node.tracks}
            if node.unfinished:
                # A run killed before its metadata listed every track (or a
                # version 1 trace, whose metadata listed none until the end):
                # its event files are found by name.
                for e in sorted(entries):
                    m = re.fullmatch(r"node%d\.(?:pe(\d+)|(comm))\.events" % node.n, e)
                    if not m or e in listed:
                        continue
                    t = Track(node, e, "pe" if m.group(1) is not None else "comm",
                              node.first_pe + int(m.group(1)) if m.group(1) is not None else -1)
                    t.found = True
                    node.tracks.append(t)
                    listed.add(e)
            seen = {}
            for t in node.tracks:
                load_track(t, issues)
                key = (t.kind, t.pe)
                if key in seen:
                    issues.problem(node.path, "tracks %s and %s are both %s %d" % (seen[key], t.file, t.kind, t.pe))
                seen[key] = t.file
            found = [t.file for t in node.tracks if t.found]
            if found:
                issues.warning(node.path, "%s not listed in it (the run ended before the metadata "
                                          "was rewritten): read from the directory" % ", ".join(found))
            for pe in range(node.first_pe, node.first_pe + node.pes):
                if ("pe", pe) not in seen:
                    (issues.warning if node.unfinished else issues.problem)(
                        node.path, "PE %d has no track (expected one per PE of the node)" % pe)
            for e in sorted(entries):
                if re.fullmatch(r"node%d\..*\.events" % node.n, e) and e not in listed:
                    issues.warning(os.path.join(directory, e), "not listed in the tracks of %s; ignored" % node.file)
            node.tracks.sort(key=lambda t: (t.kind != "pe", t.pe))
    else:
        for node in nodes:
            load_summary(node, issues)
    trace = Trace(directory, nodes)
    for node in nodes:
        how = node_ending(node)
        if how is not None:
            issues.warning(node.path, "the run ended early: %s; its events end where %s"
                           % (how, "the PEs had written them" if "no end record" in how
                              else "it could write them"))
    return trace


def node_ending(node):
    """How a node's run ended early, in words; None when it ended normally.

    The metadata's "end" says it when the runtime could write it (a fatal
    error, --weft:timeout, SIGTERM or SIGINT); else the tracks' end records
    do; a run with neither was killed (SIGKILL cannot be handled) or still
    runs.
    """
    if node.complete and not node.aborted:
        return None
    how, message, signal = node.end_how, node.end_message, node.end_signal
    if how is None:
        ends = [t.end for t in node.tracks if t.end is not None and t.end[0] != "exit"]
        if ends:
            how, signal = ends[0][0], ends[0][1]
    if how == "fatal":
        return "aborted by a fatal error" + (": " + message if message else "")
    if how == "timeout":
        return "timed out" + (" (%s)" % message if message else " (--weft:timeout)")
    if how == "signal":
        name = SIGNAL_NAMES.get(signal, "signal %s" % signal)
        return "killed by %s (signal %s; the PEs' buffers were written on it)" % (name, signal)
    if node.aborted:
        return "aborted"          # version 1: no reason recorded
    if node.version >= 2 and any(t.end is not None for t in node.tracks):
        return "killed (no end record in %s)" % ", ".join(t.file for t in node.tracks if t.end is None)
    return "killed (no end record)"


def trace_ending(trace):
    """How the job ended early, one text; None when every node ended normally."""
    texts = []
    for n in trace.nodes:
        h = node_ending(n)
        if h is not None:
            texts.append(h if len(trace.nodes) == 1 else "node %d %s" % (n.n, h))
    return "; ".join(texts) if texts else None


def end_where(trace, pes=None):
    """Where each track stopped, for a run that ended early: one line each.

    `pes` maps a track to what was still open at its last record (from a
    walk); without it only the time and the record are said.
    """
    lines = []
    for t in trace.tracks:
        if not t.node.unfinished:
            continue
        who = "PE %d" % t.pe if t.kind == "pe" else "node %d comm thread" % t.node.n
        if not t.nrec:
            lines.append("%s: no records written" % who)
            continue
        at = t.node.ns(t.last_tick) / 1e6
        text = "%s: last record at %.3f ms (record %d)" % (who, at, t.nrec - 1)
        if t.end is not None:
            text += ", its end record (%s)" % t.end[0]
        else:
            text += ", no end record"
        opened = (pes or {}).get(id(t))
        if opened:
            text += "; inside " + " > ".join(opened)
        lines.append(text)
    return lines


def load_summary(node, issues):
    path = os.path.join(node.dir, node.summary_file)
    what = "the per-PE summary of a summary-mode run"
    if not os.path.exists(path) and not node.complete:
        raise TraceError(path, "missing: the run did not finish (\"complete\" is false in %s), and "
                               "a summary is written at the end" % node.file)
    s = read_json(path, what)
    if s.get("format") != SUMMARY_FORMAT:
        raise TraceError(path, "format is %s (expected \"%s\")" % (json.dumps(s.get("format")), SUMMARY_FORMAT))
    if isinstance(s.get("version"), bool) or s.get("version") not in VERSIONS:
        raise TraceError(path, "version is %s (expected %s)" % (json.dumps(s.get("version")),
                                                               " or ".join(map(str, VERSIONS))))
    if field(s, path, "node", (int,)) != node.n:
        issues.problem(path, "node is %d (expected %d, the node of the file name)" % (s["node"], node.n))
    bin_ns = field(s, path, "bin_ns", (int, float))
    if not bin_ns > 0:
        raise TraceError(path, "bin_ns is %s (expected a number > 0)" % bin_ns)
    pes = field(s, path, "pes", (list,))
    out = []
    for i, pe in enumerate(pes):
        if not isinstance(pe, dict):
            raise TraceError(path, "pes[%d] is not an object" % i)
        rec = {"pe": field(pe, path, "pe", (int,))}
        for key in ("wall_ns", "busy_ns", "idle_ns"):
            rec[key] = field(pe, path, key, (int, float))
        rec["time_every"] = field(pe, path, "time_every", (int,), required=False, default=1)
        bins = field(pe, path, "bins", (list,), required=False, default=[])
        for j, b in enumerate(bins):
            if (not isinstance(b, list) or len(b) != 2
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)):
                raise TraceError(path, "pes[%d].bins[%d] is %s (expected [busy_ns, idle_ns])"
                                 % (i, j, json.dumps(b)[:40]))
        rec["bins"] = bins
        names = field(pe, path, "names", (list,), required=False, default=[])
        rec["names"] = []
        for j, nm in enumerate(names):
            if not isinstance(nm, dict):
                raise TraceError(path, "pes[%d].names[%d] is not an object" % (i, j))
            r = {"space": field(nm, path, "space", (str,)), "id": field(nm, path, "id", (int,))}
            for key in ("count", "total_ns", "self_ns", "max_ns"):
                r[key] = field(nm, path, key, (int, float))
            # Slices timed (summary.cpp): absent from older summaries, which
            # timed every slice.
            r["timed"] = field(nm, path, "timed", (int,), required=False, default=r["count"])
            rec["names"].append(r)
        counters = pe.get("counters", {})
        rec["counters"] = counters if isinstance(counters, dict) else {}
        out.append(rec)
    node.summary = {"bin_ns": bin_ns, "pes": out, "path": path}
