import sys, statistics as st
from collections import defaultdict
for path in sys.argv[1:]:
    rows = [list(map(int, l.split())) for l in open(path)]
    # block sm tiles t0 t1 t2 t3 epi
    by_sm = defaultdict(list)
    for r in rows: by_sm[r[1]].append(r)
    setup, loop, bulk, epi, gaps, pertile = [], [], [], [], [], []
    t_start = min(r[3] for r in rows); t_end = max(r[6] + r[7] for r in rows)
    for sm, rs in by_sm.items():
        rs.sort(key=lambda r: r[3])
        for a, b in zip(rs, rs[1:]):
            gaps.append(b[3] - (a[6] + a[7]))
        for r in rs:
            setup.append(r[4] - r[3]); loop.append(r[5] - r[4]); bulk.append(r[6] - r[5]); epi.append(r[7])
            pertile.append((r[5] - r[4]) / r[2])
    busy_first = [min(r[3] for r in rs) - t_start for rs in by_sm.values()]
    idle_last = [t_end - max(r[6] + r[7] for r in rs) for rs in by_sm.values()]
    m = lambda v: "mean %.2f med %.2f us" % (st.mean(v) / 1e3, st.median(v) / 1e3)
    n = len(rows); tiles = sum(r[2] for r in rows)
    print("== %s: %d blocks on %d SMs, %d tiles, span %.1f us" % (path, n, len(by_sm), tiles, (t_end - t_start) / 1e3))
    print("  setup (entry -> first Q/dO and K/V ready):", m(setup))
    print("  loop per tile:", m(pertile), " loop per block:", m(loop))
    print("  bulk_wait after the loop:", m(bulk))
    print("  epilogue (dK, dV):", m(epi))
    print("  gap between blocks on an SM:", m(gaps))
    print("  SM first-block start after kernel start:", m(busy_first), " SM idle at the end:", m(idle_last))
    ov = st.mean(setup) + st.mean(bulk) + st.mean(epi) + st.mean(gaps)
    print("  per-block overhead (setup + bulk + epilogue + gap): %.2f us; x blocks/SM %.1f = %.1f us of the span" % (ov / 1e3, n / len(by_sm), ov * n / len(by_sm) / 1e3))
    if len(rows[0]) > 8:
        lag = [r[10] - r[9] for r in rows]
        gap2 = []
        for sm, rs in by_sm.items():
            for a, b in zip(rs, rs[1:]):
                gap2.append(b[3] - max(a[9], a[10]))
        print("  consumer 1 ends after consumer 0 by:", m(lag))
        print("  gap from the last consumer's end to the next block's entry:", m(gap2))
        print("  producer done issuing, before consumer 0's end by:", m([r[9] - r[8] for r in rows]))
    if len(rows[0]) > 11:
        two = [(r[11] - r[4]) / 2 for r in rows if r[2] > 3]
        rest = [(r[5] - r[11]) / (r[2] - 2) for r in rows if r[2] > 3]
        print("  the first two tiles, a tile:", m(two), "  the rest, a tile:", m(rest))
