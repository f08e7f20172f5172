/*===- attention.c - scaled dot-product attention, forward and backward ---===*
 *
 * Per (batch, head) slice of [t, d]: S = Q K^T / sqrt(d) (+ causal mask),
 * P = softmax(S), O = P V. FlashAttention's algorithm, on the CPU:
 *
 *   Forward. Queries go in panels of kRows rows, keys in blocks of kCols. Per
 *   block: the scores, each row's running maximum and sum (online softmax),
 *   the panel's output rescaled by exp(old max - new max) and P V added. At
 *   most kRows x kCols scores exist at once, whatever t is.
 *   The forward also stores each row's log-sum-exp, m + log(sum).
 *   Backward. Per panel it recomputes the panel's scores over the keys it
 *   sees and their softmax P = exp(S - lse) from the forward's log-sum-exp
 *   (no pass for the rows' maxima and sums), then dP = dO V^T,
 *   dS = P * (dP - D) with D = rowsum(dO * O) (FlashAttention-2's identity:
 *   rowsum(P * dP) = dO . P V), dQ = dS K / sqrt(d), and adds
 *   dK += dS^T Q / sqrt(d), dV += P^T dO. Its scratch grows as kRows x t,
 *   never t x t.
 *
 * Under the causal mask a panel computes only the key blocks it can see, half
 * the products of the full square. Every product is the one register tile of
 * tile() (2 rows x 32 columns of eight-float vectors); each slice's operands
 * are first copied into aligned, zero-padded scratch in the layout the tile
 * reads (Q scaled by 1/sqrt(d), K and V transposed where their columns are
 * the tile's rows). No BLAS: at these sizes its packing and the zeroing of
 * each output cost as much as the products.
 *
 * Slices run in parallel (dtk_parallel_for); a slice's arithmetic does not
 * depend on which thread runs it, so results are the same bits on any thread
 * count.
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "vmath.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Query rows per panel (even: the tile takes rows in pairs), keys per
 * forward block (a multiple of the tile's 32 columns). */
enum { kRows = 16, kCols = 64, kTile = 32 };

/* Slices per range: below 2 x this many, one thread does them all. */
enum { kSliceGrain = 2 };

static int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* c_r[0, 32) = (accumulate ? c_r : 0) + sum_{x < n} a_r[x * sa] * b_x[0, 32)
 * for r = 0, 1, where b_x = b + x * ldb: a 2 x 32 tile in eight registers.
 * b and c are 32-byte aligned. */
static inline void tile(const float *a0, const float *a1, int64_t sa,
                        const float *b, int64_t ldb, int64_t n, float *c0,
                        float *c1, int accumulate) {
  dtk_v8 x0 = {0}, x1 = {0}, x2 = {0}, x3 = {0};
  dtk_v8 y0 = {0}, y1 = {0}, y2 = {0}, y3 = {0};
  if (accumulate) {
    x0 = *(dtk_v8 *)c0, x1 = *(dtk_v8 *)(c0 + 8);
    x2 = *(dtk_v8 *)(c0 + 16), x3 = *(dtk_v8 *)(c0 + 24);
    y0 = *(dtk_v8 *)c1, y1 = *(dtk_v8 *)(c1 + 8);
    y2 = *(dtk_v8 *)(c1 + 16), y3 = *(dtk_v8 *)(c1 + 24);
  }
  for (int64_t x = 0; x < n; ++x) {
    const float *bx = b + x * ldb;
    dtk_v8 b0 = *(const dtk_v8 *)bx, b1 = *(const dtk_v8 *)(bx + 8);
    dtk_v8 b2 = *(const dtk_v8 *)(bx + 16), b3 = *(const dtk_v8 *)(bx + 24);
    dtk_v8 s = dtk_splat8(a0[x * sa]), u = dtk_splat8(a1[x * sa]);
    x0 += s * b0, x1 += s * b1, x2 += s * b2, x3 += s * b3;
    y0 += u * b0, y1 += u * b1, y2 += u * b2, y3 += u * b3;
  }
  *(dtk_v8 *)c0 = x0, *(dtk_v8 *)(c0 + 8) = x1;
  *(dtk_v8 *)(c0 + 16) = x2, *(dtk_v8 *)(c0 + 24) = x3;
  *(dtk_v8 *)c1 = y0, *(dtk_v8 *)(c1 + 8) = y1;
  *(dtk_v8 *)(c1 + 16) = y2, *(dtk_v8 *)(c1 + 24) = y3;
}

/* dst (rows x ld) = src (t x d) * scale, zero-padded to the right and below */
static void copy_rows(float *dst, int64_t rows, int64_t ld, const float *src,
                      int64_t t, int64_t d, float scale) {
  memset(dst, 0, (size_t)(rows * ld) * sizeof(float));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t c = 0; c < d; ++c)
      dst[i * ld + c] = src[i * d + c] * scale;
}

/* dst (d x ld) = src (t x d) transposed, zero-padded to the right */
static void copy_transposed(float *dst, int64_t ld, const float *src, int64_t t,
                            int64_t d) {
  memset(dst, 0, (size_t)(d * ld) * sizeof(float));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t c = 0; c < d; ++c)
      dst[c * ld + i] = src[i * d + c];
}

struct attention_args {
  const float *q, *k, *v, *dout;
  float *o, *lse;                   /* the forward's results */
  const float *saved_o, *saved_lse; /* the same, as backward reads them */
  float *dq, *dk, *dv;
  int64_t t, d;
  int32_t causal;
};

/* The padded sizes of a slice's scratch: d to whole tiles (dp), keys to whole
 * tiles (tp), queries to whole panels (tq). */
struct sizes {
  int64_t dp, tp, tq;
};

static struct sizes sizes_of(const struct attention_args *a) {
  return (struct sizes){round_up(a->d, kTile), round_up(a->t, kTile),
                        round_up(a->t, kRows)};
}

/* One allocation (returned, for free) carved into `count` arrays, *parts[i]
 * of counts[i] floats, each 64-byte aligned. */
static float *carve(float **parts[], const int64_t counts[], int count) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i)
    total += round_up(counts[i], 16);
  float *base = aligned_alloc(64, (size_t)total * sizeof(float));
  if (!base)
    dtk_fail("out of memory for attention scratch space");
  for (int64_t i = 0, at = 0; i < count; at += round_up(counts[i], 16), ++i)
    *parts[i] = base + at;
  return base;
}

/* The keys query row i sees: the first i + 1 under the causal mask. */
static int64_t visible(const struct attention_args *a, int64_t i) {
  return a->causal ? min64(i + 1, a->t) : a->t;
}

/* Row max of s[0, width) after masking s[limit, width) to -inf. */
static float masked_max(float *s, int64_t limit, int64_t width) {
  for (int64_t x = limit; x < width; ++x)
    s[x] = -INFINITY;
  dtk_v8 mx = dtk_splat8(-INFINITY);
  for (int64_t x = 0; x < width; x += 8)
    mx = dtk_max8(mx, *(dtk_v8 *)(s + x));
  return dtk_hmax8(mx);
}

/* s[0, width) = exp(s - shift); returns their sum */
static float exp_shifted(float *s, int64_t width, float shift) {
  dtk_v8 sum = {0};
  for (int64_t x = 0; x < width; x += 8) {
    dtk_v8 e = dtk_exp8(*(dtk_v8 *)(s + x) - shift);
    *(dtk_v8 *)(s + x) = e;
    sum += e;
  }
  return dtk_hsum8(sum);
}

static void forward_slices(void *ctx, int64_t begin, int64_t end) {
  const struct attention_args *a = ctx;
  const int64_t t = a->t, d = a->d;
  const struct sizes z = sizes_of(a);
  float *qs, *kt, *vs, *sc, *out; /* Q, K^T, V; a block's scores; a panel's O */
  float *memory = carve((float **[]){&qs, &kt, &vs, &sc, &out},
                        (int64_t[]){z.tq * z.dp, d * z.tp, z.tp * z.dp,
                                    kRows * kCols, kRows * z.dp},
                        5);

  for (int64_t s = begin; s < end; ++s) {
    const int64_t base = s * t * d;
    copy_rows(qs, z.tq, z.dp, a->q + base, t, d, 1.0f / sqrtf((float)d));
    copy_transposed(kt, z.tp, a->k + base, t, d);
    copy_rows(vs, z.tp, z.dp, a->v + base, t, d, 1.0f);
    for (int64_t i0 = 0; i0 < t; i0 += kRows) {
      float mx[kRows], sum[kRows];
      for (int r = 0; r < kRows; ++r)
        mx[r] = -INFINITY, sum[r] = 0.0f;
      memset(out, 0, (size_t)(kRows * z.dp) * sizeof(float));
      const int64_t keys = a->causal ? min64(i0 + kRows, t) : t;
      for (int64_t j0 = 0; j0 < keys; j0 += kCols) {
        const int64_t width = min64(kCols, round_up(keys - j0, kTile));
        for (int r = 0; r < kRows; r += 2)
          for (int64_t jc = 0; jc < width; jc += kTile)
            tile(qs + (i0 + r) * z.dp, qs + (i0 + r + 1) * z.dp, 1,
                 kt + j0 + jc, z.tp, d, sc + r * kCols + jc,
                 sc + (r + 1) * kCols + jc, 0);
        for (int r = 0; r < kRows; ++r) {
          float *row = sc + r * kCols;
          const int64_t limit = visible(a, i0 + r) - j0;
          if (limit <= 0) { /* a row that sees none of this block */
            memset(row, 0, (size_t)width * sizeof(float));
            continue;
          }
          const float m = fmaxf(mx[r], masked_max(row, limit, width));
          const float rescale = expf(mx[r] - m); /* 0 on the first block */
          sum[r] = sum[r] * rescale + exp_shifted(row, width, m);
          mx[r] = m;
          if (rescale != 1.0f)
            for (int64_t c = 0; c < z.dp; ++c)
              out[r * z.dp + c] *= rescale;
        }
        for (int r = 0; r < kRows; r += 2)
          for (int64_t c0 = 0; c0 < z.dp; c0 += kTile)
            tile(sc + r * kCols, sc + (r + 1) * kCols, 1, vs + j0 * z.dp + c0,
                 z.dp, width, out + r * z.dp + c0, out + (r + 1) * z.dp + c0,
                 1);
      }
      for (int64_t r = 0; r < kRows && i0 + r < t; ++r) {
        const float inv = 1.0f / sum[r];
        float *o = a->o + base + (i0 + r) * d;
        for (int64_t c = 0; c < d; ++c)
          o[c] = out[r * z.dp + c] * inv;
        a->lse[s * t + i0 + r] = mx[r] + logf(sum[r]);
      }
    }
  }
  free(memory);
}

static void backward_slices(void *ctx, int64_t begin, int64_t end) {
  const struct attention_args *a = ctx;
  const int64_t t = a->t, d = a->d;
  const struct sizes z = sizes_of(a);
  const float scale = 1.0f / sqrtf((float)d);
  /* Q (scaled), dO, K, K^T, V^T, the dK and dV sums, and a panel's P, dP
   * (then dS) and dQ */
  float *qs, *dos, *ks, *kt, *vt, *dk, *dv, *p, *dp, *dq;
  float *memory = carve(
      (float **[]){&qs, &dos, &ks, &kt, &vt, &dk, &dv, &p, &dp, &dq},
      (int64_t[]){z.tq * z.dp, z.tq * z.dp, z.tp * z.dp, d * z.tp, d * z.tp,
                  z.tp * z.dp, z.tp * z.dp, kRows * z.tp, kRows * z.tp,
                  kRows * z.dp},
      10);

  for (int64_t s = begin; s < end; ++s) {
    const int64_t base = s * t * d;
    copy_rows(qs, z.tq, z.dp, a->q + base, t, d, scale);
    copy_rows(dos, z.tq, z.dp, a->dout + base, t, d, 1.0f);
    copy_rows(ks, z.tp, z.dp, a->k + base, t, d, 1.0f);
    copy_transposed(kt, z.tp, a->k + base, t, d);
    copy_transposed(vt, z.tp, a->v + base, t, d);
    memset(dk, 0, (size_t)(z.tp * z.dp) * sizeof(float));
    memset(dv, 0, (size_t)(z.tp * z.dp) * sizeof(float));
    for (int64_t i0 = 0; i0 < t; i0 += kRows) {
      const int64_t width = round_up(a->causal ? min64(i0 + kRows, t) : t,
                                     kTile);
      for (int r = 0; r < kRows; r += 2)
        for (int64_t jc = 0; jc < width; jc += kTile) {
          tile(qs + (i0 + r) * z.dp, qs + (i0 + r + 1) * z.dp, 1, kt + jc,
               z.tp, d, p + r * z.tp + jc, p + (r + 1) * z.tp + jc, 0);
          tile(dos + (i0 + r) * z.dp, dos + (i0 + r + 1) * z.dp, 1, vt + jc,
               z.tp, d, dp + r * z.tp + jc, dp + (r + 1) * z.tp + jc, 0);
        }
      for (int r = 0; r < kRows; ++r) {
        float *pr = p + r * z.tp, *dr = dp + r * z.tp;
        const int64_t i = i0 + r;
        if (i >= t) { /* a panel's padding: no probabilities, no gradient */
          memset(pr, 0, (size_t)width * sizeof(float));
          memset(dr, 0, (size_t)width * sizeof(float));
          continue;
        }
        const float *o = a->saved_o + base + i * d, *g = a->dout + base + i * d;
        float rowdot = 0.0f;
        for (int64_t c = 0; c < d; ++c)
          rowdot += g[c] * o[c];
        const int64_t limit = visible(a, i);
        for (int64_t x = limit; x < width; ++x)
          pr[x] = -INFINITY;
        const dtk_v8 lse = dtk_splat8(a->saved_lse[s * t + i]),
                     dot = dtk_splat8(rowdot);
        for (int64_t x = 0; x < width; x += 8) {
          dtk_v8 px = dtk_exp8(*(dtk_v8 *)(pr + x) - lse);
          *(dtk_v8 *)(pr + x) = px;
          *(dtk_v8 *)(dr + x) = px * (*(dtk_v8 *)(dr + x) - dot);
        }
      }
      /* dQ = dS K * scale */
      for (int r = 0; r < kRows; r += 2)
        for (int64_t c0 = 0; c0 < z.dp; c0 += kTile)
          tile(dp + r * z.tp, dp + (r + 1) * z.tp, 1, ks + c0, z.dp, width,
               dq + r * z.dp + c0, dq + (r + 1) * z.dp + c0, 0);
      for (int64_t r = 0; r < kRows && i0 + r < t; ++r) {
        float *row = a->dq + base + (i0 + r) * d;
        for (int64_t c = 0; c < d; ++c)
          row[c] = dq[r * z.dp + c] * scale;
      }
      /* dK += dS^T (Q * scale), dV += P^T dO: columns j of dS and P */
      for (int64_t j = 0; j < width; j += 2)
        for (int64_t c0 = 0; c0 < z.dp; c0 += kTile) {
          tile(dp + j, dp + j + 1, z.tp, qs + i0 * z.dp + c0, z.dp, kRows,
               dk + j * z.dp + c0, dk + (j + 1) * z.dp + c0, 1);
          tile(p + j, p + j + 1, z.tp, dos + i0 * z.dp + c0, z.dp, kRows,
               dv + j * z.dp + c0, dv + (j + 1) * z.dp + c0, 1);
        }
    }
    for (int64_t j = 0; j < t; ++j)
      for (int64_t c = 0; c < d; ++c) {
        a->dk[base + j * d + c] = dk[j * z.dp + c];
        a->dv[base + j * d + c] = dv[j * z.dp + c];
      }
  }
  free(memory);
}

void dtk_attention_f32(const float *q, const float *k, const float *v, float *o,
                       float *lse, int64_t slices, int64_t t, int64_t d,
                       int32_t causal) {
  if (t <= 0 || d <= 0)
    return;
  struct attention_args a = {.q = q,
                             .k = k,
                             .v = v,
                             .o = o,
                             .lse = lse,
                             .t = t,
                             .d = d,
                             .causal = causal};
  dtk_parallel_for(slices, kSliceGrain, forward_slices, &a);
}

void dtk_attention_grad_f32(const float *q, const float *k, const float *v,
                            const float *o, const float *lse, const float *dout,
                            float *dq, float *dk, float *dv, int64_t slices,
                            int64_t t, int64_t d, int32_t causal) {
  if (t <= 0 || d <= 0)
    return;
  struct attention_args a = {.q = q,
                             .k = k,
                             .v = v,
                             .dout = dout,
                             .saved_o = o,
                             .saved_lse = lse,
                             .dq = dq,
                             .dk = dk,
                             .dv = dv,
                             .t = t,
                             .d = d,
                             .causal = causal};
  dtk_parallel_for(slices, kSliceGrain, backward_slices, &a);
}
