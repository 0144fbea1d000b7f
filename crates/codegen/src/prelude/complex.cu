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
// log(z + sqrt(z^2 +- 1)) up to the signs of its parts (ir/complex_math.rs
// log_root, which says why): z in the first quadrant for plus; for minus
// z - r where z + r cancels; log z + ln 2 past 2^27.
template <bool PLUS>
__device__ __forceinline__ fb_cd fb_c_log_root(fb_cd z) {
    if (PLUS) z = fb_cd(fabs(z.re), fabs(z.im));
    if (fabs(z.re) > 134217728.0 || fabs(z.im) > 134217728.0) {
        const fb_cd l = fb_c_log(z);
        return fb_cd(__dadd_rn(l.re, 0.6931471805599453), l.im);
    }
    const fb_cd q = PLUS ? fb_c_sqr(z) + fb_cd(1.0, 0.0) : fb_c_sqr(z) - fb_cd(1.0, 0.0);
    const fb_cd r = fb_c_sqrt(q);
    const bool cancels = !PLUS && __dadd_rn(__dmul_rn(z.re, r.re), __dmul_rn(z.im, r.im)) < 0.0;
    return fb_c_log(cancels ? z - r : z + r);
}
__device__ __forceinline__ fb_cd fb_c_asinh(fb_cd z) {
    const fb_cd w = fb_c_log_root<true>(z);
    return fb_cd(copysign(w.re, z.re), copysign(w.im, z.im));
}
__device__ __forceinline__ fb_cd fb_c_acosh(fb_cd z) {
    const fb_cd w = fb_c_log_root<false>(z);
    return fb_cd(fabs(w.re), copysign(w.im, z.im));
}
__device__ __forceinline__ fb_cd fb_c_acos(fb_cd z) {
    if (z.re == 0.0 && (z.im == 0.0 || isnan(z.im))) return fb_cd(1.5707963267948966, -z.im);
    const fb_cd w = fb_c_log_root<false>(z);
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
