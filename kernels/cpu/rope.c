/*===- rope.c - rotary position embedding ---------------------------------===*
 *
 * x is viewed as (outer, T, D): the pairs (i, i + D/2) of each row t are
 * rotated by t * theta^(-2i/D), Hugging Face LLaMA's rotate-half convention,
 * the frequencies scaled as its rope_scaling says when factor != 1.
 * The angles' cosines and sines are tabulated once per call ([T, D/2], in
 * double, then rounded), as Hugging Face's rotary embedding caches them;
 * rows then run in parallel and need no transcendental functions.
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"
#include "dtk/rope_scaling.h"

#include <math.h>
#include <stdlib.h>

/* Rows per range: below 2 x this many, one thread does all. */
enum { kRowGrain = 64 };

struct rope_args {
  const float *x;
  float *y;
  const float *cos_t, *sin_t; /* [T, D/2] */
  int64_t rows, t, d;
  float sign; /* 1: rotate by +angle; -1: the inverse */
};

static void rope_rows(void *ctx, int64_t begin, int64_t end) {
  const struct rope_args *a = ctx;
  const int64_t half = a->d / 2;
  for (int64_t r = begin; r < end; ++r) {
    const float *x = a->x + r * a->d; /* (D) */
    float *y = a->y + r * a->d;
    const float *c = a->cos_t + (r % a->t) * half;
    const float *s = a->sin_t + (r % a->t) * half;
    for (int64_t i = 0; i < half; ++i) {
      float lo = x[i], hi = x[i + half], sn = a->sign * s[i];
      y[i] = lo * c[i] - hi * sn;
      y[i + half] = hi * c[i] + lo * sn;
    }
  }
}

void dtk_rope_f32(const float *x, float *y, int64_t outer, int64_t t,
                  int64_t d, float theta, float factor, float low_freq_factor,
                  float high_freq_factor, float original, int32_t inverse) {
  const int64_t half = d / 2;
  float *table = malloc((size_t)(t * half > 0 ? 2 * t * half : 1) *
                        sizeof(float));
  if (!table)
    dtk_fail("out of memory for the rotary embedding's angles");
  float *cos_t = table, *sin_t = table + t * half;
  for (int64_t i = 0; i < half; ++i) {
    /* Hugging Face's inv_freq, 1 / theta^(2i/D), in float as it computes it */
    double base = 1.0 / pow((double)theta, (double)(2 * i) / d);
    float inv_freq = (float)dtk_rope_scaled(base, factor, low_freq_factor,
                                            high_freq_factor, original);
    for (int64_t p = 0; p < t; ++p) {
      double angle = (double)((float)p * inv_freq);
      cos_t[p * half + i] = (float)cos(angle);
      sin_t[p * half + i] = (float)sin(angle);
    }
  }
  struct rope_args a = {x,     y,     cos_t, sin_t,
                        outer * t, t, d, inverse ? -1.0f : 1.0f};
  dtk_parallel_for(outer * t, kRowGrain, rope_rows, &a);
  free(table);
}
