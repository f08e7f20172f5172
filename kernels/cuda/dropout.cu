//===- dropout.cu - inverted dropout with layout-independent masks --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_dropout_f32 on the GPU: the same Philox draws (dtk/philox.h, compiled
// for the device too) from the same global indices, so a GPU run keeps and
// drops exactly the elements a CPU run does, and its results are the CPU's
// bits. What the CPU kernel takes as values computed by the generated code
// (the step, the micro-batch, where a rank's block starts) live in the arena
// here, so the kernel reads them there: the launch is the same every step.
// A thread draws for its own element; draws come four to a Philox call, so
// neighbours repeat a call, which costs arithmetic only (the kernel is bound
// by memory on large tensors).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"
#include "dtk/philox.h"

namespace {

constexpr int kThreads = 256;

struct DropoutArgs {
  const float *x;
  float *y;
  const int64_t *step, *micro;
  const int64_t *firsts[4]; // null: none
  int64_t n[4], s[4], firstStride[4];
  int64_t elements; // of the whole tensor, a micro-batch's
  uint64_t seed;
  uint32_t site, threshold;
  float scale;
};

__global__ void dropout(DropoutArgs a) {
  int64_t total = a.n[0] * a.n[1] * a.n[2] * a.n[3];
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total)
    return;
  int64_t base = *a.micro * a.elements;
  for (int i = 0; i < 4; ++i)
    if (a.firsts[i])
      base += *a.firsts[i] * a.firstStride[i];
  int64_t j = k % a.n[3], o = k / a.n[3];
  int64_t i2 = o % a.n[2], i1 = (o / a.n[2]) % a.n[1],
          i0 = o / (a.n[1] * a.n[2]);
  uint64_t g =
      uint64_t(base + i0 * a.s[0] + i1 * a.s[1] + i2 * a.s[2] + j * a.s[3]);
  uint32_t draws[4];
  dtk_dropout_draws(a.seed, a.site, uint64_t(*a.step), g >> 2, draws);
  a.y[k] = draws[g & 3] >= a.threshold ? a.x[k] * a.scale : 0.0f;
}

} // namespace

extern "C" void dtk_cuda_dropout_f32(
    const float *x, float *y, const int64_t *step, const int64_t *micro,
    const int64_t *first0, const int64_t *first1, const int64_t *first2,
    const int64_t *first3, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
    int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t elements,
    int64_t f0, int64_t f1, int64_t f2, int64_t f3, int64_t seed, int64_t site,
    float p, dtk_stream stream) {
  int64_t total = n0 * n1 * n2 * n3;
  if (total == 0)
    return;
  DropoutArgs a = {x,
                   y,
                   step,
                   micro,
                   {first0, first1, first2, first3},
                   {n0, n1, n2, n3},
                   {s0, s1, s2, s3},
                   {f0, f1, f2, f3},
                   elements,
                   uint64_t(seed),
                   uint32_t(site),
                   dtk_dropout_threshold(p),
                   1.0f / (1.0f - p)};
  dropout<<<unsigned((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      a);
}
