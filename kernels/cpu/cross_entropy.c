/*===- cross_entropy.c - softmax cross-entropy, its gradient, accuracy ----===*
 *
 * Labels come from the data: a negative label marks a padded position
 * (ignored), a label >= the number of classes is a data/model mismatch and is
 * reported. Rows run in parallel (dtk_parallel_for); the loss sums the rows'
 * terms in row order afterwards, so it is the same on any thread count.
 *
 *===----------------------------------------------------------------------===*/

#include "checks.h"
#include "vmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Rows per range: below 2 x this many, one thread does them all. */
enum { kRowGrain = 64 };

/* log(sum(exp(row))) with the maximum subtracted first, eight lanes at a
 * time and the remainder after */
static float log_sum_exp(const float *row, int64_t n) {
  const int64_t whole = n - n % 8;
  dtk_v8 mx8 = dtk_splat8(-INFINITY);
  for (int64_t j = 0; j < whole; j += 8)
    mx8 = dtk_max8(mx8, dtk_load8u(row + j));
  float mx = dtk_hmax8(mx8);
  for (int64_t j = whole; j < n; ++j)
    mx = fmaxf(mx, row[j]);
  dtk_v8 s8 = {0};
  for (int64_t j = 0; j < whole; j += 8)
    s8 += dtk_exp8(dtk_load8u(row + j) - mx);
  float s = dtk_hsum8(s8);
  for (int64_t j = whole; j < n; ++j)
    s += expf(row[j] - mx);
  return mx + logf(s);
}

struct ce_args {
  const float *logits;
  const int32_t *labels;
  float *dlogits;
  double *terms;
  float scale;
  int64_t classes;
};

static void ce_rows(void *ctx, int64_t begin, int64_t end) {
  const struct ce_args *a = ctx;
  for (int64_t r = begin; r < end; ++r) {
    if (a->labels[r] < 0)
      continue;
    dtk_check_label(a->labels[r], a->classes);
    const float *row = a->logits + r * a->classes; /* (classes) */
    a->terms[r] = log_sum_exp(row, a->classes) - row[a->labels[r]];
  }
}

void dtk_cross_entropy_f32(const float *logits, const int32_t *labels,
                           float *loss, int64_t rows, int64_t classes) {
  double *terms = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double));
  if (!terms)
    dtk_fail("out of memory for the cross-entropy's row terms");
  struct ce_args a = {logits, labels, NULL, terms, 0.0f, classes};
  dtk_parallel_for(rows, kRowGrain, ce_rows, &a);
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] >= 0) {
      sum += terms[r];
      ++count;
    }
  free(terms);
  *loss = count ? (float)(sum / (double)count) : 0.0f;
}

static void ce_grad_rows(void *ctx, int64_t begin, int64_t end) {
  const struct ce_args *a = ctx;
  int64_t classes = a->classes;
  for (int64_t r = begin; r < end; ++r) {
    const float *row = a->logits + r * classes; /* (classes) */
    float *d = a->dlogits + r * classes;
    if (a->labels[r] < 0) {
      for (int64_t j = 0; j < classes; ++j)
        d[j] = 0.0f;
      continue;
    }
    dtk_check_label(a->labels[r], classes);
    float lse = log_sum_exp(row, classes);
    const int64_t whole = classes - classes % 8;
    for (int64_t j = 0; j < whole; j += 8)
      dtk_store8u(d + j, dtk_exp8(dtk_load8u(row + j) - lse) * a->scale);
    for (int64_t j = whole; j < classes; ++j)
      d[j] = expf(row[j] - lse) * a->scale;
    d[a->labels[r]] -= a->scale;
  }
}

void dtk_cross_entropy_grad_f32(const float *logits, const int32_t *labels,
                                const float *dloss, float *dlogits,
                                int64_t rows, int64_t classes) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += labels[r] >= 0;
  float scale = count ? *dloss / (float)count : 0.0f;
  struct ce_args a = {logits, labels, dlogits, NULL, scale, classes};
  dtk_parallel_for(rows, kRowGrain, ce_grad_rows, &a);
}

void dtk_count_correct_f32(const float *logits, const int32_t *labels,
                           float *correct, int64_t rows, int64_t classes) {
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0)
      continue;
    const float *row = logits + r * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (row[j] > row[best])
        best = j;
    hits += best == labels[r];
  }
  *correct = (float)hits;
}
