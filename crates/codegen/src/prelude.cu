// fusebench device prelude: storage conversions for reduced floats and the
// block reductions, written here so that no toolkit header is needed.
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
// Round a float to the nearest value the reduced type can hold.
__device__ __forceinline__ float fb_rbf(float f) { return fb_bf2f(fb_f2bf(f)); }
__device__ __forceinline__ float fb_rh(float f) { return fb_h2f(fb_f2h(f)); }
// Double to reduced float without double rounding: round to odd in f32 first.
__device__ __forceinline__ float fb_d2f_odd(double d) {
    float f;
    asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(d));
    if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
// NaN-propagating max/min, as PyTorch and nvFuser define them.
__device__ __forceinline__ float fb_maxf(float a, float b) { return (a != a || a > b) ? a : ((b != b) ? b : (a > b ? a : b)); }
__device__ __forceinline__ float fb_minf(float a, float b) { return (a != a || a < b) ? a : ((b != b) ? b : (a < b ? a : b)); }
__device__ __forceinline__ double fb_maxd(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double fb_mind(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ float fb_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double fb_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }

template <typename T> __device__ __forceinline__ T fb_shfl_xor(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }

#define FB_DEFINE_BLOCK_REDUCE(NAME, T, OP)                                        \
    __device__ __forceinline__ T NAME(T v, T* smem) {                              \
        for (int m = 16; m > 0; m >>= 1) v = OP(v, fb_shfl_xor(v, m));             \
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;                \
        const int warps = (blockDim.x + 31) >> 5;                                  \
        __syncthreads();                                                           \
        if (lane == 0) smem[warp] = v;                                             \
        __syncthreads();                                                           \
        v = smem[0];                                                               \
        for (int w = 1; w < warps; ++w) v = OP(v, smem[w]);                        \
        return v;                                                                  \
    }
#define FB_ADD(a, b) ((a) + (b))
FB_DEFINE_BLOCK_REDUCE(fb_block_sum_f, float, FB_ADD)
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

// Helpers of the op table (fusebench_ir::elementwise), with the semantics of
// fusebench_ir::math: integer % by 0 gives 0, shifts by a negative amount or
// the width or more give 0 (<<) or the sign (>>), as on the CPU reference.
__device__ __forceinline__ bool fb_bnot(bool a) { return !a; }
__device__ __forceinline__ int fb_bnot(int a) { return ~a; }
__device__ __forceinline__ long long fb_bnot(long long a) { return ~a; }
// On bools, x / false and x % false are true, as nvFuser's kernels give.
__device__ __forceinline__ bool fb_imod(bool a, bool b) { return !b; }
__device__ __forceinline__ bool fb_iremainder(bool a, bool b) { return !b; }
__device__ __forceinline__ bool fb_idiv(bool a, bool b) { return b ? a : true; }
__device__ __forceinline__ int fb_idiv(int a, int b) { return b == 0 ? 0 : (b == -1 ? (int)(0u - (unsigned)a) : a / b); }
__device__ __forceinline__ long long fb_idiv(long long a, long long b) {
    return b == 0 ? 0LL : (b == -1 ? (long long)(0ull - (unsigned long long)a) : a / b);
}
__device__ __forceinline__ int fb_imod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ long long fb_imod(long long a, long long b) { return (b == 0 || b == -1) ? 0LL : a % b; }
__device__ __forceinline__ int fb_iremainder(int a, int b) {
    int m = fb_imod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
__device__ __forceinline__ long long fb_iremainder(long long a, long long b) {
    long long m = fb_imod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
__device__ __forceinline__ float fb_remf(float a, float b) {
    float m = fmodf(a, b);
    return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
__device__ __forceinline__ double fb_remd(double a, double b) {
    double m = fmod(a, b);
    return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m;
}
// nvFuser's integer pow: negative exponents give 0 except for bases 1 and -1.
template <typename T, typename U> __device__ __forceinline__ T fb_ipow_t(T a, T b) {
    if (b < 0) return a == 1 ? (T)1 : (a == -1 ? ((b % 2) ? (T)-1 : (T)1) : (T)0);
    U r = 1, x = (U)a;
    while (b) { if (b & 1) r *= x; b /= 2; x *= x; }
    return (T)r;
}
__device__ __forceinline__ int fb_ipow(int a, int b) { return fb_ipow_t<int, unsigned>(a, b); }
__device__ __forceinline__ long long fb_ipow(long long a, long long b) { return fb_ipow_t<long long, unsigned long long>(a, b); }
__device__ __forceinline__ bool fb_ipow(bool a, bool b) { return b ? a : true; }
template <typename T, typename U> __device__ __forceinline__ T fb_gcd_t(T a, T b) {
    a = a < 0 ? (T)(0 - (U)a) : a;
    b = b < 0 ? (T)(0 - (U)b) : b;
    while (b != 0) { T t = b; b = (b == -1) ? 0 : a % b; a = t; }
    return a;
}
__device__ __forceinline__ int fb_gcd(int a, int b) { return fb_gcd_t<int, unsigned>(a, b); }
__device__ __forceinline__ long long fb_gcd(long long a, long long b) { return fb_gcd_t<long long, unsigned long long>(a, b); }
__device__ __forceinline__ int fb_shl(int a, int b) { return (b < 0 || b >= 32) ? 0 : (int)((unsigned)a << b); }
__device__ __forceinline__ long long fb_shl(long long a, long long b) {
    return (b < 0 || b >= 64) ? 0LL : (long long)((unsigned long long)a << b);
}
__device__ __forceinline__ int fb_shr(int a, int b) { return (b < 0 || b >= 32) ? (a < 0 ? -1 : 0) : (a >> b); }
__device__ __forceinline__ long long fb_shr(long long a, long long b) {
    return (b < 0 || b >= 64) ? (a < 0 ? -1LL : 0LL) : (a >> b);
}
// nvFuser's logical_right_shift, which it builds from the ops above.
__device__ __forceinline__ int fb_lrshift(int a, int s) {
    int mask = s >= 32 ? -1 : (int)((unsigned)fb_ipow(2, s) - 1u);
    int sm = fb_shl(mask, (int)(32u - (unsigned)s));
    int rs = fb_shr(a, s);
    return a < 0 ? (sm ^ rs) : rs;
}
__device__ __forceinline__ long long fb_lrshift(long long a, long long s) {
    long long mask = s >= 64 ? -1LL : (long long)((unsigned long long)fb_ipow(2LL, s) - 1ull);
    long long sm = fb_shl(mask, (long long)(64ull - (unsigned long long)s));
    long long rs = fb_shr(a, s);
    return a < 0 ? (sm ^ rs) : rs;
}
__device__ __forceinline__ float fb_lerpf(float s, float e, float w) {
    return w < 0.5f ? s + w * (e - s) : e - (e - s) * (1.0f - w);
}
__device__ __forceinline__ double fb_lerpd(double s, double e, double w) {
    return w < 0.5 ? s + w * (e - s) : e - (e - s) * (1.0 - w);
}
__device__ __forceinline__ double fb_clamp(double x, double lo, double hi) { return fb_mind(fb_maxd(x, lo), hi); }
__device__ __forceinline__ long long fb_clampi(long long x, long long lo, long long hi) {
    long long m = x > lo ? x : lo;
    return m < hi ? m : hi;
}
__device__ __forceinline__ double fb_threshold(double x, double t, double v) { return x <= t ? v : x; }
__device__ __forceinline__ long long fb_thresholdi(long long x, long long t, long long v) { return x <= t ? v : x; }
