"""The index arithmetic of codegen/scan_blocks.rs (a block per line, 256 threads of 4 elements a step, warp
shuffles, the warps' totals, a carry between steps), run in Python against a sequential scan (sums with and
without init, running maxima) on lines of 2-5000. Run: python3 bench/scan_block_model.py (prints ok)."""
import random
T,I=256,4
def block_scan(x, op, ident, start):
    n=len(x); out=[None]*n; carry=start
    for base in range(0,n,T*I):
        v=[[ (x[base+t*I+j] if base+t*I+j<n else ident) for j in range(I)] for t in range(T)]
        for t in range(T):
            for j in range(1,I): v[t][j]=op(v[t][j-1],v[t][j])
        s=[v[t][I-1] for t in range(T)]
        # warp inclusive scan via shfl_up
        for o in [1,2,4,8,16]:
            u=[s[t-o] if (t%32)>=o else s[t] for t in range(T)]
            s=[op(u[t],s[t]) if (t%32)>=o else s[t] for t in range(T)]
        wt=[s[w*32+31] for w in range(T//32)]
        before=[ident if t%32==0 else s[t-1] for t in range(T)]
        for t in range(T):
            p=carry
            for w in range(t//32): p=op(p,wt[w])
            p=op(p,before[t])
            for j in range(I):
                k=base+t*I+j
                if k<n: out[k]=op(p,v[t][j])
        for w in range(T//32): carry=op(carry,wt[w])
    return out
for trial in range(6):
    n=random.choice([2,5,1023,1024,1025,3000,5000])
    x=[random.randint(-9,9) for _ in range(n)]
    init=random.choice([0,7])
    got=block_scan(x, lambda a,b:a+b, 0, init)
    want=[]; a=init
    for e in x: a+=e; want.append(a)
    assert got==want
    got=block_scan(x, max, -10**9, -10**9)
    want=[]; a=-10**9
    for e in x: a=max(a,e); want.append(a)
    assert got==want
print("ok")
