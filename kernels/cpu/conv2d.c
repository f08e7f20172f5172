/*===- conv2d.c - 2-D convolution and its gradients, as GEMMs -------------===*
 *
 * dt.conv2d and its two gradients, NCHW, with strides, zero padding,
 * dilation and groups, each as one matrix product per group over a chunk of
 * samples:
 *
 *   forward        Y_g [og, L]  = W_g [og, K] x cols [K, L]
 *   input grad     dcols [K, L] = W_g^T [K, og] x dY_g [og, L], then col2im
 *   weight grad    dW_g [og, K] += dY_g [og, L] x cols^T [L, K]
 *
 * where K = (c / groups) kh kw is a window's size, L = samples x oh ow the
 * output positions of the chunk, and cols the chunk's windows unrolled
 * (im2col). One wide product per chunk keeps BLAS efficient on small images,
 * where a product per sample would be a sliver. Chunks hold at most about
 * kChunkFloats window values, so the scratch stays bounded for large images.
 * The unrolling, rolling back and the transposes between [n, o, p] and
 * [o, n p] run on the kernels' thread pool, each output element written by
 * one thread in a fixed order: every run gives the same bits.
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "blas.h"

#include <stdlib.h>
#include <string.h>

enum { kChunkFloats = 1 << 23 };

struct conv {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  int64_t cg, og, k, p; /* channels per group in and out, window, positions */
};

static struct conv make_conv(int64_t n, int64_t c, int64_t h, int64_t w,
                             int64_t o, int64_t kh, int64_t kw, int64_t oh,
                             int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw,
                             int64_t groups) {
  struct conv v = {n,  c,  h,  w,  o,  kh, kw,     oh, ow, sh,
                   sw, ph, pw, dh, dw, groups, 0,  0,  0,  0};
  v.cg = c / groups;
  v.og = o / groups;
  v.k = v.cg * kh * kw;
  v.p = oh * ow;
  return v;
}

/* Samples per chunk: as many as keep the chunk's windows under the bound. */
static int64_t chunk_of(const struct conv *v) {
  int64_t per = v->k * v->p > 0 ? v->k * v->p : 1;
  int64_t chunk = kChunkFloats / per;
  return chunk < 1 ? 1 : chunk > v->n ? v->n : chunk;
}

static float *scratch(int64_t floats, const char *what) {
  float *p = malloc((size_t)(floats > 0 ? floats : 1) * sizeof(float));
  if (!p)
    dtk_fail(what);
  return p;
}

/* The output columns [*j0, *j1) of a window tap whose input column is
 * j * sw + off: those that land inside the image (the others read padding). */
static void tap_columns(const struct conv *v, int64_t off, int64_t *j0,
                        int64_t *j1) {
  int64_t lo = off >= 0 ? 0 : (-off + v->sw - 1) / v->sw;
  int64_t hi = v->w - 1 - off < 0 ? 0 : (v->w - 1 - off) / v->sw + 1;
  if (hi > v->ow)
    hi = v->ow;
  *j0 = lo < hi ? lo : hi;
  *j1 = hi;
}

/* im2col: rows [begin, end) of cols [k, samples p] for group g. A row is one
 * tap (channel, u, t) of every window; its valid columns are one run, copied
 * whole for stride 1, between runs of zeros for the padding. */
struct unroll_args {
  const struct conv *v;
  const float *x;
  float *cols;
  int64_t first, samples, g;
};

static void unroll_rows(void *ctx, int64_t begin, int64_t end) {
  const struct unroll_args *a = ctx;
  const struct conv *v = a->v;
  int64_t width = a->samples * v->p;
  for (int64_t r = begin; r < end; ++r) {
    int64_t ci = r / (v->kh * v->kw), u = r / v->kw % v->kh, t = r % v->kw;
    int64_t off = t * v->dw - v->pw, j0, j1;
    tap_columns(v, off, &j0, &j1);
    float *row = a->cols + r * width;
    for (int64_t s = 0; s < a->samples; ++s) {
      const float *plane =
          a->x + ((a->first + s) * v->c + a->g * v->cg + ci) * v->h * v->w;
      for (int64_t i = 0; i < v->oh; ++i) {
        int64_t y = i * v->sh - v->ph + u * v->dh;
        float *out = row + s * v->p + i * v->ow;
        if (y < 0 || y >= v->h) {
          memset(out, 0, (size_t)v->ow * sizeof(float));
          continue;
        }
        const float *in = plane + y * v->w;
        memset(out, 0, (size_t)j0 * sizeof(float));
        if (v->sw == 1)
          memcpy(out + j0, in + j0 + off, (size_t)(j1 - j0) * sizeof(float));
        else
          for (int64_t j = j0; j < j1; ++j)
            out[j] = in[j * v->sw + off];
        memset(out + j1, 0, (size_t)(v->ow - j1) * sizeof(float));
      }
    }
  }
}

static void unroll(const struct conv *v, const float *x, float *cols,
                   int64_t first, int64_t samples, int64_t g) {
  struct unroll_args a = {v, x, cols, first, samples, g};
  dtk_parallel_for(v->k, 1, unroll_rows, &a);
}

/* col2im: adds dcols back into the input planes [begin, end) of the chunk
 * (plane = sample x channel of the group), each plane by one thread, taps
 * in a fixed order. */
struct roll_args {
  const struct conv *v;
  const float *cols;
  float *dx;
  int64_t first, samples, g;
};

static void roll_planes(void *ctx, int64_t begin, int64_t end) {
  const struct roll_args *a = ctx;
  const struct conv *v = a->v;
  int64_t width = a->samples * v->p;
  for (int64_t q = begin; q < end; ++q) {
    int64_t s = q / v->cg, ci = q % v->cg;
    float *plane =
        a->dx + ((a->first + s) * v->c + a->g * v->cg + ci) * v->h * v->w;
    for (int64_t u = 0; u < v->kh; ++u)
      for (int64_t t = 0; t < v->kw; ++t) {
        int64_t off = t * v->dw - v->pw, j0, j1;
        tap_columns(v, off, &j0, &j1);
        const float *row =
            a->cols + ((ci * v->kh + u) * v->kw + t) * width + s * v->p;
        for (int64_t i = 0; i < v->oh; ++i) {
          int64_t y = i * v->sh - v->ph + u * v->dh;
          if (y < 0 || y >= v->h)
            continue;
          float *in = plane + y * v->w;
          const float *g = row + i * v->ow;
          if (v->sw == 1)
            for (int64_t j = j0; j < j1; ++j)
              in[j + off] += g[j];
          else
            for (int64_t j = j0; j < j1; ++j)
              in[j * v->sw + off] += g[j];
        }
      }
  }
}

/* Between the layouts [n, o, p] (tensors) and [og, samples p] (products) of
 * group g: rows [begin, end) of the (sample, channel) pairs. */
struct move_args {
  const struct conv *v;
  const float *src;
  float *dst;
  int64_t first, samples, g;
  int to_matrix;
};

static void move_rows(void *ctx, int64_t begin, int64_t end) {
  const struct move_args *a = ctx;
  const struct conv *v = a->v;
  int64_t width = a->samples * v->p;
  for (int64_t q = begin; q < end; ++q) {
    int64_t s = q / v->og, oc = q % v->og;
    int64_t tensor = ((a->first + s) * v->o + a->g * v->og + oc) * v->p,
            matrix = oc * width + s * v->p;
    memcpy(a->dst + (a->to_matrix ? matrix : tensor),
           a->src + (a->to_matrix ? tensor : matrix),
           (size_t)v->p * sizeof(float));
  }
}

static void move(const struct conv *v, const float *src, float *dst,
                 int64_t first, int64_t samples, int64_t g, int to_matrix) {
  struct move_args a = {v, src, dst, first, samples, g, to_matrix};
  int64_t grain = v->p >= 4096 ? 1 : 4096 / (v->p > 0 ? v->p : 1);
  dtk_parallel_for(samples * v->og, grain, move_rows, &a);
}

void dtk_conv2d_f32(const float *x, const float *w, float *y, int64_t n,
                    int64_t c, int64_t h, int64_t wd, int64_t o, int64_t kh,
                    int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                    int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                    int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  int64_t chunk = chunk_of(&v);
  float *cols = scratch(v.k * chunk * v.p, "out of memory for a convolution's windows");
  float *out = scratch(v.og * chunk * v.p, "out of memory for a convolution's output");
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t samples = n - first < chunk ? n - first : chunk;
    blasint m = dtk_blas_size(v.og, "conv2d"),
            l = dtk_blas_size(samples * v.p, "conv2d"),
            k = dtk_blas_size(v.k, "conv2d");
    for (int64_t g = 0; g < groups; ++g) {
      unroll(&v, x, cols, first, samples, g);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, l, k, 1.0f,
                  w + g * v.og * v.k, k, cols, l, 0.0f, out, l);
      move(&v, out, y, first, samples, g, 0);
    }
  }
  free(out);
  free(cols);
}

void dtk_conv2d_input_grad_f32(const float *dy, const float *w, float *dx,
                               int64_t n, int64_t c, int64_t h, int64_t wd,
                               int64_t o, int64_t kh, int64_t kw, int64_t oh,
                               int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                               int64_t pw, int64_t dh, int64_t dw,
                               int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  int64_t chunk = chunk_of(&v);
  float *cols = scratch(v.k * chunk * v.p, "out of memory for a convolution's windows");
  float *grad = scratch(v.og * chunk * v.p, "out of memory for a convolution's gradient");
  memset(dx, 0, (size_t)(n * c * h * wd) * sizeof(float));
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t samples = n - first < chunk ? n - first : chunk;
    blasint m = dtk_blas_size(v.og, "conv2d_input_grad"),
            l = dtk_blas_size(samples * v.p, "conv2d_input_grad"),
            k = dtk_blas_size(v.k, "conv2d_input_grad");
    for (int64_t g = 0; g < groups; ++g) {
      move(&v, dy, grad, first, samples, g, 1);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, l, m, 1.0f,
                  w + g * v.og * v.k, k, grad, l, 0.0f, cols, l);
      struct roll_args a = {&v, cols, dx, first, samples, g};
      dtk_parallel_for(samples * v.cg, 1, roll_planes, &a);
    }
  }
  free(grad);
  free(cols);
}

void dtk_conv2d_weight_grad_f32(const float *x, const float *dy, float *dw_out,
                                int64_t n, int64_t c, int64_t h, int64_t wd,
                                int64_t o, int64_t kh, int64_t kw, int64_t oh,
                                int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                                int64_t pw, int64_t dh, int64_t dw,
                                int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  int64_t chunk = chunk_of(&v);
  float *cols = scratch(v.k * chunk * v.p, "out of memory for a convolution's windows");
  float *grad = scratch(v.og * chunk * v.p, "out of memory for a convolution's gradient");
  memset(dw_out, 0, (size_t)(o * v.k) * sizeof(float));
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t samples = n - first < chunk ? n - first : chunk;
    blasint m = dtk_blas_size(v.og, "conv2d_weight_grad"),
            l = dtk_blas_size(samples * v.p, "conv2d_weight_grad"),
            k = dtk_blas_size(v.k, "conv2d_weight_grad");
    for (int64_t g = 0; g < groups; ++g) {
      unroll(&v, x, cols, first, samples, g);
      move(&v, dy, grad, first, samples, g, 1);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, l, 1.0f, grad,
                  l, cols, l, 1.0f, dw_out + g * v.og * v.k, k);
    }
  }
  free(grad);
  free(cols);
}
