/*===- softmax.c - softmax along one axis ---------------------------------===*
 *
 * x is viewed as (outer, n, inner) and normalised along n; the maximum is
 *subtracted first so that exp never overflows.
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include <math.h>

void dtk_softmax_f32(const float *x, float *y, int64_t outer, int64_t n,
                     int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *xs = x + o * n * inner + i; /* (n) with stride inner */
      float *ys = y + o * n * inner + i;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j)
        mx = fmaxf(mx, xs[j * inner]);
      /* Summed in double: in float, 50257 terms (a vocabulary) in a row lose
       * 6e-5 of the sum, which every output inherits. */
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        float e = expf(xs[j * inner] - mx);
        ys[j * inner] = e;
        sum += e;
      }
      float inv = (float)(1.0 / sum);
      for (int64_t j = 0; j < n; ++j)
        ys[j * inner] *= inv;
    }
}
