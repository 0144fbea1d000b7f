// Flash attention backward (sdpfa_bwd, codegen/attention.rs) in two kernels
// of FlashAttention-2's scheme with no atomics: one per block of 64 queries
// for dQ (and D = rowsum(dO * O), which both need), one per block of 64 keys
// for dK and dV. Each recomputes the weights P = 2^(S log2(e) - lse log2(e))
// from the forward's log-sum-exp; dS = P * (dP - D). P and dS are rounded to
// the operands' type before they multiply, as flash attention rounds them.
// Every product is mma.sync m16n8k16 with f32 accumulation.

// A fragments of 16 rows from `r0` of a row-major tile of row width W,
// columns c0..c0+15.
__device__ __forceinline__ void fb_attn_a(unsigned* a, const unsigned short* s, int W, int r0, int c0) {
    const int lane = threadIdx.x & 31;
    fb_ldsm4(a, s + (r0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * W + c0 + (lane >> 4) * 8);
}
// B fragments of two 8-column tiles n0..n0+15 over k0..k0+15 where the
// tile is stored [n][k] (a K read for Q.K^T): b[0..1] tile n0, b[2..3] n0+8.
__device__ __forceinline__ void fb_attn_bn(unsigned* b, const unsigned short* s, int W, int n0, int k0) {
    const int lane = threadIdx.x & 31;
    fb_ldsm4(b, s + (n0 + (lane >> 4) * 8 + (lane & 7)) * W + k0 + ((lane >> 3) & 1) * 8);
}
// The same where the tile is stored [k][n] (a V read for P.V).
__device__ __forceinline__ void fb_attn_bk(unsigned* b, const unsigned short* s, int W, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    fb_ldsm4t(b, s + (k0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * W + n0 + (lane >> 4) * 8);
}
// Accumulator tiles 2kk and 2kk + 1 as the A fragment of columns 16kk..16kk+15.
template <bool BF16> __device__ __forceinline__ void fb_attn_c2a(unsigned* a, const float* c0, const float* c1) {
    a[0] = fb_attn_pack<BF16>(c0[0], c0[1]);
    a[1] = fb_attn_pack<BF16>(c0[2], c0[3]);
    a[2] = fb_attn_pack<BF16>(c1[0], c1[1]);
    a[3] = fb_attn_pack<BF16>(c1[2], c1[3]);
}

// c += A B^T for one warp's 16 rows: A's fragment of columns 16kk..16kk+15
// from `a_at(kk, a)`, B the NS * 8 rows of a tile stored [n][k] (row width
// W), KD columns.
template <bool BF16, int KD, int NS, typename AF>
__device__ __forceinline__ void fb_attn_abt(float (*c)[4], AF a_at, const unsigned short* b, int W) {
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk) {
        unsigned a[4];
        a_at(kk, a);
#pragma unroll
        for (int np = 0; np < NS / 2; ++np) {
            unsigned bb[4];
            fb_attn_bn(bb, b, W, np * 16, kk * 16);
            fb_mma16816<BF16>(c[2 * np], a, bb[0], bb[1]);
            fb_mma16816<BF16>(c[2 * np + 1], a, bb[2], bb[3]);
        }
    }
}
// c += A B over rows k0..k0+15 of B, a tile stored [k][n] (row width W), ND columns.
template <bool BF16, int ND>
__device__ __forceinline__ void fb_attn_ab(float (*c)[4], const unsigned* a, const unsigned short* b, int W, int k0) {
#pragma unroll
    for (int np = 0; np < ND / 16; ++np) {
        unsigned bb[4];
        fb_attn_bk(bb, b, W, k0, np * 16);
        fb_mma16816<BF16>(c[2 * np], a, bb[0], bb[1]);
        fb_mma16816<BF16>(c[2 * np + 1], a, bb[2], bb[3]);
    }
}
// Rows `r` and r + 8 of this warp's accumulators (ND / 8 tiles) times `mul`
// into a dense row-major [rows, D] array, rows past `rows` skipped.
template <bool BF16, int D, int ND>
__device__ __forceinline__ void fb_attn_store(unsigned short* out, const float (*c)[4], int r, int rows, float mul) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (r + 8 * h >= rows) continue;
#pragma unroll
        for (int n = 0; n < ND / 8; ++n) {
            if (n * 8 < D) {
                *reinterpret_cast<unsigned*>(out + (long long)(r + 8 * h) * D + n * 8 + 2 * t) =
                    fb_attn_pack<BF16>(c[n][2 * h] * mul, c[n][2 * h + 1] * mul);
            }
        }
    }
}

// dQ of 64 queries, and D of them into `dsum` (read by the dK, dV kernel).
// Shared memory: 64 (EP + 8) + 64 (EVP + 8) + 2 BN (EP + EVP + 16) 16-bit
// elements and 128 floats. q, o, dout [L, *], k, v [S, *] at their row
// strides; lse and dsum [L]; dq [L, E] dense.
template <bool BF16, int E, int EV, bool CAUSAL, int BN>
__device__ __forceinline__ void fb_flash_bwd_dq(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                                const unsigned short* __restrict__ v, const unsigned short* __restrict__ o,
                                                const unsigned short* __restrict__ dout, const float* __restrict__ lse,
                                                unsigned short* __restrict__ dq, float* __restrict__ dsum, int L, int S,
                                                long long qs, long long ks, long long vs, long long os, long long dos,
                                                float scale_log2, float scale) {
    constexpr int EP = (E + 15) / 16 * 16, EVP = (EV + 15) / 16 * 16;
    constexpr int QW = EP + 8, VW = EVP + 8, NS = BN / 8;
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    unsigned short* sQ = fb_attn_smem;
    unsigned short* sO = sQ + 64 * QW;  // dO
    unsigned short* sK = sO + 64 * VW;  // two buffers of BN keys
    unsigned short* sV = sK + 2 * BN * QW;
    float* sL = reinterpret_cast<float*>(sV + 2 * BN * VW);
    float* sD = sL + 64;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int qt = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * 64;
    const int kend = CAUSAL ? min(S, q0 + 64) : S;
    const int ntiles = (kend + BN - 1) / BN;

    fb_attn_tile<64, E, EP, QW, 128>(sQ, q + (long long)q0 * qs, qs, L - q0);
    fb_attn_tile<64, EV, EVP, VW, 128>(sO, dout + (long long)q0 * dos, dos, L - q0);
    fb_attn_tile<BN, E, EP, QW, 128>(sK, k, ks, S);
    fb_attn_tile<BN, EV, EVP, VW, 128>(sV, v, vs, S);
    fb_attn_commit();
    // D = rowsum(dO * O) of the block's rows in f32, a warp per row, and the
    // log-sum-exp in base 2.
    for (int r = warp; r < 64; r += 4) {
        float d = 0.f;
        if (q0 + r < L) {
            for (int c = lane * 8; c < EV; c += 256) {
                const uint4 x = *reinterpret_cast<const uint4*>(dout + (long long)(q0 + r) * dos + c);
                const uint4 y = *reinterpret_cast<const uint4*>(o + (long long)(q0 + r) * os + c);
                const unsigned short* xs = reinterpret_cast<const unsigned short*>(&x);
                const unsigned short* ys = reinterpret_cast<const unsigned short*>(&y);
#pragma unroll
                for (int i = 0; i < 8; ++i) d += BF16 ? fb_bf2f(xs[i]) * fb_bf2f(ys[i]) : fb_h2f(xs[i]) * fb_h2f(ys[i]);
            }
        }
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) d += __shfl_xor_sync(0xffffffffu, d, m);
        if (lane == 0) {
            sD[r] = d;
            sL[r] = q0 + r < L ? lse[q0 + r] * 1.4426950408889634f : 0.f;
            if (q0 + r < L) dsum[q0 + r] = d;
        }
    }
    fb_attn_wait<0>();
    __syncthreads();

    constexpr bool QREG = EP <= 128 && EVP <= 128;
    unsigned qf[QREG ? EP / 16 : 1][4], of[QREG ? EVP / 16 : 1][4];
    if (QREG) {
#pragma unroll
        for (int kk = 0; kk < EP / 16; ++kk) fb_attn_a(qf[QREG ? kk : 0], sQ, QW, warp * 16, kk * 16);
#pragma unroll
        for (int kk = 0; kk < EVP / 16; ++kk) fb_attn_a(of[QREG ? kk : 0], sO, VW, warp * 16, kk * 16);
    }
    const int row0 = q0 + warp * 16 + g;
    const float lr[2] = {sL[warp * 16 + g], sL[warp * 16 + g + 8]};
    const float dr[2] = {sD[warp * 16 + g], sD[warp * 16 + g + 8]};
    float acc[EP / 8][4];
#pragma unroll
    for (int n = 0; n < EP / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

    for (int j = 0; j < ntiles; ++j) {
        const int k0 = j * BN, b = j & 1;
        const unsigned short* cK = sK + b * BN * QW;
        const unsigned short* cV = sV + b * BN * VW;
        if (j + 1 < ntiles) {
            fb_attn_tile<BN, E, EP, QW, 128>(sK + (b ^ 1) * BN * QW, k + (long long)(k0 + BN) * ks, ks, S - k0 - BN);
            fb_attn_tile<BN, EV, EVP, VW, 128>(sV + (b ^ 1) * BN * VW, v + (long long)(k0 + BN) * vs, vs, S - k0 - BN);
            fb_attn_commit();
        }
        float s[NS][4], dp[NS][4];
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
        fb_attn_abt<BF16, EP, NS>(s, [&](int kk, unsigned* a) {
            if (QREG) {
                for (int i = 0; i < 4; ++i) a[i] = qf[QREG ? kk : 0][i];
            } else {
                fb_attn_a(a, sQ, QW, warp * 16, kk * 16);
            }
        }, cK, QW);
        fb_attn_abt<BF16, EVP, NS>(dp, [&](int kk, unsigned* a) {
            if (QREG) {
                for (int i = 0; i < 4; ++i) a[i] = of[QREG ? kk : 0][i];
            } else {
                fb_attn_a(a, sO, VW, warp * 16, kk * 16);
            }
        }, cV, VW);
        // P from the log-sum-exp; dS = P (dP - D); masked weights are 0.
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = k0 + n * 8 + 2 * t + (e & 1), h = e >> 1;
                const bool off = col >= S || (CAUSAL && col > row0 + 8 * h);
                const float p = off ? 0.f : fb_attn_ex2(s[n][e] * scale_log2 - lr[h]);
                s[n][e] = p * (dp[n][e] - dr[h]);
            }
#pragma unroll
        for (int kk = 0; kk < NS / 2; ++kk) {
            unsigned da[4];
            fb_attn_c2a<BF16>(da, s[2 * kk], s[2 * kk + 1]);
            fb_attn_ab<BF16, EP>(acc, da, cK, QW, kk * 16);
        }
        if (j + 1 < ntiles) {
            fb_attn_wait<0>();
            __syncthreads();
        }
    }
    fb_attn_store<BF16, E, EP>(dq, acc, row0, L, scale);
}

// dK and dV of 64 keys, walking the queries BN at a time (from the block's
// first key on, causal). Reads D from `dsum`, written by fb_flash_bwd_dq.
// Shared memory: 64 (EP + 8) + 64 (EVP + 8) + 2 BN (EP + EVP + 16) 16-bit
// elements and 4 BN floats. dk [S, E], dv [S, EV] dense.
template <bool BF16, int E, int EV, bool CAUSAL, int BN>
__device__ __forceinline__ void fb_flash_bwd_dkv(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                                 const unsigned short* __restrict__ v, const unsigned short* __restrict__ dout,
                                                 const float* __restrict__ lse, const float* __restrict__ dsum,
                                                 unsigned short* __restrict__ dk, unsigned short* __restrict__ dv, int L, int S,
                                                 long long qs, long long ks, long long vs, long long dos, float scale_log2,
                                                 float scale) {
    constexpr int EP = (E + 15) / 16 * 16, EVP = (EV + 15) / 16 * 16;
    constexpr int QW = EP + 8, VW = EVP + 8, NS = BN / 8;
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    unsigned short* sK = fb_attn_smem;
    unsigned short* sV = sK + 64 * QW;
    unsigned short* sQ = sV + 64 * VW;  // two buffers of BN queries
    unsigned short* sO = sQ + 2 * BN * QW;  // dO, two buffers
    float* sL = reinterpret_cast<float*>(sO + 2 * BN * VW);  // two buffers of BN
    float* sD = sL + 2 * BN;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int k0 = blockIdx.x * 64;
    const int first = CAUSAL ? k0 / BN : 0;
    const int ntiles = (L + BN - 1) / BN - first;

    fb_attn_tile<64, E, EP, QW, 128>(sK, k + (long long)k0 * ks, ks, S - k0);
    fb_attn_tile<64, EV, EVP, VW, 128>(sV, v + (long long)k0 * vs, vs, S - k0);
    auto load = [&](int i, int b) {
        const int qi = (first + i) * BN;
        fb_attn_tile<BN, E, EP, QW, 128>(sQ + b * BN * QW, q + (long long)qi * qs, qs, L - qi);
        fb_attn_tile<BN, EV, EVP, VW, 128>(sO + b * BN * VW, dout + (long long)qi * dos, dos, L - qi);
        fb_attn_commit();
        for (int r = threadIdx.x; r < BN; r += 128) {
            sL[b * BN + r] = qi + r < L ? lse[qi + r] * 1.4426950408889634f : 0.f;
            sD[b * BN + r] = qi + r < L ? dsum[qi + r] : 0.f;
        }
    };
    if (ntiles > 0) load(0, 0);
    fb_attn_wait<0>();
    __syncthreads();

    const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0, key0 + 8
    float ak[EP / 8][4], av[EVP / 8][4];
#pragma unroll
    for (int n = 0; n < EP / 8; ++n) ak[n][0] = ak[n][1] = ak[n][2] = ak[n][3] = 0.f;
#pragma unroll
    for (int n = 0; n < EVP / 8; ++n) av[n][0] = av[n][1] = av[n][2] = av[n][3] = 0.f;

    for (int i = 0; i < ntiles; ++i) {
        const int b = i & 1, qi = (first + i) * BN;
        const unsigned short* cQ = sQ + b * BN * QW;
        const unsigned short* cO = sO + b * BN * VW;
        const float* cL = sL + b * BN;
        const float* cD = sD + b * BN;
        if (i + 1 < ntiles) load(i + 1, b ^ 1);
        // S^T = K Q^T and dP^T = V dO^T: rows are this warp's keys.
        float s[NS][4], dp[NS][4];
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
        fb_attn_abt<BF16, EP, NS>(s, [&](int kk, unsigned* a) { fb_attn_a(a, sK, QW, warp * 16, kk * 16); }, cQ, QW);
        fb_attn_abt<BF16, EVP, NS>(dp, [&](int kk, unsigned* a) { fb_attn_a(a, sV, VW, warp * 16, kk * 16); }, cO, VW);
        // P^T from the queries' log-sum-exp (columns), dS^T = P^T (dP^T - D).
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int c = n * 8 + 2 * t + (e & 1), col = qi + c, key = key0 + 8 * (e >> 1);
                const bool off = col >= L || key >= S || (CAUSAL && col < key);
                const float p = off ? 0.f : fb_attn_ex2(s[n][e] * scale_log2 - cL[c]);
                s[n][e] = p;
                dp[n][e] = p * (dp[n][e] - cD[c]);
            }
        // dV += P^T dO and dK += dS^T Q: the queries are the reduced dim.
#pragma unroll
        for (int kk = 0; kk < NS / 2; ++kk) {
            unsigned pa[4], da[4];
            fb_attn_c2a<BF16>(pa, s[2 * kk], s[2 * kk + 1]);
            fb_attn_c2a<BF16>(da, dp[2 * kk], dp[2 * kk + 1]);
            fb_attn_ab<BF16, EVP>(av, pa, cO, VW, kk * 16);
            fb_attn_ab<BF16, EP>(ak, da, cQ, QW, kk * 16);
        }
        if (i + 1 < ntiles) {
            fb_attn_wait<0>();
            __syncthreads();
        }
    }
    fb_attn_store<BF16, E, EP>(dk, ak, key0, S, scale);
    fb_attn_store<BF16, EV, EVP>(dv, av, key0, S, 1.f);
}
