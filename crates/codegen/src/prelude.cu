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
// Round a float to the nearest value the reduced type can hold.
__device__ __forceinline__ float fb_rbf(float f) { return fb_bf2f(fb_f2bf(f)); }
__device__ __forceinline__ float fb_rh(float f) { return fb_h2f(fb_f2h(f)); }
// 16 bytes from global to shared memory without passing through registers
// (cp.async on sm_80 and later); fb_copy_wait waits for this thread's copies,
// and a __syncthreads after it makes every thread's copies visible.
__device__ __forceinline__ void fb_copy16(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem));
#else
    *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void fb_copy_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
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
// lgamma next to its roots 1 and 2, where CUDA's lgamma/lgammaf are tens of
// ulps off (fuzz seed 1 fusions 290, 4840): the Taylor series of lgamma(2 + z),
// (1 - euler) z + sum_k (-1)^k (zeta(k) - 1) / k z^k, for |z| <= 1/4, and
// lgamma(x) = lgamma(x + 1) - log1p(x - 1) next to 1. Elsewhere CUDA's lgamma.
__device__ double fb_lgamma2(double z) {
    const double c[30] = {
        0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986, 0.0028905103307415234,
        -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939, 9.945751278180853e-05, -4.492623673813314e-05,
        2.050721277567069e-05, -9.439488275268397e-06, 4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07,
        -4.492469198764566e-07, 2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
        1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09, 5.731367241678862e-10,
        -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11, 3.1044247747322276e-11, -1.5021384080754142e-11,
    };
    double s = 0.0;
    for (int k = 29; k >= 0; --k) s = fma(s, z, c[k]);
    return fma(s, z * z, 0.42278433509846713 * z);
}
__device__ double fb_lgamma(double x) {
    if (x >= 1.75 && x <= 2.25) return fb_lgamma2(x - 2.0);
    if (x >= 0.75 && x <= 1.25) return fb_lgamma2(x - 1.0) - log1p(x - 1.0);
    return lgamma(x);
}
// float8 storage: one byte each, converted bit by bit (no fp8 headers needed).
// To float8: round to nearest even, saturating to the largest finite value
// (as nvFuser's cvt.rn.satfinite does); NaN stays NaN.
__device__ __forceinline__ float fb_e4m3_to_f(unsigned char b) {
    const unsigned s = (unsigned)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return __uint_as_float(0x7fffffffu);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
    return __uint_as_float(s | ((e + 120) << 23) | (m << 20));
}
__device__ __forceinline__ unsigned char fb_f_to_e4m3(float f) {
    const unsigned char s = (__float_as_uint(f) >> 24) & 0x80;
    if (f != f) return 0x7f;
    const float a = fabsf(f);
    if (a >= 448.0f) return s | 0x7e;
    if (a < 0.015625f) return s | (unsigned char)rintf(a * 512.0f);
    unsigned v = __float_as_uint(a);
    v += 0x7ffffu + ((v >> 20) & 1u);
    const int e = (int)(v >> 23) - 120;
    const unsigned m = (v >> 20) & 7u;
    if (e > 15 || (e == 15 && m == 7)) return s | 0x7e;
    return s | (unsigned char)((e << 3) | m);
}
__device__ __forceinline__ float fb_e5m2_to_f(unsigned char b) {
    const unsigned s = (unsigned)(b & 0x80) << 24, e = (b >> 2) & 31, m = b & 3;
    if (e == 31) return __uint_as_float(m == 0 ? (s | 0x7f800000u) : 0x7fffffffu);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 1.52587890625e-05f));
    return __uint_as_float(s | ((e + 112) << 23) | (m << 21));
}
__device__ __forceinline__ unsigned char fb_f_to_e5m2(float f) {
    const unsigned char s = (__float_as_uint(f) >> 24) & 0x80;
    if (f != f) return 0x7f;
    const float a = fabsf(f);
    if (a >= 57344.0f) return s | 0x7b;
    if (a < 6.103515625e-05f) return s | (unsigned char)rintf(a * 65536.0f);
    unsigned v = __float_as_uint(a);
    v += 0xfffffu + ((v >> 21) & 1u);
    const int e = (int)(v >> 23) - 112;
    const unsigned m = (v >> 21) & 3u;
    if (e > 30) return s | 0x7b;
    return s | (unsigned char)((e << 2) | m);
}
// Storing an e5m2 register: an infinity there is a copied e5m2 element (a
// conversion rounds first, saturating), kept as nvFuser's set keeps it.
__device__ __forceinline__ unsigned char fb_store_e5m2(float f) {
    return isinf(f) ? (unsigned char)(f < 0.0f ? 0xfc : 0x7c) : fb_f_to_e5m2(f);
}
// e8m0: a biased exponent only (2^(b-127), 255 is NaN), converted as
// PyTorch's fp8e8m0fnu_from_fp32_value: sign ignored, 1.5 * 2^k rounds up.
__device__ __forceinline__ float fb_e8m0_to_f(unsigned char b) {
    if (b == 255) return __uint_as_float(0x7fffffffu);
    if (b == 0) return __uint_as_float(0x00400000u);
    return __uint_as_float((unsigned)b << 23);
}
__device__ __forceinline__ unsigned char fb_f_to_e8m0(float f) {
    const unsigned u = __float_as_uint(f);
    unsigned e = (u >> 23) & 0xffu;
    if (e == 0xffu) return 0xff;
    if ((u & 0x400000u) && ((u & 0x3fffffu) || e > 0)) e += 1;
    return (unsigned char)e;
}
__device__ __forceinline__ float fb_re4m3(float f) { return fb_e4m3_to_f(fb_f_to_e4m3(f)); }
__device__ __forceinline__ float fb_re5m2(float f) { return fb_e5m2_to_f(fb_f_to_e5m2(f)); }
__device__ __forceinline__ float fb_re8m0(float f) { return fb_e8m0_to_f(fb_f_to_e8m0(f)); }

// Complex values: two parts, laid out as PyTorch stores them. fb_cf
// arithmetic and functions compute in double and round each part once to
// float, as the CPU reference does (float steps would drift from it: a
// product's cancellation alone costs ulps that a later double op keeps).
// The functions follow nvFuser's (libc++'s) formulas; fusebench's
// ir/complex_math.rs is the same math on the CPU.
struct __align__(8) fb_cf { float re, im; fb_cf() = default; __device__ __forceinline__ fb_cf(float r, float i) : re(r), im(i) {} };
struct __align__(16) fb_cd { double re, im; fb_cd() = default; __device__ __forceinline__ fb_cd(double r, double i) : re(r), im(i) {} };
__device__ __forceinline__ fb_cd fb_tocd(fb_cf a) { return fb_cd(a.re, a.im); }
__device__ __forceinline__ fb_cf fb_tocf(fb_cd a) { return fb_cf((float)a.re, (float)a.im); }
__device__ __forceinline__ fb_cd operator+(fb_cd a, fb_cd b) { return fb_cd(a.re + b.re, a.im + b.im); }
__device__ __forceinline__ fb_cd operator-(fb_cd a, fb_cd b) { return fb_cd(a.re - b.re, a.im - b.im); }
__device__ __forceinline__ fb_cd operator-(fb_cd a) { return fb_cd(-a.re, -a.im); }
__device__ __forceinline__ fb_cd operator*(fb_cd a, fb_cd b) {
    return fb_cd(__dsub_rn(__dmul_rn(a.re, b.re), __dmul_rn(a.im, b.im)), __dadd_rn(__dmul_rn(a.re, b.im), __dmul_rn(a.im, b.re)));
}
__device__ __forceinline__ fb_cd operator/(fb_cd a, fb_cd b) {
    const double d = __dadd_rn(__dmul_rn(b.re, b.re), __dmul_rn(b.im, b.im));
    return fb_cd(__dadd_rn(__dmul_rn(a.re, b.re), __dmul_rn(a.im, b.im)) / d, __dsub_rn(__dmul_rn(a.im, b.re), __dmul_rn(a.re, b.im)) / d);
}
__device__ __forceinline__ fb_cf operator+(fb_cf a, fb_cf b) { return fb_tocf(fb_tocd(a) + fb_tocd(b)); }
__device__ __forceinline__ fb_cf operator-(fb_cf a, fb_cf b) { return fb_tocf(fb_tocd(a) - fb_tocd(b)); }
__device__ __forceinline__ fb_cf operator-(fb_cf a) { return fb_cf(-a.re, -a.im); }
__device__ __forceinline__ fb_cf operator*(fb_cf a, fb_cf b) { return fb_tocf(fb_tocd(a) * fb_tocd(b)); }
__device__ __forceinline__ fb_cf operator/(fb_cf a, fb_cf b) { return fb_tocf(fb_tocd(a) / fb_tocd(b)); }
__device__ __forceinline__ bool operator==(fb_cd a, fb_cd b) { return a.re == b.re && a.im == b.im; }
__device__ __forceinline__ bool operator!=(fb_cd a, fb_cd b) { return a.re != b.re || a.im != b.im; }
__device__ __forceinline__ bool operator==(fb_cf a, fb_cf b) { return a.re == b.re && a.im == b.im; }
__device__ __forceinline__ bool operator!=(fb_cf a, fb_cf b) { return a.re != b.re || a.im != b.im; }
__device__ __forceinline__ double fb_cabs(fb_cd a) { return hypot(a.re, a.im); }
__device__ __forceinline__ float fb_cabs(fb_cf a) { return (float)hypot((double)a.re, (double)a.im); }
// nvFuser's complex converts to bool (either part nonzero): the ops with no
// complex overload run their integer form on it.
__device__ __forceinline__ long long fb_cbool(fb_cd a) { return (a.re != 0.0 || a.im != 0.0) ? 1LL : 0LL; }
__device__ __forceinline__ long long fb_cbool(fb_cf a) { return (a.re != 0.0f || a.im != 0.0f) ? 1LL : 0LL; }
__device__ __forceinline__ fb_cd fb_c_exp(fb_cd z) {
    if (z.im == 0.0) return fb_cd(exp(z.re), z.im);
    const double e = exp(z.re);
    return fb_cd(e * cos(z.im), e * sin(z.im));
}
__device__ __forceinline__ fb_cd fb_c_log(fb_cd z) { return fb_cd(log(hypot(z.re, z.im)), atan2(z.im, z.re)); }
__device__ __forceinline__ fb_cd fb_c_sqrt(fb_cd z) {
    if (isinf(z.im)) return fb_cd(__longlong_as_double(0x7ff0000000000000LL), z.im);
    const double r = sqrt(hypot(z.re, z.im)), t = atan2(z.im, z.re) / 2.0;
    return fb_cd(r * cos(t), r * sin(t));
}
__device__ __forceinline__ fb_cd fb_c_mul_i(fb_cd z) { return fb_cd(-z.im, z.re); }
__device__ __forceinline__ fb_cd fb_c_mul_minus_i(fb_cd z) { return fb_cd(z.im, -z.re); }
__device__ __forceinline__ fb_cd fb_c_sqr(fb_cd z) { return fb_cd((z.re - z.im) * (z.re + z.im), 2.0 * z.re * z.im); }
__device__ __forceinline__ fb_cd fb_c_sinh(fb_cd z) { return fb_cd(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im)); }
__device__ __forceinline__ fb_cd fb_c_cosh(fb_cd z) {
    if (z.re == 0.0 && z.im == 0.0) return fb_cd(1.0, z.im);
    return fb_cd(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im));
}
__device__ __forceinline__ fb_cd fb_c_tanh(fb_cd z) {
    if (isinf(z.re)) return fb_cd(copysign(1.0, z.re), copysign(0.0, sin(2.0 * z.im)));
    const double r2 = 2.0 * z.re, i2 = 2.0 * z.im, d = cosh(r2) + cos(i2), s = sinh(r2);
    if (isinf(s) && isinf(d)) return fb_cd(s > 0.0 ? 1.0 : -1.0, i2 > 0.0 ? 0.0 : -0.0);
    return fb_cd(s / d, sin(i2) / d);
}
__device__ __forceinline__ fb_cd fb_c_asinh(fb_cd z) {
    const fb_cd w = fb_c_log(z + fb_c_sqrt(fb_c_sqr(z) + fb_cd(1.0, 0.0)));
    return fb_cd(copysign(w.re, z.re), copysign(w.im, z.im));
}
__device__ __forceinline__ fb_cd fb_c_acosh(fb_cd z) {
    const fb_cd w = fb_c_log(z + fb_c_sqrt(fb_c_sqr(z) - fb_cd(1.0, 0.0)));
    return fb_cd(fabs(w.re), copysign(w.im, z.im));
}
__device__ __forceinline__ fb_cd fb_c_acos(fb_cd z) {
    if (z.re == 0.0 && (z.im == 0.0 || isnan(z.im))) return fb_cd(1.5707963267948966, -z.im);
    const fb_cd w = fb_c_log(z + fb_c_sqrt(fb_c_sqr(z) - fb_cd(1.0, 0.0)));
    return signbit(z.im) ? fb_cd(fabs(w.im), fabs(w.re)) : fb_cd(fabs(w.im), -fabs(w.re));
}
__device__ __forceinline__ fb_cd fb_c_atanh(fb_cd z) {
    if (fabs(z.re) == 1.0 && z.im == 0.0) return fb_cd(copysign(__longlong_as_double(0x7ff0000000000000LL), z.re), copysign(0.0, z.im));
    const fb_cd w = fb_c_log((fb_cd(1.0, 0.0) + z) / (fb_cd(1.0, 0.0) - z));
    return fb_cd(copysign(w.re / 2.0, z.re), copysign(w.im / 2.0, z.im));
}
__device__ __forceinline__ fb_cd fb_c_sin(fb_cd z) { return fb_c_mul_minus_i(fb_c_sinh(fb_c_mul_i(z))); }
__device__ __forceinline__ fb_cd fb_c_cos(fb_cd z) { return fb_c_cosh(fb_c_mul_i(z)); }
__device__ __forceinline__ fb_cd fb_c_tan(fb_cd z) { return fb_c_mul_minus_i(fb_c_tanh(fb_c_mul_i(z))); }
__device__ __forceinline__ fb_cd fb_c_asin(fb_cd z) { return fb_c_mul_minus_i(fb_c_asinh(fb_c_mul_i(z))); }
__device__ __forceinline__ fb_cd fb_c_atan(fb_cd z) { return fb_c_mul_minus_i(fb_c_atanh(fb_c_mul_i(z))); }
__device__ __forceinline__ fb_cd fb_c_log10(fb_cd z) { const fb_cd w = fb_c_log(z); return fb_cd(w.re / 2.302585092994046, w.im / 2.302585092994046); }
__device__ __forceinline__ fb_cd fb_c_log2(fb_cd z) { const fb_cd w = fb_c_log(z); return fb_cd(w.re / 0.6931471805599453, w.im / 0.6931471805599453); }
__device__ __forceinline__ fb_cd fb_c_reciprocal(fb_cd z) { return fb_cd(1.0, 0.0) / z; }
__device__ __forceinline__ fb_cd fb_c_rsqrt(fb_cd z) { return fb_cd(1.0, 0.0) / fb_c_sqrt(z); }
__device__ __forceinline__ fb_cd fb_c_sigmoid(fb_cd z) { return fb_cd(1.0, 0.0) / (fb_cd(1.0, 0.0) + fb_c_exp(-z)); }
__device__ __forceinline__ fb_cd fb_c_pow(fb_cd a, fb_cd b) { return fb_c_exp(b * fb_c_log(a)); }
__device__ __forceinline__ fb_cd fb_c_lerp(fb_cd s, fb_cd e, fb_cd w) {
    return hypot(w.re, w.im) < 0.5 ? s + w * (e - s) : e - (e - s) * (fb_cd(1.0, 0.0) - w);
}
__device__ __forceinline__ bool fb_c_isnan(fb_cd z) { return isnan(z.re) || isnan(z.im); }
__device__ __forceinline__ bool fb_c_isinf(fb_cd z) { return isinf(z.re) || isinf(z.im); }
__device__ __forceinline__ bool fb_c_isfinite(fb_cd z) { return isfinite(z.re) && isfinite(z.im); }
__device__ __forceinline__ bool fb_c_isreal(fb_cd z) { return z.im == 0.0; }
__device__ __forceinline__ bool fb_c_isposinf(fb_cd z) { return fb_cbool(z) && fb_c_isinf(z); }
__device__ __forceinline__ bool fb_c_isneginf(fb_cd z) { return false; }
// fb_cf: the double function, each part rounded once.
#define FB_CF_FN(NAME) __device__ __forceinline__ fb_cf NAME(fb_cf z) { return fb_tocf(NAME(fb_tocd(z))); }
#define FB_CF_PRED(NAME) __device__ __forceinline__ bool NAME(fb_cf z) { return NAME(fb_tocd(z)); }
FB_CF_FN(fb_c_exp) FB_CF_FN(fb_c_log) FB_CF_FN(fb_c_sqrt) FB_CF_FN(fb_c_sinh) FB_CF_FN(fb_c_cosh)
FB_CF_FN(fb_c_tanh) FB_CF_FN(fb_c_asinh) FB_CF_FN(fb_c_acosh) FB_CF_FN(fb_c_acos) FB_CF_FN(fb_c_atanh)
FB_CF_FN(fb_c_sin) FB_CF_FN(fb_c_cos) FB_CF_FN(fb_c_tan) FB_CF_FN(fb_c_asin) FB_CF_FN(fb_c_atan)
FB_CF_FN(fb_c_log10) FB_CF_FN(fb_c_log2) FB_CF_FN(fb_c_reciprocal) FB_CF_FN(fb_c_rsqrt) FB_CF_FN(fb_c_sigmoid)
FB_CF_PRED(fb_c_isnan) FB_CF_PRED(fb_c_isinf) FB_CF_PRED(fb_c_isfinite) FB_CF_PRED(fb_c_isreal)
FB_CF_PRED(fb_c_isposinf) FB_CF_PRED(fb_c_isneginf)
__device__ __forceinline__ fb_cf fb_c_pow(fb_cf a, fb_cf b) { return fb_tocf(fb_c_pow(fb_tocd(a), fb_tocd(b))); }
__device__ __forceinline__ fb_cf fb_c_lerp(fb_cf s, fb_cf e, fb_cf w) { return fb_tocf(fb_c_lerp(fb_tocd(s), fb_tocd(e), fb_tocd(w))); }

// NaN-propagating max/min, as PyTorch and nvFuser define them.
__device__ __forceinline__ float fb_maxf(float a, float b) { return (a != a || a > b) ? a : ((b != b) ? b : (a > b ? a : b)); }
__device__ __forceinline__ float fb_minf(float a, float b) { return (a != a || a < b) ? a : ((b != b) ? b : (a < b ? a : b)); }
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

// nvFuser's random numbers (runtime/random_numbers.cu): Philox4x32-10 keyed by the seed, counter
// (offset, subsequence); element i of an op takes subsequence i / m and output i % m (m = 4, or 2 for
// double). Written with nvFuser's expressions so that NVRTC contracts them into the same FMAs.
struct fb_u4 { unsigned v[4]; };
__device__ __forceinline__ fb_u4 fb_philox(unsigned long long seed, unsigned long long sub, unsigned long long off) {
    unsigned c0 = (unsigned)off, c1 = (unsigned)(off >> 32), c2 = (unsigned)sub, c3 = (unsigned)(sub >> 32);
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    #pragma unroll
    for (int r = 0; r < 10; r++) {
        unsigned lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        unsigned lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    fb_u4 o; o.v[0] = c0; o.v[1] = c1; o.v[2] = c2; o.v[3] = c3;
    return o;
}
__device__ __forceinline__ float fb_raw_uniformf(unsigned x) {
    const float scale = (float)(1.0 / (double)(1ll << 32));
    return (float)x * scale + 0.5f * scale;
}
__device__ __forceinline__ float fb_uniformf(unsigned x) { float r = fb_raw_uniformf(x); return r == 1.0f ? 0.0f : r; }
__device__ __forceinline__ double fb_uniformd(unsigned x, unsigned y) {
    const double scale = 1.0 / (double)(1ll << 53);
    const unsigned long long z = (unsigned long long)x ^ ((unsigned long long)y << (53 - 32));
    double r = (double)z * scale + 0.5 * scale;
    return r == 1.0 ? 0.0 : r;
}
// Each Philox block gives four floats: element i is word i % 4 of block i / 4.
// The `_r` forms take the block, so that a thread drawing four consecutive
// elements runs Philox once (codegen's lowerer shares it between lanes).
__device__ __forceinline__ float fb_rng_uniformf_r(fb_u4 r, int c, float from, float to) {
    float range = to - from;
    return from + range * fb_uniformf(r.v[c]);
}
__device__ float fb_rng_uniformf(unsigned long long seed, unsigned long long off, unsigned long long i, float from, float to) {
    return fb_rng_uniformf_r(fb_philox(seed, i / 4, off), (int)(i % 4), from, to);
}
// Half/bfloat16 (held in a float): a value that rounds to `to` becomes `from`.
__device__ __forceinline__ float fb_rng_uniform_reduced_r(fb_u4 r, int c, float from, float to, bool bf) {
    float range = to - from;
    float v = from + range * fb_raw_uniformf(r.v[c]);
    float h = bf ? fb_rbf(v) : fb_rh(v);
    float t = bf ? fb_rbf(to) : fb_rh(to);
    return h == t ? (bf ? fb_rbf(from) : fb_rh(from)) : h;
}
__device__ float fb_rng_uniform_reduced(unsigned long long seed, unsigned long long off, unsigned long long i, float from, float to, bool bf) {
    return fb_rng_uniform_reduced_r(fb_philox(seed, i / 4, off), (int)(i % 4), from, to, bf);
}
__device__ double fb_rng_uniformd(unsigned long long seed, unsigned long long off, unsigned long long i, double from, double to) {
    fb_u4 r = fb_philox(seed, i / 2, off);
    int c = (int)(i % 2);
    double range = to - from;
    return from + range * fb_uniformd(r.v[c * 2], r.v[c * 2 + 1]);
}
// Box-Muller: even outputs take the sine, odd ones the cosine of the pair's angle.
__device__ __forceinline__ float fb_rng_normalf_r(fb_u4 r, int c, float mean, float std) {
    float u = fb_uniformf(r.v[c / 2 * 2]);
    float v = fb_uniformf(r.v[1 + c / 2 * 2]) * 6.2831855f;
    float n = (c % 2 == 0) ? sqrtf(-2.0f * logf(u)) * sinf(v) : sqrtf(-2.0f * logf(u)) * cosf(v);
    return n * std + mean;
}
__device__ float fb_rng_normalf(unsigned long long seed, unsigned long long off, unsigned long long i, float mean, float std) {
    return fb_rng_normalf_r(fb_philox(seed, i / 4, off), (int)(i % 4), mean, std);
}
__device__ double fb_rng_normald(unsigned long long seed, unsigned long long off, unsigned long long i, double mean, double std) {
    fb_u4 r = fb_philox(seed, i / 2, off);
    int c = (int)(i % 2);
    double u = fb_uniformd(r.v[0], r.v[1]);
    double v = fb_uniformd(r.v[2], r.v[3]) * 6.2831853071795860;
    double n = (c % 2 == 0) ? sqrt(-2.0 * log(u)) * sin(v) : sqrt(-2.0 * log(u)) * cos(v);
    return n * std + mean;
}
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
#define FB_MUL(a, b) ((a) * (b))
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_f, float, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_d, double, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_i, long long, FB_MUL)
// Complex products (nvFuser's complex prod: complex multiply, identity 1+0i),
// accumulated in complex double: shuffles move both parts, and the block
// helper keeps its own shared scratch (the caller's real one is ignored).
__device__ __forceinline__ fb_cd fb_shfl_xor(fb_cd v, int m) {
    return fb_cd(__shfl_xor_sync(0xffffffffu, v.re, m), __shfl_xor_sync(0xffffffffu, v.im, m));
}
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_cd_in, fb_cd, FB_MUL)
__device__ __forceinline__ fb_cd fb_block_prod_cd(fb_cd v, const void*, int gw = 32) {
    __shared__ fb_cd s[32];
    return fb_block_prod_cd_in(v, s, gw);
}
