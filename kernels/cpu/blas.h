/*===- blas.h - CBLAS sizes, checked ---------------------------------------===*
 *
 * Debian's OpenBLAS takes sizes and leading dimensions as 32-bit `blasint`,
 * while dt's shapes are 64-bit. A cast would silently multiply the wrong
 * matrices for a dimension of 2^31 or more, so every size goes through
 * dtk_blas_size, which reports such a product instead.
 *
 *===----------------------------------------------------------------------===*/

#ifndef DTK_CPU_BLAS_H
#define DTK_CPU_BLAS_H

#include "dtk/kernels.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>

static inline blasint dtk_blas_size(int64_t v, const char *kernel) {
  if (v < 0 || (sizeof(blasint) < sizeof(int64_t) &&
                v > (int64_t)((((uint64_t)1) << (8 * sizeof(blasint) - 1)) - 1))) {
    char message[240];
    snprintf(message, sizeof message,
             "%s: a matrix dimension of %lld is beyond what this BLAS "
             "(%d-bit sizes) can multiply; use a smaller batch or "
             "micro_batch, or shard the model over more ranks",
             kernel, (long long)v, (int)(8 * sizeof(blasint)));
    dtk_fail(message);
  }
  return (blasint)v;
}

#endif /* DTK_CPU_BLAS_H */
