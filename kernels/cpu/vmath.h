/*===- vmath.h - eight-float vectors and a vectorised exp -----------------===*
 *
 * The kernels' own vectors, GCC/Clang vector extensions of eight floats: one
 * AVX2 register where the machine has one, plain arithmetic elsewhere, so the
 * kernels stay portable C. dtk_exp8 is exp over eight lanes: without it every
 * softmax would make one libm call per element (expf was 7 % of gpt_tiny's
 * profile before this header).
 *
 * dtk_exp8 follows the classic range reduction: x = n ln2 + r with
 * |r| <= ln2 / 2, exp(r) by a degree-6 polynomial (Cephes' expf
 * coefficients), and 2^n put straight into the exponent bits. Its error is
 * under 1 ulp over the normal range; below -87.3 (where expf is subnormal) it
 * returns 0, so exp(-inf), a masked score, is exactly 0; above 88.37 it
 * returns exp(88.37); NaN stays NaN, so a diverged run still shows.
 *
 *===----------------------------------------------------------------------===*/

#ifndef DTK_CPU_VMATH_H
#define DTK_CPU_VMATH_H

#include <stdint.h>

typedef float dtk_v8 __attribute__((vector_size(32), may_alias));
typedef int32_t dtk_v8i __attribute__((vector_size(32), may_alias));
/* The same vector at any float's address (rows of a caller's tensor). */
typedef float dtk_v8u __attribute__((vector_size(32), may_alias, aligned(4)));
/* Four floats at any float's address, and four doubles: sums of floats that
 * accumulate in double (layer norm's statistics) take four lanes at a time. */
typedef float dtk_v4u __attribute__((vector_size(16), may_alias, aligned(4)));
typedef double dtk_v4d __attribute__((vector_size(32), may_alias));

static inline dtk_v8 dtk_splat8(float x) { return (dtk_v8){0} + x; }

static inline dtk_v8 dtk_load8u(const float *p) { return *(const dtk_v8u *)p; }

static inline void dtk_store8u(float *p, dtk_v8 v) { *(dtk_v8u *)p = v; }

/* Four floats at p, widened to double. */
static inline dtk_v4d dtk_load4d(const float *p) {
  return __builtin_convertvector(*(const dtk_v4u *)p, dtk_v4d);
}

static inline double dtk_hsum4d(dtk_v4d v) { return (v[0] + v[2]) + (v[1] + v[3]); }

static inline dtk_v8 dtk_max8(dtk_v8 a, dtk_v8 b) {
  dtk_v8i gt = a > b;
  return (dtk_v8)((gt & (dtk_v8i)a) | (~gt & (dtk_v8i)b));
}

static inline float dtk_hmax8(dtk_v8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i)
    m = v[i] > m ? v[i] : m;
  return m;
}

static inline float dtk_hsum8(dtk_v8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline dtk_v8 dtk_exp8(dtk_v8 x) {
  const float lo = -87.33654f, hi = 88.37626f;
  dtk_v8 x0 = x;
  dtk_v8i zero = x < lo, nan = x != x;
  x = dtk_max8(x, dtk_splat8(lo));
  x = dtk_max8(dtk_splat8(-hi), -x);
  x = -x; /* x clamped to [lo, hi] */
  /* n = floor(x log2(e) + 1/2), as a float and an integer */
  dtk_v8 t = x * 1.44269504088896341f + 0.5f;
  dtk_v8i ni = __builtin_convertvector(t, dtk_v8i);
  dtk_v8 n = __builtin_convertvector(ni, dtk_v8);
  dtk_v8i above = n > t; /* truncation rounded a negative t up */
  n += __builtin_convertvector(above, dtk_v8);
  ni += above;
  /* r = x - n ln2, ln2 in two parts so the product is exact */
  dtk_v8 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  dtk_v8 p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  dtk_v8 scale = (dtk_v8)((ni + 127) << 23);
  dtk_v8i out = (dtk_v8i)(p * scale) & ~zero;
  return (dtk_v8)((out & ~nan) | ((dtk_v8i)x0 & nan));
}

#endif /* DTK_CPU_VMATH_H */
