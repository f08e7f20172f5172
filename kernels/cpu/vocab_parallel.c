/*===- vocab_parallel.c - embeddings and cross-entropy over class blocks --===*
 *
 * Megatron's vocabulary parallelism: each rank holds a block of an embedding
 * table's rows, or of the logits' classes, and no rank ever holds them all. A
 * lookup reads zeros for ids in other blocks (the ranks' results are then
 * summed); a cross-entropy exchanges four numbers per position and block (its
 * maximum, its sum of exponentials, the label's logit, its arg-max) instead of
 * the logits. The statistics are combined in the same order on every rank, so
 * every rank computes the same loss.
 *
 *===----------------------------------------------------------------------------===*/

#include "checks.h"

#include <math.h>
#include <string.h>

enum { kMax = 0, kSum = 1, kTarget = 2, kArgMax = 3, kStats = 4 };

void dtk_embedding_shard_f32(const float *table, const int32_t *ids, float *out,
                             int64_t n, int64_t first, int64_t count,
                             int64_t total, int64_t width) {
  for (int64_t i = 0; i < n; ++i) {
    dtk_check_id(ids[i], total);
    int64_t row = (int64_t)ids[i] - first;
    if (row >= 0 && row < count)
      memcpy(out + i * width, table + row * width,
             (size_t)width * sizeof(float));
    else
      memset(out + i * width, 0, (size_t)width * sizeof(float));
  }
}

void dtk_embedding_grad_shard_f32(const int32_t *ids, const float *dout,
                                  float *dtable, int64_t n, int64_t first,
                                  int64_t count, int64_t total, int64_t width) {
  memset(dtable, 0, (size_t)(count * width) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    dtk_check_id(ids[i], total);
    int64_t row = (int64_t)ids[i] - first;
    if (row < 0 || row >= count)
      continue;
    float *to = dtable + row * width; /* (width) */
    const float *g = dout + i * width;
    for (int64_t j = 0; j < width; ++j)
      to[j] += g[j];
  }
}

void dtk_class_stats_f32(const float *logits, const int32_t *labels,
                         float *stats, int64_t rows, int64_t classes,
                         int64_t first, int64_t total) {
  /* Columns past `total` are the padding of an uneven last block. */
  int64_t valid = total - first < classes ? total - first : classes;
  if (valid < 0)
    valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -INFINITY, sum = 0.0f, target = 0.0f, arg = -1.0f;
    if (labels[r] >= 0) {
      dtk_check_label(labels[r], total);
      const float *row = logits + r * classes; /* (classes) */
      int64_t best = -1;
      for (int64_t j = 0; j < valid; ++j)
        if (best < 0 || row[j] > row[best])
          best = j;
      if (best >= 0) {
        mx = row[best];
        arg = (float)(first + best);
        for (int64_t j = 0; j < valid; ++j)
          sum += expf(row[j] - mx);
      }
      int64_t at = (int64_t)labels[r] - first;
      if (at >= 0 && at < valid)
        target = row[at];
    }
    stats[kMax * rows + r] = mx;
    stats[kSum * rows + r] = sum;
    stats[kTarget * rows + r] = target;
    stats[kArgMax * rows + r] = arg;
  }
}

/* The statistic k of block b at row r. */
static float stat(const float *stats, int64_t b, int k, int64_t rows,
                  int64_t r) {
  return stats[(b * kStats + k) * rows + r];
}

/* log(sum of exp) over every block's classes at row r, and the label's logit. */
static float global_lse(const float *stats, int64_t blocks, int64_t rows,
                        int64_t r, float *target) {
  float mx = -INFINITY;
  for (int64_t b = 0; b < blocks; ++b)
    mx = fmaxf(mx, stat(stats, b, kMax, rows, r));
  float sum = 0.0f, t = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    float m = stat(stats, b, kMax, rows, r);
    if (m != -INFINITY)
      sum += stat(stats, b, kSum, rows, r) * expf(m - mx);
    t += stat(stats, b, kTarget, rows, r);
  }
  if (target)
    *target = t;
  return mx + logf(sum);
}

void dtk_cross_entropy_stats_f32(const float *stats, const int32_t *labels,
                                 float *loss, int64_t blocks, int64_t rows) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0)
      continue;
    float target;
    float lse = global_lse(stats, blocks, rows, r, &target);
    total += lse - target;
    ++count;
  }
  *loss = count ? (float)(total / (double)count) : 0.0f;
}

void dtk_cross_entropy_grad_shard_f32(const float *logits,
                                      const int32_t *labels, const float *stats,
                                      const float *dloss, float *dlogits,
                                      int64_t blocks, int64_t rows,
                                      int64_t classes, int64_t first,
                                      int64_t total) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += labels[r] >= 0;
  float scale = count ? *dloss / (float)count : 0.0f;
  int64_t valid = total - first < classes ? total - first : classes;
  if (valid < 0)
    valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits + r * classes; /* (classes) */
    float *d = dlogits + r * classes;
    if (labels[r] < 0) {
      memset(d, 0, (size_t)classes * sizeof(float));
      continue;
    }
    dtk_check_label(labels[r], total);
    float lse = global_lse(stats, blocks, rows, r, NULL);
    for (int64_t j = 0; j < valid; ++j)
      d[j] = expf(row[j] - lse) * scale;
    for (int64_t j = valid; j < classes; ++j)
      d[j] = 0.0f;
    int64_t at = (int64_t)labels[r] - first;
    if (at >= 0 && at < valid)
      d[at] -= scale;
  }
}

void dtk_count_correct_stats_f32(const float *stats, const int32_t *labels,
                                 float *correct, int64_t blocks, int64_t rows) {
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0)
      continue;
    /* The first maximum over all classes: the smallest index among the
       blocks whose maximum is the largest. */
    float mx = -INFINITY, best = -1.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      float m = stat(stats, b, kMax, rows, r);
      float at = stat(stats, b, kArgMax, rows, r);
      if (at < 0.0f)
        continue;
      if (best < 0.0f || m > mx || (m == mx && at < best)) {
        mx = m;
        best = at;
      }
    }
    hits += best >= 0.0f && (int64_t)best == labels[r];
  }
  *correct = (float)hits;
}
