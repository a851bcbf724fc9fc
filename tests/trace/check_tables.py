#!/usr/bin/env python3
"""The tables that tools/weft-trace (its module tools/weft_trace/format.py)
and the format's spec hold a copy of, checked against the runtime's
headers: the event kinds (trace/hooks.hpp `enum class kind`; the spec's
record table), the send and handler_begin flag bits (`send_flags`), the ids
of what runs without a message (main_handler, callback_handler) and the
ways a run ends (trace/session.hpp `end_how`). A kind added to one side
only fails here. FORMAT_PY is loaded on its own (it imports nothing of its
package).

usage: check_tables.py HOOKS_HPP SESSION_HPP FORMAT_PY TRACE_FORMAT_MD
"""
import importlib.machinery
import importlib.util
import re
import sys


def load_tool(path):
    loader = importlib.machinery.SourceFileLoader("weft_trace_format", path)
    spec = importlib.util.spec_from_loader("weft_trace_format", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def enum_body(text, head):
    m = re.search(re.escape(head) + r"[^{]*\{(.*?)\};", text, re.S)
    if not m:
        sys.exit("check_tables: no '%s' found" % head)
    return m.group(1)


def enumerators(body):
    out = {}
    for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", re.sub(r"//[^\n]*", "", body)):
        out[int(value)] = name
    return out


def constants(text):
    """inline constexpr ... name = <expr>; with expr '1u << N' or a hex/decimal number."""
    out = {}
    for name, expr in re.findall(r"inline constexpr [\w:]+ (\w+) = ([^;]+);", text):
        expr = expr.strip()
        m = re.fullmatch(r"1u?\s*<<\s*(\d+)", expr)
        if m:
            out[name] = 1 << int(m.group(1))
        elif re.fullmatch(r"0x[0-9a-fA-F]+u?", expr):
            out[name] = int(expr.rstrip("u"), 16)
        elif re.fullmatch(r"\d+u?", expr):
            out[name] = int(expr.rstrip("u"))
    return out


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[-1].strip())
    hooks = open(sys.argv[1]).read()
    session = open(sys.argv[2]).read()
    tool = load_tool(sys.argv[3])
    spec = open(sys.argv[4]).read()
    problems = []

    def same(what, runtime, copy, holder="tools/weft_trace/format.py"):
        if runtime != copy:
            problems.append("%s differ:\n  runtime: %s\n  %s: %s" % (what, runtime, holder, copy))

    kinds_runtime = enumerators(enum_body(hooks, "enum class kind"))
    same("event kinds", kinds_runtime, dict(tool.KIND_NAMES))
    spec_kinds = {int(k): n for k, n in re.findall(r"^\| (\d+) \| ([a-z_]+) \|", spec, re.M)}
    same("event kinds", kinds_runtime, spec_kinds, "docs/design/trace-format.md")
    same("end records' how", enumerators(enum_body(session, "enum class end_how")),
         dict(tool.END_HOWS))
    c = constants(hooks)
    same("send flags (node_queue, remote, bcast_copy, to_remote)",
         [c.get("node_queue"), c.get("remote"), c.get("bcast_copy"), c.get("to_remote")],
         [tool.HQ_NODE_QUEUE, tool.HQ_REMOTE, tool.SEND_BROADCAST, tool.SEND_REMOTE])
    same("send flag 'a is a node'", c.get("node_queue"), tool.SEND_TO_NODE)
    same("ids of main and callbacks", [c.get("main_handler"), c.get("callback_handler")],
         [tool.MAIN_ID, tool.TIMER_ID])
    for name, value in (("SEND", "send"), ("COUNTER", "counter"), ("END", "end"), ("CPU", "cpu"),
                        ("STEAL", "steal"), ("REDUCTION", "reduction"),
                        ("MIGRATE_OUT", "migrate_out"), ("MIGRATE_IN", "migrate_in"),
                        ("MARK", "mark")):
        if tool.KIND_NAMES.get(getattr(tool, name)) != value:
            got = getattr(tool, name)
            problems.append("weft_trace/format.py's %s is %d, which names %r, not %r"
                            % (name, got, tool.KIND_NAMES.get(got), value))
    kinds = set(tool.KIND_NAMES)
    for table in ("BEGINS", "ENDS"):
        extra = set(getattr(tool, table)) - kinds
        if extra:
            problems.append("weft_trace/format.py's %s names kinds that do not exist: %s"
                            % (table, sorted(extra)))
    for begin, pair in tool.BEGINS.items():
        if tool.KIND_NAMES[begin] != pair + "_begin" or tool.ENDS.get(begin + 1) != pair:
            problems.append("weft_trace/format.py's pair %r: begin %d, end %s" % (pair, begin, tool.ENDS))
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("check_tables: %d event kinds, the flags, the ids and the end hows agree"
          % len(kinds))


main()
