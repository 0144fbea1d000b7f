// Flash attention forward (sdpfa_fwd, codegen/attention.rs), the scheme of
// FlashAttention-2: a block of WARPS warps takes 16 queries per warp and
// walks the keys BN at a time. Scores, the softmax's running max and sum and
// the output stay in registers; only Q, K and V tiles pass through shared
// memory. Products are mma.sync m16n8k16 on 16-bit operands with f32
// accumulation; P is rounded to the operands' type before P.V, as flash
// attention rounds it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "fusebench's flash attention needs compute capability 8.0 or later (mma.sync on bf16, cp.async)"
#endif

// +infinity, with no toolkit header.
#define FB_ATTN_INF __int_as_float(0x7f800000)

__device__ __forceinline__ void fb_attn_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fb_attn_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// Four 8x8 matrices of 16-bit elements from shared memory; lane l gives the
// address of row l % 8 of matrix l / 8. With `trans` each is read transposed.
__device__ __forceinline__ void fb_ldsm4(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(p)));
}
__device__ __forceinline__ void fb_ldsm4t(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(p)));
}

// d += a.b for a 16x16 A (row-major fragment) and a 16x8 B (column fragment).
template <bool BF16>
__device__ __forceinline__ void fb_mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    if (BF16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// 2^x in one instruction, results below 2^-126 flushed to zero (weights
// that small add nothing to a sum of at least one).
__device__ __forceinline__ float fb_attn_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <bool BF16> __device__ __forceinline__ unsigned fb_attn_pack(float lo, float hi) {
    return BF16 ? fb_f2bf2(lo, hi) : fb_f2h2(lo, hi);
}

// An R-row tile of D columns into shared memory rows of W elements, by T
// threads: rows past `rows` and columns past D (up to DP, a multiple of 16)
// are zeros, so that a padded key's value row cannot turn its zero weight
// into NaN.
template <int R, int D, int DP, int W, int T>
__device__ __forceinline__ void fb_attn_tile(unsigned short* s, const unsigned short* g, long long stride, int rows) {
    constexpr int C = DP / 8;
    for (int i = threadIdx.x; i < R * C; i += T) {
        const int r = i / C, c = i % C;
        unsigned short* dst = s + r * W + c * 8;
        if (r < rows && c * 8 < D) {
            fb_copy16(dst, g + r * stride + c * 8);
        } else {
            *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
    }
}

// One batch row of attention: q [L, E] at row stride qs, k [S, E], v [S, EV],
// o [L, EV] dense, lse [L] (natural log, +inf for a row with no key).
// `scale_log2` is the scores' scale times log2(e): the softmax runs in base 2.
// Each warp takes MT tiles of 16 queries: every K and V fragment read from
// shared memory then feeds MT products (shared memory's bandwidth bounds
// the kernel at one tile). Shared memory: ((BM + BN) * (EP + 8) + BN * (EVP
// + 8)) 16-bit elements, BM = 16 WARPS MT, the rows padded by 8 so that
// ldmatrix's 8 rows fall in distinct banks. POS: the scale is known to be
// positive, so the max of the scaled scores is the scaled max, and scaling
// and subtracting it are one multiply-add.
template <bool BF16, int E, int EV, bool CAUSAL, int WARPS, int BN, int MT, bool POS>
__device__ __forceinline__ void fb_flash_fwd(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                             const unsigned short* __restrict__ v, unsigned short* __restrict__ o,
                                             float* __restrict__ lse, int L, int S, long long qs, long long ks,
                                             long long vs, float scale_log2) {
    constexpr int EP = (E + 15) / 16 * 16, EVP = (EV + 15) / 16 * 16;
    constexpr int QW = EP + 8, VW = EVP + 8;
    constexpr int KQ = EP / 16, NO = EVP / 8, BM = 16 * WARPS * MT, T = 32 * WARPS, NS = BN / 8;
    // Q's fragments stay in registers up to 128 columns of one tile; more,
    // each use reads them again.
    constexpr bool QREG = EP * MT <= 128;
    extern __shared__ __align__(16) unsigned short fb_attn_smem[];
    unsigned short* sQ = fb_attn_smem;
    unsigned short* sK = sQ + BM * QW;
    unsigned short* sV = sK + BN * QW;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    // Causal blocks differ in work: the heaviest (last queries) start first.
    const int qt = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * BM;
    const int kend = CAUSAL ? min(S, q0 + BM) : S;
    const int ntiles = (kend + BN - 1) / BN;

    fb_attn_tile<BM, E, EP, QW, T>(sQ, q + (long long)q0 * qs, qs, L - q0);
    fb_attn_tile<BN, E, EP, QW, T>(sK, k, ks, S);
    fb_attn_commit();
    fb_attn_wait<0>();
    __syncthreads();

    // ldmatrix rows and columns of this lane: A fragments (Q), B fragments
    // of K (read as stored), B fragments of V (read transposed).
    const int w0 = warp * 16 * MT;
    const int ar = w0 + ((lane >> 3) & 1) * 8 + (lane & 7), ac = (lane >> 4) * 8;
    const int kr = (lane >> 4) * 8 + (lane & 7), kc = ((lane >> 3) & 1) * 8;
    const int vr = ((lane >> 3) & 1) * 8 + (lane & 7), vc = (lane >> 4) * 8;
    unsigned qf[QREG ? MT * KQ : 1][4];
    if (QREG) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kk = 0; kk < KQ; ++kk) fb_ldsm4(qf[QREG ? mt * KQ + kk : 0], sQ + (ar + mt * 16) * QW + kk * 16 + ac);
    }

    float m[MT][2], l[MT][2], acc[MT][NO][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        m[mt][0] = m[mt][1] = -FB_ATTN_INF;
        l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
        for (int n = 0; n < NO; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
    }
    // This thread's rows: row0 + 16 mt + 8 h.
    const int row0 = q0 + w0 + g;

    for (int j = 0; j < ntiles; ++j) {
        const int k0 = j * BN;
        if (j > 0) {
            fb_attn_wait<0>();
            __syncthreads();
        }
        fb_attn_tile<BN, EV, EVP, VW, T>(sV, v + (long long)k0 * vs, vs, S - k0);
        fb_attn_commit();

        float s[MT][NS][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < NS; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KQ; ++kk) {
            unsigned qa[QREG ? 1 : MT][4];
            if (!QREG) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) fb_ldsm4(qa[QREG ? 0 : mt], sQ + (ar + mt * 16) * QW + kk * 16 + ac);
            }
#pragma unroll
            for (int np = 0; np < NS / 2; ++np) {
                unsigned b[4];
                fb_ldsm4(b, sK + (np * 16 + kr) * QW + kk * 16 + kc);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const unsigned* a = QREG ? qf[QREG ? mt * KQ + kk : 0] : qa[QREG ? 0 : mt];
                    fb_mma16816<BF16>(s[mt][2 * np], a, b[0], b[1]);
                    fb_mma16816<BF16>(s[mt][2 * np + 1], a, b[2], b[3]);
                }
            }
        }
        __syncthreads();
        if (j + 1 < ntiles) {
            fb_attn_tile<BN, E, EP, QW, T>(sK, k + (long long)(k0 + BN) * ks, ks, S - k0 - BN);
            fb_attn_commit();
        }

        // Keys past the end, and (causal) keys after the query.
        const bool edge = k0 + BN > S || (CAUSAL && k0 + BN - 1 > q0 + w0);
        unsigned pf[MT][NS / 2][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            // Scaled before the max where the scale may be of either sign.
            if (!POS) {
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][n][e] *= scale_log2;
            }
            if (edge) {
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = k0 + n * 8 + 2 * t + (e & 1), row = row0 + mt * 16 + (e >> 1) * 8;
                        if (col >= S || (CAUSAL && col > row)) s[mt][n][e] = -FB_ATTN_INF;
                    }
            }
            // The running max and sum of rows g and g + 8 (the 4 lanes of a
            // quad share a row): what was summed before is rescaled by
            // 2^(old - new).
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = -FB_ATTN_INF;
#pragma unroll
                for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mnew = fmaxf(m[mt][h], POS ? mx * scale_log2 : mx);
                const float mu = mnew == -FB_ATTN_INF ? 0.f : mnew;
                const float alpha = fb_attn_ex2(m[mt][h] - mu);
                m[mt][h] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NS; ++n) {
                    s[mt][n][2 * h] = fb_attn_ex2(POS ? fmaf(s[mt][n][2 * h], scale_log2, -mu) : s[mt][n][2 * h] - mu);
                    s[mt][n][2 * h + 1] = fb_attn_ex2(POS ? fmaf(s[mt][n][2 * h + 1], scale_log2, -mu) : s[mt][n][2 * h + 1] - mu);
                    sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
                }
                l[mt][h] = l[mt][h] * alpha + sum;
#pragma unroll
                for (int n = 0; n < NO; ++n) {
                    acc[mt][n][2 * h] *= alpha;
                    acc[mt][n][2 * h + 1] *= alpha;
                }
            }
            // P's accumulator layout is the A fragment layout of P.V: keys
            // 16kk..16kk+15 are accumulator tiles 2kk and 2kk + 1.
#pragma unroll
            for (int kk = 0; kk < NS / 2; ++kk) {
                pf[mt][kk][0] = fb_attn_pack<BF16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pf[mt][kk][1] = fb_attn_pack<BF16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pf[mt][kk][2] = fb_attn_pack<BF16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pf[mt][kk][3] = fb_attn_pack<BF16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
        }
        // V of this tile is the older of the (at most) two copies in flight.
        if (j + 1 < ntiles) {
            fb_attn_wait<1>();
        } else {
            fb_attn_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
            for (int np = 0; np < EVP / 16; ++np) {
                unsigned b[4];
                fb_ldsm4t(b, sV + (kk * 16 + vr) * VW + np * 16 + vc);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    fb_mma16816<BF16>(acc[mt][2 * np], pf[mt][kk], b[0], b[1]);
                    fb_mma16816<BF16>(acc[mt][2 * np + 1], pf[mt][kk], b[2], b[3]);
                }
            }
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float sum = l[mt][h];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int row = row0 + mt * 16 + h * 8;
            if (row >= L) continue;
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
            for (int n = 0; n < NO; ++n) {
                const int col = n * 8 + 2 * t;
                if (n * 8 < EV) {
                    *reinterpret_cast<unsigned*>(o + (long long)row * EV + col) =
                        fb_attn_pack<BF16>(acc[mt][n][2 * h] * inv, acc[mt][n][2 * h + 1] * inv);
                }
            }
            if (t == 0) lse[row] = sum > 0.f ? (m[mt][h] + log2f(sum)) * 0.6931471805599453f : FB_ATTN_INF;
        }
}
