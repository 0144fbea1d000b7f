// fusebench device prelude, its core (every module): storage conversions for
// reduced floats and the block reductions, written here so that no toolkit
// header is needed. The other sections of prelude/ come where a kernel names
// them (prelude.rs).
typedef unsigned short fb_bf16;
typedef unsigned short fb_f16;

__device__ __forceinline__ float fb_bf2f(fb_bf16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ fb_bf16 fb_f2bf(float f) {
    fb_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float fb_h2f(fb_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ fb_f16 fb_f2h(float f) {
    fb_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
// Two floats to a pair of reduced floats in one conversion (the low lane
// first in memory): conversions share a quarter-rate pipe with exp and
// division, and a store of 8 bf16 took 8 of them.
__device__ __forceinline__ unsigned fb_f2bf2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ unsigned fb_f2h2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// The compiler must take these registers as changed here (an empty asm that
// reads and writes them): a 16-bit row held as loaded is converted again in
// each pass after it, not kept converted to floats (Lowerer::repack).
__device__ __forceinline__ void fb_keep(unsigned int& x) { asm volatile("" : "+r"(x)); }
__device__ __forceinline__ void fb_keep(uint2& x) { asm volatile("" : "+r"(x.x), "+r"(x.y)); }
__device__ __forceinline__ void fb_keep(uint4& x) { asm volatile("" : "+r"(x.x), "+r"(x.y), "+r"(x.z), "+r"(x.w)); }
// Round a float to the nearest value the reduced type can hold.
__device__ __forceinline__ float fb_rbf(float f) { return fb_bf2f(fb_f2bf(f)); }
__device__ __forceinline__ float fb_rh(float f) { return fb_h2f(fb_f2h(f)); }
// 16 bytes (fb_copy4: 4) from global to shared memory without passing through
// registers (cp.async on sm_80 and later); fb_copy_wait waits for this thread's copies,
// and a __syncthreads after it makes every thread's copies visible.
__device__ __forceinline__ void fb_copy16(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem));
#else
    *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void fb_copy4(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem));
#else
    *reinterpret_cast<unsigned*>(smem) = *reinterpret_cast<const unsigned*>(gmem);
#endif
}
__device__ __forceinline__ void fb_copy_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// The reciprocal of a count (a positive integer) with no branch: the fast approximation
// refined by one Newton step. An IEEE division's slow-path call in a Welford loop kept
// the loop's loads from issuing together (one load in flight per step).
__device__ __forceinline__ float fb_rcp_count(float n) { const float r = __fdividef(1.0f, n); return fmaf(r, fmaf(-n, r, 1.0f), r); }
__device__ __forceinline__ double fb_rcp_count(double n) { return 1.0 / n; }
// Double to reduced float without double rounding: round to odd in f32 first.
__device__ __forceinline__ float fb_d2f_odd(double d) {
    float f;
    asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(d));
    if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
// Float to integer (C leaves NaN and out-of-range values undefined, and the
// hardware's answer differs by width): truncate toward zero, saturate at the
// type's limits, NaN gives 0 -- the rule the CPU reference follows too
// (docs/fuzzing.md, "Float to integer").
#define FB_F2I(NAME, T, LO, HI, LOF, HIF) \
    __device__ __forceinline__ T NAME(double x) { \
        return x != x ? (T)0 : x <= (double)(LOF) ? (T)(LO) : x >= (double)(HIF) ? (T)(HI) : (T)x; } \
    __device__ __forceinline__ T NAME(float x) { \
        return x != x ? (T)0 : x <= (float)(LOF) ? (T)(LO) : x >= (float)(HIF) ? (T)(HI) : (T)x; }
FB_F2I(fb_f2i32, int, -2147483647 - 1, 2147483647, -2147483648.0, 2147483648.0)
FB_F2I(fb_f2i64, long long, -9223372036854775807LL - 1, 9223372036854775807LL, -9223372036854775808.0, 9223372036854775808.0)
FB_F2I(fb_f2u64, unsigned long long, 0ULL, 18446744073709551615ULL, 0.0, 18446744073709551616.0)
// NaN-propagating max/min, as PyTorch and nvFuser define them. sm_80 and
// later do it in one instruction (max.NaN); the C form is three dependent
// ones, and a row's maximum chains them element after element (H200, 61 row
// reductions: 0.982 of the C form, cross-entropy and softmax 0.87-0.95).
#if __CUDA_ARCH__ >= 800
#define FB_NAN_MINMAX(name, op, cmp) __device__ __forceinline__ float name(float a, float b) { \
    float r; asm(op ".NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#else
#define FB_NAN_MINMAX(name, op, cmp) __device__ __forceinline__ float name(float a, float b) { \
    return (a != a || a cmp b) ? a : ((b != b) ? b : (a cmp b ? a : b)); }
#endif
FB_NAN_MINMAX(fb_maxf, "max", >)
FB_NAN_MINMAX(fb_minf, "min", <)
__device__ __forceinline__ double fb_maxd(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double fb_mind(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ float fb_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double fb_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }

template <typename T> __device__ __forceinline__ T fb_shfl_xor(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }

// Reduces over the block, or over each group of `gw` consecutive warps when a
// block holds several rows (row-wise schedule); a group of one warp needs no
// shared memory. Every lane of every warp must call it (full-mask shuffles):
// idle lanes pass the identity.
#define FB_DEFINE_BLOCK_REDUCE(NAME, T, OP)                                        \
    __device__ __forceinline__ T NAME(T v, T* smem, int gw = 32) {                 \
        for (int m = 16; m > 0; m >>= 1) v = OP(v, fb_shfl_xor(v, m));             \
        if (gw == 1) return v;                                                     \
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;                \
        const int warps = (blockDim.x + 31) >> 5;                                  \
        const int first = warp / gw * gw, end = first + gw < warps ? first + gw : warps; \
        __syncthreads();                                                           \
        if (lane == 0) smem[warp] = v;                                             \
        __syncthreads();                                                           \
        v = smem[first];                                                           \
        for (int w = first + 1; w < end; ++w) v = OP(v, smem[w]);                  \
        return v;                                                                  \
    }
#define FB_ADD(a, b) ((a) + (b))
FB_DEFINE_BLOCK_REDUCE(fb_block_sum_f, float, FB_ADD)
// Two float sums over the block (or group of `gw` warps) at once, each added
// in the same order as fb_block_sum_f adds it, with one pair of barriers for
// both: a backward LayerNorm's two row sums, or two rows' sums.
__device__ __forceinline__ void fb_block_sum2_f(float& a, float& b, float2* smem, int gw = 32) {
    for (int m = 16; m > 0; m >>= 1) { a += fb_shfl_xor(a, m); b += fb_shfl_xor(b, m); }
    if (gw == 1) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int warps = (blockDim.x + 31) >> 5;
    const int first = warp / gw * gw, end = first + gw < warps ? first + gw : warps;
    __syncthreads();
    if (lane == 0) smem[warp] = make_float2(a, b);
    __syncthreads();
    float2 v = smem[first];
    for (int w = first + 1; w < end; ++w) { const float2 t = smem[w]; v.x += t.x; v.y += t.y; }
    a = v.x;
    b = v.y;
}
FB_DEFINE_BLOCK_REDUCE(fb_block_sum_d, double, FB_ADD)
FB_DEFINE_BLOCK_REDUCE(fb_block_sum_i, long long, FB_ADD)
FB_DEFINE_BLOCK_REDUCE(fb_block_max_f, float, fb_maxf)
FB_DEFINE_BLOCK_REDUCE(fb_block_min_f, float, fb_minf)
FB_DEFINE_BLOCK_REDUCE(fb_block_max_d, double, fb_maxd)
FB_DEFINE_BLOCK_REDUCE(fb_block_min_d, double, fb_mind)
__device__ __forceinline__ long long fb_maxi(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long fb_mini(long long a, long long b) { return a < b ? a : b; }
FB_DEFINE_BLOCK_REDUCE(fb_block_max_i, long long, fb_maxi)
FB_DEFINE_BLOCK_REDUCE(fb_block_min_i, long long, fb_mini)
#define FB_MUL(a, b) ((a) * (b))
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_f, float, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_d, double, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_i, long long, FB_MUL)
