/*===- embedding.c - table lookups and their scatter-add gradient ---------===*
 *
 * Ids come from the data, so they are checked: an id outside the table is a
 *mismatch between the data and the model's vocabulary, and is reported as such.
 *
 *===----------------------------------------------------------------------------===*/

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

void dtk_embedding_grad_f32(const int32_t *ids, const float *dout,
                            float *dtable, int64_t n, int64_t count,
                            int64_t width) {
  memset(dtable, 0, (size_t)(count * width) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    dtk_check_id(ids[i], count);
    float *row = dtable + (int64_t)ids[i] * width; /* (width) */
    const float *g = dout + i * width;
    for (int64_t j = 0; j < width; ++j)
      row[j] += g[j];
  }
}
