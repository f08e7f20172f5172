/*===- embedding.c - table lookups and their scatter-add gradient ---------===*
 *
 * Ids come from the data, so they are checked: an id outside the table is a
 * mismatch between the data and the model's vocabulary, and is reported as
 * such. The gradient runs on the pool without locks: the table is zeroed in
 * ranges of rows, then each range of columns adds every id's gradient row,
 * ids in order, so a row hit by many ids sums them in the same order on any
 * thread count.
 *
 *===----------------------------------------------------------------------===*/

#include "checks.h"

#include <stdio.h>
#include <string.h>

void dtk_embedding_f32(const float *table, const int32_t *ids, float *out,
                       int64_t n, int64_t count, int64_t width) {
  for (int64_t i = 0; i < n; ++i) {
    dtk_check_id(ids[i], count);
    memcpy(out + i * width, table + (int64_t)ids[i] * width,
           (size_t)width * sizeof(float));
  }
}

struct embedding_grad_args {
  const int32_t *ids;
  const float *dout;
  float *dtable;
  int64_t n, width;
};

static void zero_rows(void *ctx, int64_t begin, int64_t end) {
  const struct embedding_grad_args *a = ctx;
  memset(a->dtable + begin * a->width, 0,
         (size_t)((end - begin) * a->width) * sizeof(float));
}

static void add_columns(void *ctx, int64_t begin, int64_t end) {
  const struct embedding_grad_args *a = ctx;
  for (int64_t i = 0; i < a->n; ++i) {
    float *row = a->dtable + (int64_t)a->ids[i] * a->width; /* (width) */
    const float *g = a->dout + i * a->width;
    for (int64_t j = begin; j < end; ++j)
      row[j] += g[j];
  }
}

/* Rows to zero, and columns to add, per range at least. */
enum { kZeroGrain = 1024, kColumnGrain = 32 };

void dtk_embedding_grad_f32(const int32_t *ids, const float *dout,
                            float *dtable, int64_t n, int64_t count,
                            int64_t width) {
  for (int64_t i = 0; i < n; ++i)
    dtk_check_id(ids[i], count);
  struct embedding_grad_args a = {ids, dout, dtable, n, width};
  dtk_parallel_for(count, kZeroGrain, zero_rows, &a);
  dtk_parallel_for(width, kColumnGrain, add_columns, &a);
}
