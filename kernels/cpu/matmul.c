/*===- matmul.c - batched matrix products through CBLAS -------------------===*
 *
 * Every dt.matmul lands here: one cblas_sgemm per matrix of the batch, with the
 * transposes folded into BLAS's flags so no operand is ever copied.
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include <cblas.h>

void dtk_matmul_f32(const float *a, const float *b, float *c, int64_t batch,
                    int64_t m, int64_t n, int64_t k, int32_t trans_a,
                    int32_t trans_b) {
  const int64_t lda = trans_a ? m : k; /* A is (K, M) or (M, K) */
  const int64_t ldb = trans_b ? k : n; /* B is (N, K) or (K, N) */
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
                (blasint)k, 1.0f, a + i * m * k, (blasint)lda, b + i * k * n,
                (blasint)ldb, 0.0f, c + i * m * n, (blasint)n);
}
