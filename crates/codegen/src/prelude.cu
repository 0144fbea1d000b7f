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
#define FB_MUL(a, b) ((a) * (b))
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_f, float, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_d, double, FB_MUL)
FB_DEFINE_BLOCK_REDUCE(fb_block_prod_i, long long, FB_MUL)
