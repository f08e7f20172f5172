/*===- pool2d.c - 2-D max and average pooling and their gradients ---------===*
 *
 * NCHW, a plane (sample x channel) per task on the kernels' pool; each plane
 * is read and written by one thread in a fixed order, so the gradients, which
 * add overlapping windows' shares, give the same bits on every run.
 *
 * Max pooling skips the padding (PyTorch pads with -inf) and takes the first
 * largest input of a window in row-major order, NaN winning as in PyTorch;
 * its gradient recomputes that choice. Average pooling divides by the whole
 * window, padding included (PyTorch's default count_include_pad).
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include <math.h>
#include <string.h>

struct pool {
  const float *x, *dy;
  float *y, *dx;
  int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

/* Window (i, j)'s rows [y0, y1) and columns [x0, x1) inside the image. */
struct window {
  int64_t y0, y1, x0, x1;
};

static struct window window_of(const struct pool *p, int64_t i, int64_t j) {
  int64_t y = i * p->sh - p->ph, x = j * p->sw - p->pw;
  struct window w = {y < 0 ? 0 : y, y + p->kh > p->h ? p->h : y + p->kh,
                     x < 0 ? 0 : x, x + p->kw > p->w ? p->w : x + p->kw};
  return w;
}

/* The flat index in its plane of window (i, j)'s first largest input. */
static int64_t argmax(const struct pool *p, const float *plane, int64_t i,
                      int64_t j) {
  struct window w = window_of(p, i, j);
  int64_t best = -1;
  float value = 0.0f;
  for (int64_t y = w.y0; y < w.y1; ++y)
    for (int64_t x = w.x0; x < w.x1; ++x) {
      float f = plane[y * p->w + x];
      if (best < 0 || f > value || (isnan(f) && !isnan(value))) {
        best = y * p->w + x;
        value = f;
      }
    }
  return best;
}

static void max_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  for (int64_t q = begin; q < end; ++q) {
    const float *plane = p->x + q * p->h * p->w;
    float *out = p->y + q * p->oh * p->ow;
    for (int64_t i = 0; i < p->oh; ++i)
      for (int64_t j = 0; j < p->ow; ++j) {
        int64_t at = argmax(p, plane, i, j);
        out[i * p->ow + j] = at < 0 ? -INFINITY : plane[at];
      }
  }
}

static void max_grad_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  for (int64_t q = begin; q < end; ++q) {
    const float *plane = p->x + q * p->h * p->w,
                *g = p->dy + q * p->oh * p->ow;
    float *out = p->dx + q * p->h * p->w;
    memset(out, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t i = 0; i < p->oh; ++i)
      for (int64_t j = 0; j < p->ow; ++j) {
        int64_t at = argmax(p, plane, i, j);
        if (at >= 0)
          out[at] += g[i * p->ow + j];
      }
  }
}

static void avg_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  float scale = 1.0f / (float)(p->kh * p->kw);
  for (int64_t q = begin; q < end; ++q) {
    const float *plane = p->x + q * p->h * p->w;
    float *out = p->y + q * p->oh * p->ow;
    for (int64_t i = 0; i < p->oh; ++i)
      for (int64_t j = 0; j < p->ow; ++j) {
        struct window w = window_of(p, i, j);
        float sum = 0.0f;
        for (int64_t y = w.y0; y < w.y1; ++y)
          for (int64_t x = w.x0; x < w.x1; ++x)
            sum += plane[y * p->w + x];
        out[i * p->ow + j] = sum * scale;
      }
  }
}

static void avg_grad_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  float scale = 1.0f / (float)(p->kh * p->kw);
  for (int64_t q = begin; q < end; ++q) {
    const float *g = p->dy + q * p->oh * p->ow;
    float *out = p->dx + q * p->h * p->w;
    memset(out, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t i = 0; i < p->oh; ++i)
      for (int64_t j = 0; j < p->ow; ++j) {
        struct window w = window_of(p, i, j);
        float share = g[i * p->ow + j] * scale;
        for (int64_t y = w.y0; y < w.y1; ++y)
          for (int64_t x = w.x0; x < w.x1; ++x)
            out[y * p->w + x] += share;
      }
  }
}

static void run(void (*body)(void *, int64_t, int64_t), struct pool *p,
                int64_t planes) {
  int64_t per = p->h * p->w > 0 ? p->h * p->w : 1;
  int64_t grain = per >= 4096 ? 1 : 4096 / per;
  dtk_parallel_for(planes, grain, body, p);
}

#define DTK_POOL_SIZES                                                         \
  int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh,    \
      int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw

void dtk_max_pool2d_f32(const float *x, float *y, DTK_POOL_SIZES) {
  struct pool p = {x, NULL, y, NULL, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(max_planes, &p, planes);
}

void dtk_max_pool2d_grad_f32(const float *x, const float *dy, float *dx,
                             DTK_POOL_SIZES) {
  struct pool p = {x, dy, NULL, dx, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(max_grad_planes, &p, planes);
}

void dtk_avg_pool2d_f32(const float *x, float *y, DTK_POOL_SIZES) {
  struct pool p = {x, NULL, y, NULL, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(avg_planes, &p, planes);
}

void dtk_avg_pool2d_grad_f32(const float *dy, float *dx, DTK_POOL_SIZES) {
  struct pool p = {NULL, dy, NULL, dx, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(avg_grad_planes, &p, planes);
}
