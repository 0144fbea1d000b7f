#!/usr/bin/env python3
"""f32 simulation of one-pass variance designs over an outer reduction's layout (splits of `chunk`
elements, 8 rows of threads strided within a split, sequential per thread, rows folded in order, splits
combined in order, or as moments.rs's combine does), against the exact variance and the fuzzer's moments bound ((g + 3u) sum x^2 / div,
g = (ceil(log2 n) + 1) u, u = 2^-24). No GPU: to choose a design before timing it."""
import math, random, struct

def f(x):
    return struct.unpack('f', struct.pack('f', x))[0]

U = 2.0 ** -24
BY = 8

def layout(n, splits):
    chunk = -(-n // splits)
    out = []
    for s in range(0, n, chunk):
        rows = [list(range(s + y, min(s + chunk, n), BY)) for y in range(BY)]
        out.append(rows)
    return out

def sums(xs, lay, term):
    """Sum of term(x) with the GPU's order; f32 at every step."""
    parts = []
    for rows in lay:
        ts = []
        for idx in rows:
            a = 0.0
            for i in idx:
                a = f(a + term(xs[i]))
            ts.append(a)
        b = ts[0]
        for t in ts[1:]:
            b = f(b + t)
        parts.append(b)
    a = 0.0
    for p in parts:
        a = f(a + p)
    return a

def two_pass(xs, lay, c):
    n = len(xs)
    m = f(sums(xs, lay, lambda x: x) / n)
    q = sums(xs, lay, lambda x: f(f(x - m) * f(x - m)))
    return f(q / (n - c))

def three_sums(xs, lay, c):
    n = len(xs)
    k = xs[0]
    s = sums(xs, lay, lambda x: f(x - k))
    t = sums(xs, lay, lambda x: f(f(x - k) * f(x - k)))
    q = f(t - f(f(s * s) / n))
    return f(q / (n - c))

def chan(a, b):
    (na, ma, qa), (nb, mb, qb) = a, b
    if nb == 0:
        return a
    if na == 0:
        return b
    n = na + nb
    d = f(mb - ma)
    m = f(ma + f(d * f(nb / n)))
    q = f(f(qa + qb) + f(f(d * d) * f(f(na * nb) / n)))
    return (n, m, q)

def welford_blocks(xs, lay, k):
    """Each block's (count, mean, M2) of the values shifted by k: Welford's update per row of threads,
    the rows merged in order."""
    parts = []
    for rows in lay:
        ts = []
        for idx in rows:
            cnt, m, q = 0, 0.0, 0.0
            for i in idx:
                y = f(xs[i] - k)
                cnt += 1
                d = f(y - m)
                m = f(m + f(d * f(1.0 / cnt)))
                q = f(q + f(d * f(y - m)))
            ts.append((cnt, m, q))
        b = ts[0]
        for t in ts[1:]:
            b = chan(b, t)
        parts.append(b)
    return parts

def welford(xs, lay, c, shift):
    n = len(xs)
    a = (0, 0.0, 0.0)
    for p in welford_blocks(xs, lay, xs[0] if shift else 0.0):
        a = chan(a, p)
    return f(a[2] / (n - c))

def welford_groups(xs, lay, c, groups=8):
    """Welford's update shifted, the blocks combined as moments.rs does: the shifted mean as a sum of
    the block means weighted by count / n, then M2 as a sum of q_s + n_s (m_s - mean)^2, each split
    over `groups` threads (partials g, g + groups, ...) whose sums are added in order."""
    n = len(xs)
    parts = welford_blocks(xs, lay, xs[0])
    g = min(groups, len(parts))
    wm = [0.0] * g
    for s, (ns, ms, _) in enumerate(parts):
        wm[s % g] = f(wm[s % g] + f(ms * f(ns / n)))
    mean = wm[0]
    for w in wm[1:]:
        mean = f(mean + w)
    qg = [0.0] * g
    for s, (ns, ms, qs) in enumerate(parts):
        d = f(ms - mean)
        qg[s % g] = f(qg[s % g] + f(qs + f(f(ns * d) * d)))
    q = qg[0]
    for t in qg[1:]:
        q = f(q + t)
    return f(q / (n - c))

def exact(xs, c):
    n = len(xs)
    m = math.fsum(xs) / n
    return math.fsum((x - m) ** 2 for x in xs) / (n - c)

def bound(xs, c):
    n = len(xs)
    g = (math.ceil(math.log2(max(n, 2))) + 1) * U
    return (g + 3 * U) * math.fsum(x * x for x in xs) / (n - c) + U * exact(xs, c)

def cases(rng):
    yield "uniform[-9,9] n=9, first at -8.9", [-8.9] + [f(rng.uniform(-9, 9)) for _ in range(8)], 1
    yield "1000+U[0,1] n=4099", [f(1000 + rng.random()) for _ in range(4099)], 1
    yield "normal n=16384, first 6 sigma", [6.0] + [f(rng.gauss(0, 1)) for _ in range(16383)], 0
    yield "normal n=2048", [f(rng.gauss(0, 1)) for _ in range(2048)], 0
    yield "normal(5, 0.01) n=1000", [f(rng.gauss(5, 0.01)) for _ in range(1000)], 1

def main():
    rng = random.Random(17)
    designs = [("two passes", two_pass), ("three sums", three_sums),
               ("welford", lambda x, l, c: welford(x, l, c, False)), ("welford shifted", lambda x, l, c: welford(x, l, c, True)),
               ("shifted, grouped", welford_groups)]
    for name, xs, c in cases(rng):
        lay = layout(len(xs), min(64, max(1, len(xs) // 64)))
        e, b = exact(xs, c), bound(xs, c)
        row = [f"{name}: var {e:.6g}, fuzz bound {b:.3g}"]
        for dn, d in designs:
            err = abs(d(xs, lay, c) - e)
            row.append(f"  {dn:16s} err {err:.3g} ({err / b:.2f} of the bound, {err / e:.2g} relative)")
        print("\n".join(row))

if __name__ == "__main__":
    main()
