// Grouped matrix products (grouped_mm, codegen/grouped_mm.rs): D_g = A_g B_g
// for the groups `offs` cuts (Int32 cumulative ends, read on the device) along
// m (CUT 0: A [M, K] rows, B [G, K, N]), n (CUT 1: A [G, M, K], B [K, N]
// columns) or k (CUT 2: A [M, K] x B [K, N] into D [G, M, N]). One block of 8
// warps takes a 128 x 128 tile of one group's D, 64 of k at a time through
// STAGES stages of dynamic shared memory (36 KiB each); warp (wm, wn) its rows 64 wm.. and columns
// 32 wn.., mma.sync m16n8k16 with f32 accumulation. Each operand's tile is
// copied as its layout allows (LA, LB): FB_GMM_K, k contiguous and 16-byte
// aligned rows, 16 bytes a thread with cp.async while the stages before are
// multiplied (a chunk crossing a group's k range element by element), the
// tile held [row][k]; FB_GMM_MN, its rows (m of A, n of B) contiguous and
// each k's 16-byte aligned, the same way along the rows, the tile held
// [k][row] and read transposed by ldmatrix; FB_GMM_ELEMENT, element by
// element, the unit-stride dim fastest across threads, held [row][k].
// D is dense row-major.
// On Hopper compiled for sm_90a, fb_grouped_mm_wg takes the tiles copied 16
// bytes a thread in 128-byte swizzled rows and multiplies them with wgmma,
// each warpgroup 64 rows x 128 columns (m64n128k16) reading both operands
// from shared memory; elsewhere it is fb_grouped_mm. An operand whose rows
// are contiguous (FB_GMM_MN) is held MN-major there: 64 of its rows (128
// bytes) by 8 of k to each 1024-byte swizzle atom, and wgmma reads it
// transposed; such a B is multiplied 64 columns at a time (m64n64k16), so
// that no instruction spans two atoms along m or n and the descriptor's one
// stride that matters is the one between 8-row steps of k.

#define FB_GMM_W 72
// A tile held [k][row]: 64 rows of 128, padded so that ldmatrix's eight
// rows fall in distinct banks (8704 elements, within a [row][k] tile's 9216).
#define FB_GMM_MN_W 136
#define FB_GMM_ELEMENT 0
#define FB_GMM_K 1
#define FB_GMM_MN 2

// cp.async of 16 bytes, only the first `bytes` read and the rest zeros.
__device__ __forceinline__ void fb_gmm_copy(void* smem, const void* gmem, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem),
                 "r"(bytes));
}

// The 128 x 64 tile from row r0 and k `k` of an operand seen as [rows][k]
// (element (r, c) at g[r * sr + c * sc]) into `s` (row width FB_GMM_W, or
// FB_GMM_MN_W held [k][row]): zeros past row `rows` and outside k [klo, k1).
template <int L>
__device__ __forceinline__ void fb_gmm_tile(unsigned short* s, const unsigned short* g, long long sr, long long sc, int r0,
                                            int rows, int k, int klo, int k1) {
    if (L == FB_GMM_MN) {
        // 64 rows of k of 16 chunks of 8 rows (sr is 1): four chunks a
        // thread, 16 threads reading 256 contiguous bytes. A chunk past the
        // last row reads the rows left and zeros the rest. r0 is a multiple
        // of 128 here (the groups do not cut these rows), so every chunk is
        // 16-byte aligned.
#pragma unroll
        for (int i = threadIdx.x; i < 1024; i += 256) {
            const int kr = i >> 4, c = (i & 15) * 8;
            const int gr = r0 + c, kc = k + kr;
            unsigned short* dst = s + kr * FB_GMM_MN_W + c;
            if (gr >= rows || kc < klo || kc >= k1) {
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
            } else {
                fb_gmm_copy(dst, g + gr + kc * sc, min(rows - gr, 8) * 2);
            }
        }
    } else if (L == FB_GMM_K) {
        // 128 rows of 8 chunks of 8: four chunks a thread; a chunk that
        // crosses the k range (a group's first or last) element by element.
#pragma unroll
        for (int i = threadIdx.x; i < 1024; i += 256) {
            const int r = i >> 3, c = (i & 7) * 8;
            const int gr = r0 + r, kc = k + c;
            unsigned short* dst = s + r * FB_GMM_W + c;
            if (gr >= rows || kc >= k1 || kc + 8 <= klo) {
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
            } else if (kc >= klo && kc + 8 <= k1) {
                fb_gmm_copy(dst, g + gr * sr + kc, 16);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) dst[e] = (kc + e >= klo && kc + e < k1) ? g[gr * sr + kc + e] : (unsigned short)0;
            }
        }
    } else {
        const bool k_fast = sc == 1;
        for (int i = threadIdx.x; i < 128 * 64; i += 256) {
            const int r = k_fast ? i >> 6 : i & 127;
            const int c = k_fast ? i & 63 : i >> 7;
            const int gr = r0 + r, gc = k + c;
            s[r * FB_GMM_W + c] = (gr < rows && gc >= klo && gc < k1) ? g[gr * sr + gc * sc] : (unsigned short)0;
        }
    }
}

// Two neighbours of a row of D, the second only where `both`.
template <bool BF16>
__device__ __forceinline__ void fb_gmm_store(unsigned short* at, bool both, float lo, float hi) {
    const unsigned p = fb_attn_pack<BF16>(lo, hi);
    if (both && (reinterpret_cast<unsigned long long>(at) & 3) == 0) {
        *reinterpret_cast<unsigned*>(at) = p;
    } else {
        at[0] = (unsigned short)(p & 0xffff);
        if (both) at[1] = (unsigned short)(p >> 16);
    }
}

// Tiles of a group whose extent along the cut is `ext`: 128 rows by BN
// columns, tm and tn the whole product's tiles along m and n.
template <int CUT, int BN>
__device__ __forceinline__ int fb_gmm_group_tiles(int ext, int tm, int tn) {
    return CUT == 0 ? ((ext + 127) >> 7) * tn : CUT == 1 ? tm * ((ext + BN - 1) / BN) : tm * tn;
}

// Tile t of the product, counted group after group, 128 rows by BN columns:
// its group g, rows [r0, r1), columns [c0, c1) and k [k0, k1) of the
// group's product; false past the last group's tiles (fb_gmm_find's search
// for any t and BN; fb_gmm_find keeps its own so that the kernels measured
// with it compile as they did).
template <int CUT, int BN>
__device__ __forceinline__ bool fb_gmm_tile_at(int t, const int* __restrict__ offs, int groups, int M, int N,
                                               int K, int& g, int& r0, int& r1, int& c0, int& c1, int& k0, int& k1) {
    int lo = 0, hi = 0;
    const int tm = (M + 127) >> 7, tn = (N + BN - 1) / BN;
    for (g = 0; g < groups; ++g) {
        lo = g == 0 ? 0 : offs[g - 1];
        hi = offs[g];
        const int tiles = fb_gmm_group_tiles<CUT, BN>(hi > lo ? hi - lo : 0, tm, tn);
        if (t < tiles) break;
        t -= tiles;
    }
    if (g >= groups) return false;
    r1 = M; c1 = N; k0 = 0; k1 = K;
    if (CUT == 0) {
        r0 = lo + (t / tn) * 128; r1 = hi; c0 = (t % tn) * BN;
    } else if (CUT == 1) {
        const int tg = (hi - lo + BN - 1) / BN;
        r0 = (t / tg) * 128; c0 = lo + (t % tg) * BN; c1 = hi;
    } else {
        r0 = (t / tn) * 128; c0 = (t % tn) * BN; k0 = lo; k1 = hi;
    }
    return true;
}

// This block's tile: rows [r0, r1), columns [c0, c1) and k [k0, k1) of its
// group's product, with a, b and d moved to the group's; false past the last
// group's tiles. Tiles are counted group after group.
template <int CUT>
__device__ __forceinline__ bool fb_gmm_find(const int* __restrict__ offs, int groups, int M, int N, int K, long long ag,
                                            long long bg, const unsigned short* __restrict__& a,
                                            const unsigned short* __restrict__& b, unsigned short* __restrict__& d,
                                            int& r0, int& r1, int& c0, int& c1, int& k0, int& k1) {
    int t = blockIdx.x, g = 0, lo = 0, hi = 0;
    const int tm = (M + 127) >> 7, tn = (N + 127) >> 7;
    for (; g < groups; ++g) {
        lo = g == 0 ? 0 : offs[g - 1];
        hi = offs[g];
        const int ext = hi > lo ? hi - lo : 0;
        const int tiles = CUT == 0 ? ((ext + 127) >> 7) * tn : CUT == 1 ? tm * ((ext + 127) >> 7) : tm * tn;
        if (t < tiles) break;
        t -= tiles;
    }
    if (g >= groups) return false;
    r1 = M; c1 = N; k0 = 0; k1 = K;
    if (CUT == 0) {
        r0 = lo + (t / tn) * 128; r1 = hi; c0 = (t % tn) * 128;
        b += g * bg;
    } else if (CUT == 1) {
        const int tg = (hi - lo + 127) >> 7;
        r0 = (t / tg) * 128; c0 = lo + (t % tg) * 128; c1 = hi;
        a += g * ag;
    } else {
        r0 = (t / tn) * 128; c0 = (t % tn) * 128; k0 = lo; k1 = hi;
        d += (long long)g * M * N;
    }
    return true;
}

// A fragments of 16 rows from m0 over k0..k0+15 where the tile is held
// [k][m] (row width W): fb_attn_a's four matrices, each read transposed.
__device__ __forceinline__ void fb_gmm_at(unsigned* a, const unsigned short* s, int W, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    fb_ldsm4t(a, s + (k0 + (lane >> 4) * 8 + (lane & 7)) * W + m0 + ((lane >> 3) & 1) * 8);
}

template <bool BF16, int CUT, int LA, int LB, int STAGES>
__device__ __forceinline__ void fb_grouped_mm(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                              const int* __restrict__ offs, unsigned short* __restrict__ d, int groups,
                                              int M, int N, int K, long long ag, long long ar, long long ac, long long bg,
                                              long long br, long long bc) {
    // Stage s: A's tile at s, B's at STAGES + s (128 rows of FB_GMM_W each).
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    int r0, r1, c0, c1, k0, k1;
    if (!fb_gmm_find<CUT>(offs, groups, M, N, K, ag, bg, a, b, d, r0, r1, c0, c1, k0, k1)) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;
    float c[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) c[i][j][0] = c[i][j][1] = c[i][j][2] = c[i][j][3] = 0.f;
    // A as [row][k], B as [column][k] (or each [k][row] where FB_GMM_MN).
    auto as = [&](int stage) { return fb_attn_smem + stage * 128 * FB_GMM_W; };
    auto bs = [&](int stage) { return fb_attn_smem + (STAGES + stage) * 128 * FB_GMM_W; };
    auto load = [&](int stage, int k) {
        fb_gmm_tile<LA>(as(stage), a, ar, ac, r0, r1, k, k0, k1);
        fb_gmm_tile<LB>(bs(stage), b, bc, br, c0, c1, k, k0, k1);
    };
    // From k0 rounded down to 8 elements: 16-byte chunks stay aligned. An
    // empty group (k0 == k1 cutting k) takes no step: its result is zeros.
    const int kstart = k0 & ~7, kend = k0 < k1 ? k1 : kstart;
    // STAGES - 1 steps in flight ahead of the one multiplied; a step's stage
    // is loaded again only after the barrier that follows its use.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (kstart + 64 * s < kend) load(s, kstart + 64 * s);
        fb_attn_commit();
    }
    int stage = 0;
    for (int k = kstart; k < kend; k += 64) {
        fb_attn_wait<STAGES - 2>();
        __syncthreads();
        const int ahead = k + 64 * (STAGES - 1);
        if (ahead < kend) load((stage + STAGES - 1) % STAGES, ahead);
        fb_attn_commit();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            unsigned af[4][4], bf[2][4];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                if (LA == FB_GMM_MN) {
                    fb_gmm_at(af[mt], as(stage), FB_GMM_MN_W, 64 * wm + 16 * mt, 16 * kk);
                } else {
                    fb_attn_a(af[mt], as(stage), FB_GMM_W, 64 * wm + 16 * mt, 16 * kk);
                }
            }
#pragma unroll
            for (int np = 0; np < 2; ++np) {
                if (LB == FB_GMM_MN) {
                    fb_attn_bk(bf[np], bs(stage), FB_GMM_MN_W, 16 * kk, 32 * wn + 16 * np);
                } else {
                    fb_attn_bn(bf[np], bs(stage), FB_GMM_W, 32 * wn + 16 * np, 16 * kk);
                }
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int np = 0; np < 2; ++np) {
                    fb_mma16816<BF16>(c[mt][2 * np], af[mt], bf[np][0], bf[np][1]);
                    fb_mma16816<BF16>(c[mt][2 * np + 1], af[mt], bf[np][2], bf[np][3]);
                }
        }
        stage = (stage + 1) % STAGES;
    }
    // Tile (mt, nt) holds rows 64 wm + 16 mt + lane / 4 (+ 8) and columns
    // 32 wn + 8 nt + 2 (lane % 4) (+ 1).
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = r0 + 64 * wm + 16 * mt + (lane >> 2) + 8 * h;
                const int col = c0 + 32 * wn + 8 * nt + 2 * (lane & 3);
                if (r >= r1 || col >= c1) continue;
                fb_gmm_store<BF16>(d + (long long)r * N + col, col + 1 < c1, c[mt][nt][2 * h], c[mt][nt][2 * h + 1]);
            }
}

// A TMA tensor map (runtime's encode_tensor_map), a __grid_constant__
// parameter of the warp-specialized kernel's wrapper on every architecture.
struct __align__(64) fb_tmap { unsigned long long w[16]; };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A wgmma operand descriptor for a tile of 128-byte swizzled rows from `p`
// (its 8-row groups 1024 bytes apart; the row width makes the leading offset
// unused, 1 by convention).
__device__ __forceinline__ unsigned long long fb_wg_desc(const void* p) {
    const unsigned long long at = (unsigned)__cvta_generic_to_shared(p);
    return ((at & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
// The same for an MN-major operand of one swizzle atom along m or n, its
// atoms of 8 rows of k 1024 bytes apart: both offsets 1024, so that the one
// the instruction steps k by is right whichever field it reads.
__device__ __forceinline__ unsigned long long fb_wg_desc_mn(const void* p) {
    const unsigned long long at = (unsigned)__cvta_generic_to_shared(p);
    return ((at & 0x3FFFF) >> 4) | ((1024ull >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

#define FB_WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FB_WG_D16(i) FB_WG_D4(i), FB_WG_D4(i + 4), FB_WG_D4(i + 8), FB_WG_D4(i + 12)
// TRANS: "0, 0" both K-major, "1, 0" A M-major.
#define FB_WG_MMA128(TY, TRANS)                                                                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                           \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, "      \
                 "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "  \
                 "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
                 "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, " TRANS ";\n}\n" \
                 : FB_WG_D16(0), FB_WG_D16(16), FB_WG_D16(32), FB_WG_D16(48)                                            \
                 : "l"(da), "l"(db), "r"(accumulate))
#define FB_WG_MMA(TY) FB_WG_MMA128(TY, "0, 0")
// 64 columns with B N-major; TRANS "0, 1" or "1, 1".
#define FB_WG_MMA64(TY, TRANS)                                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                           \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, "       \
                 "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "  \
                 "%29, %30, %31}, %32, %33, p, 1, 1, " TRANS ";\n}\n"                                                   \
                 : FB_WG_D16(0), FB_WG_D16(16)                                                                          \
                 : "l"(da), "l"(db), "r"(accumulate))

// d (a warpgroup's 64 x 128 f32 tile) += A (64 x 16, K-major) B (16 x 128, B
// held as [column][k]), both from shared memory.
template <bool BF16>
__device__ __forceinline__ void fb_wgmma_128(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if (BF16) {
        FB_WG_MMA("bf16");
    } else {
        FB_WG_MMA("f16");
    }
}

// d += A B with A M-major (TA) or K-major and B K-major: 64 x 128.
template <bool BF16, bool TA>
__device__ __forceinline__ void fb_wgmma_128t(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if (BF16) {
        if (TA) { FB_WG_MMA128("bf16", "1, 0"); } else { FB_WG_MMA128("bf16", "0, 0"); }
    } else {
        if (TA) { FB_WG_MMA128("f16", "1, 0"); } else { FB_WG_MMA128("f16", "0, 0"); }
    }
}
// d (32 of a warpgroup's accumulators) += A B over 64 columns, B N-major.
template <bool BF16, bool TA>
__device__ __forceinline__ void fb_wgmma_64n(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if (BF16) {
        if (TA) { FB_WG_MMA64("bf16", "1, 1"); } else { FB_WG_MMA64("bf16", "0, 1"); }
    } else {
        if (TA) { FB_WG_MMA64("f16", "1, 1"); } else { FB_WG_MMA64("f16", "0, 1"); }
    }
}

// Keeps the compiler from moving reads or writes of the accumulators across
// the asynchronous multiply (which writes them until wgmma.wait_group).
// N: the accumulators a thread holds (64 for 128 columns, 128 for 256).
template <int N = 64>
__device__ __forceinline__ void fb_wg_pin(float* d) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <bool BF16, int CUT, int STAGES, int LA = FB_GMM_K, int LB = FB_GMM_K>
__device__ __forceinline__ void fb_grouped_mm_wg(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                                 const int* __restrict__ offs, unsigned short* __restrict__ d, int groups,
                                                 int M, int N, int K, long long ag, long long ar, long long ac,
                                                 long long bg, long long br, long long bc) {
    // Stage s: A's 128 x 64 tile, then B's, 32 KiB, from a 1024-byte
    // boundary (the swizzle repeats every 8 rows of 128 bytes).
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(fb_attn_smem);
    unsigned short* sm = fb_attn_smem + (((raw + 1023) & ~1023u) - raw) / 2;
    int r0, r1, c0, c1, k0, k1;
    if (!fb_gmm_find<CUT>(offs, groups, M, N, K, ag, bg, a, b, d, r0, r1, c0, c1, k0, k1)) return;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    auto as = [&](int stage) { return sm + stage * 16384; };
    auto bs = [&](int stage) { return sm + stage * 16384 + 8192; };
    // A thread copies the same 16-byte chunk of k of rows rr + 32 j (j < 4)
    // of both tiles at every step: their addresses are found once. The
    // chunk's swizzled place is the same in those rows (rr + 32 j = rr mod 8).
    const int ch = threadIdx.x & 7, rr = threadIdx.x >> 3;
    const int place = rr * 64 + ((ch ^ (rr & 7)) << 3);
    const unsigned short* ga[4];
    const unsigned short* gb[4];
    bool va[4], vb[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        va[j] = r0 + rr + 32 * j < r1;
        vb[j] = c0 + rr + 32 * j < c1;
        ga[j] = a + (long long)(va[j] ? r0 + rr + 32 * j : 0) * ar + ch * 8;
        gb[j] = b + (long long)(vb[j] ? c0 + rr + 32 * j : 0) * bc + ch * 8;
    }
    // Zeros past the tile's rows and outside the group's k [k0, k1); a chunk
    // crossing that range element by element.
    auto copy = [&](unsigned short* s, const unsigned short* const* g, const bool* v, int k) {
        const int kc = k + ch * 8;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            unsigned short* dst = s + place + 2048 * j;
            if (!v[j] || kc >= k1 || kc + 8 <= k0) {
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
            } else if (kc >= k0 && kc + 8 <= k1) {
                fb_gmm_copy(dst, g[j] + k, 16);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) dst[e] = (kc + e >= k0 && kc + e < k1) ? g[j][k + e] : (unsigned short)0;
            }
        }
    };
    // An MN-major operand: a thread copies chunk mc (8 of its rows) of rows
    // mk + 16 j of k (j < 4), into atom (mc / 8, mk / 8 + 2 j) at row mk % 8
    // (atom (x, y) at 512 (8 x + y): x along the rows, y along k), its
    // place the same in each but for the atom; a chunk past the last row
    // reads the rows left and zeros the rest.
    const int mc = threadIdx.x & 15, mk = threadIdx.x >> 4;
    const int mplace = ((mc >> 3) * 8 + (mk >> 3)) * 512 + (mk & 7) * 64 + (((mc & 7) ^ (mk & 7)) << 3);
    const int abytes = r0 + mc * 8 < r1 ? min(r1 - r0 - mc * 8, 8) * 2 : 0;
    const int bbytes = c0 + mc * 8 < c1 ? min(c1 - c0 - mc * 8, 8) * 2 : 0;
    const unsigned short* gam = a + (abytes ? r0 + mc * 8 : 0);
    const unsigned short* gbm = b + (bbytes ? c0 + mc * 8 : 0);
    auto copy_mn = [&](unsigned short* s, const unsigned short* g, int bytes, long long sk, int k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int kc = k + mk + 16 * j;
            unsigned short* dst = s + mplace + 1024 * j;
            if (bytes == 0 || kc < k0 || kc >= k1) {
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
            } else {
                fb_gmm_copy(dst, g + (long long)kc * sk, bytes);
            }
        }
    };
    auto load = [&](int stage, int k) {
        if (LA == FB_GMM_MN) {
            copy_mn(as(stage), gam, abytes, ac, k);
        } else {
            copy(as(stage), ga, va, k);
        }
        if (LB == FB_GMM_MN) {
            copy_mn(bs(stage), gbm, bbytes, br, k);
        } else {
            copy(bs(stage), gb, vb, k);
        }
    };
    const int kstart = k0 & ~7, kend = k0 < k1 ? k1 : kstart;
    // With 3 stages or more a step's multiply runs on while the next step
    // waits for its copies: a stage is loaded again two steps after its
    // multiply was issued, once every warpgroup has waited for it (the
    // barrier after each one's wgmma.wait_group 1). With 2, each step waits
    // for its own multiply and the copies run one step ahead.
    constexpr int AHEAD = STAGES >= 3 ? STAGES - 2 : 1;
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (kstart + 64 * s < kend) load(s, kstart + 64 * s);
        fb_attn_commit();
    }
    int stage = 0;
    for (int k = kstart; k < kend; k += 64) {
        fb_attn_wait<AHEAD - 1>();
        // This thread's copies and stores into the stage, seen by the async
        // proxy wgmma reads shared memory through; then everyone's.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        const int ahead = k + 64 * AHEAD;
        if (ahead < kend) load((stage + AHEAD) % STAGES, ahead);
        fb_attn_commit();
        fb_wg_pin(acc);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            if (LA == FB_GMM_K && LB == FB_GMM_K) {
                fb_wgmma_128<BF16>(acc, fb_wg_desc(as(stage) + 64 * 64 * wg + 16 * kk), fb_wg_desc(bs(stage) + 16 * kk), 1);
            } else {
                // k rows 16 kk.. are atoms 2 kk and 2 kk + 1 along k.
                const unsigned long long da = LA == FB_GMM_MN ? fb_wg_desc_mn(as(stage) + (8 * wg + 2 * kk) * 512)
                                                              : fb_wg_desc(as(stage) + 64 * 64 * wg + 16 * kk);
                if (LB == FB_GMM_MN) {
                    fb_wgmma_64n<BF16, LA == FB_GMM_MN>(acc, da, fb_wg_desc_mn(bs(stage) + 2 * kk * 512), 1);
                    fb_wgmma_64n<BF16, LA == FB_GMM_MN>(acc + 32, da, fb_wg_desc_mn(bs(stage) + (8 + 2 * kk) * 512), 1);
                } else {
                    fb_wgmma_128t<BF16, true>(acc, da, fb_wg_desc(bs(stage) + 16 * kk), 1);
                }
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if (STAGES >= 3) {
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        } else {
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        }
        fb_wg_pin(acc);
        stage = (stage + 1) % STAGES;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fb_wg_pin(acc);
    // Columns 8 i + 2 (lane % 4) (+ 1) of rows 64 wg + 16 warp + lane / 4
    // (+ 8): acc[4 i + 2 h], acc[4 i + 2 h + 1].
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + 64 * wg + 16 * warp + (lane >> 2) + 8 * h;
            const int col = c0 + 8 * i + 2 * (lane & 3);
            if (r >= r1 || col >= c1) continue;
            fb_gmm_store<BF16>(d + (long long)r * N + col, col + 1 < c1, acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
        }
}

// 256 columns: d (a warpgroup's 64 x 256 f32 tile, 128 a thread) += A B, B K-major; TRANS "0, 0" A K-major,
// "1, 0" A M-major.
#define FB_WG_MMA256(TY, TRANS)                                                                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                          \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                          \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
                 "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
                 "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
                 "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
                 "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
                 "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
                 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
                 "%123, %124, %125, %126, %127"                                                                         \
                 "}, %128, %129, p, 1, 1, " TRANS ";\n}\n"                                                            \
                 : FB_WG_D16(0), FB_WG_D16(16), FB_WG_D16(32), FB_WG_D16(48),                                          \
                   FB_WG_D16(64), FB_WG_D16(80), FB_WG_D16(96), FB_WG_D16(112)                                         \
                 : "l"(da), "l"(db), "r"(accumulate))
template <bool BF16, bool TA>
__device__ __forceinline__ void fb_wgmma_256(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if (BF16) {
        if (TA) { FB_WG_MMA256("bf16", "1, 0"); } else { FB_WG_MMA256("bf16", "0, 0"); }
    } else {
        if (TA) { FB_WG_MMA256("f16", "1, 0"); } else { FB_WG_MMA256("f16", "0, 0"); }
    }
}
// d += A B over BN columns: B K-major in one instruction, or N-major 64
// columns (one swizzle atom along n) an instruction; A K-major or M-major (TA).
template <bool BF16, int BN, bool TA, bool TB>
__device__ __forceinline__ void fb_wgmma_n(float* d, unsigned long long da, const unsigned short* bs, int kk) {
    if (TB) {
        // k rows 16 kk.. are atoms 2 kk and 2 kk + 1 along k of atom x along n.
#pragma unroll
        for (int x = 0; x < BN / 64; ++x) fb_wgmma_64n<BF16, TA>(d + 32 * x, da, fb_wg_desc_mn(bs + (8 * x + 2 * kk) * 512), 1);
    } else if (BN == 256) {
        fb_wgmma_256<BF16, TA>(d, da, fb_wg_desc(bs + 16 * kk), 1);
    } else {
        fb_wgmma_128t<BF16, TA>(d, da, fb_wg_desc(bs + 16 * kk), 1);
    }
}

// mbarriers in shared memory (phases: a wait names the parity of the phase
// it waits to see completed; a fresh barrier counts phase 1 as completed).
__device__ __forceinline__ void fb_mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void fb_mbar_arrive(unsigned long long* bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
__device__ __forceinline__ void fb_mbar_wait(unsigned long long* bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nFB_MBAR_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra FB_MBAR_WAIT;\n}\n" :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
}

// The box of map `m` at (x, y[, z]) into shared memory at `dst`, counted on `bar`.
__device__ __forceinline__ void fb_tma_2d(void* dst, const fb_tmap& m, int x, int y, unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(reinterpret_cast<unsigned long long>(&m)), "r"(x), "r"(y),
                 "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
__device__ __forceinline__ void fb_tma_3d(void* dst, const fb_tmap& m, int x, int y, int z, unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(reinterpret_cast<unsigned long long>(&m)), "r"(x), "r"(y),
                 "r"(z), "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
// A stage's tile of one operand, its rows from `row` and k from `k` (and
// group g where GROUPED): K-major, one box of 64 of k by the tile's rows;
// MN-major, BOXES boxes of 64 rows by 64 of k, each 8 swizzle atoms of 8 k
// apart along k, 4096 elements apart along the rows (the MN-major wgmma's
// layout).
template <int L, int BOXES, bool GROUPED>
__device__ __forceinline__ void fb_ws_tile(unsigned short* dst, const fb_tmap& m, int row, int k, int g,
                                           unsigned long long* bar) {
    if (L == FB_GMM_MN) {
#pragma unroll
        for (int x = 0; x < BOXES; ++x) {
            if (GROUPED) {
                fb_tma_3d(dst + 4096 * x, m, row + 64 * x, k, g, bar);
            } else {
                fb_tma_2d(dst + 4096 * x, m, row + 64 * x, k, bar);
            }
        }
    } else if (GROUPED) {
        fb_tma_3d(dst, m, k, row, g, bar);
    } else {
        fb_tma_2d(dst, m, k, row, bar);
    }
}
// One arrival that also expects `bytes` of copies before the phase completes.
__device__ __forceinline__ void fb_mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
}

// Where element (row r, k c) of a stage's tile lies: K-major, rows of 64 of k
// with 16-byte chunks swizzled by the row; MN-major, atoms of 64 rows by 8 of
// k (x = r / 64 along the rows, 4096 apart; c / 8 along k, 512 apart), the
// chunks swizzled by the k row.
template <int L>
__device__ __forceinline__ int fb_gmm_at_ws(int r, int c) {
    if (L == FB_GMM_MN) return (r >> 6) * 4096 + (c >> 3) * 512 + (c & 7) * 64 + ((((r >> 3) & 7) ^ (c & 7)) << 3) + (r & 7);
    return r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

// Warp-specialized: a block of three warpgroups walks the product's tiles
// (128 x BN, blocks stepping by the grid). One thread of warpgroup 0 has the
// tensor memory accelerator copy both operands' 64-wide steps of k (maps `ma`
// and `mb`, rows swizzled 128 bytes at a time and zeros past the tensors'
// extents; an operand whose rows are contiguous, LA or LB FB_GMM_MN, held
// MN-major and read transposed) into STAGES stages; warpgroups 1 and 2 each
// multiply 64 rows of the tile with wgmma (m64nBNk16) as the stages fill.
// They meet at two mbarriers a stage: `full` (the copies' bytes arrived)
// and `empty` (the 256 multiplying threads' wgmma reading it retired, one
// step later: wgmma.wait_group 1). Rows a box reads past its group's belong
// to the next group and are never stored; k past a group's end (CUT 2) is
// zeroed by the multipliers before they read it, as is k before a group's
// start where the step begins at the 16-byte boundary below it. The multipliers store their
// tile while the copier already fills the next tile's stages.
template <bool BF16, int CUT, int STAGES, int BN, int LA = FB_GMM_K, int LB = FB_GMM_K>
__device__ __forceinline__ void fb_grouped_mm_ws(const fb_tmap& ma, const fb_tmap& mb, const int* __restrict__ offs,
                                                 unsigned short* __restrict__ d, int groups, int M, int N, int K) {
    constexpr int STAGE = (128 + BN) * 64;
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(fb_attn_smem);
    unsigned short* sm = fb_attn_smem + (((raw + 1023) & ~1023u) - raw) / 2;
    unsigned long long* full = reinterpret_cast<unsigned long long*>(sm + STAGES * STAGE);
    unsigned long long* empty = full + STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            fb_mbar_init(full + s, 1);
            fb_mbar_init(empty + s, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // The tiles of every group.
    int total = 0;
    {
        const int tm = (M + 127) >> 7, tn = (N + BN - 1) / BN;
        for (int g = 0, lo = 0; g < groups; ++g) {
            const int hi = offs[g];
            total += fb_gmm_group_tiles<CUT, BN>(hi > lo ? hi - lo : 0, tm, tn);
            lo = hi;
        }
    }
    const int wg = threadIdx.x >> 7;
    int g, r0, r1, c0, c1, k0, k1;
    if (wg == 0) {
        if (threadIdx.x != 0) return;
        int it = 0;
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            fb_gmm_tile_at<CUT, BN>(t, offs, groups, M, N, K, g, r0, r1, c0, c1, k0, k1);
            // An empty group (k0 == k1 cutting k) takes no step, as below.
            const int kend = k0 < k1 ? k1 : (k0 & ~7);
            for (int k = k0 & ~7; k < kend; k += 64, ++it) {
                const int s = it % STAGES;
                fb_mbar_wait(empty + s, ((it / STAGES) & 1) ^ 1);
                fb_mbar_expect(full + s, STAGE * 2);
                unsigned short* as = sm + s * STAGE;
                unsigned short* bs = as + 128 * 64;
                fb_ws_tile<LA, 2, CUT == 1>(as, ma, r0, k, g, full + s);
                fb_ws_tile<LB, BN / 64, CUT == 0>(bs, mb, c0, k, g, full + s);
            }
        }
        return;
    }
    const int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    float acc[BN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        fb_gmm_tile_at<CUT, BN>(t, offs, groups, M, N, K, g, r0, r1, c0, c1, k0, k1);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
        // An empty group (k0 == k1 cutting k) takes no step: its result is zeros.
        if (k0 < k1) {
            for (int k = k0 & ~7; k < k1; k += 64, ++it) {
                const int s = it % STAGES;
                fb_mbar_wait(full + s, (it / STAGES) & 1);
                unsigned short* as = sm + s * STAGE;
                unsigned short* bs = as + 128 * 64;
                if (CUT == 2 && (k < k0 || k + 64 > k1)) {
                    // k before k0 (the step starts at a 16-byte boundary, as
                    // the copies' coordinates) or from k1 on is another
                    // group's: zeros in this warpgroup's 64 rows of A and half
                    // of B's rows, seen by wgmma's proxy and by the other
                    // warpgroup before either multiplies. The warps converge
                    // first: what follows is .aligned.
                    const int lo = k0 - k, hi = k1 - k, i0 = threadIdx.x & 127;
                    for (int i = i0; i < 64 * 64; i += 128) {
                        const int r = 64 * cw + (i >> 6), c = i & 63;
                        if (c < lo || c >= hi) as[fb_gmm_at_ws<LA>(r, c)] = 0;
                    }
                    for (int i = i0; i < BN / 2 * 64; i += 128) {
                        const int r = BN / 2 * cw + (i >> 6), c = i & 63;
                        if (c < lo || c >= hi) bs[fb_gmm_at_ws<LB>(r, c)] = 0;
                    }
                    __syncwarp();
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    asm volatile("bar.sync 1, 256;\n" ::: "memory");
                }
                fb_wg_pin<BN / 2>(acc);
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    // This warpgroup's 64 rows of A: K-major from row 64 cw, or
                    // MN-major atom cw along m, atoms 2 kk.. along k.
                    const unsigned long long da = LA == FB_GMM_MN ? fb_wg_desc_mn(as + (8 * cw + 2 * kk) * 512)
                                                                  : fb_wg_desc(as + 64 * 64 * cw + 16 * kk);
                    fb_wgmma_n<BF16, BN, LA == FB_GMM_MN, LB == FB_GMM_MN>(acc, da, bs, kk);
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                fb_wg_pin<BN / 2>(acc);
                if (k > (k0 & ~7)) fb_mbar_arrive(empty + (it - 1) % STAGES);
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            fb_wg_pin<BN / 2>(acc);
            fb_mbar_arrive(empty + (it - 1) % STAGES);
        }
        unsigned short* dt = d + (CUT == 2 ? (long long)g * M * N : 0);
        // Columns 8 i + 2 (lane % 4) (+ 1) of rows 64 cw + 16 warp + lane / 4
        // (+ 8): acc[4 i + 2 h], acc[4 i + 2 h + 1].
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = r0 + 64 * cw + 16 * warp + (lane >> 2) + 8 * h;
                const int col = c0 + 8 * i + 2 * (lane & 3);
                if (r >= r1 || col >= c1) continue;
                fb_gmm_store<BF16>(dt + (long long)r * N + col, col + 1 < c1, acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
            }
    }
}
#else
// Without sm_90a's wgmma: the mma.sync kernel.
template <bool BF16, int CUT, int STAGES, int LA = FB_GMM_K, int LB = FB_GMM_K>
__device__ __forceinline__ void fb_grouped_mm_wg(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                                 const int* __restrict__ offs, unsigned short* __restrict__ d, int groups,
                                                 int M, int N, int K, long long ag, long long ar, long long ac,
                                                 long long bg, long long br, long long bc) {
    fb_grouped_mm<BF16, CUT, LA, LB, STAGES>(a, b, offs, d, groups, M, N, K, ag, ar, ac, bg, br, bc);
}
// Planned only where compiled for sm_90a (Device::grouped_wgmma): a kernel
// of three warpgroups and tensor maps has no mma.sync form.
template <bool BF16, int CUT, int STAGES, int BN, int LA = FB_GMM_K, int LB = FB_GMM_K>
__device__ __forceinline__ void fb_grouped_mm_ws(const fb_tmap&, const fb_tmap&, const int* __restrict__,
                                                 unsigned short* __restrict__, int, int, int, int) {
    __trap();
}
#endif
