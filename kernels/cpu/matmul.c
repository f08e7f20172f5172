/*===- matmul.c - batched matrix products through CBLAS -------------------===*
 *
 * Every dt.matmul lands here: one cblas_sgemm per matrix of the batch, with the
 * transposes folded into BLAS's flags so no operand is ever copied.
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "blas.h"

void dtk_matmul_f32(const float *a, const float *b, float *c, int64_t batch,
                    int64_t m, int64_t n, int64_t k, int32_t trans_a,
                    int32_t trans_b) {
  static const char kName[] = "dtk_matmul_f32";
  const blasint bm = dtk_blas_size(m, kName), bn = dtk_blas_size(n, kName),
                bk = dtk_blas_size(k, kName);
  const blasint lda = trans_a ? bm : bk; /* A is (K, M) or (M, K) */
  const blasint ldb = trans_b ? bk : bn; /* B is (N, K) or (K, N) */
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, bm, bn, bk, 1.0f,
                a + i * m * k, lda, b + i * k * n, ldb, 0.0f, c + i * m * n,
                bn);
}
