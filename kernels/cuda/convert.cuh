//===- convert.cuh - 16-bit data as f32 values ------------------*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The _typed kernels read bf16 or f16 data as the f32 values a widening gives
// (exactly) and store f32 values as 16-bit data rounded to nearest, ties to
// even, as a narrowing's conversion does: so a typed kernel computes the bits
// its f32 twin computes between the conversions the GPU plan left out.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_CONVERT_CUH
#define DTK_CUDA_CONVERT_CUH

#include "dtk/cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dtk {

__device__ inline float widen(float v) { return v; }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float widen(__half v) { return __half2float(v); }

template <typename T> __device__ T narrow(float v);
template <> __device__ inline float narrow<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ inline __half narrow<__half>(float v) {
  return __float2half_rn(v);
}

/// Data of a type chosen when the kernel is launched (DTK_CUDA_F32, _BF16,
/// _F16): what a kernel takes instead of a typed pointer where instantiating
/// it for every pairing of its operands' types would multiply its code. One
/// type per launch, so the branch on it is the same for every thread. `x[i]`
/// reads element i as f32, `x + n` is n elements on.
struct AnyData {
  const void *p;
  int type;
  __device__ int size() const { return type == DTK_CUDA_F32 ? 4 : 2; }
  __device__ float operator[](int64_t i) const {
    if (type == DTK_CUDA_BF16)
      return widen(static_cast<const __nv_bfloat16 *>(p)[i]);
    if (type == DTK_CUDA_F16)
      return widen(static_cast<const __half *>(p)[i]);
    return static_cast<const float *>(p)[i];
  }
  __device__ AnyData operator+(int64_t n) const {
    return {static_cast<const char *>(p) + n * size(), type};
  }
};

/// Its writable twin: `put(y, i, v)` stores v as y's type (rounded to
/// nearest).
struct AnyOut {
  void *p;
  int type;
  __device__ AnyOut operator+(int64_t n) const {
    return {static_cast<char *>(p) + n * (type == DTK_CUDA_F32 ? 4 : 2), type};
  }
};

template <typename T> __device__ inline void put(T *p, int64_t i, float v) {
  p[i] = narrow<T>(v);
}
__device__ inline void put(AnyOut p, int64_t i, float v) {
  if (p.type == DTK_CUDA_BF16)
    static_cast<__nv_bfloat16 *>(p.p)[i] = narrow<__nv_bfloat16>(v);
  else if (p.type == DTK_CUDA_F16)
    static_cast<__half *>(p.p)[i] = narrow<__half>(v);
  else
    static_cast<float *>(p.p)[i] = v;
}

} // namespace dtk

#endif // DTK_CUDA_CONVERT_CUH
