/*===- cross_entropy.c - softmax cross-entropy, its gradient, accuracy ----===*
 *
 * Labels come from the data: a negative label marks a padded position
 *(ignored), a label
 * >= the number of classes is a data/model mismatch and is reported.
 *
 *===----------------------------------------------------------------------------===*/

#include "checks.h"

#include <math.h>
#include <stdio.h>

/* log(sum(exp(row))) with the maximum subtracted first */
static float log_sum_exp(const float *row, int64_t n) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    mx = fmaxf(mx, row[j]);
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j)
    s += expf(row[j] - mx);
  return mx + logf(s);
}

void dtk_cross_entropy_f32(const float *logits, const int32_t *labels,
                           float *loss, int64_t rows, int64_t classes) {
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0)
      continue;
    dtk_check_label(labels[r], classes);
    const float *row = logits + r * classes; /* (classes) */
    sum += log_sum_exp(row, classes) - row[labels[r]];
    ++count;
  }
  *loss = count ? (float)(sum / (double)count) : 0.0f;
}

void dtk_cross_entropy_grad_f32(const float *logits, const int32_t *labels,
                                const float *dloss, float *dlogits,
                                int64_t rows, int64_t classes) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += labels[r] >= 0;
  float scale = count ? *dloss / (float)count : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits + r * classes; /* (classes) */
    float *d = dlogits + r * classes;
    if (labels[r] < 0) {
      for (int64_t j = 0; j < classes; ++j)
        d[j] = 0.0f;
      continue;
    }
    dtk_check_label(labels[r], classes);
    float lse = log_sum_exp(row, classes);
    for (int64_t j = 0; j < classes; ++j)
      d[j] = expf(row[j] - lse) * scale;
    d[labels[r]] -= scale;
  }
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
