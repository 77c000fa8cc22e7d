"""ws_protocol.py — a model of the synchronisation of kernels/attention_ws.cuh, run on
random schedules: the producer warpgroup and 1-2 consumer warpgroups of one persistent
CTA walking several work items; Q, row ids and the item's task double-buffered (qfull /
qempty; after the last item the producer publishes an end task), the K/V
ring of STAGES stages (full / empty mbarriers with phase-parity waits), interval tables
of predicated runs in buffers indexed by a global run counter, each copied in by a bulk
copy on its run's first sub-tile's full barrier (expected bytes raised before the
producer's arrival, landing later; full runs have none, and their sub-tiles are computed
by every warpgroup), consumers skipping sub-tiles none of
their rows touches, and the P V of the last computed sub-tile pending until the next one
is found, or finished at the first skip.

An item's Q comes either by the producer's own copies (done before it arrives on qfull)
or by TMA (on a random half of the items): the producer raises qfull's expected bytes
(mbarrier.expect_tx) before its arrival and the bytes land later, in any order with
everything else; qfull's phase completes once both are in.

Checks, per random case: no deadlock; no stage, table or Q buffer overwritten while a
consumer still reads it (nor a TMA's bytes landing in one); no Q read before its bytes
landed; no mbarrier wait more than one phase behind. With --old (the first version: the
pending P V held across skips) it must find the deadlock, which shows the model can; with
the expected bytes raised after the arrival instead of before, a stale Q; the same for a
table, a stale table.

A second model covers pass 2's staged rows (SPLAT_WS_STAGED): per item, a consumer
warpgroup's threads meet at its named barrier, each issues the cp.async copies of its
chunks of the item's rows (none past the item's rows), which land later, and arrives on
pfull once they have landed (cp.async.mbarrier.arrive.noinc); every thread waits on the
parity of the item and reads the rows. It checks that no row is read stale and no copy
lands in a row being read; without the named barrier it must find such a case. The
kernel is not derived from this file: change both together.

    python3 tests/models/ws_protocol.py [cases]      # exit 0 when every case passes
"""
import random
import sys


class Barrier:
    """An mbarrier: `count` arrivals complete a phase; wait(parity) passes once the phase
    of that parity has completed (a fresh barrier counts phase -1, parity 1, as done)."""

    arrivals = 0  # over all barriers: progress, for the deadlock check

    def __init__(self, count):
        self.count, self.arrived, self.done, self.tx = count, 0, 0, 0

    def arrive(self):
        Barrier.arrivals += 1
        self.arrived += 1
        self.complete_if_due()

    def expect_tx(self):
        """mbarrier.expect_tx: one more transfer (a TMA's bytes) before the phase completes."""
        self.tx += 1

    def complete_tx(self):
        """A transfer's bytes have landed."""
        Barrier.arrivals += 1
        self.tx -= 1
        self.complete_if_due()

    def complete_if_due(self):
        if self.arrived == self.count and self.tx == 0:
            self.arrived, self.done = 0, self.done + 1

    def ready(self, use):
        """Whether use number `use` (0, 1, ...) of the barrier's phases has completed."""
        assert self.done <= use + 1, "a wait more than one phase behind"
        return (self.done & 1) != (use & 1) if use >= 0 else True


def run_case(seed, old=False, late_tx=False, late_table=False):
    rnd = random.Random(seed)
    stages, wgs = rnd.choice([2, 3, 4]), rnd.choice([1, 2])
    items = []  # per item: sub-tiles per run, whether each run is predicated, and per
    # warpgroup whether it computes each sub-tile (every one of a full run, unless the
    # warpgroup is idle: the item has no rows of its)
    for _ in range(rnd.randint(1, 6)):
        runs = [rnd.randint(1, 8) for _ in range(rnd.randint(0, 4))]
        pred = [rnd.random() < 0.7 for _ in runs]
        p = rnd.choice([0.0, 0.1, 0.5, 0.9, 1.0])
        active = [w == 0 or rnd.random() < 0.8 for w in range(wgs)]
        items.append((runs, pred, [[[active[w] and (not pred[li] or rnd.random() < p)
                                     for _ in range(n)] for li, n in enumerate(runs)]
                                   for w in range(wgs)]))
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(wgs) for _ in range(stages)]
    qfull, qempty = [Barrier(1), Barrier(1)], [Barrier(wgs), Barrier(wgs)]
    stage, table, qbuf = [None] * stages, [None] * stages, [None, None]
    qdata, q_flight = [None, None], []  # the Q rows in each buffer; TMA loads not landed
    t_flight, t_in_use = [], [None] * wgs  # tables' copies not landed; the one each reads
    stage_readers, q_readers = [set() for _ in range(stages)], [set(), set()]
    by_tma = [rnd.random() < 0.5 for _ in items]

    def arrive_q(b, k):
        qfull[b].arrive()
        if late_tx and by_tma[k]:
            qfull[b].expect_tx()

    def producer():
        n = R = 0
        for k, (runs, pred, _) in enumerate(items):
            b = k & 1
            while not qempty[b].ready((k >> 1) - 1):
                yield
            assert not q_readers[b], "Q buffer overwritten while read"
            qbuf[b] = k  # the task and row ids: the producer's own writes
            if by_tma[k]:
                if not late_tx:
                    qfull[b].expect_tx()
                q_flight.append((b, k))
            else:
                qdata[b] = k
            yield
            q_pending = True  # v4.6: Q's wait and qfull after the item's first sub-tile
            for li, nsub in enumerate(runs):
                for ls in range(nsub):
                    st = n % stages
                    while not empty[st].ready(n // stages - 1):
                        yield
                    assert not stage_readers[st], "stage overwritten while read"
                    copy = ls == 0 and pred[li]
                    if copy:  # the run's table, by a bulk copy on this stage's barrier
                        if not late_table:
                            full[st].expect_tx()
                        t_flight.append((R % stages, (k, li), st))
                    stage[st] = (k, li, ls)
                    yield
                    full[st].arrive()
                    if copy and late_table:
                        full[st].expect_tx()
                    n += 1
                    if q_pending:
                        arrive_q(b, k)
                        q_pending = False
                R += 1
            if q_pending:
                arrive_q(b, k)
        k = len(items)  # the end task: the consumers learn the walk's end from it
        b = k & 1
        while not qempty[b].ready((k >> 1) - 1):
            yield
        assert not q_readers[b], "Q buffer overwritten while read"
        qbuf[b] = "end"
        qfull[b].arrive()

    def consumer(w):
        n = R = k = 0
        while True:
            b = k & 1
            while not qfull[b].ready(k >> 1):
                yield
            if qbuf[b] == "end":  # the task names the item; the consumer never counts them
                break
            assert qbuf[b] == k
            assert qdata[b] == k, "Q read before its bytes landed"
            runs, pred, touched = items[qbuf[b]]
            q_readers[b].add(w)
            order = [(li, ls) for li, nsub in enumerate(runs) for ls in range(nsub)]
            state = {"pos": 0, "pending": None}

            def finish():
                pn, pid = state["pending"]
                assert stage[pn % stages] == (k,) + pid, "V read from a refilled stage"
                stage_readers[pn % stages].discard((w, pn))
                empty[pn % stages].arrive()
                state["pending"] = None

            def walk():
                """next(): to the next computed sub-tile; skips release their stage."""
                nonlocal n
                while state["pos"] < len(order):
                    st, (li, ls) = n % stages, order[state["pos"]]
                    while not full[st].ready(n // stages):
                        yield
                    assert stage[st] == (k, li, ls)
                    t_in_use[w] = (R + li) % stages if pred[li] else None
                    if pred[li]:
                        assert table[(R + li) % stages] == (k, li), "interval table stale or overwritten"
                    if touched[w][li][ls]:
                        return True
                    if state["pending"] and not old:
                        finish()
                    t_in_use[w] = None  # done with the skipped sub-tile and its table
                    empty[st].arrive()
                    n += 1
                    state["pos"] += 1
                    yield
                if state["pending"]:
                    finish()
                return False

            while (yield from walk()):
                stage_readers[n % stages].add((w, n))  # S reads K; P V will read V
                yield
                if state["pending"]:
                    finish()
                state["pending"] = (n, order[state["pos"]][0:2])
                n += 1
                state["pos"] += 1
                yield
            R += len(runs)
            t_in_use[w] = None
            yield  # the epilogue reads the row ids of buffer b
            assert qbuf[b] == k and qdata[b] == k
            q_readers[b].discard(w)
            qempty[b].arrive()
            k += 1

    def tma_engine():
        while True:
            if q_flight and rnd.random() < 0.3:
                b, k = q_flight.pop(rnd.randrange(len(q_flight)))
                assert not q_readers[b], "a TMA's Q landed in a buffer being read"
                qdata[b] = k
                qfull[b].complete_tx()
            if t_flight and rnd.random() < 0.3:
                slot, run, st = t_flight.pop(rnd.randrange(len(t_flight)))
                assert slot not in t_in_use, "a table's copy landed in a buffer being read"
                table[slot] = run
                full[st].complete_tx()
            yield

    alive, engine = [producer()] + [consumer(w) for w in range(wgs)], tma_engine()
    last, idle = Barrier.arrivals, 0
    while alive:
        actor = rnd.choice(alive + [engine])
        try:
            next(actor)
        except StopIteration:
            alive.remove(actor)
        idle = 0 if Barrier.arrivals != last else idle + 1
        last = Barrier.arrivals
        if idle > 2000:  # every actor waits on a barrier nobody will arrive at
            raise AssertionError("deadlock: no progress")


def run_staging_case(seed, barrier=True):
    """One warpgroup of `threads` threads; an item's rows (up to `rows`) of `chunks` chunks
    each (an odd count, as a row's 9 or 17), two threads a row: thread i copies chunks
    i % 2, i % 2 + 2, ... of row i // 2."""
    rnd = random.Random(seed)
    threads, rows, chunks = 4, 2, 3
    rows_of_item = [rnd.randint(0, rows) for _ in range(rnd.randint(1, 6))]  # 0: idle
    pfull = Barrier(threads)
    staged = [[None] * chunks for _ in range(rows)]
    in_flight, readers = [], [set() for _ in range(rows)]
    outstanding, armed = [0] * threads, [False] * threads
    meet = {"generation": 0, "arrived": 0}

    def bar_sync():
        g = meet["generation"]
        meet["arrived"] += 1
        if meet["arrived"] == threads:
            meet["arrived"], meet["generation"] = 0, g + 1
        while meet["generation"] == g:
            yield

    def arrive_when_landed(i):
        """cp.async.mbarrier.arrive.noinc: the arrival once thread i's copies have landed."""
        if armed[i] and outstanding[i] == 0:
            armed[i] = False
            pfull.arrive()

    def thread(i):
        for k, nrows in enumerate(rows_of_item):
            if barrier:
                yield from bar_sync()
            r, half = i // 2, i % 2
            for ch in range(half, chunks, 2) if r < nrows else ():
                in_flight.append((i, r, ch, k))
                outstanding[i] += 1
                yield
            armed[i] = True
            arrive_when_landed(i)
            yield
            while not pfull.ready(k):
                yield
            for r in range(nrows):
                assert staged[r] == [k] * chunks, f"row {r} read stale ({staged[r]}) at item {k}"
                readers[r].add(i)
            yield
            for r in range(rows):
                readers[r].discard(i)
            yield

    def copy_engine():
        while True:
            if in_flight and rnd.random() < 0.3:
                i, r, ch, k = in_flight.pop(rnd.randrange(len(in_flight)))
                assert not readers[r], "a copy landed in a row being read"
                staged[r][ch] = k
                outstanding[i] -= 1
                arrive_when_landed(i)
            yield

    alive, engine, steps = [thread(i) for i in range(threads)], copy_engine(), 0
    while alive:
        actor = rnd.choice(alive + [engine])
        try:
            next(actor)
        except StopIteration:
            alive.remove(actor)
        steps += 1
        if steps > 200000:
            raise AssertionError("deadlock: no progress")


def tally(run, cases, label, **broken):
    """Runs the model `run` on `cases` seeds as the kernel has it (printing failures) and
    broken by `broken`, which must fail somewhere (else the model proves nothing). Returns
    (failures, broken cases caught)."""
    failed = caught = 0
    for seed in range(cases):
        try:
            run(seed)
        except AssertionError as e:
            print(f"{label} case {seed}: {e}")
            failed += 1
        try:
            run(seed, **broken)
        except AssertionError:
            caught += 1
    return failed, caught


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    cases = int(args[0]) if args else 300
    # The first version (the pending P V held across skips) must deadlock.
    failed, old_caught = tally(run_case, cases, "ring", old=True)
    print(f"{cases - failed} passed, {failed} failed; the first version fails {old_caught} of {cases}")
    _, late_caught = tally(run_case, cases, "ring", late_tx=True)
    print(f"with Q's expected bytes raised after the arrival, {late_caught} of {cases} fail")
    _, late_table_caught = tally(run_case, cases, "ring", late_table=True)
    print(f"with a table's expected bytes raised after the arrival, {late_table_caught} of "
          f"{cases} fail")
    staging_failed, unguarded_caught = tally(run_staging_case, cases, "staging", barrier=False)
    print(f"pass 2's staged rows: {cases - staging_failed} passed, {staging_failed} failed; "
          f"without the named barrier {unguarded_caught} of {cases} fail")
    ok = (failed == 0 and old_caught > 0 and late_caught > 0 and late_table_caught > 0
          and staging_failed == 0
          and unguarded_caught > 0)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
