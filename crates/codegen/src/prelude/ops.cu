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
// UInt64: unsigned division, powers and shifts, as the CPU reference's u64 lanes.
__device__ __forceinline__ unsigned long long fb_idiv(unsigned long long a, unsigned long long b) { return b == 0 ? 0ull : a / b; }
__device__ __forceinline__ unsigned long long fb_ipow(unsigned long long a, unsigned long long b) {
    unsigned long long r = 1ull;
    if (b > 0xFFFFFFFFull) b = 0xFFFFFFFFull;
    while (b) { if (b & 1ull) r *= a; a *= a; b >>= 1; }
    return r;
}
__device__ __forceinline__ unsigned long long fb_shl(unsigned long long a, unsigned long long b) { return b >= 64 ? 0ull : a << b; }
__device__ __forceinline__ unsigned long long fb_shr(unsigned long long a, unsigned long long b) { return b >= 64 ? 0ull : a >> b; }
__device__ __forceinline__ unsigned long long fb_bnot(unsigned long long a) { return ~a; }
__device__ __forceinline__ unsigned long long fb_imod(unsigned long long a, unsigned long long b) { return b == 0 ? 0ull : a % b; }
__device__ __forceinline__ unsigned long long fb_gcd(unsigned long long a, unsigned long long b) {
    while (b != 0) { unsigned long long t = b; b = a % b; a = t; }
    return a;
}
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
