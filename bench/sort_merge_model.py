"""The index arithmetic of codegen/sort_long.rs (chunks of 4096 sorted, runs merged in pairs, each element
placed by a binary search in the other run), run in Python against a stable sort on random rows with many ties.
Run: python3 bench/sort_merge_model.py (prints ok)."""
import random
SORT_MAX=4096
def model(vals, largest):
    n=len(vals)
    # keys: ints transformed; use python ints with tie by pos
    key=[(-v if largest else v) for v in vals]
    K=[None]*n; P=[None]*n
    chunks=(n+SORT_MAX-1)//SORT_MAX
    for c in range(chunks):
        c0=c*SORT_MAX; ln=min(SORT_MAX,n-c0)
        pairs=sorted((key[c0+e],c0+e) for e in range(ln))
        for e,(k,p) in enumerate(pairs): K[c0+e]=k; P[c0+e]=p
    w=SORT_MAX
    while w<n:
        K2=[None]*n; P2=[None]*n
        for e in range(n):
            start=e//w*w; ps=((e//w)^1)*w
            kk,pp=K[e],P[e]; dst=e
            if ps<n:
                lo,hi=ps,min(ps+w,n)
                while lo<hi:
                    mid=(lo+hi)>>1
                    if K[mid]<kk or (K[mid]==kk and P[mid]<pp): lo=mid+1
                    else: hi=mid
                dst=min(start,ps)+(e-start)+(lo-ps)
            assert K2[dst] is None, "collision"
            K2[dst]=kk; P2[dst]=pp
        K,P=K2,P2; w*=2
    return P
for trial in range(12):
    n=random.choice([4097,8191,8192,10000,20003,4096*5+7,33000])
    vals=[random.randint(-5,5) for _ in range(n)]
    largest=random.random()<0.5
    got=model(vals,largest)
    want=sorted(range(n), key=lambda i:((-vals[i] if largest else vals[i]), i))
    assert got==want, (n,largest)
print("ok")
