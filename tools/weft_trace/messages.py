"""Messages: each send record matched to the handler_begin that ran it, as
the spec says (source PE, seq, destination PE or node queue). perfetto
draws them as flow arrows; check counts them.

It reads only the two kinds it needs (send and handler_begin), found by a
regular expression over the records' kind bytes, rather than walking every
record: a large trace holds many more records of other kinds.
"""

import re

from .format import HEADER_BYTES, RECORD, RECORD_BYTES, SEND, SEND_TO_NODE, i32


def match_messages(trace):
    """Pairs sends with handler_begins as the spec says.

    A handler_begin on PE d (node n) with source s and seq q takes the
    earliest unmatched send of s with seq q to PE d, or to node n's queue.
    Receives are taken in time order, so repeated seqs (they wrap at 256)
    pair up first with first. Returns [(send_ref, recv_ref)] in receive
    order (a send as (track, record index, tick, bytes, d), a receive as
    (track, record index, tick)), and the number of receives from a PE
    that found no send.
    """
    # Only kinds 1 and 5 matter: find them in the kind bytes, unpack those.
    sends = {}     # (source PE, seq, to node?, destination) -> [list, next unmatched]
    recvs = []     # (time ns, order, track, idx, tick, source, seq)
    order = 0
    for t in trace.tracks:
        data = t.data
        kinds = data[HEADER_BYTES::RECORD_BYTES]
        for m in re.finditer(b"[\x01\x05]", kinds):
            i = m.start()
            w, a, b, c, d = RECORD.unpack_from(data, HEADER_BYTES + i * RECORD_BYTES)
            tick = w >> 8
            if w & 0xFF == SEND:
                if t.kind != "pe":
                    continue        # a comm thread is no PE: nobody names it as source
                key = (t.pe, d & 0xFF, bool(d & SEND_TO_NODE), i32(a))
                lst = sends.get(key)
                if lst is None:
                    sends[key] = lst = [[], 0]
                lst[0].append((t, i, tick, b, d))
            else:
                src = i32(b)
                if src < 0:
                    continue
                recvs.append((t.node.ns(tick), order, t, i, tick, src, d & 0xFF))
                order += 1
    recvs.sort(key=lambda r: (r[0], r[1]))
    matched = []
    unmatched = 0
    for _, _, t, i, tick, src, seq in recvs:
        best = None
        for key in ((src, seq, False, t.pe), (src, seq, True, t.node.n)):
            lst = sends.get(key)
            if lst is None or lst[1] >= len(lst[0]):
                continue
            cand = lst[0][lst[1]]
            # Both lists hold sends of one PE track in record order.
            if best is None or cand[1] < best[0][1]:
                best = (cand, lst)
        if best is None:
            unmatched += 1
            continue
        best[1][1] += 1
        matched.append((best[0], (t, i, tick)))
    return matched, unmatched
