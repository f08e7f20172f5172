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
#include <stdlib.h>
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

/* Whether input f replaces `value` as a window's choice: larger, or NaN over
 * a number (a NaN chosen stays). Taken in row-major order, this keeps the
 * first largest. */
static inline int beats(float f, float value) {
  /* Bitwise, not short-circuit: the loops that use it stay branch-free and
   * vectorise. */
  return (f > value) | ((f != f) & (value == value));
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
      if (best < 0 || beats(f, value)) {
        best = y * p->w + x;
        value = f;
      }
    }
  return best;
}

/* The output columns [*j0, *j1) whose windows lie inside the image across:
 * there a window's columns need no clipping. */
static void inner_columns(const struct pool *p, int64_t *j0, int64_t *j1) {
  int64_t lo = (p->pw + p->sw - 1) / p->sw;
  int64_t hi =
      p->w + p->pw - p->kw < 0 ? 0 : (p->w + p->pw - p->kw) / p->sw + 1;
  hi = hi > p->ow ? p->ow : hi;
  *j0 = lo < hi ? lo : hi;
  *j1 = hi;
}

/* The choices of the inside windows [j0, j1) of an output row whose window
 * rows are [y0, y0 + rows): value[j] and, as an offset from the window's
 * top-left input, tap[j]. Tap by tap across the row, without branches, so
 * the loop over windows vectorises; with the stride a constant where it is
 * 1 or 2. */
static inline __attribute__((always_inline)) void
inner_choices_at(const struct pool *p, const float *plane, int64_t y0,
                 int64_t rows, int64_t j0, int64_t j1, int64_t sw, float *value,
                 int32_t *tap) {
  for (int64_t u = 0; u < rows; ++u)
    for (int64_t t = 0; t < p->kw; ++t) {
      const float *src = plane + (y0 + u) * p->w - p->pw + t;
      int32_t here = (int32_t)(u * p->w + t);
      if (u == 0 && t == 0) {
        for (int64_t j = j0; j < j1; ++j) {
          value[j] = src[j * sw];
          tap[j] = 0;
        }
        continue;
      }
      for (int64_t j = j0; j < j1; ++j) {
        float f = src[j * sw], v = value[j];
        int b = beats(f, v);
        value[j] = b ? f : v;
        tap[j] = b ? here : tap[j];
      }
    }
}

static void inner_choices(const struct pool *p, const float *plane, int64_t y0,
                          int64_t rows, int64_t j0, int64_t j1, float *value,
                          int32_t *tap) {
  if (p->sw == 2)
    inner_choices_at(p, plane, y0, rows, j0, j1, 2, value, tap);
  else if (p->sw == 1)
    inner_choices_at(p, plane, y0, rows, j0, j1, 1, value, tap);
  else
    inner_choices_at(p, plane, y0, rows, j0, j1, p->sw, value, tap);
}

/* Row i's choices: at[j] the index in the plane of window (i, j)'s first
 * largest input (< 0: none, the window is all padding); inside windows skip
 * the clipping. `value` is scratch for a row. */
static void row_choices(const struct pool *p, const float *plane, int64_t i,
                        int64_t j0, int64_t j1, float *value, int32_t *tap,
                        int64_t *at) {
  struct window rows = window_of(p, i, 0);
  int64_t inside = rows.y0 < rows.y1 ? j1 : j0;
  inner_choices(p, plane, rows.y0, rows.y1 - rows.y0, j0, inside, value, tap);
  int64_t first = rows.y0 * p->w - p->pw;
  for (int64_t j = j0; j < inside; ++j)
    at[j] = first + j * p->sw + tap[j];
  for (int64_t j = 0; j < p->ow; ++j)
    if (j < j0 || j >= inside)
      at[j] = argmax(p, plane, i, j);
}

/* A row of choices, per range of planes. */
struct row {
  int64_t *at;
  float *value;
  int32_t *tap;
};

static struct row row_scratch(const struct pool *p) {
  size_t ow = (size_t)(p->ow > 0 ? p->ow : 1);
  char *block =
      malloc(ow * (sizeof(int64_t) + sizeof(float) + sizeof(int32_t)));
  if (!block)
    dtk_fail("out of memory for a pooling row");
  struct row r = {(int64_t *)block, (float *)(block + ow * sizeof(int64_t)),
                  (int32_t *)(block + ow * (sizeof(int64_t) + sizeof(float)))};
  return r;
}

static void max_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  struct row r = row_scratch(p);
  int64_t j0, j1;
  inner_columns(p, &j0, &j1);
  for (int64_t q = begin; q < end; ++q) {
    const float *plane = p->x + q * p->h * p->w;
    for (int64_t i = 0; i < p->oh; ++i) {
      float *out = p->y + (q * p->oh + i) * p->ow;
      row_choices(p, plane, i, j0, j1, r.value, r.tap, r.at);
      for (int64_t j = 0; j < p->ow; ++j)
        out[j] = r.at[j] < 0 ? -INFINITY : plane[r.at[j]];
    }
  }
  free(r.at);
}

static void max_grad_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  struct row r = row_scratch(p);
  int64_t j0, j1;
  inner_columns(p, &j0, &j1);
  for (int64_t q = begin; q < end; ++q) {
    const float *plane = p->x + q * p->h * p->w;
    float *out = p->dx + q * p->h * p->w;
    memset(out, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t i = 0; i < p->oh; ++i) {
      const float *g = p->dy + (q * p->oh + i) * p->ow;
      row_choices(p, plane, i, j0, j1, r.value, r.tap, r.at);
      for (int64_t j = 0; j < p->ow; ++j)
        if (r.at[j] >= 0)
          out[r.at[j]] += g[j];
    }
  }
  free(r.at);
}

/* 2x2 windows of stride 2 that tile the plane exactly (no padding, even
 * sizes), as nn.MaxPool2d(2) mostly meets them: first the choice between
 * the two inputs of each window row, along whole rows of input pairs, then
 * between a window's two rows. The first largest of the pair of firsts is
 * the first largest of the four (NaN winning as `beats` says), so this
 * agrees with the tap-by-tap scan; it runs in long vector loops where a
 * row of 14 windows left the scan mostly scalar. */
static int is_pairs(const struct pool *p) {
  return p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 &&
         p->pw == 0 && p->h == 2 * p->oh && p->w == 2 * p->ow;
}

/* Each input row's pairs: the larger value and whether it is the right one. */
static void pair_choices(const float *plane, int64_t pairs, float *value,
                         float *right) {
  for (int64_t k = 0; k < pairs; ++k) {
    float a = plane[2 * k], b = plane[2 * k + 1];
    int r = beats(b, a);
    value[k] = r ? b : a;
    right[k] = r ? 1.0f : 0.0f;
  }
}

/* Room for a plane's pair choices: values, then which side. */
static float *pair_scratch(int64_t pairs) {
  float *value = malloc((size_t)(pairs > 0 ? pairs : 1) * 2 * sizeof(float));
  if (!value)
    dtk_fail("out of memory for a pooling plane");
  return value;
}

static void max_pairs_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  int64_t pairs = p->h * p->ow;
  float *value = pair_scratch(pairs), *right = value + pairs;
  for (int64_t q = begin; q < end; ++q) {
    pair_choices(p->x + q * p->h * p->w, pairs, value, right);
    float *out = p->y + q * p->oh * p->ow;
    for (int64_t i = 0; i < p->oh; ++i) {
      const float *top = value + 2 * i * p->ow, *bottom = top + p->ow;
      for (int64_t j = 0; j < p->ow; ++j) {
        float t = top[j], u = bottom[j];
        int lower = beats(u, t);
        out[i * p->ow + j] = lower ? u : t;
      }
    }
  }
  free(value);
}

/* Each window's gradient goes to its choice and zeros to its other three
 * inputs: the windows cover the plane once, so every input is written. */
static void max_pairs_grad_planes(void *ctx, int64_t begin, int64_t end) {
  const struct pool *p = ctx;
  int64_t pairs = p->h * p->ow;
  float *value = pair_scratch(pairs), *right = value + pairs;
  for (int64_t q = begin; q < end; ++q) {
    pair_choices(p->x + q * p->h * p->w, pairs, value, right);
    const float *g = p->dy + q * p->oh * p->ow;
    float *out = p->dx + q * p->h * p->w;
    for (int64_t i = 0; i < p->oh; ++i) {
      const float *top = value + 2 * i * p->ow, *bottom = top + p->ow;
      const float *top_right = right + 2 * i * p->ow,
                  *bottom_right = top_right + p->ow;
      float *row0 = out + 2 * i * p->w, *row1 = row0 + p->w;
      for (int64_t j = 0; j < p->ow; ++j) {
        float t = top[j], u = bottom[j], d = g[i * p->ow + j];
        int lower = beats(u, t);
        float r0 = top_right[j], r1 = bottom_right[j];
        row0[2 * j] = !lower && r0 == 0.0f ? d : 0.0f;
        row0[2 * j + 1] = !lower && r0 != 0.0f ? d : 0.0f;
        row1[2 * j] = lower && r1 == 0.0f ? d : 0.0f;
        row1[2 * j + 1] = lower && r1 != 0.0f ? d : 0.0f;
      }
    }
  }
  free(value);
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
  run(is_pairs(&p) ? max_pairs_planes : max_planes, &p, planes);
}

void dtk_max_pool2d_grad_f32(const float *x, const float *dy, float *dx,
                             DTK_POOL_SIZES) {
  struct pool p = {x, dy, NULL, dx, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(is_pairs(&p) ? max_pairs_grad_planes : max_grad_planes, &p, planes);
}

void dtk_avg_pool2d_f32(const float *x, float *y, DTK_POOL_SIZES) {
  struct pool p = {x, NULL, y, NULL, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(avg_planes, &p, planes);
}

void dtk_avg_pool2d_grad_f32(const float *dy, float *dx, DTK_POOL_SIZES) {
  struct pool p = {NULL, dy, NULL, dx, h, w, oh, ow, kh, kw, sh, sw, ph, pw};
  run(avg_grad_planes, &p, planes);
}
