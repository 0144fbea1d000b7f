// Grouped matrix products (grouped_mm, codegen/grouped_mm.rs): D_g = A_g B_g
// for the groups `offs` cuts (Int32 cumulative ends, read on the device) along
// m (CUT 0: A [M, K] rows, B [G, K, N]), n (CUT 1: A [G, M, K], B [K, N]
// columns) or k (CUT 2: A [M, K] x B [K, N] into D [G, M, N]). One block of 8
// warps takes a 128 x 128 tile of one group's D, 64 of k at a time through
// STAGES stages of dynamic shared memory (36 KiB each); warp (wm, wn) its rows 64 wm.. and columns
// 32 wn.., mma.sync m16n8k16 with f32 accumulation. With VEC both operands
// have k contiguous and 16-byte aligned rows, and the tiles are copied 16
// bytes a thread with cp.async while the stages before are multiplied (a
// chunk crossing a group's k range element by element); otherwise element by
// element, the unit-stride dim fastest across threads.
// D is dense row-major.

#define FB_GMM_W 72

// cp.async of 16 bytes, only the first `bytes` read and the rest zeros.
__device__ __forceinline__ void fb_gmm_copy(void* smem, const void* gmem, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem),
                 "r"(bytes));
}

// The 128 x 64 tile from row r0 and k `k` of an operand seen as [rows][k]
// (element (r, c) at g[r * sr + c * sc]) into `s` (row width FB_GMM_W):
// zeros past row `rows` and outside k [klo, k1).
template <bool VEC>
__device__ __forceinline__ void fb_gmm_tile(unsigned short* s, const unsigned short* g, long long sr, long long sc, int r0,
                                            int rows, int k, int klo, int k1) {
    if (VEC) {
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

template <bool BF16, int CUT, bool VEC, int STAGES>
__device__ __forceinline__ void fb_grouped_mm(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                                              const int* __restrict__ offs, unsigned short* __restrict__ d, int groups,
                                              int M, int N, int K, long long ag, long long ar, long long ac, long long bg,
                                              long long br, long long bc) {
    // Stage s: A's tile at s, B's at STAGES + s (128 rows of FB_GMM_W each).
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    // This block's group and tile: tiles are counted group after group.
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
    if (g >= groups) return;
    // Rows [r0, r1), columns [c0, c1), k [k0, k1) of the group's product.
    int r0, r1 = M, c0, c1 = N, k0 = 0, k1 = K;
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
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;
    float c[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) c[i][j][0] = c[i][j][1] = c[i][j][2] = c[i][j][3] = 0.f;
    // A as [row][k], B as [column][k].
    auto as = [&](int stage) { return fb_attn_smem + stage * 128 * FB_GMM_W; };
    auto bs = [&](int stage) { return fb_attn_smem + (STAGES + stage) * 128 * FB_GMM_W; };
    auto load = [&](int stage, int k) {
        fb_gmm_tile<VEC>(as(stage), a, ar, ac, r0, r1, k, k0, k1);
        fb_gmm_tile<VEC>(bs(stage), b, bc, br, c0, c1, k, k0, k1);
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
            for (int mt = 0; mt < 4; ++mt) fb_attn_a(af[mt], as(stage), FB_GMM_W, 64 * wm + 16 * mt, 16 * kk);
#pragma unroll
            for (int np = 0; np < 2; ++np) fb_attn_bn(bf[np], bs(stage), FB_GMM_W, 32 * wn + 16 * np, 16 * kk);
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
                const unsigned p = fb_attn_pack<BF16>(c[mt][nt][2 * h], c[mt][nt][2 * h + 1]);
                unsigned short* at = d + (long long)r * N + col;
                if (col + 1 < c1 && (reinterpret_cast<unsigned long long>(at) & 3) == 0) {
                    *reinterpret_cast<unsigned*>(at) = p;
                } else {
                    at[0] = (unsigned short)(p & 0xffff);
                    if (col + 1 < c1) at[1] = (unsigned short)(p >> 16);
                }
            }
}
