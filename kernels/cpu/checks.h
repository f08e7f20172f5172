/*===- checks.h - the kernels' checks of ids and labels from the data ------===*
 *
 * Ids and labels come from the data, so kernels check them: one outside the
 * model's table or classes is a mismatch between the data and the model, and is
 * reported as such through dtk_fail. Shared by the kernels over whole tables
 * and over blocks of them (vocab_parallel.c), which check against the whole.
 *
 *===----------------------------------------------------------------------------===*/

#ifndef DTK_CPU_CHECKS_H
#define DTK_CPU_CHECKS_H

#include "dtk/kernels.h"

#include <stdio.h>

/* An id of a table of `rows` rows. */
static inline void dtk_check_id(int32_t id, int64_t rows) {
  if (id < 0 || id >= rows) {
    char message[200];
    snprintf(message, sizeof message,
             "token id %d is outside the embedding table of %lld rows; the "
             "data's vocabulary is larger than the model's (check the model's "
             "vocab size against the data)",
             (int)id, (long long)rows);
    dtk_fail(message);
  }
}

/* A label of `classes` classes; negative labels mark ignored positions. */
static inline void dtk_check_label(int32_t label, int64_t classes) {
  if (label >= classes) {
    char message[200];
    snprintf(message, sizeof message,
             "label %d is out of range for a model with %lld output classes "
             "(check the data's labels against the model's output width)",
             (int)label, (long long)classes);
    dtk_fail(message);
  }
}

#endif /* DTK_CPU_CHECKS_H */
