/*===- layer_norm.c - layer normalisation, forward and backward -----------===*
 *
 * Row statistics are accumulated in double (rows are short, so this is cheap)
 *and recomputed in the backward pass instead of being stored, which keeps the
 *forward activations of a layer norm to its input alone.
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include <math.h>
#include <string.h>

/* mean and 1/sqrt(var + eps) of one row of n values */
static void row_stats(const float *x, int64_t n, float eps, float *mean,
                      float *rstd) {
  double s = 0.0, ss = 0.0;
  for (int64_t j = 0; j < n; ++j)
    s += x[j];
  double m = s / (double)n;
  for (int64_t j = 0; j < n; ++j) {
    double d = x[j] - m;
    ss += d * d;
  }
  *mean = (float)m;
  *rstd = (float)(1.0 / sqrt(ss / (double)n + eps));
}

void dtk_layer_norm_f32(const float *x, const float *w, const float *b,
                        float *y, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols; /* (cols) */
    float *yr = y + r * cols;
    float mean, rstd;
    row_stats(xr, cols, eps, &mean, &rstd);
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

void dtk_layer_norm_grad_f32(const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float *db, int64_t rows,
                             int64_t cols, float eps) {
  memset(dw, 0, (size_t)cols * sizeof(float));
  memset(db, 0, (size_t)cols * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *dyr = dy + r * cols; /* (cols) */
    float *dxr = dx + r * cols;
    float mean, rstd;
    row_stats(xr, cols, eps, &mean, &rstd);
    /* dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy
     * * w */
    double mean_d = 0.0, mean_dx = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - mean) * rstd;
      float d = dyr[j] * w[j];
      mean_d += d;
      mean_dx += (double)d * xhat;
      dw[j] += dyr[j] * xhat;
      db[j] += dyr[j];
    }
    float md = (float)(mean_d / (double)cols),
          mdx = (float)(mean_dx / (double)cols);
    for (int64_t j = 0; j < cols; ++j) {
      float xhat = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (dyr[j] * w[j] - md - xhat * mdx);
    }
  }
}
