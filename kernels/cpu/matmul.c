/*===- matmul.c - batched matrix products through CBLAS -------------------===*
 *
 * Every dt.matmul and dt.matmul_bias lands here: one cblas_sgemm per matrix of
 * the batch, with the transposes folded into BLAS's flags so no operand is
 * ever copied.
 *
 * C is always filled first (zeros, or the bias in every row) and the product
 * accumulated into it with beta = 1. OpenBLAS starts a beta = 0 product with
 * a pass of scalar stores over C (sgemm_beta, 5 % of a Fashion-MNIST step);
 * memset and row copies make that pass in vector stores, and a bias costs no
 * pass of its own. The sum is the same one BLAS makes from zero: the kernel
 * adds each block of A B to C.
 *
 *===----------------------------------------------------------------------------===*/

#include "dtk/kernels.h"

#include "blas.h"

#include <string.h>

static void accumulate(const float *a, const float *b, float *c, int64_t batch,
                       int64_t m, int64_t n, int64_t k, int32_t trans_a,
                       int32_t trans_b, const char *name) {
  const blasint bm = dtk_blas_size(m, name), bn = dtk_blas_size(n, name),
                bk = dtk_blas_size(k, name);
  const blasint lda = trans_a ? bm : bk; /* A is (K, M) or (M, K) */
  const blasint ldb = trans_b ? bk : bn; /* B is (N, K) or (K, N) */
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, bm, bn, bk, 1.0f,
                a + i * m * k, lda, b + i * k * n, ldb, 1.0f, c + i * m * n,
                bn);
}

/* Rows of C to fill: the bias in each (zeros without one). */
struct fill_args {
  const float *bias;
  float *c;
  int64_t n;
};

static void fill_rows(void *ctx, int64_t begin, int64_t end) {
  const struct fill_args *f = ctx;
  if (!f->bias) {
    memset(f->c + begin * f->n, 0, (size_t)((end - begin) * f->n) * sizeof(float));
    return;
  }
  for (int64_t row = begin; row < end; ++row)
    memcpy(f->c + row * f->n, f->bias, (size_t)f->n * sizeof(float));
}

/* Enough rows that a range fills at least 64 KiB. */
static void fill(const float *bias, float *c, int64_t rows, int64_t n) {
  struct fill_args f = {bias, c, n};
  int64_t grain = n > 0 ? (16384 + n - 1) / n : rows;
  dtk_parallel_for(rows, grain > 0 ? grain : 1, fill_rows, &f);
}

void dtk_matmul_f32(const float *a, const float *b, float *c, int64_t batch,
                    int64_t m, int64_t n, int64_t k, int32_t trans_a,
                    int32_t trans_b) {
  fill(NULL, c, batch * m, n);
  accumulate(a, b, c, batch, m, n, k, trans_a, trans_b, "dtk_matmul_f32");
}

void dtk_matmul_bias_f32(const float *a, const float *b, const float *bias,
                         float *c, int64_t batch, int64_t m, int64_t n,
                         int64_t k, int32_t trans_a, int32_t trans_b) {
  fill(bias, c, batch * m, n);
  accumulate(a, b, c, batch, m, n, k, trans_a, trans_b, "dtk_matmul_bias_f32");
}
