/*===- layer_norm.c - layer and RMS normalisation, forward and backward --===*
 *
 * Row statistics are accumulated in double, four lanes at a time (rows are
 * short, so this is cheap), and recomputed in the backward pass instead of
 * being stored, which keeps the forward activations of a layer norm to its
 * input alone. Rows run in parallel; the weight and bias gradients, sums over
 * rows, run in parallel over columns, each summing its rows in order, so every
 * thread count gives the same bits. RMS norm (LLaMA's) is the same with the
 * mean taken as zero and no bias: the row's scale is 1/sqrt(mean(x^2) + eps).
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "vmath.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows (or columns) per range: below 2 x this many, one thread does all. */
enum { kRowGrain = 32, kColumnGrain = 16 };

/* mean and 1/sqrt(var + eps) of one row of n values; with `rms`, the mean is
 * taken as zero (1/sqrt(mean(x^2) + eps)) */
static void row_stats(const float *x, int64_t n, float eps, int rms,
                      float *mean, float *rstd) {
  const int64_t whole = n - n % 4;
  double m = 0;
  if (!rms) {
    dtk_v4d s4 = {0};
    for (int64_t j = 0; j < whole; j += 4)
      s4 += dtk_load4d(x + j);
    double s = dtk_hsum4d(s4);
    for (int64_t j = whole; j < n; ++j)
      s += x[j];
    m = s / (double)n;
  }
  dtk_v4d ss4 = {0};
  for (int64_t j = 0; j < whole; j += 4) {
    dtk_v4d d = dtk_load4d(x + j) - m;
    ss4 += d * d;
  }
  double ss = dtk_hsum4d(ss4);
  for (int64_t j = whole; j < n; ++j) {
    double d = x[j] - m;
    ss += d * d;
  }
  *mean = (float)m;
  *rstd = (float)(1.0 / sqrt(ss / (double)n + eps));
}

struct ln_args {
  const float *x, *w, *b, *dy;
  float *y, *dx, *dw, *db;
  /* Per row: mean and 1/std (the backward's). */
  float *stats;
  int64_t rows, cols;
  float eps;
  /* RMS norm: no centring, no bias (b and db are null). */
  int rms;
};

static void ln_rows(void *ctx, int64_t begin, int64_t end) {
  const struct ln_args *a = ctx;
  int64_t cols = a->cols;
  for (int64_t r = begin; r < end; ++r) {
    const float *xr = a->x + r * cols; /* (cols) */
    float *yr = a->y + r * cols;
    float mean, rstd;
    row_stats(xr, cols, a->eps, a->rms, &mean, &rstd);
    if (a->rms)
      for (int64_t j = 0; j < cols; ++j)
        yr[j] = xr[j] * rstd * a->w[j];
    else
      for (int64_t j = 0; j < cols; ++j)
        yr[j] = (xr[j] - mean) * rstd * a->w[j] + a->b[j];
  }
}

void dtk_layer_norm_f32(const float *x, const float *w, const float *b,
                        float *y, int64_t rows, int64_t cols, float eps) {
  struct ln_args a = {x,    w,    b,    NULL, y,   NULL,
                      NULL, NULL, NULL, rows, cols, eps, 0};
  dtk_parallel_for(rows, kRowGrain, ln_rows, &a);
}

void dtk_rms_norm_f32(const float *x, const float *w, float *y, int64_t rows,
                      int64_t cols, float eps) {
  struct ln_args a = {x,    w,    NULL, NULL, y,   NULL,
                      NULL, NULL, NULL, rows, cols, eps, 1};
  dtk_parallel_for(rows, kRowGrain, ln_rows, &a);
}

/* dx of each row: rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
 * dxhat = dy * w (without the mean(dxhat) term for RMS norm, whose xhat is
 * not centred); keeps each row's statistics for the columns' pass. */
static void ln_grad_rows(void *ctx, int64_t begin, int64_t end) {
  const struct ln_args *a = ctx;
  int64_t cols = a->cols;
  for (int64_t r = begin; r < end; ++r) {
    const float *xr = a->x + r * cols, *dyr = a->dy + r * cols; /* (cols) */
    float *dxr = a->dx + r * cols;
    float mean, rstd;
    row_stats(xr, cols, a->eps, a->rms, &mean, &rstd);
    a->stats[2 * r] = mean;
    a->stats[2 * r + 1] = rstd;
    const float *w = a->w;
    const int64_t whole = cols - cols % 4;
    dtk_v4d d4 = {0}, dx4 = {0};
    for (int64_t j = 0; j < whole; j += 4) {
      dtk_v4u xhat = (*(const dtk_v4u *)(xr + j) - mean) * rstd;
      dtk_v4u d = *(const dtk_v4u *)(dyr + j) * *(const dtk_v4u *)(w + j);
      dtk_v4d wide = __builtin_convertvector(d, dtk_v4d);
      d4 += wide;
      dx4 += wide * __builtin_convertvector(xhat, dtk_v4d);
    }
    double mean_d = dtk_hsum4d(d4), mean_dx = dtk_hsum4d(dx4);
    for (int64_t j = whole; j < cols; ++j) {
      float xhat = (xr[j] - mean) * rstd;
      float d = dyr[j] * w[j];
      mean_d += d;
      mean_dx += (double)d * xhat;
    }
    float md = a->rms ? 0.0f : (float)(mean_d / (double)cols),
          mdx = (float)(mean_dx / (double)cols);
    for (int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (dyr[j] * a->w[j] - md - xhat * mdx);
    }
  }
}

/* dw[j] = sum over rows of dy * xhat, db[j] = sum of dy, rows in order. */
static void ln_grad_columns(void *ctx, int64_t begin, int64_t end) {
  const struct ln_args *a = ctx;
  int64_t cols = a->cols;
  /* restrict: the compiler may keep a vector of columns in registers */
  float *restrict dw = a->dw, *restrict db = a->db;
  for (int64_t j = begin; j < end; ++j)
    dw[j] = 0.0f;
  if (db)
    for (int64_t j = begin; j < end; ++j)
      db[j] = 0.0f;
  for (int64_t r = 0; r < a->rows; ++r) {
    const float *restrict xr = a->x + r * cols, *restrict dyr = a->dy + r * cols;
    float mean = a->stats[2 * r], rstd = a->stats[2 * r + 1];
    for (int64_t j = begin; j < end; ++j)
      dw[j] += dyr[j] * ((xr[j] - mean) * rstd);
    if (db)
      for (int64_t j = begin; j < end; ++j)
        db[j] += dyr[j];
  }
}

void dtk_layer_norm_grad_f32(const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float *db, int64_t rows,
                             int64_t cols, float eps) {
  float *stats = malloc((size_t)(rows > 0 ? 2 * rows : 1) * sizeof(float));
  if (!stats)
    dtk_fail("out of memory for the layer norm's row statistics");
  struct ln_args a = {x,  w,     NULL, dy,   NULL, dx, dw,
                      db, stats, rows, cols, eps,  0};
  dtk_parallel_for(rows, kRowGrain, ln_grad_rows, &a);
  dtk_parallel_for(cols, kColumnGrain, ln_grad_columns, &a);
  free(stats);
}

void dtk_rms_norm_grad_f32(const float *x, const float *w, const float *dy,
                           float *dx, float *dw, int64_t rows, int64_t cols,
                           float eps) {
  float *stats = malloc((size_t)(rows > 0 ? 2 * rows : 1) * sizeof(float));
  if (!stats)
    dtk_fail("out of memory for the RMS norm's row statistics");
  struct ln_args a = {x,  w,     NULL, dy,   NULL, dx, dw,
                      NULL, stats, rows, cols, eps,  1};
  dtk_parallel_for(rows, kRowGrain, ln_grad_rows, &a);
  dtk_parallel_for(cols, kColumnGrain, ln_grad_columns, &a);
  free(stats);
}
