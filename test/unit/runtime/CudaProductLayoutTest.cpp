//===- CudaProductLayoutTest.cpp - Row-major products as cuBLAS's ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Both of the GPU's product libraries (cuBLASLt and cuBLAS's classic API)
// are column-major; the runtime hands them a row-major product as its
// transpose, through columnMajor. Checked here without a GPU: a reference
// column-major product that reads its operands as cuBLAS documents it (each
// matrix stored rows x cols with leading dimension ld, batches `stride`
// apart, op(X) = X^T when transposed) must give the row-major product.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/blas.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

using namespace dtrt;
using namespace dtrt::cuda;

namespace {

/// Element (r, c) of op(X) for a stored column-major matrix.
double at(const std::vector<double> &x, const ColumnMajor::Matrix &m,
          int64_t batch, int64_t r, int64_t c) {
  int64_t row = m.transposed ? c : r, col = m.transposed ? r : c;
  EXPECT_LT(row, m.rows);
  EXPECT_LT(col, m.cols);
  return x[size_t(batch * m.stride + row + col * m.ld)];
}

/// D = op(first) op(second), column-major, as cuBLAS computes it.
std::vector<double> columnMajorProduct(const ColumnMajor &cm, int64_t batch,
                                       const std::vector<double> &first,
                                       const std::vector<double> &second) {
  std::vector<double> d(size_t(batch * cm.result.stride));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < cm.m; ++i)
      for (int64_t j = 0; j < cm.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < cm.k; ++l)
          sum += at(first, cm.first, b, i, l) * at(second, cm.second, b, l, j);
        d[size_t(b * cm.result.stride + i + j * cm.result.ld)] = sum;
      }
  return d;
}

/// C = op(A) op(B), row-major, as dtk_matmul_f32 defines it.
std::vector<double> rowMajorProduct(const Product &p,
                                    const std::vector<double> &a,
                                    const std::vector<double> &b) {
  std::vector<double> c(size_t(p.batch * p.m * p.n));
  for (int64_t x = 0; x < p.batch; ++x)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          double av = p.transA ? a[size_t(x * p.m * p.k + l * p.m + i)]
                               : a[size_t(x * p.m * p.k + i * p.k + l)];
          double bv = p.transB ? b[size_t(x * p.k * p.n + j * p.k + l)]
                               : b[size_t(x * p.k * p.n + l * p.n + j)];
          sum += av * bv;
        }
        c[size_t((x * p.m + i) * p.n + j)] = sum;
      }
  return c;
}

TEST(CudaProductLayoutTest, TheTransposedProductIsTheRowMajorOne) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);
  for (int64_t batch : {1, 3})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 3},
                           {1, 6, 4},
                           {6, 1, 2},
                           {4, 4, 1}})
      for (int trans = 0; trans < 4; ++trans) {
        Product p{batch, m, n, k, (trans & 1) != 0, (trans & 2) != 0};
        SCOPED_TRACE(testing::Message()
                     << batch << "x " << m << "x" << n << "x" << k
                     << (p.transA ? " A^T" : "") << (p.transB ? " B^T" : ""));
        std::vector<double> a(size_t(batch * m * k)), b(size_t(batch * k * n));
        for (double &v : a)
          v = small(rng);
        for (double &v : b)
          v = small(rng);
        ColumnMajor cm = columnMajor(p);
        // The shapes agree: D is the transpose of C, and the inner sizes meet.
        EXPECT_EQ(cm.m, n);
        EXPECT_EQ(cm.n, m);
        EXPECT_EQ(cm.k, k);
        EXPECT_EQ(cm.first.rows * cm.first.cols, k * n);
        EXPECT_EQ(cm.second.rows * cm.second.cols, m * k);
        EXPECT_GE(cm.first.ld, cm.first.rows);
        EXPECT_GE(cm.second.ld, cm.second.rows);
        // cuBLAS's first operand is our B, its second our A; its column-major
        // n x m result, element (j, i), is our row-major C's (i, j).
        std::vector<double> d = columnMajorProduct(cm, batch, b, a);
        EXPECT_EQ(d, rowMajorProduct(p, a, b));
      }
}

TEST(CudaProductLayoutTest, ACachedAlgorithmIsItsEightWordsAndNothingElse) {
  // What the peaks cache keeps of a timed choice (a later run takes it back
  // where cuBLASLt accepts it): the algorithm's words, all 64 bits of each.
  cublasLtMatmulAlgo_t algo{};
  for (size_t i = 0; i < 8; ++i)
    algo.data[i] = (uint64_t(1) << 63) | (i * 0x0123456789abcdefull);
  nlohmann::json j = nlohmann::json::parse(algoToJson(algo).dump());
  std::optional<cublasLtMatmulAlgo_t> back = algoFromJson(j);
  ASSERT_TRUE(back.has_value());
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(back->data[i], algo.data[i]) << i;
  // Another form (an older version's, an edit by hand) is no algorithm.
  for (const char *bad : {"[1, 2, 3]", "[1, 2, 3, 4, 5, 6, 7, -8]",
                          "[1, 2, 3, 4, 5, 6, 7, 8.5]", "\"fast\"", "{}"})
    EXPECT_FALSE(algoFromJson(nlohmann::json::parse(bad)).has_value()) << bad;
}

TEST(CudaProductLayoutTest, TheEngineComesFromTheEnvironment) {
  unsetenv("DTRT_CUDA_PRODUCTS");
  EXPECT_EQ(*productEngineFromEnvironment(), ProductEngine::Tuned);
  setenv("DTRT_CUDA_PRODUCTS", "lt", 1);
  EXPECT_EQ(*productEngineFromEnvironment(), ProductEngine::Lt);
  setenv("DTRT_CUDA_PRODUCTS", "tuned", 1);
  EXPECT_EQ(*productEngineFromEnvironment(), ProductEngine::Tuned);
  setenv("DTRT_CUDA_PRODUCTS", "cublas", 1);
  EXPECT_EQ(*productEngineFromEnvironment(), ProductEngine::Classic);
  setenv("DTRT_CUDA_PRODUCTS", "fast", 1);
  Expected<ProductEngine> bad = productEngineFromEnvironment();
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.error().message().find("not one of tuned"), std::string::npos);
  unsetenv("DTRT_CUDA_PRODUCTS");
}

} // namespace
