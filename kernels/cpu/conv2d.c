/*===- conv2d.c - 2-D convolution and its gradients -----------------------===*
 *
 * dt.conv2d and its two gradients, NCHW, with strides, zero padding,
 * dilation and groups, as register-tiled products, but for the weight
 * gradient of a strided or a wide convolution: that one unrolls the windows
 * of a chunk of samples and is one BLAS product per group.
 *
 * A convolution is a product Y_g [og, P] = W_g [og, K] x cols [K, P] per
 * sample and group, K = (c / groups) kh kw a window's size and P = oh ow the
 * output positions; row (ci, u, t) of cols holds input channel ci shifted by
 * the tap (u, t). With stride 1 that row is the zero-padded input plane
 * itself, read from an offset: computing the outputs over the padded width
 * ("wide" rows, a few columns of each thrown away), cols is a set of views
 * into one padded copy of the input, never written (the direct path). Other
 * strides unroll each sample's windows into a small buffer that stays in
 * cache (the unrolled path), a chunk of positions at a time.
 *
 *   forward        Y_g [og, P]   = W_g [og, K] x cols [K, P]
 *   input grad     stride 1: a forward convolution of dY with the weights
 *                  flipped and their channels swapped ("full" padding);
 *                  otherwise dcols [K, P] = W_g^T x dY_g, added back (col2im)
 *   weight grad    dW_g [og, K] = sum over samples of dY_g [og, P] x cols^T
 *
 * The forward products keep an MR x 2-vector tile of Y in registers; the
 * weight gradient keeps an MO x MK tile of dW as vectors over positions and
 * sums their lanes once per chunk of samples. Samples (with their groups)
 * are the forward passes' parallel tasks and tiles of dW the weight
 * gradient's, each output element computed by one thread in an order fixed
 * by the shapes alone: every run, at any thread count, gives the same bits
 * (BLAS's products too, as OpenBLAS splits them by output blocks).
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "blas.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define VW 16 /* floats in a vector */
enum { MR = 8, MO = 4, MK = 4 };
#else
#define VW 8
enum { MR = 4, MO = 2, MK = 4 };
#endif
enum { NR = 2 * VW }; /* output columns of a forward tile */

/* Scratch budgets, in floats: the weight gradient's staged chunk of samples,
 * one forward task's unrolled windows, one weight-gradient pass over samples
 * (kept in L2) and its accumulators. */
enum {
  kChunkFloats = 1 << 23,
  kColsFloats = 1 << 15,
  kBlockFloats = 1 << 16,
  kAccFloats = 1 << 16
};

typedef float vf __attribute__((vector_size(VW * sizeof(float))));

/* Unaligned vector loads and stores (the builtin, which the build's
 * -fno-builtin-memcpy leaves alone: see copy_row). */
static inline vf load(const float *p) {
  vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

static inline void store(float *p, vf v) { __builtin_memcpy(p, &v, sizeof v); }

/* Copies a row of n floats. The rows here are a few dozen floats, where a
 * call to memcpy costs more than the copy (a tenth of a small CNN's step):
 * whole vectors, then the rest one by one. The build keeps the compiler from
 * turning these loops into memcpy calls (kernels/CMakeLists.txt). */
static inline void copy_row(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + VW <= n; i += VW)
    store(dst + i, load(src + i));
  for (; i < n; ++i)
    dst[i] = src[i];
}

static inline int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static float *scratch(int64_t floats, const char *what) {
  float *p = malloc((size_t)(floats > 0 ? floats : 1) * sizeof(float));
  if (!p)
    dtk_fail(what);
  return p;
}

static int64_t *offsets(int64_t count) {
  int64_t *p = malloc((size_t)(count > 0 ? count : 1) * sizeof(int64_t));
  if (!p)
    dtk_fail("out of memory for a convolution's offsets");
  return p;
}

/* Offsets of `count` rows `stride` apart. */
static int64_t *row_offsets(int64_t count, int64_t stride) {
  int64_t *p = offsets(count);
  for (int64_t r = 0; r < count; ++r)
    p[r] = r * stride;
  return p;
}

struct conv {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  int64_t cg, og, k, p;  /* channels per group in and out, window, positions */
  int64_t hp, wp, plane; /* padded input height, width and plane (direct) */
  int64_t q, qr;         /* wide positions, and rounded up to a tile */
};

static struct conv make_conv(int64_t n, int64_t c, int64_t h, int64_t w,
                             int64_t o, int64_t kh, int64_t kw, int64_t oh,
                             int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw,
                             int64_t groups) {
  struct conv v = {n,  c,  h,      w, o, kh, kw, oh, ow, sh, sw, ph, pw,
                   dh, dw, groups, 0, 0, 0,  0,  0,  0,  0,  0,  0};
  v.cg = c / groups;
  v.og = o / groups;
  v.k = v.cg * kh * kw;
  v.p = oh * ow;
  v.hp = h + 2 * ph;
  v.wp = w + 2 * pw;
  v.plane = v.hp * v.wp;
  /* Output (i, j) sits at i wp + j of the wide rows. */
  v.q = oh > 0 && ow > 0 ? (oh - 1) * v.wp + ow : 0;
  v.qr = round_up(v.q, NR);
  return v;
}

/* Stride 1: every tap of a window is the padded plane shifted. */
static int is_direct(const struct conv *v) { return v->sh == 1 && v->sw == 1; }

/* The offset of tap row r = (ci, u, t) in padded planes `stride` apart. */
static void direct_offsets(const struct conv *v, int64_t stride, int64_t *off) {
  for (int64_t r = 0; r < v->k; ++r) {
    int64_t ci = r / (v->kh * v->kw), u = r / v->kw % v->kh, t = r % v->kw;
    off[r] = ci * stride + u * v->dh * v->wp + t * v->dw;
  }
}

/* Copies channel ci of sample s into a zero-padded plane at dst. */
static void pad_plane(const struct conv *v, const float *x, int64_t s,
                      int64_t ci, float *dst) {
  const float *src = x + (s * v->c + ci) * v->h * v->w;
  memset(dst, 0, (size_t)v->plane * sizeof(float));
  float *row = dst + v->ph * v->wp + v->pw;
  for (int64_t y = 0; y < v->h; ++y, row += v->wp)
    copy_row(row, src + y * v->w, v->w);
}

/* The output columns [*j0, *j1) of tap column t whose input column lies
 * inside the image (the others read padding). */
static void tap_columns(const struct conv *v, int64_t t, int64_t *j0,
                        int64_t *j1) {
  int64_t off = t * v->dw - v->pw;
  int64_t lo = off >= 0 ? 0 : (-off + v->sw - 1) / v->sw;
  int64_t hi = v->w - 1 - off < 0 ? 0 : (v->w - 1 - off) / v->sw + 1;
  if (hi > v->ow)
    hi = v->ow;
  *j0 = lo < hi ? lo : hi;
  *j1 = hi;
}

/* Calls visit(ctx, q, at, count) for each run of positions [q, q + count)
 * within [q0, end) that row r = (ci, u, t) of the unrolled windows takes
 * from the image, reading its plane from index `at` on, every sw columns
 * (one run per output row at most); the positions between runs read
 * padding. */
typedef void (*run_visit)(void *ctx, int64_t q, int64_t at, int64_t count);

/* Inlined where it is called, so that `visit`, a constant there, is a call
 * the compiler inlines too (a run is a handful of floats). */
static inline __attribute__((always_inline)) void
for_each_run(const struct conv *v, int64_t r, int64_t q0, int64_t end,
             run_visit visit, void *ctx) {
  int64_t u = r / v->kw % v->kh, t = r % v->kw, j0, j1;
  tap_columns(v, t, &j0, &j1);
  for (int64_t i = q0 / v->ow; i * v->ow < end; ++i) {
    int64_t y = i * v->sh - v->ph + u * v->dh;
    if (y < 0 || y >= v->h)
      continue;
    int64_t lo = i * v->ow + j0, hi = i * v->ow + j1;
    lo = lo < q0 ? q0 : lo;
    hi = hi > end ? end : hi;
    if (lo < hi)
      visit(ctx, lo, y * v->w + (lo - i * v->ow) * v->sw + t * v->dw - v->pw,
            hi - lo);
  }
}

/* Between a row of unrolled windows (indexed by position) and its image
 * plane, one the source and the other the destination. */
struct run_rows {
  const float *src;
  float *dst;
  int64_t sw;
  int64_t filled; /* copy_run: the row's positions written so far */
};

static void zero_row(float *dst, int64_t n) {
  if (n > 0)
    memset(dst, 0, (size_t)n * sizeof(float));
}

/* Plane to row, zeroing the padding before the run: runs come in order of
 * position, so each position is written once (zeroing the whole row first
 * wrote it twice, a tenth of a strided weight gradient at ResNet sizes). */
static void copy_run(void *ctx, int64_t q, int64_t at, int64_t count) {
  struct run_rows *a = ctx;
  zero_row(a->dst + a->filled, q - a->filled);
  a->filled = q + count;
  if (a->sw == 1)
    copy_row(a->dst + q, a->src + at, count);
  else
    for (int64_t j = 0; j < count; ++j)
      a->dst[q + j] = a->src[at + j * a->sw];
}

/* Row added into plane. */
static void add_run(void *ctx, int64_t q, int64_t at, int64_t count) {
  const struct run_rows *a = ctx;
  for (int64_t j = 0; j < count; ++j)
    a->dst[at + j * a->sw] += a->src[q + j];
}

/* Row r = (ci, u, t) of the unrolled windows of group g of sample s for
 * positions [q0, q0 + width) into dst, column q - q0. Positions past the
 * last one are zero. */
static void unroll_row(const struct conv *v, const float *x, int64_t s,
                       int64_t g, int64_t r, int64_t q0, int64_t width,
                       float *dst) {
  int64_t ci = r / (v->kh * v->kw);
  struct run_rows a = {x + (s * v->c + g * v->cg + ci) * v->h * v->w, dst - q0,
                       v->sw, q0};
  for_each_run(v, r, q0, min64(q0 + width, v->p), copy_run, &a);
  zero_row(a.dst + a.filled, q0 + width - a.filled);
}

/* All of them, rows `ld` apart. */
static void unroll(const struct conv *v, const float *x, int64_t s, int64_t g,
                   int64_t q0, int64_t width, float *cols, int64_t ld) {
  for (int64_t r = 0; r < v->k; ++r)
    unroll_row(v, x, s, g, r, q0, width, cols + r * ld);
}

/* col2im: adds dcols (rows `width` apart, positions [q0, q0 + width)) into
 * the input gradient planes of group g of sample s. */
static void roll(const struct conv *v, const float *cols, int64_t s, int64_t g,
                 int64_t q0, int64_t width, float *dx) {
  for (int64_t r = 0; r < v->k; ++r) {
    int64_t ci = r / (v->kh * v->kw);
    struct run_rows a = {cols + r * width - q0,
                         dx + (s * v->c + g * v->cg + ci) * v->h * v->w, v->sw,
                         0};
    for_each_run(v, r, q0, min64(q0 + width, v->p), add_run, &a);
  }
}

/* The forward tile: C[i][0, NR) = sum over k of A[k][i] B[off[k] + 0 .. NR)
 * for rows i < mr of an A packed as [kn][MR]. */
static void tile(int64_t kn, const float *a, const float *b, const int64_t *off,
                 float *c, int64_t ldc, int64_t mr) {
  vf acc[MR][2];
  for (int i = 0; i < MR; ++i)
    acc[i][0] = acc[i][1] = (vf){0};
  for (int64_t k = 0; k < kn; ++k) {
    const float *bk = b + off[k];
    vf b0 = load(bk), b1 = load(bk + VW);
    const float *ak = a + k * MR;
    for (int i = 0; i < MR; ++i) {
      acc[i][0] += ak[i] * b0;
      acc[i][1] += ak[i] * b1;
    }
  }
  for (int64_t i = 0; i < mr; ++i) {
    store(c + i * ldc, acc[i][0]);
    store(c + i * ldc + VW, acc[i][1]);
  }
}

/* C [rows, width] = A x B-view for columns [0, width) (a multiple of NR),
 * A packed by pack_rows. */
static void product(int64_t rows, int64_t kn, const float *apack,
                    const float *b, const int64_t *off, float *c,
                    int64_t width) {
  for (int64_t q = 0; q < width; q += NR)
    for (int64_t r0 = 0; r0 < rows; r0 += MR)
      tile(kn, apack + r0 * kn, b + q, off, c + r0 * width + q, width,
           min64(MR, rows - r0));
}

/* Packs A [rows, kn] (element (i, k) at a[i * rs + k * ks]) as blocks of MR
 * rows, [block][k][MR], zero past the last row. */
static void pack_rows(const float *a, int64_t rows, int64_t kn, int64_t rs,
                      int64_t ks, float *dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += MR)
    for (int64_t k = 0; k < kn; ++k)
      for (int64_t i = 0; i < MR; ++i)
        *dst++ = r0 + i < rows ? a[(r0 + i) * rs + k * ks] : 0.0f;
}

/*===--- forward ----------------------------------------------------------===*/

struct forward_args {
  const struct conv *v;
  const float *x, *apack; /* apack: per group, og rows of K packed */
  float *y;
};

static void forward_direct(void *ctx, int64_t begin, int64_t end) {
  const struct forward_args *a = ctx;
  const struct conv *v = a->v;
  float *padded =
      scratch(v->cg * v->plane + NR, "out of memory for a convolution's input");
  float *wide =
      scratch(v->og * v->qr, "out of memory for a convolution's output");
  int64_t *off = offsets(v->k);
  direct_offsets(v, v->plane, off);
  memset(padded + v->cg * v->plane, 0, NR * sizeof(float));
  int64_t packed = round_up(v->og, MR) * v->k;
  for (int64_t task = begin; task < end; ++task) {
    int64_t s = task / v->groups, g = task % v->groups;
    for (int64_t ci = 0; ci < v->cg; ++ci)
      pad_plane(v, a->x, s, g * v->cg + ci, padded + ci * v->plane);
    product(v->og, v->k, a->apack + g * packed, padded, off, wide, v->qr);
    for (int64_t oc = 0; oc < v->og; ++oc) {
      float *out = a->y + (s * v->o + g * v->og + oc) * v->p;
      for (int64_t i = 0; i < v->oh; ++i)
        copy_row(out + i * v->ow, wide + oc * v->qr + i * v->wp, v->ow);
    }
  }
  free(off);
  free(wide);
  free(padded);
}

/* Positions per unrolled chunk: a multiple of NR, its windows in budget. */
static int64_t cols_width(const struct conv *v) {
  int64_t width = kColsFloats / (v->k > 0 ? v->k : 1) / NR * NR;
  if (width < NR)
    width = NR;
  return min64(width, round_up(v->p, NR));
}

static void forward_unrolled(void *ctx, int64_t begin, int64_t end) {
  const struct forward_args *a = ctx;
  const struct conv *v = a->v;
  int64_t width = cols_width(v);
  float *cols =
      scratch(v->k * width + NR, "out of memory for a convolution's windows");
  float *out =
      scratch(v->og * width, "out of memory for a convolution's output");
  int64_t *off = row_offsets(v->k, width);
  int64_t packed = round_up(v->og, MR) * v->k;
  for (int64_t task = begin; task < end; ++task) {
    int64_t s = task / v->groups, g = task % v->groups;
    for (int64_t q0 = 0; q0 < v->p; q0 += width) {
      unroll(v, a->x, s, g, q0, width, cols, width);
      product(v->og, v->k, a->apack + g * packed, cols, off, out, width);
      int64_t count = min64(width, v->p - q0);
      for (int64_t oc = 0; oc < v->og; ++oc)
        copy_row(a->y + (s * v->o + g * v->og + oc) * v->p + q0,
                 out + oc * width, count);
    }
  }
  free(off);
  free(out);
  free(cols);
}

static void forward(const struct conv *v, const float *x, const float *w,
                    float *y) {
  int64_t packed = round_up(v->og, MR) * v->k;
  float *apack =
      scratch(v->groups * packed, "out of memory for a convolution's weights");
  for (int64_t g = 0; g < v->groups; ++g)
    pack_rows(w + g * v->og * v->k, v->og, v->k, v->k, 1, apack + g * packed);
  struct forward_args a = {v, x, apack, y};
  dtk_parallel_for(v->n * v->groups, 1,
                   is_direct(v) ? forward_direct : forward_unrolled, &a);
  free(apack);
}

void dtk_conv2d_f32(const float *x, const float *w, float *y, int64_t n,
                    int64_t c, int64_t h, int64_t wd, int64_t o, int64_t kh,
                    int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                    int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                    int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  forward(&v, x, w, y);
}

/*===--- input gradient ---------------------------------------------------===*/

struct input_grad_args {
  const struct conv *v;
  const float *dy, *apack; /* apack: per group, K rows of og packed (W^T) */
  float *dx;
};

static void input_grad_unrolled(void *ctx, int64_t begin, int64_t end) {
  const struct input_grad_args *a = ctx;
  const struct conv *v = a->v;
  int64_t width = cols_width(v);
  float *grad =
      scratch(v->og * width + NR, "out of memory for a convolution's gradient");
  float *cols =
      scratch(v->k * width, "out of memory for a convolution's windows");
  int64_t *off = row_offsets(v->og, width);
  int64_t packed = round_up(v->k, MR) * v->og;
  for (int64_t task = begin; task < end; ++task) {
    int64_t s = task / v->groups, g = task % v->groups;
    for (int64_t ci = 0; ci < v->cg; ++ci)
      memset(a->dx + (s * v->c + g * v->cg + ci) * v->h * v->w, 0,
             (size_t)(v->h * v->w) * sizeof(float));
    for (int64_t q0 = 0; q0 < v->p; q0 += width) {
      int64_t count = min64(width, v->p - q0);
      for (int64_t oc = 0; oc < v->og; ++oc) {
        float *row = grad + oc * width;
        copy_row(row, a->dy + (s * v->o + g * v->og + oc) * v->p + q0, count);
        memset(row + count, 0, (size_t)(width - count) * sizeof(float));
      }
      product(v->k, v->og, a->apack + g * packed, grad, off, cols, width);
      roll(v, cols, s, g, q0, width, a->dx);
    }
  }
  free(off);
  free(cols);
  free(grad);
}

void dtk_conv2d_input_grad_f32(const float *dy, const float *w, float *dx,
                               int64_t n, int64_t c, int64_t h, int64_t wd,
                               int64_t o, int64_t kh, int64_t kw, int64_t oh,
                               int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                               int64_t pw, int64_t dh, int64_t dw,
                               int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  int64_t fh = dh * (kh - 1) - ph, fw = dw * (kw - 1) - pw;
  if (is_direct(&v) && fh >= 0 && fw >= 0) {
    /* dx is dy convolved with the flipped weights, input and output channels
     * swapped within each group, under the padding that makes it "full". */
    struct conv t =
        make_conv(n, o, oh, ow, c, kh, kw, h, wd, 1, 1, fh, fw, dh, dw, groups);
    float *flipped =
        scratch(c * t.k, "out of memory for a convolution's weights");
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t ci = 0; ci < v.cg; ++ci)
        for (int64_t oc = 0; oc < v.og; ++oc)
          for (int64_t u = 0; u < kh; ++u)
            for (int64_t s = 0; s < kw; ++s)
              flipped[(((g * v.cg + ci) * v.og + oc) * kh + u) * kw + s] =
                  w[(((g * v.og + oc) * v.cg + ci) * kh + (kh - 1 - u)) * kw +
                    (kw - 1 - s)];
    forward(&t, dy, flipped, dx);
    free(flipped);
    return;
  }
  int64_t packed = round_up(v.k, MR) * v.og;
  float *apack =
      scratch(groups * packed, "out of memory for a convolution's weights");
  for (int64_t g = 0; g < groups; ++g)
    pack_rows(w + g * v.og * v.k, v.k, v.og, 1, v.k, apack + g * packed);
  struct input_grad_args a = {&v, dy, apack, dx};
  dtk_parallel_for(n * groups, 1, input_grad_unrolled, &a);
  free(apack);
}

/*===--- weight gradient --------------------------------------------------===*/

/* A chunk of samples staged for the weight gradient as rows over positions,
 * the chunk's samples one after another (`per` positions each) in every
 * row: the output gradient, a row per output channel, zero at positions
 * that are not outputs, so those lanes add nothing; and the input, a padded
 * plane per channel (direct) or a row of unrolled windows per tap. A tile of
 * dW is then a sum of products of whole rows. */
struct staged {
  const struct conv *v;
  const float *x, *dy;
  float *grad, *in;
  int direct;                       /* padded planes (else unrolled windows) */
  int64_t first, samples, per, len; /* len: floats per row */
};

/* Stages rows [begin, end) of the chunk: the output gradient's rows, then
 * the input's. A row at a time, every sample of it: the writes run along
 * the row (sample by sample, each sample writing a few dozen floats of
 * every row, wrote most cache lines twice). */
static void stage_rows(void *ctx, int64_t begin, int64_t end) {
  const struct staged *a = ctx;
  const struct conv *v = a->v;
  for (int64_t r = begin; r < end; ++r)
    for (int64_t s = 0; s < a->samples; ++s) {
      int64_t sample = a->first + s;
      if (r < v->o) {
        const float *src = a->dy + (sample * v->o + r) * v->p;
        float *row = a->grad + r * a->len + s * a->per;
        if (a->direct) {
          memset(row, 0, (size_t)a->per * sizeof(float));
          for (int64_t i = 0; i < v->oh; ++i)
            copy_row(row + i * v->wp, src + i * v->ow, v->ow);
        } else {
          copy_row(row, src, v->p);
        }
        continue;
      }
      int64_t in = r - v->o;
      float *row = a->in + in * a->len + s * a->per;
      if (a->direct)
        pad_plane(v, a->x, sample, in, row);
      else
        unroll_row(v, a->x, sample, in / v->k, in % v->k, 0, v->p, row);
    }
}

/* Tiles of dW: group, block of MO output channels, block of MK taps. */
struct weight_grad_args {
  const struct staged *st;
  const int64_t *off; /* tap r's row (and shift) in a group's staged input */
  float *dw;
  int64_t oblocks, kblocks;
};

/* Tiles are numbered in blocks of BO x BK (output channel blocks x tap
 * blocks, group by group), so that a batch of consecutive tiles reads a few
 * rows of each kind rather than one output block against every tap. */
enum { BO = 8, BK = 32 };

static void tile_at(const struct weight_grad_args *a, int64_t t, int64_t *g,
                    int64_t *ob, int64_t *kb) {
  int64_t per_group = a->oblocks * a->kblocks, at = t % per_group;
  *g = t / per_group;
  /* Rows of blocks before this one are full, BO x kblocks tiles each; in
   * a row, the blocks before this one are BK tap blocks wide. */
  int64_t so = at / (BO * a->kblocks), rem = at % (BO * a->kblocks);
  int64_t bo = min64(BO, a->oblocks - so * BO);
  int64_t sk = rem / (bo * BK), in = rem % (bo * BK);
  int64_t bk = min64(BK, a->kblocks - sk * BK);
  *ob = so * BO + in / bk;
  *kb = sk * BK + in % bk;
}

/* Positions per pass over the staged rows for tiles [t0, t1): as many as
 * keep the rows those tiles read in L2. */
static int64_t pass_block(const struct weight_grad_args *a, int64_t t0,
                          int64_t t1) {
  const struct conv *v = a->st->v;
  int64_t taps = v->kh * v->kw, g, ob, kb;
  int64_t lo[3] = {INT64_MAX, INT64_MAX, INT64_MAX}, hi[3] = {0, 0, 0};
  for (int64_t t = t0; t < t1; ++t) {
    tile_at(a, t, &g, &ob, &kb);
    int64_t at[3] = {g, ob, kb * MK / taps};
    for (int d = 0; d < 3; ++d) {
      lo[d] = at[d] < lo[d] ? at[d] : lo[d];
      hi[d] = at[d] > hi[d] ? at[d] : hi[d];
    }
  }
  /* Input channels a tap block reaches past its first. */
  int64_t reach = (MK + taps - 1) / taps + 1;
  int64_t rows = hi[0] > lo[0] ? (hi[0] - lo[0] + 1) * (v->og + v->cg)
                               : (hi[1] - lo[1] + 1) * MO +
                                     min64(hi[2] - lo[2] + reach, v->cg);
  int64_t block = kBlockFloats / rows / VW * VW;
  return block < VW ? VW : block;
}

static void weight_tiles(void *ctx, int64_t begin, int64_t end) {
  const struct weight_grad_args *a = ctx;
  const struct staged *st = a->st;
  const struct conv *v = st->v;
  int64_t batch = kAccFloats / (MO * MK * VW);
  vf *accs = aligned_alloc(sizeof(vf), (size_t)batch * MO * MK * sizeof(vf));
  if (!accs)
    dtk_fail("out of memory for a convolution's weight gradient");
  int64_t in_group = v->cg * st->len;
  int64_t total = round_up(st->samples * st->per, VW);
  for (int64_t t0 = begin; t0 < end; t0 += batch) {
    int64_t t1 = min64(end, t0 + batch);
    memset(accs, 0, (size_t)(t1 - t0) * MO * MK * sizeof(vf));
    /* Pass over the positions a block at a time, every tile of the batch
     * over each block while it is in cache. */
    int64_t block = pass_block(a, t0, t1);
    for (int64_t q0 = 0; q0 < total; q0 += block) {
      int64_t q1 = min64(total, q0 + block);
      for (int64_t t = t0; t < t1; ++t) {
        int64_t g, ob, kb;
        tile_at(a, t, &g, &ob, &kb);
        const float *grow[MO], *irow[MK];
        for (int i = 0; i < MO; ++i)
          grow[i] =
              st->grad + (g * v->og + min64(ob * MO + i, v->og - 1)) * st->len;
        for (int j = 0; j < MK; ++j)
          irow[j] =
              st->in + g * in_group + a->off[min64(kb * MK + j, v->k - 1)];
        vf acc[MO][MK];
        __builtin_memcpy(acc, accs + (t - t0) * MO * MK, sizeof acc);
        for (int64_t q = q0; q < q1; q += VW) {
          vf gv[MO];
          for (int i = 0; i < MO; ++i)
            gv[i] = load(grow[i] + q);
          for (int j = 0; j < MK; ++j) {
            vf iv = load(irow[j] + q);
            for (int i = 0; i < MO; ++i)
              acc[i][j] += gv[i] * iv;
          }
        }
        __builtin_memcpy(accs + (t - t0) * MO * MK, acc, sizeof acc);
      }
    }
    for (int64_t t = t0; t < t1; ++t) {
      int64_t g, ob, kb;
      tile_at(a, t, &g, &ob, &kb);
      const vf *acc = accs + (t - t0) * MO * MK;
      for (int64_t i = 0; i < MO && ob * MO + i < v->og; ++i)
        for (int64_t j = 0; j < MK && kb * MK + j < v->k; ++j) {
          vf lanes = acc[i * MK + j];
          float sum = 0.0f;
          for (int l = 0; l < VW; ++l)
            sum += lanes[l];
          a->dw[(g * v->og + ob * MO + i) * v->k + kb * MK + j] += sum;
        }
    }
  }
  free(accs);
}

/* Whether the weight gradient reads padded planes directly and sums vector
 * tiles (else it unrolls the windows and calls BLAS). The tiles load an
 * operand per two multiply-adds and read their rows from L2, where BLAS's
 * packed panels reuse each load from L1; unrolling copies each input value
 * kh kw times, and BLAS runs poorly on a few output channels. Measured on
 * ResNet's and cnn_fashion's layers (batch 16 and 128, 1 and 2 threads):
 * the tiles are faster up to 128 input channels a group (1.5-3x on
 * cnn_fashion's), BLAS past that (1.4x at 512 channels of 7x7, where a
 * padded plane is 40 % padding). */
static int direct_weight_grad(const struct conv *v) {
  return is_direct(v) && v->cg <= 128;
}

void dtk_conv2d_weight_grad_f32(const float *x, const float *dy, float *dw_out,
                                int64_t n, int64_t c, int64_t h, int64_t wd,
                                int64_t o, int64_t kh, int64_t kw, int64_t oh,
                                int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                                int64_t pw, int64_t dh, int64_t dw,
                                int64_t groups) {
  struct conv v =
      make_conv(n, c, h, wd, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups);
  memset(dw_out, 0, (size_t)(o * v.k) * sizeof(float));
  if (n == 0 || v.p == 0)
    return;
  int direct = direct_weight_grad(&v);
  /* Positions per sample, and input rows: directly, a sample's place in a
   * row is its padded plane, its outputs at their wide positions. */
  int64_t per = direct ? v.plane : v.p;
  int64_t in_rows = direct ? c : c * kh * kw;
  int64_t chunk = kChunkFloats / ((o + in_rows) * per);
  chunk = chunk < 1 ? 1 : chunk > n ? n : chunk;
  /* Chunks of equal size: a last chunk of one sample is a product too
   * small to run well. */
  int64_t chunks = (n + chunk - 1) / chunk;
  chunk = (n + chunks - 1) / chunks;
  struct staged st = {&v, x, dy, NULL, NULL, direct, 0, 0, per, 0};
  st.len = round_up(chunk * per, VW);
  /* A direct tap reads its row shifted by up to a plane: the rows after the
   * last one's end are zero. */
  int64_t in_floats = in_rows * st.len + (direct ? v.plane + VW : 0);
  st.grad = scratch(o * st.len, "out of memory for a convolution's gradient");
  st.in = scratch(in_floats, "out of memory for a convolution's windows");
  int64_t *off = offsets(v.k);
  direct_offsets(&v, st.len, off);
  struct weight_grad_args a = {&st, off, dw_out, 0, 0};
  a.oblocks = round_up(v.og, MO) / MO;
  a.kblocks = round_up(v.k, MK) / MK;
  for (int64_t first = 0; first < n; first += chunk) {
    st.first = first;
    st.samples = min64(chunk, n - first);
    int64_t used = st.samples * per;
    if (direct) {
      /* Zero what no sample writes and the tiles read: the rows' ends, and
       * the slack. */
      for (int64_t r = 0; r < o; ++r)
        memset(st.grad + r * st.len + used, 0,
               (size_t)(st.len - used) * sizeof(float));
      for (int64_t r = 0; r < in_rows; ++r)
        memset(st.in + r * st.len + used, 0,
               (size_t)(st.len - used) * sizeof(float));
      memset(st.in + in_rows * st.len, 0,
             (size_t)(in_floats - in_rows * st.len) * sizeof(float));
    }
    dtk_parallel_for(o + in_rows, 1, stage_rows, &st);
    if (direct) {
      dtk_parallel_for(groups * a.oblocks * a.kblocks, 1, weight_tiles, &a);
      continue;
    }
    /* Unrolled, the staged rows are the matrices themselves: dW_g += dY_g
     * [og, positions] x cols_g^T [positions, K], rows `len` apart. */
    blasint m = dtk_blas_size(v.og, "conv2d_weight_grad"),
            nk = dtk_blas_size(v.k, "conv2d_weight_grad"),
            l = dtk_blas_size(used, "conv2d_weight_grad"),
            ld = dtk_blas_size(st.len, "conv2d_weight_grad");
    for (int64_t g = 0; g < groups; ++g)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nk, l, 1.0f,
                  st.grad + g * v.og * st.len, ld, st.in + g * v.k * st.len, ld,
                  1.0f, dw_out + g * v.og * v.k, nk);
  }
  free(off);
  free(st.in);
  free(st.grad);
}
