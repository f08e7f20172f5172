/*===- attention.c - scaled dot-product attention, forward and backward ---===*
 *
 * Per (batch, head) slice of [t, d]: S = Q K^T / sqrt(d) (+ causal mask),
 * P = softmax(S), O = P V, with the products in CBLAS. The backward pass
 * recomputes P rather than storing it, so the forward keeps no t x t
 * activations: dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)),
 * dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d).
 *
 * Slices run in parallel (dtk_parallel_for), each range with its own scratch
 * space; OpenBLAS runs each slice's small products on one thread meanwhile,
 * so the two pools never share the cores.
 *
 *===----------------------------------------------------------------------===*/

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

/* Slices per range: below 2 x this many, one thread does them all. */
enum { kSliceGrain = 2 };

struct attention_args {
  const float *q, *k, *v, *dout;
  float *o, *dq, *dk, *dv;
  int64_t t, d;
  int32_t causal;
};

static void forward_slices(void *ctx, int64_t begin, int64_t end) {
  const struct attention_args *a = ctx;
  int64_t t = a->t, d = a->d;
  const blasint bt = dtk_blas_size(t, kName), bd = dtk_blas_size(d, kName);
  float *p = scratch(t * t); /* (t, t) */
  for (int64_t s = begin; s < end; ++s) {
    int64_t base = s * t * d;
    probabilities(a->q + base, a->k + base, p, t, d, a->causal);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bt, bd, bt, 1.0f, p,
                bt, a->v + base, bd, 0.0f, a->o + base, bd);
  }
  free(p);
}

static void backward_slices(void *ctx, int64_t begin, int64_t end) {
  const struct attention_args *a = ctx;
  int64_t t = a->t, d = a->d;
  const blasint bt = dtk_blas_size(t, kName), bd = dtk_blas_size(d, kName);
  float *p = scratch(2 * t * t); /* P and dP, (t, t) each */
  float *dp = p + t * t;
  float scale = 1.0f / sqrtf((float)d);
  for (int64_t s = begin; s < end; ++s) {
    int64_t base = s * t * d;
    probabilities(a->q + base, a->k + base, p, t, d, a->causal);
    /* dV = P^T dO */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bt, bd, bt, 1.0f, p,
                bt, a->dout + base, bd, 0.0f, a->dv + base, bd);
    /* dP = dO V^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, bt, bd, 1.0f,
                a->dout + base, bd, a->v + base, bd, 0.0f, dp, bt);
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bt, bd, bt, scale,
                dp, bt, a->k + base, bd, 0.0f, a->dq + base, bd);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bt, bd, bt, scale, dp,
                bt, a->q + base, bd, 0.0f, a->dk + base, bd);
  }
  free(p);
}

/* Runs body over the slices: in parallel with OpenBLAS on one thread, or, on
 * one thread of ours, serially with OpenBLAS on all of its own. */
static void over_slices(dtk_body body, struct attention_args *a,
                        int64_t slices) {
  int threads = dtk_threads();
  if (threads == 1 || slices < 2 * kSliceGrain) {
    body(a, 0, slices);
    return;
  }
  int blas = openblas_get_num_threads();
  openblas_set_num_threads(1);
  dtk_parallel_for(slices, kSliceGrain, body, a);
  openblas_set_num_threads(blas);
}

void dtk_attention_f32(const float *q, const float *k, const float *v, float *o,
                       int64_t slices, int64_t t, int64_t d, int32_t causal) {
  struct attention_args a = {q, k, v, NULL, o, NULL, NULL, NULL, t, d, causal};
  over_slices(forward_slices, &a, slices);
}

void dtk_attention_grad_f32(const float *q, const float *k, const float *v,
                            const float *dout, float *dq, float *dk, float *dv,
                            int64_t slices, int64_t t, int64_t d,
                            int32_t causal) {
  struct attention_args a = {q, k, v, dout, NULL, dq, dk, dv, t, d, causal};
  over_slices(backward_slices, &a, slices);
}
