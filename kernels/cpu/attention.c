/*===- attention.c - scaled dot-product attention, forward and backward ----===*
 *
 * Per (batch, head) slice of [t, d]: S = Q K^T / sqrt(d) (+ causal mask), P =
 *softmax(S), O = P V, with the products in CBLAS. The backward pass recomputes
 *P rather than storing it, so the forward keeps no t x t activations: dV = P^T
 *dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),  dQ = dS K / sqrt(d), dK =
 *dS^T Q / sqrt(d).
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "blas.h"
#include <math.h>
#include <stdlib.h>

static const char kName[] = "dtk_attention_f32";

/* p (t, t) = softmax(q k^T * scale) with the causal mask applied */
static void probabilities(const float *q, const float *k, float *p, int64_t t,
                          int64_t d, int32_t causal) {
  const blasint bt = dtk_blas_size(t, kName), bd = dtk_blas_size(d, kName);
  float scale = 1.0f / sqrtf((float)d);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, bt,
              bd, scale, q, bd, k, bd, 0.0f, p,
              bt);
  for (int64_t i = 0; i < t; ++i) {
    float *row = p + i * t;
    int64_t visible = causal ? i + 1 : t;
    float mx = -INFINITY;
    for (int64_t j = 0; j < visible; ++j)
      mx = fmaxf(mx, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < visible; ++j)
      row[j] *= inv;
    for (int64_t j = visible; j < t; ++j)
      row[j] = 0.0f;
  }
}

static float *scratch(int64_t n) {
  float *p = malloc((size_t)n * sizeof(float));
  if (!p)
    dtk_fail("out of memory for attention scratch space");
  return p;
}

void dtk_attention_f32(const float *q, const float *k, const float *v, float *o,
                       int64_t slices, int64_t t, int64_t d, int32_t causal) {
  const blasint bt = dtk_blas_size(t, kName), bd = dtk_blas_size(d, kName);
  float *p = scratch(t * t); /* (t, t) */
  for (int64_t s = 0; s < slices; ++s) {
    int64_t base = s * t * d;
    probabilities(q + base, k + base, p, t, d, causal);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bt,
                bd, bt, 1.0f, p, bt, v + base,
                bd, 0.0f, o + base, bd);
  }
  free(p);
}

void dtk_attention_grad_f32(const float *q, const float *k, const float *v,
                            const float *dout, float *dq, float *dk, float *dv,
                            int64_t slices, int64_t t, int64_t d,
                            int32_t causal) {
  const blasint bt = dtk_blas_size(t, kName), bd = dtk_blas_size(d, kName);
  float *p = scratch(2 * t * t); /* P and dP, (t, t) each */
  float *dp = p + t * t;
  float scale = 1.0f / sqrtf((float)d);
  for (int64_t s = 0; s < slices; ++s) {
    int64_t base = s * t * d;
    probabilities(q + base, k + base, p, t, d, causal);
    /* dV = P^T dO */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bt, bd,
                bt, 1.0f, p, bt, dout + base, bd, 0.0f,
                dv + base, bd);
    /* dP = dO V^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, bt,
                bd, 1.0f, dout + base, bd, v + base, bd,
                0.0f, dp, bt);
    /* dS = P * (dP - rowsum(dP * P)), stored over dP */
    for (int64_t i = 0; i < t; ++i) {
      float *pr = p + i * t, *dpr = dp + i * t;
      float dot = 0.0f;
      for (int64_t j = 0; j < t; ++j)
        dot += dpr[j] * pr[j];
      for (int64_t j = 0; j < t; ++j)
        dpr[j] = pr[j] * (dpr[j] - dot);
    }
    /* dQ = dS K * scale; dK = dS^T Q * scale */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bt,
                bd, bt, scale, dp, bt, k + base,
                bd, 0.0f, dq + base, bd);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bt, bd,
                bt, scale, dp, bt, q + base, bd, 0.0f,
                dk + base, bd);
  }
  free(p);
}
