#!/usr/bin/env python3
"""bench/item_trace.py — where the warp-specialised attention kernel's time goes, item by
item: runs splat's fused attention with SPLAT_ATTN_TRACE=1, whose kernel writes the SM clock
at fixed marks of each work item over the log-sum-exp output (kernels/attention_ws.cuh
SPLAT_WS_TRACE), and prints, per case, the median cycles between the marks of the consumer
warpgroups and of the producer, each step's share of the consumers' time, and a fit of an
item's cycles against its sub-tiles (fixed cost + cost a sub-tile).

    SPLAT_LIBRARY=build-gpu/libsplat.so PYTHONPATH=python python3 bench/item_trace.py \\
        --specs "window(64);window(256)" --seqs 4096 --head-dims 64,128

Needs an sm_90a GPU. Cycles are the SM's clock; the traced kernel runs a few percent slower
than the plain one (its timing is printed beside the trace's spans; for two-pass plans the
time is both passes', the spans pass 2's). The output holds the marks of the first
batch x heads x seq / 1536 CTAs (the count is printed). Items of which a consumer warpgroup
computes nothing (the second warpgroup of 64-row items) are left out of its figures: their
walk lies before their first mark. Plans whose outputs other kernels also write (split
tiles' merge, rows of the irregular remainder) overwrite parts of the trace: use one-pass
plans without them, or two-pass plans (pass 2's items).
"""
import argparse
import ctypes
import os
import sys

os.environ["SPLAT_ATTN_TRACE"] = "1"  # before the first plan: read at plan creation

import numpy as np  # noqa: E402
import torch  # noqa: E402

import splat  # noqa: E402
import splat.torch  # noqa: E402,F401
from splat import _lib  # noqa: E402
from splat.ops import plan_cache  # noqa: E402
from splat.torch import _tensor  # noqa: E402

ITEMS, EVENTS, ROLES = 64, 8, 3  # kernels/attention_ws.cuh SPLAT_WS_TRACE's layout
UNSET = 0xFFFFFFFF
# Consumer marks 0..6 (7: the ring position after the item), producer marks 0..7. An item's
# cycles run from its start to the next item's: the six steps between its marks, then the
# loop's own ("between": its mark 6 to the next item's mark 0); a warpgroup's last traced
# item has no next and is left out.
CONSUMER_STEPS = ["wait Q", "wait K/V 0", "S 0", "softmax 0", "walk", "epilogue", "between"]
PRODUCER_STEPS = ["wait Q buf", "row ids", "issue Q", "wait stage", "issue 1st", "hand Q",
                  "the rest"]


def cycles(later, earlier):
    """Clock differences modulo 2^32 (the marks keep the clock's low 32 bits)."""
    return (later.astype(np.int64) - earlier.astype(np.int64)) % (1 << 32)


def traced_call(spec, seq, head_dim, batch, heads, reps):
    """The traced kernel's records [CTA][role][item][event] and its time a call (ms)."""
    pattern = splat.Pattern(spec, seq)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    plan = plan_cache.get(pattern, batch, heads, heads, head_dim,
                          _lib.dtype_code("torch.bfloat16", "q"),
                          f"cuda:{torch.cuda.current_device()}", _lib.OPS_ATTENTION)
    out = torch.empty_like(q)
    marks = torch.empty((batch, heads, seq), dtype=torch.int32, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    view = _lib.tensor(marks.data_ptr(), 0, (batch, heads, seq, 1), tuple(marks.stride()) + (1,))

    def call():
        plan.call("attention", ctypes.byref(_tensor(q, "q")), ctypes.byref(_tensor(k, "k")),
                  ctypes.byref(_tensor(v, "v")), _lib.DEFAULT_SCALE,
                  ctypes.byref(_tensor(out, "out")), ctypes.byref(view), stream)

    for _ in range(5):
        call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        call()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / reps
    marks.fill_(-1)
    call()
    torch.cuda.synchronize()
    raw = marks.flatten().cpu().numpy().view(np.uint32)
    ctas = raw.size // (ROLES * ITEMS * EVENTS)
    return raw[: ctas * ROLES * ITEMS * EVENTS].reshape(ctas, ROLES, ITEMS, EVENTS), ms


def signed(later, earlier):
    """Clock differences as signed 32-bit values (either order)."""
    d = cycles(later, earlier)
    return d - (1 << 32) if d >= (1 << 31) else d


def coupling(rec):
    """Medians, over the items of consumer warpgroup 0, of when the producer issued what the
    consumers then waited for (the two roles' clocks are one SM's), each a later mark less an
    earlier one: "Q issued - consumer asks" and "K/V 0 issued - Q in" are negative where the
    producer was ahead (the second always is: the producer hands Q over only once the item's
    first K/V is issued, so it says how far behind the consumers were), the others how long
    a hand-over took."""
    rows = []
    for cta in range(rec.shape[0]):
        c, p = rec[cta, 1], rec[cta, 0]
        for i in range(2, ITEMS):
            if any(v == UNSET for v in p[i]) or any(v == UNSET for v in c[i, :7]) or \
                    c[i - 1, 0] == UNSET or c[i - 2, 6] == UNSET:
                continue
            rows.append([signed(p[i, 3], c[i, 0]), signed(c[i, 1], p[i, 3]),
                         signed(p[i, 5], c[i, 1]), signed(c[i, 2], p[i, 5]),
                         signed(p[i, 1], c[i - 2, 6]), signed(p[i, 0], c[i - 1, 0])])
    if rows:
        r = np.median(np.array(rows, dtype=np.float64), axis=0)
        names = ["Q issued - consumer asks", "Q in - Q issued", "K/V 0 issued - Q in",
                 "K/V 0 in - K/V 0 issued", "Q buffer seen free - its epilogue done",
                 "producer starts item - consumers start the one before"]
        print("   coupling, median cycles: " + ", ".join(f"{n} {v:.0f}" for n, v in zip(names, r)))


def summarise(spec, seq, head_dim, rec, ms):
    consumer, producer, spans, idle, last, ctas = [], [], [], 0, 0, 0
    for cta in range(rec.shape[0]):
        ctas += int(rec[cta, 1, 0, 0] != UNSET)
        for role in (1, 2):
            r = rec[cta, role]
            items = [i for i in range(ITEMS) if r[i, 0] != UNSET and r[i, 6] != UNSET]
            if not items:
                continue
            spans.append(cycles(r[items[-1], 6], r[items[0], 0]))
            ring = 0
            for x, i in enumerate(items):
                walked = int(r[i, 7]) - ring
                ring = int(r[i, 7])
                if r[i, 3] == UNSET:  # the warpgroup computed none of the item's sub-tiles
                    idle += 1
                    continue
                if x + 1 == len(items):  # an item's span runs to the next one's start
                    last += 1
                    continue
                nxt = items[x + 1]
                steps = [cycles(r[i, e + 1], r[i, e]) for e in range(6)]
                steps.append(cycles(r[nxt, 0], r[i, 6]))
                consumer.append(steps + [walked, cycles(r[nxt, 0], r[i, 0])])
                p = rec[cta, 0, i]
                if role == 1 and all(v != UNSET for v in p):
                    producer.append([cycles(p[e + 1], p[e]) for e in range(7)])
    if not consumer:
        why = ("one traced item a warpgroup: no item has a next" if last else
               "not the warp-specialised kernel?")
        print(f"{spec:<28} {seq:>6} d{head_dim:<4} no trace ({why})")
        return
    c = np.array(consumer, dtype=np.float64)
    ns = len(CONSUMER_STEPS)  # c's columns: the steps, then sub-tiles walked, then the item
    mhz = np.median(spans) / (ms * 1e3)
    total = c[:, ns + 1].sum()
    print(f"{spec:<28} {seq:>6} d{head_dim:<4} {ms * 1e3:8.1f} us a call, ~{mhz:4.0f} cycles/us; "
          f"{ctas} CTAs traced, {len(c)} items of their consumer warpgroups ({idle} idle and "
          f"{last} last of a warpgroup left out), median {np.median(c[:, ns]):.0f} sub-tiles "
          f"walked an item")
    print("   consumers, median cycles: " +
          ", ".join(f"{n} {np.median(c[:, i]):.0f}" for i, n in enumerate(CONSUMER_STEPS)) +
          f"; item {np.median(c[:, ns + 1]):.0f}")
    print("   consumers, share of time: " +
          ", ".join(f"{n} {100 * c[:, i].sum() / total:.1f}%" for i, n in enumerate(CONSUMER_STEPS)))
    if len(set(c[:, ns])) > 1:
        per, fixed = np.polyfit(c[:, ns], c[:, ns + 1], 1)
        print(f"   an item ~ {fixed:.0f} + {per:.0f} x sub-tiles walked (cycles, least squares)")
    if producer:
        p = np.array(producer, dtype=np.float64)
        print("   producer, median cycles:  " +
              ", ".join(f"{n} {np.median(p[:, i]):.0f}" for i, n in enumerate(PRODUCER_STEPS)))
        coupling(rec)
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--specs", default="window(64);window(256);blocked(512)",
                    help="semicolon-separated pattern specs")
    ap.add_argument("--seqs", default="4096", help="comma-separated seq lengths")
    ap.add_argument("--head-dims", default="64,128", help="comma-separated head dims")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--reps", type=int, default=50, help="timed calls of the traced kernel")
    ap.add_argument("--raw", help="also save every case's marks and time here (.npz)")
    args = ap.parse_args()
    splat.require_device("cuda")
    print(f"{torch.cuda.get_device_name()}, splat from {splat.library_path()}")
    raw = {}
    for seq in (int(x) for x in args.seqs.split(",")):
        for head_dim in (int(x) for x in args.head_dims.split(",")):
            for spec in args.specs.split(";"):
                rec, ms = traced_call(spec, seq, head_dim, args.batch, args.heads, args.reps)
                summarise(spec, seq, head_dim, rec, ms)
                raw[f"{spec} {seq} d{head_dim} {ms:.6f} ms"] = rec
    if args.raw:
        np.savez_compressed(args.raw, **raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
