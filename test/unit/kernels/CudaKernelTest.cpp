//===- CudaKernelTest.cpp - each GPU kernel against its CPU twin ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Runs every kernel of kernels/cuda on random inputs of awkward shapes (rows
// and widths that are not multiples of a warp or a block) and compares the
// result with the CPU kernel of the same name in kernels/cpu. Where the two
// add in the same order (embedding gradients) the bits must agree; elsewhere
// the GPU's tree-shaped sums differ in the last bits. Without a GPU every test
// is skipped, saying so; the kernels are still compiled, by nvcc for sm_90.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"
#include "dtk/kernels.h"
#include "dtrt/cuda/blas.h"

#include "RandomVector.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

// The CPU kernels report a bad id through the runtime's dtk_fail.
extern "C" void dtk_fail(const char *message) {
  std::fprintf(stderr, "error: %s\n", message);
  std::exit(1);
}

namespace {

bool haveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_GPU()                                                          \
  if (!haveGpu())                                                              \
  GTEST_SKIP() << "no GPU on this machine (the kernels were compiled, not "    \
                  "run)"

/// A device copy of a host vector, freed with it.
template <typename T> class DeviceBuffer {
public:
  explicit DeviceBuffer(const std::vector<T> &host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceBuffer(size_t size) : DeviceBuffer(std::vector<T>(size)) {}
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  T *get() { return ptr_; }
  std::vector<T> read() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

private:
  size_t bytes() const { return size_ * sizeof(T); }
  T *ptr_ = nullptr;
  size_t size_;
};

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 double relative, const char *what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (float w : want)
    scale = std::max(scale, double(std::abs(w)));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], relative * std::max(scale, 1e-30))
        << what << "[" << i << "]";
}

TEST(CudaKernelTest, SoftmaxAlongEachDimension) {
  REQUIRE_GPU();
  for (auto [outer, n, inner] :
       {std::tuple<int64_t, int64_t, int64_t>{37, 1000, 1},
        {3, 77, 5},
        {1, 50257, 1}}) {
    std::vector<float> x = randomVector(size_t(outer * n * inner), 1, 3.0f);
    std::vector<float> want(x.size());
    dtk_softmax_f32(x.data(), want.data(), outer, n, inner);
    DeviceBuffer<float> dx(x), dy(x.size());
    dtk_cuda_softmax_f32(dx.get(), dy.get(), outer, n, inner, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(dy.read(), want, 1e-5, "softmax");
  }
}

TEST(CudaKernelTest, BiasRowsBeforeAProduct) {
  REQUIRE_GPU();
  // The fill dt.matmul_bias starts C from, on awkward sizes.
  for (auto [rows, n] :
       {std::pair<int64_t, int64_t>{37, 1000}, {1, 1}, {300, 77}}) {
    std::vector<float> bias = randomVector(size_t(n), 21);
    DeviceBuffer<float> gbias(bias), c(size_t(rows * n));
    dtk_cuda_fill_rows_f32(gbias.get(), c.get(), rows, n, 0, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    std::vector<float> got = c.read();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(got[size_t(r * n + j)], bias[size_t(j)]) << r << ", " << j;
  }
}

TEST(CudaKernelTest, LayerNormAndItsGradients) {
  REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 768},
                            {1000, 37},
                            {5, 4100},
                            {2000, 300}}) {
    std::vector<float> x = randomVector(size_t(rows * cols), 2, 2.0f),
                       w = randomVector(size_t(cols), 3),
                       b = randomVector(size_t(cols), 4),
                       dy = randomVector(size_t(rows * cols), 5);
    std::vector<float> y(x.size()), dx(x.size()), dw(static_cast<size_t>(cols)),
        db(static_cast<size_t>(cols));
    dtk_layer_norm_f32(x.data(), w.data(), b.data(), y.data(), rows, cols,
                       1e-5f);
    dtk_layer_norm_grad_f32(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                            db.data(), rows, cols, 1e-5f);
    DeviceBuffer<float> gx(x), gw(w), gb(b), gdy(dy), gy(x.size()),
        gdx(x.size()), gdw(static_cast<size_t>(cols)),
        gdb(static_cast<size_t>(cols)),
        stats(static_cast<size_t>(2 * rows + 2 * ((rows + 63) / 64) * cols));
    dtk_cuda_layer_norm_f32(gx.get(), gw.get(), gb.get(), gy.get(), rows, cols,
                            1e-5f, nullptr);
    dtk_cuda_layer_norm_grad_f32(gx.get(), gw.get(), gdy.get(), gdx.get(),
                                 gdw.get(), gdb.get(), stats.get(), rows, cols,
                                 1e-5f, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(gy.read(), y, 1e-5, "y");
    expectClose(gdx.read(), dx, 1e-4, "dx");
    expectClose(gdw.read(), dw, 1e-4, "dw");
    expectClose(gdb.read(), db, 1e-4, "db");
  }
}

TEST(CudaKernelTest, RMSNormAndItsGradients) {
  REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 768},
                            {1000, 37},
                            {5, 4100},
                            {2000, 300}}) {
    std::vector<float> x = randomVector(size_t(rows * cols), 22, 2.0f),
                       w = randomVector(size_t(cols), 23),
                       dy = randomVector(size_t(rows * cols), 24);
    std::vector<float> y(x.size()), dx(x.size()), dw(static_cast<size_t>(cols));
    dtk_rms_norm_f32(x.data(), w.data(), y.data(), rows, cols, 1e-6f);
    dtk_rms_norm_grad_f32(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                          rows, cols, 1e-6f);
    DeviceBuffer<float> gx(x), gw(w), gdy(dy), gy(x.size()), gdx(x.size()),
        gdw(static_cast<size_t>(cols)),
        stats(static_cast<size_t>(2 * rows + ((rows + 63) / 64) * cols));
    dtk_cuda_rms_norm_f32(gx.get(), gw.get(), gy.get(), rows, cols, 1e-6f,
                          nullptr);
    dtk_cuda_rms_norm_grad_f32(gx.get(), gw.get(), gdy.get(), gdx.get(),
                               gdw.get(), stats.get(), rows, cols, 1e-6f,
                               nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(gy.read(), y, 1e-5, "y");
    expectClose(gdx.read(), dx, 1e-4, "dx");
    expectClose(gdw.read(), dw, 1e-4, "dw");
  }
}

TEST(CudaKernelTest, RotaryEmbeddingScalingsAndInverse) {
  REQUIRE_GPU();
  struct Case {
    int64_t outer, t, d;
    float theta, factor, low, high, original;
  };
  // Plain, "linear" and "llama3" scalings, on odd sizes and LLaMA's.
  for (Case c : {Case{6, 37, 64, 10000.0f, 1.0f, 1.0f, 4.0f, 0.0f},
                 Case{3, 100, 18, 500000.0f, 4.0f, 1.0f, 4.0f, 0.0f},
                 Case{2, 300, 128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192.0f}}) {
    SCOPED_TRACE(testing::Message()
                 << "t=" << c.t << " d=" << c.d << " factor=" << c.factor);
    size_t n = size_t(c.outer * c.t * c.d);
    std::vector<float> x = randomVector(n, 25), y(n), back(n);
    dtk_rope_f32(x.data(), y.data(), c.outer, c.t, c.d, c.theta, c.factor,
                 c.low, c.high, c.original, 0);
    dtk_rope_f32(y.data(), back.data(), c.outer, c.t, c.d, c.theta, c.factor,
                 c.low, c.high, c.original, 1);
    DeviceBuffer<float> gx(x), gy(n), gback(n),
        table(static_cast<size_t>(2 * c.t * (c.d / 2)));
    dtk_cuda_rope_f32(gx.get(), gy.get(), table.get(), c.outer, c.t, c.d,
                      c.theta, c.factor, c.low, c.high, c.original, 0, nullptr);
    std::vector<float> got = gy.read();
    // The inverse of the CPU's rotation, so both directions are compared.
    DeviceBuffer<float> gyCpu(y);
    dtk_cuda_rope_f32(gyCpu.get(), gback.get(), table.get(), c.outer, c.t, c.d,
                      c.theta, c.factor, c.low, c.high, c.original, 1, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(got, y, 1e-6, "y");
    expectClose(gback.read(), back, 1e-6, "inverse");
  }
}

TEST(CudaKernelTest, DropoutDrawsTheCpuMasks) {
  REQUIRE_GPU();
  // A [4, 6, 50, 10] tensor of which this rank holds the block [2, 3, 50, 5]
  // at (2, 3, 0, 5): runs of 2, 3 x 50 (the third dimension whole) and 5, as
  // DropoutIndexing makes them.
  const int64_t strides[4] = {6 * 50 * 10, 50 * 10, 10, 1};
  const int64_t firsts[4] = {2, 3, 0, 5};
  const int64_t elements = 4 * 6 * 50 * 10, micro = 3, step = 17;
  int64_t base = micro * elements;
  for (int i = 0; i < 4; ++i)
    base += firsts[i] * strides[i];
  const int64_t n[4] = {1, 2, 3 * 50, 5}, s[4] = {0, 6 * 50 * 10, 10, 1};
  size_t count = size_t(n[0] * n[1] * n[2] * n[3]);
  for (float p : {0.1f, 0.5f, 0.0f}) {
    std::vector<float> x = randomVector(count, 26), y(count);
    dtk_dropout_f32(x.data(), y.data(), n[0], n[1], n[2], n[3], s[0], s[1],
                    s[2], s[3], base, 42, 7, step, p);
    DeviceBuffer<float> gx(x), gy(count);
    DeviceBuffer<int64_t> gstep(std::vector<int64_t>{step}),
        gmicro(std::vector<int64_t>{micro}),
        gfirsts(std::vector<int64_t>(firsts, firsts + 4));
    int64_t *f = gfirsts.get();
    dtk_cuda_dropout_f32(gx.get(), gy.get(), gstep.get(), gmicro.get(), f,
                         f + 1, f + 2, f + 3, n[0], n[1], n[2], n[3], s[0],
                         s[1], s[2], s[3], elements, strides[0], strides[1],
                         strides[2], strides[3], 42, 7, p, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    std::vector<float> got = gy.read();
    size_t dropped = 0;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], y[i]) << "p=" << p << " element " << i;
      dropped += y[i] == 0.0f;
    }
    // The masks are real: about p of the elements dropped.
    EXPECT_NEAR(double(dropped) / double(count), p, 0.05) << p;
  }
}

/// The convolutions' products through the runtime's cuBLAS, as a program
/// runs them (dtk_cuda_gemm).
int gemmThroughBlas(void *ctx, const float *a, const float *b, float *c,
                    int64_t batch, int64_t m, int64_t n, int64_t k,
                    int32_t transA, int32_t transB, int32_t accumulate) {
  auto *blas = static_cast<dtrt::cuda::Blas *>(ctx);
  dtrt::Status s =
      blas->matmul(a, b, c, batch, m, n, k, transA != 0, transB != 0,
                   accumulate != 0, dtrt::cuda::Operands::F32);
  EXPECT_TRUE(bool(s)) << (s ? "" : s.error().message());
  return s ? 0 : 1;
}

TEST(CudaKernelTest, ConvolutionsAndTheirGradients) {
  REQUIRE_GPU();
  auto blas = dtrt::cuda::Blas::open(nullptr);
  ASSERT_TRUE(bool(blas)) << blas.error().message();
  struct Case {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  };
  // cnn_fashion's 3x3, ResNet's strided 7x7 stem and 1x1 downsample, groups
  // with a dilation, odd sizes throughout.
  for (Case v : {Case{5, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                 Case{2, 3, 33, 29, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
                 Case{3, 12, 9, 9, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1},
                 Case{2, 6, 11, 13, 9, 3, 2, 1, 2, 2, 1, 2, 1, 3}}) {
    SCOPED_TRACE(testing::Message()
                 << v.c << "->" << v.o << " " << v.kh << "x" << v.kw << " /"
                 << v.sh << " groups " << v.groups);
    int64_t oh = (v.h + 2 * v.ph - v.dh * (v.kh - 1) - 1) / v.sh + 1,
            ow = (v.w + 2 * v.pw - v.dw * (v.kw - 1) - 1) / v.sw + 1;
    size_t xs = size_t(v.n * v.c * v.h * v.w),
           ws = size_t(v.o * (v.c / v.groups) * v.kh * v.kw),
           ys = size_t(v.n * v.o * oh * ow);
    std::vector<float> x = randomVector(xs, 29), wt = randomVector(ws, 30),
                       dy = randomVector(ys, 31);
    std::vector<float> y(ys), dx(xs), dw(ws);
#define CONV_SIZES                                                             \
  v.n, v.c, v.h, v.w, v.o, v.kh, v.kw, oh, ow, v.sh, v.sw, v.ph, v.pw, v.dh,   \
      v.dw, v.groups
    dtk_conv2d_f32(x.data(), wt.data(), y.data(), CONV_SIZES);
    dtk_conv2d_input_grad_f32(dy.data(), wt.data(), dx.data(), CONV_SIZES);
    dtk_conv2d_weight_grad_f32(x.data(), dy.data(), dw.data(), CONV_SIZES);
    DeviceBuffer<float> gx(x), gw(wt), gdy(dy), gy(ys), gdx(xs), gdw(ws),
        scratch(size_t(dtk_cuda_conv2d_scratch_floats(CONV_SIZES)));
    void *ctx = blas->get();
    EXPECT_EQ(dtk_cuda_conv2d_f32(gx.get(), gw.get(), gy.get(), scratch.get(),
                                  CONV_SIZES, gemmThroughBlas, ctx, nullptr),
              0);
    EXPECT_EQ(dtk_cuda_conv2d_input_grad_f32(gdy.get(), gw.get(), gdx.get(),
                                             scratch.get(), CONV_SIZES,
                                             gemmThroughBlas, ctx, nullptr),
              0);
    EXPECT_EQ(dtk_cuda_conv2d_weight_grad_f32(gx.get(), gdy.get(), gdw.get(),
                                              scratch.get(), CONV_SIZES,
                                              gemmThroughBlas, ctx, nullptr),
              0);
#undef CONV_SIZES
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(gy.read(), y, 1e-5, "y");
    expectClose(gdx.read(), dx, 1e-5, "dx");
    expectClose(gdw.read(), dw, 1e-5, "dw");
  }
}

TEST(CudaKernelTest, PoolingGivesTheCpuBits) {
  REQUIRE_GPU();
  struct Case {
    int64_t planes, h, w, kh, kw, sh, sw, ph, pw;
  };
  // 2x2 tiles (the CPU's pairs path), ResNet's 3x3 /2 stem with padding,
  // overlapping windows on odd sizes, a window larger than its stride.
  for (Case c :
       {Case{6, 28, 28, 2, 2, 2, 2, 0, 0}, Case{5, 17, 23, 3, 3, 2, 2, 1, 1},
        Case{3, 9, 11, 3, 2, 1, 1, 1, 0}, Case{2, 15, 15, 5, 5, 3, 3, 2, 2}}) {
    SCOPED_TRACE(testing::Message() << c.h << "x" << c.w << " window " << c.kh
                                    << "x" << c.kw << " /" << c.sh);
    int64_t oh = (c.h + 2 * c.ph - c.kh) / c.sh + 1,
            ow = (c.w + 2 * c.pw - c.kw) / c.sw + 1;
    size_t in = size_t(c.planes * c.h * c.w), outs = size_t(c.planes * oh * ow);
    std::vector<float> x = randomVector(in, 27), dy = randomVector(outs, 28);
    // Ties between neighbours and NaNs, which the choices must break as the
    // CPU does.
    for (size_t i = 0; i < in; i += 3)
      x[i] = float((i * 7919 / 3) % 3);
    x[5] = x[in / 2] = std::nanf("");
    std::vector<float> ymax(outs), yavg(outs), dxmax(in), dxavg(in);
    dtk_max_pool2d_f32(x.data(), ymax.data(), c.planes, c.h, c.w, oh, ow, c.kh,
                       c.kw, c.sh, c.sw, c.ph, c.pw);
    dtk_max_pool2d_grad_f32(x.data(), dy.data(), dxmax.data(), c.planes, c.h,
                            c.w, oh, ow, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw);
    dtk_avg_pool2d_f32(x.data(), yavg.data(), c.planes, c.h, c.w, oh, ow, c.kh,
                       c.kw, c.sh, c.sw, c.ph, c.pw);
    dtk_avg_pool2d_grad_f32(dy.data(), dxavg.data(), c.planes, c.h, c.w, oh, ow,
                            c.kh, c.kw, c.sh, c.sw, c.ph, c.pw);
    DeviceBuffer<float> gx(x), gdy(dy), gymax(outs), gyavg(outs), gdxmax(in),
        gdxavg(in);
    dtk_cuda_max_pool2d_f32(gx.get(), gymax.get(), c.planes, c.h, c.w, oh, ow,
                            c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, nullptr);
    dtk_cuda_max_pool2d_grad_f32(gx.get(), gdy.get(), gdxmax.get(), c.planes,
                                 c.h, c.w, oh, ow, c.kh, c.kw, c.sh, c.sw, c.ph,
                                 c.pw, nullptr);
    dtk_cuda_avg_pool2d_f32(gx.get(), gyavg.get(), c.planes, c.h, c.w, oh, ow,
                            c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, nullptr);
    dtk_cuda_avg_pool2d_grad_f32(gdy.get(), gdxavg.get(), c.planes, c.h, c.w,
                                 oh, ow, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw,
                                 nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    auto same = [](const std::vector<float> &got,
                   const std::vector<float> &want, const char *what) {
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_TRUE(got[i] == want[i] ||
                    (got[i] != got[i] && want[i] != want[i]))
            << what << "[" << i << "]: " << got[i] << " against " << want[i];
    };
    same(gymax.read(), ymax, "max");
    same(gdxmax.read(), dxmax, "max gradient");
    same(gyavg.read(), yavg, "average");
    same(gdxavg.read(), dxavg, "average gradient");
  }
}

TEST(CudaKernelTest, EmbeddingLookupsAndDeterministicGradients) {
  REQUIRE_GPU();
  const int64_t n = 300, count = 97, width = 130;
  std::mt19937 rng(6);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = int32_t(rng() % 20); // repeated ids: rows sum several gradients
  std::vector<float> table = randomVector(size_t(count * width), 7),
                     dout = randomVector(size_t(n * width), 8);
  std::vector<float> out(size_t(n * width)), dtable(table.size());
  dtk_embedding_f32(table.data(), ids.data(), out.data(), n, count, width);
  dtk_embedding_grad_f32(ids.data(), dout.data(), dtable.data(), n, count,
                         width);
  DeviceBuffer<float> gtable(table), gdout(dout), gout(out.size()),
      gdtable(table.size());
  DeviceBuffer<int32_t> gids(ids);
  dtk_cuda_embedding_f32(gtable.get(), gids.get(), gout.get(), n, count, width,
                         nullptr);
  dtk_cuda_embedding_grad_f32(gids.get(), gdout.get(), gdtable.get(), n, count,
                              width, nullptr);
  ASSERT_EQ(dtk_cuda_last_error(), nullptr);
  EXPECT_EQ(gout.read(), out);
  EXPECT_EQ(gdtable.read(), dtable); // the same additions in the same order
}

TEST(CudaKernelTest, EmbeddingGradientsAtGpt2sSizeAndWiderRows) {
  REQUIRE_GPU();
  // GPT-2's table, more ids than one staging holds, and a frequent token (a
  // third of the ids, some in runs); then rows wider than a lane's four
  // columns a pass (five passes), positions (every row hit, the hits moving
  // row at every id), byte-level text (every hit in rows 0 to 255, a space
  // in six and the letters most of the rest: the bench's data), and tables
  // that keep the kernel that sums in registers: rows too wide for shared
  // memory, and a LLaMA's 32 000 x 4 096 (too many blocks of 4 rows).
  enum Kind { Frequent, Positions, Bytes };
  struct Case {
    int64_t n, count, width;
    Kind kind;
  };
  for (Case c :
       {Case{20000, 50257, 768, Frequent}, Case{9000, 300, 4100, Frequent},
        Case{16384, 1024, 768, Positions}, Case{16384, 50257, 768, Bytes},
        Case{600, 40, 20000, Frequent}, Case{2000, 32000, 4096, Frequent}}) {
    SCOPED_TRACE(testing::Message()
                 << c.n << " ids, " << c.count << " x " << c.width);
    std::mt19937 rng(61);
    std::vector<int32_t> ids(size_t(c.n));
    for (int64_t i = 0; i < c.n; ++i)
      if (c.kind == Positions)
        ids[size_t(i)] = int32_t(i % c.count);
      else if (c.kind == Bytes)
        ids[size_t(i)] = rng() % 6 == 0   ? 32
                         : rng() % 8 == 0 ? int32_t(rng() % 256)
                                          : int32_t(97 + rng() % 26);
      else
        ids[size_t(i)] = rng() % 3 == 0 || (i / 40) % 7 == 0
                             ? 13
                             : int32_t(rng() % uint64_t(c.count));
    std::vector<float> dout = randomVector(size_t(c.n * c.width), 62);
    std::vector<float> dtable(size_t(c.count * c.width));
    dtk_embedding_grad_f32(ids.data(), dout.data(), dtable.data(), c.n, c.count,
                           c.width);
    DeviceBuffer<float> gdout(dout),
        gdtable(std::vector<float>(dtable.size(), -7.0f));
    DeviceBuffer<int32_t> gids(ids);
    dtk_cuda_embedding_grad_f32(gids.get(), gdout.get(), gdtable.get(), c.n,
                                c.count, c.width, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    EXPECT_EQ(gdtable.read(), dtable); // every row written, in the CPU's order
  }
}

TEST(CudaKernelTest, CrossEntropyItsGradientAndAccuracy) {
  REQUIRE_GPU();
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{70, 50257}, {1000, 10}, {3, 1}}) {
    std::vector<float> logits = randomVector(size_t(rows * classes), 9, 2.0f);
    std::mt19937 rng(10);
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int32_t &y : labels) // some rows unlabelled (padding)
      y = rng() % 5 == 0 ? -1 : int32_t(rng() % uint64_t(classes));
    // A tie, which the arg-max breaks towards the first maximum.
    logits[1] = logits[0] = 100.0f;
    float loss = 0, correct = 0, dloss = 0.75f;
    std::vector<float> dlogits(logits.size());
    dtk_cross_entropy_f32(logits.data(), labels.data(), &loss, rows, classes);
    dtk_cross_entropy_grad_f32(logits.data(), labels.data(), &dloss,
                               dlogits.data(), rows, classes);
    dtk_count_correct_f32(logits.data(), labels.data(), &correct, rows,
                          classes);
    DeviceBuffer<float> gl(logits), gdl(logits.size()), gloss(1), gcorrect(1),
        gdloss(std::vector<float>{dloss}), scratch(static_cast<size_t>(rows));
    DeviceBuffer<int32_t> gy(labels);
    dtk_cuda_cross_entropy_f32(gl.get(), gy.get(), gloss.get(), scratch.get(),
                               rows, classes, nullptr);
    dtk_cuda_cross_entropy_grad_f32(gl.get(), gy.get(), gdloss.get(), gdl.get(),
                                    scratch.get(), rows, classes, nullptr);
    dtk_cuda_count_correct_f32(gl.get(), gy.get(), gcorrect.get(),
                               scratch.get(), rows, classes, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(gloss.read(), {loss}, 1e-5, "loss");
    expectClose(gdl.read(), dlogits, 1e-5, "dlogits");
    EXPECT_EQ(gcorrect.read(), std::vector<float>{correct});
  }
}

TEST(CudaKernelTest, EmbeddingShardsAndTheirDeterministicGradients) {
  REQUIRE_GPU();
  // 97 rows in blocks of 40: the last block holds 17 and 23 rows of padding.
  // 300 ids over 97 rows: every block's rows sum several gradients, and most
  // ids fall outside any one block. A row 9000 wide takes one row a block.
  const int64_t n = 300, total = 97, block = 40, blocks = 3;
  for (int64_t width : {int64_t(130), int64_t(9000)}) {
    SCOPED_TRACE(testing::Message() << "width " << width);
    std::mt19937 rng(31);
    std::vector<int32_t> ids(n);
    for (int32_t &id : ids)
      id = int32_t(rng() % uint64_t(total));
    std::vector<float> table = randomVector(size_t(total * width), 32),
                       dout = randomVector(size_t(n * width), 33);
    DeviceBuffer<float> gdout(dout);
    DeviceBuffer<int32_t> gids(ids);
    for (int64_t b = 0; b < blocks; ++b) {
      SCOPED_TRACE(testing::Message() << "block " << b);
      int64_t first = b * block;
      std::vector<float> part(size_t(block * width), 0.0f);
      for (int64_t r = 0; r < block && first + r < total; ++r)
        std::copy_n(table.begin() + (first + r) * width, width,
                    part.begin() + r * width);
      std::vector<float> out(size_t(n * width)), grad(part.size());
      dtk_embedding_shard_f32(part.data(), ids.data(), out.data(), n, first,
                              block, total, width);
      dtk_embedding_grad_shard_f32(ids.data(), dout.data(), grad.data(), n,
                                   first, block, total, width);
      // The outputs start as garbage: every element must be written.
      DeviceBuffer<float> gpart(part),
          gout(std::vector<float>(out.size(), -7.0f)),
          ggrad(std::vector<float>(grad.size(), -7.0f));
      DeviceBuffer<int64_t> gfirst(std::vector<int64_t>{first});
      dtk_cuda_embedding_shard_f32(gpart.get(), gids.get(), gout.get(), n,
                                   gfirst.get(), block, total, width, nullptr);
      dtk_cuda_embedding_grad_shard_f32(gids.get(), gdout.get(), ggrad.get(), n,
                                        gfirst.get(), block, total, width,
                                        nullptr);
      ASSERT_EQ(dtk_cuda_last_error(), nullptr);
      EXPECT_EQ(gout.read(), out);
      EXPECT_EQ(ggrad.read(), grad); // the same additions in the same order
    }
  }
}

TEST(CudaKernelTest, CrossEntropyOverClassBlocksFromTheirStats) {
  REQUIRE_GPU();
  // (rows, classes, blocks): GPT-2's vocabulary over 3 blocks of 16 753 (2
  // columns of padding), 10 classes over 3 blocks of 4 (2 of padding), and 5
  // over 4 blocks of 2, the last one padding only.
  for (auto [rows, total, blocks] :
       {std::tuple<int64_t, int64_t, int64_t>{70, 50257, 3},
        {37, 10, 3},
        {33, 5, 4}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows, " << total
                                    << " classes, " << blocks << " blocks");
    int64_t block = (total + blocks - 1) / blocks;
    std::vector<float> logits = randomVector(size_t(rows * total), 34, 2.0f);
    std::mt19937 rng(35);
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int32_t &y : labels) // some rows unlabelled (padding)
      y = rng() % 5 == 0 ? -1 : int32_t(rng() % uint64_t(total));
    labels[3] = -1;
    // Ties: in row 0 across the first and last classes (other blocks), the
    // label the first; in row 1 between neighbours (one block), the label
    // the second. The first maximum wins both.
    logits[size_t(total - 1)] = logits[0] = 100.0f;
    labels[0] = 0;
    logits[size_t(total + 1)] = logits[size_t(total)] = 100.0f;
    labels[1] = total > 1 ? 1 : 0;
    // Block b's logits; the padding columns large, to be ignored.
    auto logitsOf = [&, rows = rows, total = total](int64_t b) {
      std::vector<float> out(size_t(rows * block), 50.0f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < block && b * block + j < total; ++j)
          out[size_t(r * block + j)] =
              logits[size_t(r * total + b * block + j)];
      return out;
    };
    // The stats of every block, laid out as the all-gather does, on each side.
    std::vector<float> stats;
    DeviceBuffer<float> gstats(size_t(blocks * 4 * rows));
    DeviceBuffer<int32_t> gy(labels);
    for (int64_t b = 0; b < blocks; ++b) {
      std::vector<float> part = logitsOf(b), mine(size_t(4 * rows));
      dtk_class_stats_f32(part.data(), labels.data(), mine.data(), rows, block,
                          b * block, total);
      stats.insert(stats.end(), mine.begin(), mine.end());
      DeviceBuffer<float> gpart(part);
      DeviceBuffer<int64_t> gfirst(std::vector<int64_t>{b * block});
      dtk_cuda_class_stats_f32(gpart.get(), gy.get(),
                               gstats.get() + b * 4 * rows, rows, block,
                               gfirst.get(), total, nullptr);
      ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    }
    std::vector<float> got = gstats.read();
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        auto at = [&, rows = rows](const std::vector<float> &s, int k) {
          return s[size_t((b * 4 + k) * rows + r)];
        };
        SCOPED_TRACE(testing::Message() << "block " << b << " row " << r);
        EXPECT_EQ(at(got, 0), at(stats, 0)) << "maximum";
        // The GPU adds the exponentials in a tree, the CPU in a row: over
        // 16 753 classes they differ by up to about 5e-6.
        EXPECT_NEAR(at(got, 1), at(stats, 1), 1e-4 * at(stats, 1)) << "sum";
        EXPECT_EQ(at(got, 2), at(stats, 2)) << "target";
        EXPECT_EQ(at(got, 3), at(stats, 3)) << "arg-max";
      }

    // The loss and accuracy from the GPU's stats, as a program runs them.
    float loss = 0, correct = 0, dloss = 0.75f;
    dtk_cross_entropy_stats_f32(stats.data(), labels.data(), &loss, blocks,
                                rows);
    dtk_count_correct_stats_f32(stats.data(), labels.data(), &correct, blocks,
                                rows);
    DeviceBuffer<float> gloss(1), gcorrect(1),
        gdloss(std::vector<float>{dloss}), scratch(static_cast<size_t>(rows));
    dtk_cuda_cross_entropy_stats_f32(gstats.get(), gy.get(), gloss.get(),
                                     scratch.get(), blocks, rows, nullptr);
    dtk_cuda_count_correct_stats_f32(gstats.get(), gy.get(), gcorrect.get(),
                                     scratch.get(), blocks, rows, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    expectClose(gloss.read(), {loss}, 1e-5, "loss");
    EXPECT_GE(correct, 1.0f); // row 0
    EXPECT_EQ(gcorrect.read(), std::vector<float>{correct});

    // Each block's gradient, over garbage: padding columns and unlabelled
    // rows must be written zeros.
    for (int64_t b = 0; b < blocks; ++b) {
      SCOPED_TRACE(testing::Message() << "gradient of block " << b);
      std::vector<float> part = logitsOf(b), d(part.size());
      dtk_cross_entropy_grad_shard_f32(part.data(), labels.data(), stats.data(),
                                       &dloss, d.data(), blocks, rows, block,
                                       b * block, total);
      DeviceBuffer<float> gpart(part),
          gd(std::vector<float>(part.size(), -7.0f));
      DeviceBuffer<int64_t> gfirst(std::vector<int64_t>{b * block});
      dtk_cuda_cross_entropy_grad_shard_f32(
          gpart.get(), gy.get(), gstats.get(), gdloss.get(), gd.get(),
          scratch.get(), blocks, rows, block, gfirst.get(), total, nullptr);
      ASSERT_EQ(dtk_cuda_last_error(), nullptr);
      std::vector<float> gotD = gd.read();
      expectClose(gotD, d, 1e-5, "dlogits");
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < block; ++j)
          if (b * block + j >= total || labels[size_t(r)] < 0) {
            ASSERT_EQ(gotD[size_t(r * block + j)], 0.0f) << r << ", " << j;
          }
    }
  }
}

using AttentionForward = void (*)(const float *, const float *, const float *,
                                  float *, float *, int64_t, int64_t, int64_t,
                                  int32_t, dtk_stream);
using AttentionBackward = void (*)(const float *, const float *, const float *,
                                   const float *, const float *, const float *,
                                   float *, float *, float *, float *, int64_t,
                                   int64_t, int64_t, int32_t, dtk_stream);

/// Rounds every element to the nearest bf16 (ties to even): what a bf16
/// program's widened operands hold.
std::vector<float> roundedToBf16(std::vector<float> x) {
  for (float &f : x) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&f, &bits, 4);
  }
  return x;
}

/// One GPU attention (forward and backward) against the CPU kernels on
/// random inputs (bf16 values with `bf16`), within `forward` and `backward`
/// relative to the largest element.
void checkAttention(AttentionForward gpuForward, AttentionBackward gpuBackward,
                    int64_t slices, int64_t t, int64_t d, int32_t causal,
                    bool bf16, double forward, double backward) {
  SCOPED_TRACE(testing::Message() << "slices=" << slices << " t=" << t
                                  << " d=" << d << " causal=" << causal);
  size_t n = size_t(slices * t * d);
  auto input = [&](unsigned seed) {
    std::vector<float> x = randomVector(n, seed);
    return bf16 ? roundedToBf16(std::move(x)) : x;
  };
  std::vector<float> q = input(11), k = input(12), v = input(13),
                     dout = input(14);
  size_t rows = size_t(slices * t);
  std::vector<float> o(n), lse(rows), dq(n), dk(n), dv(n);
  dtk_attention_f32(q.data(), k.data(), v.data(), o.data(), lse.data(), slices,
                    t, d, causal);
  dtk_attention_grad_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                         dout.data(), dq.data(), dk.data(), dv.data(), slices,
                         t, d, causal);
  // Each side's gradient from its own forward's O and log-sum-exp, as a
  // program runs them.
  DeviceBuffer<float> gq(q), gk(k), gv(v), gdout(dout), go(n), glse(rows),
      gdq(n), gdk(n), gdv(n), scratch(2 * rows);
  gpuForward(gq.get(), gk.get(), gv.get(), go.get(), glse.get(), slices, t, d,
             causal, nullptr);
  gpuBackward(gq.get(), gk.get(), gv.get(), go.get(), glse.get(), gdout.get(),
              gdq.get(), gdk.get(), gdv.get(), scratch.get(), slices, t, d,
              causal, nullptr);
  ASSERT_EQ(dtk_cuda_last_error(), nullptr);
  expectClose(go.read(), o, forward, "o");
  expectClose(glse.read(), lse, forward, "lse");
  expectClose(gdq.read(), dq, backward, "dq");
  expectClose(gdk.read(), dk, backward, "dk");
  expectClose(gdv.read(), dv, backward, "dv");
}

TEST(CudaKernelTest, AttentionForwardAndBackward) {
  REQUIRE_GPU();
  for (auto [slices, t, d, causal] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{3, 200, 64, 1},
        {2, 129, 33, 0},
        {1, 300, 256, 1}})
    checkAttention(dtk_cuda_attention_f32, dtk_cuda_attention_grad_f32, slices,
                   t, d, causal, false, 1e-5, 1e-4);
}

TEST(CudaKernelTest, AttentionOnTensorCoresForSixteenBitInputs) {
  REQUIRE_GPU();
  // Heads of 16, 64 and 128 take the TF32 kernels (ragged t, both
  // maskings): P and dS round to TF32 (2^-11 relative) before their
  // products. 33 and 256 fall back to the f32 kernels, as tight as above.
  for (auto [slices, t, d, causal] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{3, 200, 64, 1},
        {2, 129, 128, 0},
        {2, 77, 16, 1},
        {1, 64, 64, 0},
        {2, 129, 33, 0},
        {1, 100, 256, 1}}) {
    bool tensorCores = d % 16 == 0 && d <= 128;
    checkAttention(dtk_cuda_attention_tf32, dtk_cuda_attention_grad_tf32,
                   slices, t, d, causal, true, tensorCores ? 1e-3 : 1e-5,
                   tensorCores ? 3e-3 : 1e-4);
  }
}

TEST(CudaKernelTest, AttentionOnBf16TensorCoresForBf16Inputs) {
  REQUIRE_GPU();
  // Heads that are multiples of 16 up to 128 take the mma.sync kernels
  // (ragged t, both maskings, a GPT-2 sized head): P and dS round to bf16
  // (2^-9 relative) before their products. 33 falls back to the TF32
  // kernels' fallback, the f32 ones.
  for (auto [slices, t, d, causal] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{3, 200, 64, 1},
        {2, 129, 128, 0},
        {2, 77, 16, 1},
        {1, 64, 64, 0},
        {2, 100, 48, 1},
        {2, 1024, 64, 1},
        {1, 70, 112, 0},
        {2, 129, 33, 0}}) {
    bool tensorCores = d % 16 == 0 && d <= 128;
    checkAttention(dtk_cuda_attention_bf16, dtk_cuda_attention_grad_bf16,
                   slices, t, d, causal, true, tensorCores ? 6e-3 : 1e-5,
                   tensorCores ? 1.2e-2 : 1e-4);
  }
}

TEST(CudaKernelTest, Bf16AttentionGivesTheSameBitsEveryRun) {
  REQUIRE_GPU();
  int64_t slices = 4, t = 300, d = 64;
  size_t n = size_t(slices * t * d);
  std::vector<float> q = roundedToBf16(randomVector(n, 21)),
                     k = roundedToBf16(randomVector(n, 22)),
                     v = roundedToBf16(randomVector(n, 23)),
                     dout = roundedToBf16(randomVector(n, 24));
  DeviceBuffer<float> gq(q), gk(k), gv(v), gdout(dout),
      scratch(size_t(2 * slices * t));
  std::vector<std::vector<float>> runs[2];
  for (auto &run : runs) {
    DeviceBuffer<float> go(n), glse(size_t(slices * t)), gdq(n), gdk(n), gdv(n);
    dtk_cuda_attention_bf16(gq.get(), gk.get(), gv.get(), go.get(), glse.get(),
                            slices, t, d, 1, nullptr);
    dtk_cuda_attention_grad_bf16(gq.get(), gk.get(), gv.get(), go.get(),
                                 glse.get(), gdout.get(), gdq.get(), gdk.get(),
                                 gdv.get(), scratch.get(), slices, t, d, 1,
                                 nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    run = {go.read(), glse.read(), gdq.read(), gdk.read(), gdv.read()};
  }
  for (size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_EQ(std::memcmp(runs[0][i].data(), runs[1][i].data(),
                          runs[0][i].size() * 4),
              0)
        << "output " << i;
}

/// The top 16 bits of each element (bf16 values, as roundedToBf16 leaves
/// them), and back.
std::vector<uint16_t> bf16Bits(const std::vector<float> &x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    bits[i] = uint16_t(b >> 16);
  }
  return bits;
}

std::vector<float> widenedBf16(const std::vector<uint16_t> &bits) {
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t b = uint32_t(bits[i]) << 16;
    std::memcpy(&x[i], &b, 4);
  }
  return x;
}

TEST(CudaKernelTest, ABf16ProductWritesItsResultInBf16) {
  REQUIRE_GPU();
  // What a bf16 program's GPU plan asks of a product followed by its
  // narrowing ("out": "bf16"): the f32 sums rounded to bf16, within the
  // rounding of sums cuBLAS may order differently for the two outputs.
  auto blas = dtrt::cuda::Blas::open(nullptr);
  ASSERT_TRUE(bool(blas)) << blas.error().message();
  const int64_t m = 37, n = 50, k = 64;
  std::vector<float> a = roundedToBf16(randomVector(size_t(m * k), 51)),
                     b = roundedToBf16(randomVector(size_t(k * n), 52));
  DeviceBuffer<uint16_t> ga(bf16Bits(a)), gb(bf16Bits(b)), c16(size_t(m * n));
  DeviceBuffer<float> c32(size_t(m * n));
  using dtrt::cuda::Operands;
  for (bool transB : {false, true}) {
    SCOPED_TRACE(transB ? "B^T" : "B");
    ASSERT_TRUE(bool((*blas)->matmul(ga.get(), gb.get(), c32.get(), 1, m, n, k,
                                     false, transB, false, Operands::BF16)));
    ASSERT_TRUE(
        bool((*blas)->matmul(ga.get(), gb.get(), c16.get(), 1, m, n, k, false,
                             transB, false, Operands::BF16, Operands::BF16)));
    std::vector<float> want = roundedToBf16(c32.read());
    std::vector<uint16_t> got = c16.read();
    for (size_t i = 0; i < want.size(); ++i) {
      uint32_t bits = uint32_t(got[i]) << 16;
      float g;
      std::memcpy(&g, &bits, 4);
      EXPECT_NEAR(g, want[i], std::abs(want[i]) / 128 + 1e-6f) << i;
    }
  }
  // A 16-bit result of another type than the operands' is refused.
  EXPECT_FALSE(
      bool((*blas)->matmul(ga.get(), gb.get(), c16.get(), 1, m, n, k, false,
                           false, false, Operands::BF16, Operands::F16)));
}

TEST(CudaKernelTest, CrossEntropyReadsAndWritesSixteenBitData) {
  REQUIRE_GPU();
  // The typed kernels compute what the f32 ones compute on the widened
  // logits, and round the gradient to nearest as the narrowing after it
  // does: bit for bit (what a bf16 program's GPU plan relies on when it
  // leaves those conversions out).
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{70, 50257}, {1000, 10}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << classes);
    size_t n = size_t(rows * classes);
    std::vector<float> logits = roundedToBf16(randomVector(n, 41, 2.0f));
    std::mt19937 rng(42);
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int32_t &y : labels)
      y = rng() % 5 == 0 ? -1 : int32_t(rng() % uint64_t(classes));
    DeviceBuffer<float> gl(logits), gdl(n), gloss(1), gloss16(1),
        gdloss(std::vector<float>{0.75f}), scratch(static_cast<size_t>(rows));
    DeviceBuffer<uint16_t> gh(bf16Bits(logits)), gdl16(n);
    DeviceBuffer<int32_t> gy(labels);
    dtk_cuda_cross_entropy_f32(gl.get(), gy.get(), gloss.get(), scratch.get(),
                               rows, classes, nullptr);
    dtk_cuda_cross_entropy_typed(gh.get(), DTK_CUDA_BF16, gy.get(),
                                 gloss16.get(), scratch.get(), rows, classes,
                                 nullptr);
    dtk_cuda_cross_entropy_grad_f32(gl.get(), gy.get(), gdloss.get(), gdl.get(),
                                    scratch.get(), rows, classes, nullptr);
    dtk_cuda_cross_entropy_grad_typed(gh.get(), DTK_CUDA_BF16, gy.get(),
                                      gdloss.get(), gdl16.get(), DTK_CUDA_BF16,
                                      scratch.get(), rows, classes, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    EXPECT_EQ(gloss16.read(), gloss.read());
    EXPECT_EQ(gdl16.read(), bf16Bits(roundedToBf16(gdl.read())));
  }
}

TEST(CudaKernelTest, ProductsThroughEachEngineEqualTheCpus) {
  REQUIRE_GPU();
  // Every engine a program may choose (DTRT_CUDA_PRODUCTS), on products of
  // odd shapes, both transposes, batches, accumulation, a bias epilogue, and
  // 16-bit operands and results: the row-major products the CPU computes.
  using dtrt::cuda::Operands;
  using dtrt::cuda::Product;
  using dtrt::cuda::ProductEngine;
  for (ProductEngine engine :
       {ProductEngine::Lt, ProductEngine::Tuned, ProductEngine::Classic}) {
    auto blas = dtrt::cuda::Blas::open(nullptr, engine);
    ASSERT_TRUE(bool(blas)) << blas.error().message();
    for (Operands operands : {Operands::F32, Operands::TF32, Operands::BF16})
      for (int64_t batch : {1, 3})
        for (int variant = 0; variant < 8; ++variant) {
          const int64_t m = 37, n = 50, k = 72;
          Product p{batch,
                    m,
                    n,
                    k,
                    (variant & 1) != 0,
                    (variant & 2) != 0,
                    (variant & 4) != 0,
                    operands};
          bool bias = variant == 1 || variant == 6;
          bool half = operands == Operands::BF16;
          if (half && variant == 3)
            p.result = Operands::BF16; // a product's narrowing, fused
          SCOPED_TRACE(testing::Message()
                       << "engine " << int(engine) << ", operands "
                       << int(operands) << ", batch " << batch << ", variant "
                       << variant);
          // 16-bit values (exact in TF32 and bf16) keep the reference exact.
          std::vector<float> a = roundedToBf16(randomVector(
                                 size_t(batch * m * k), 61 + variant)),
                             b = roundedToBf16(randomVector(
                                 size_t(batch * k * n), 71 + variant)),
                             c0 = randomVector(size_t(batch * m * n), 81),
                             row = randomVector(size_t(n), 91);
          std::vector<double> want(c0.size());
          for (int64_t x = 0; x < batch; ++x)
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double sum = p.accumulate ? c0[size_t((x * m + i) * n + j)] : 0;
                if (bias)
                  sum += row[size_t(j)];
                for (int64_t l = 0; l < k; ++l)
                  sum +=
                      double(a[size_t(x * m * k +
                                      (p.transA ? l * m + i : i * k + l))]) *
                      b[size_t(x * k * n + (p.transB ? j * k + l : l * n + j))];
                want[size_t((x * m + i) * n + j)] = sum;
              }
          DeviceBuffer<uint16_t> a16(bf16Bits(a)), b16(bf16Bits(b));
          DeviceBuffer<float> a32(a), b32(b), gbias(row), c32(c0);
          DeviceBuffer<uint16_t> c16(bf16Bits(roundedToBf16(c0)));
          const void *ga = half ? (void *)a16.get() : (void *)a32.get(),
                     *gb = half ? (void *)b16.get() : (void *)b32.get();
          void *gc = p.result == Operands::BF16 ? (void *)c16.get()
                                                : (void *)c32.get();
          const float *gbiasp = bias ? gbias.get() : nullptr;
          if (engine == ProductEngine::Tuned) {
            // Tuning writes C; the product then starts from c0 again.
            ASSERT_TRUE(bool((*blas)->tune(p, ga, gb, gc, gbiasp)));
            DeviceBuffer<float> fresh(c0);
            ASSERT_EQ(cudaMemcpy(c32.get(), fresh.get(), c0.size() * 4,
                                 cudaMemcpyDeviceToDevice),
                      cudaSuccess);
            DeviceBuffer<uint16_t> fresh16(bf16Bits(roundedToBf16(c0)));
            ASSERT_EQ(cudaMemcpy(c16.get(), fresh16.get(), c0.size() * 2,
                                 cudaMemcpyDeviceToDevice),
                      cudaSuccess);
          }
          dtrt::Status s = (*blas)->matmul(p, ga, gb, gc, gbiasp);
          ASSERT_TRUE(bool(s)) << s.error().message();
          std::vector<float> got;
          if (p.result == Operands::BF16) {
            for (uint16_t h : c16.read()) {
              uint32_t bits = uint32_t(h) << 16;
              float f;
              std::memcpy(&f, &bits, 4);
              got.push_back(f);
            }
          } else {
            got = c32.read();
          }
          // f32 products (CUDA cores) to rounding; a bf16 result or
          // accumulator to its 8 bits.
          double bound = p.result == Operands::BF16 ? 1.0 / 128 : 1e-5;
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], bound * (std::abs(want[i]) + 1.0))
                << i << " (" << (*blas)->lastEngine() << ")";
        }
  }
}

TEST(CudaKernelTest, ProductsTakeRowPitches) {
  REQUIRE_GPU();
  // What a GPU plan's "ld" asks of a product (GPT-2's logits, 50 257 wide,
  // in rows of 50 264): A, B and C with rows a pitch apart, every engine,
  // each transpose, bf16 in and out; the padding past each row untouched.
  using dtrt::cuda::Operands;
  using dtrt::cuda::Product;
  using dtrt::cuda::ProductEngine;
  const uint16_t kCanary = 0x7fc1; // a bf16 NaN no product writes
  for (ProductEngine engine :
       {ProductEngine::Lt, ProductEngine::Tuned, ProductEngine::Classic}) {
    auto blas = dtrt::cuda::Blas::open(nullptr, engine);
    ASSERT_TRUE(bool(blas)) << blas.error().message();
    for (int variant = 0; variant < 4; ++variant) {
      const int64_t m = 37, n = 101, k = 53;
      bool transA = variant & 1, transB = variant & 2;
      Product p{
          1, m, n, k, transA, transB, false, Operands::BF16, Operands::BF16};
      // Stored rows and columns of each operand, and a pitch past them.
      int64_t aRows = transA ? k : m, aCols = transA ? m : k;
      int64_t bRows = transB ? n : k, bCols = transB ? k : n;
      p.lda = (aCols + 7) / 8 * 8 + 8;
      p.ldb = (bCols + 7) / 8 * 8;
      p.ldc = (n + 7) / 8 * 8;
      SCOPED_TRACE(testing::Message()
                   << "engine " << int(engine) << ", variant " << variant);
      std::vector<float> a = roundedToBf16(randomVector(size_t(aRows * aCols),
                                                        161 + variant)),
                         b = roundedToBf16(randomVector(size_t(bRows * bCols),
                                                        171 + variant));
      auto pitched = [&](const std::vector<float> &x, int64_t rows,
                         int64_t cols, int64_t ld) {
        std::vector<uint16_t> bits = bf16Bits(x),
                              out(size_t(rows * ld), kCanary);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            out[size_t(r * ld + c)] = bits[size_t(r * cols + c)];
        return out;
      };
      DeviceBuffer<uint16_t> ga(pitched(a, aRows, aCols, p.lda)),
          gb(pitched(b, bRows, bCols, p.ldb)),
          gc(std::vector<uint16_t>(size_t(m * p.ldc), kCanary));
      if (engine == ProductEngine::Tuned)
        ASSERT_TRUE(bool((*blas)->tune(p, ga.get(), gb.get(), gc.get())));
      dtrt::Status s = (*blas)->matmul(p, ga.get(), gb.get(), gc.get());
      ASSERT_TRUE(bool(s)) << s.error().message();
      std::vector<uint16_t> got = gc.read();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < p.ldc; ++j) {
          uint16_t h = got[size_t(i * p.ldc + j)];
          if (j >= n) {
            ASSERT_EQ(h, kCanary) << "padding of row " << i << " written";
            continue;
          }
          double sum = 0;
          for (int64_t l = 0; l < k; ++l)
            sum += double(a[size_t(transA ? l * m + i : i * k + l)]) *
                   b[size_t(transB ? j * k + l : l * n + j)];
          uint32_t word = uint32_t(h) << 16;
          float f;
          std::memcpy(&f, &word, 4);
          ASSERT_NEAR(f, sum, (std::abs(sum) + 1.0) / 128) << i << ", " << j;
        }
    }
  }
}

TEST(CudaKernelTest, ProductsTakeRowPitchesAtGpt2sVocabulary) {
  REQUIRE_GPU();
  // The three products beside GPT-2's loss as its GPU plan gives them
  // (16 x 1024 tokens, 768 wide, 50 257 classes in rows of 50 264): the
  // logits, their input gradient and the table's gradient, bf16 through the
  // default engine, at their own size (1.6 GB of logits). Sampled elements
  // against a host sum; a read of the padding (NaN) or a write to it shows.
  using dtrt::cuda::Operands;
  using dtrt::cuda::Product;
  const int64_t tokens = 16384, width = 768, vocab = 50257, ld = 50264;
  const uint16_t kNaN = 0x7fc1;
  auto blas = dtrt::cuda::Blas::open(nullptr, dtrt::cuda::ProductEngine::Lt);
  ASSERT_TRUE(bool(blas)) << blas.error().message();
  // Small integers over 8: exact in bf16, and their products' sums in f32.
  auto value = [](int64_t i, int64_t j, int64_t salt) {
    return float((i * 7 + j * 13 + salt) % 17 - 8) / 8.0f;
  };
  auto bits = [](float f) {
    uint32_t w;
    std::memcpy(&w, &f, 4);
    return uint16_t(w >> 16);
  };
  auto fill = [&](int64_t rows, int64_t cols, int64_t pitch, int64_t salt) {
    std::vector<uint16_t> x(size_t(rows * pitch), kNaN);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        x[size_t(i * pitch + j)] = bits(value(i, j, salt));
    return x;
  };
  auto asFloat = [](uint16_t h) {
    uint32_t w = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  };
  std::mt19937 rng(5);
  // C = A op(B) for `p`, A and B filled by value() (salts 1 and 2) with
  // rows `lda` and `ldb` apart, C's rows `ldc` apart: 2048 sampled elements
  // and every row's padding.
  auto check = [&](Product p, int64_t aRows, int64_t aCols, int64_t bRows,
                   int64_t bCols) {
    int64_t lda = p.lda ? p.lda : aCols, ldb = p.ldb ? p.ldb : bCols,
            ldc = p.ldc ? p.ldc : p.n;
    DeviceBuffer<uint16_t> a(fill(aRows, aCols, lda, 1)),
        b(fill(bRows, bCols, ldb, 2)),
        c(std::vector<uint16_t>(size_t(p.m * ldc), kNaN));
    dtrt::Status s = (*blas)->matmul(p, a.get(), b.get(), c.get());
    ASSERT_TRUE(bool(s)) << s.error().message();
    std::vector<uint16_t> got = c.read();
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = p.n; j < ldc; ++j)
        ASSERT_EQ(got[size_t(i * ldc + j)], kNaN) << "padding of row " << i;
    for (int sample = 0; sample < 2048; ++sample) {
      int64_t i = int64_t(rng() % uint64_t(p.m)),
              j = int64_t(rng() % uint64_t(p.n));
      double sum = 0;
      for (int64_t l = 0; l < p.k; ++l)
        sum += double(p.transA ? value(l, i, 1) : value(i, l, 1)) *
               (p.transB ? value(j, l, 2) : value(l, j, 2));
      ASSERT_NEAR(asFloat(got[size_t(i * ldc + j)]), sum,
                  (std::abs(sum) + 1.0) / 128)
          << i << ", " << j;
    }
  };
  Product logits{1, tokens, vocab, width, false, true, false, Operands::BF16,
                 Operands::BF16};
  logits.ldc = ld;
  check(logits, tokens, width, vocab, width);
  Product inputGrad{1,     tokens, width, vocab,         false,
                    false, false,  Operands::BF16, Operands::BF16};
  inputGrad.lda = ld;
  check(inputGrad, tokens, vocab, vocab, width);
  Product tableGrad{1,    vocab, width, tokens,         true,
                    false, false, Operands::BF16, Operands::BF16};
  tableGrad.lda = ld;
  check(tableGrad, tokens, vocab, tokens, width);
}

TEST(CudaKernelTest, TheLossWithItsGradientGivesBothLaunchesBits) {
  REQUIRE_GPU();
  // cross_entropy_with_grad (the plan's launch when nothing between the loss
  // and its gradient reads the loss): the loss's bits and the gradient's,
  // pitched and packed, bf16 and f32 logits, some rows unlabelled.
  const int64_t rows = 70, classes = 1001, ld = 1008;
  std::vector<float> x =
      roundedToBf16(randomVector(size_t(rows * classes), 191, 4.0f));
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = r % 7 == 3 ? -1 : int32_t((r * 53) % classes);
  std::vector<uint16_t> packed = bf16Bits(x), wide(size_t(rows * ld), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c)
      wide[size_t(r * ld + c)] = packed[size_t(r * classes + c)];
  DeviceBuffer<int32_t> glabels(labels);
  DeviceBuffer<float> dloss(std::vector<float>{0.75f}),
      scratch(static_cast<size_t>(rows + 1)), gx(x);
  for (int64_t pitch : {classes, ld}) {
    SCOPED_TRACE(testing::Message() << "rows " << pitch << " apart");
    DeviceBuffer<uint16_t> logits(pitch == ld ? wide : packed),
        apart(size_t(rows * pitch)), together(size_t(rows * pitch));
    DeviceBuffer<float> lossApart(static_cast<size_t>(1)),
        lossTogether(static_cast<size_t>(1));
    dtk_cuda_cross_entropy_pitched(logits.get(), DTK_CUDA_BF16, pitch,
                                   glabels.get(), lossApart.get(),
                                   scratch.get(), rows, classes, nullptr);
    dtk_cuda_cross_entropy_grad_pitched(logits.get(), DTK_CUDA_BF16, pitch,
                                        glabels.get(), dloss.get(), apart.get(),
                                        DTK_CUDA_BF16, pitch, scratch.get(),
                                        rows, classes, nullptr);
    dtk_cuda_cross_entropy_with_grad_pitched(
        logits.get(), DTK_CUDA_BF16, pitch, glabels.get(), dloss.get(),
        together.get(), DTK_CUDA_BF16, pitch, lossTogether.get(), scratch.get(),
        rows, classes, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    EXPECT_EQ(lossTogether.read(), lossApart.read());
    std::vector<uint16_t> want = apart.read(), got = together.read();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < classes; ++c)
        ASSERT_EQ(got[size_t(r * pitch + c)], want[size_t(r * pitch + c)])
            << r << ", " << c;
  }
  // f32 logits and gradient, against the f32 entry points.
  DeviceBuffer<float> dApart(x.size()), dTogether(x.size()),
      lossApart(static_cast<size_t>(1)), lossTogether(static_cast<size_t>(1));
  dtk_cuda_cross_entropy_f32(gx.get(), glabels.get(), lossApart.get(),
                             scratch.get(), rows, classes, nullptr);
  dtk_cuda_cross_entropy_grad_f32(gx.get(), glabels.get(), dloss.get(),
                                  dApart.get(), scratch.get(), rows, classes,
                                  nullptr);
  dtk_cuda_cross_entropy_with_grad_pitched(
      gx.get(), DTK_CUDA_F32, classes, glabels.get(), dloss.get(),
      dTogether.get(), DTK_CUDA_F32, classes, lossTogether.get(), scratch.get(),
      rows, classes, nullptr);
  ASSERT_EQ(dtk_cuda_last_error(), nullptr);
  EXPECT_EQ(lossTogether.read(), lossApart.read());
  EXPECT_EQ(dTogether.read(), dApart.read());
}

TEST(CudaKernelTest, PitchedLogitsGiveThePackedBits) {
  REQUIRE_GPU();
  // The loss and its gradient over logits whose rows lie a pitch apart (the
  // plan's "ld"), writing dlogits so: the packed kernels' bits (aligned rows
  // load and store 16 bytes at a time, unaligned ones an element at a time,
  // in the same order), and the padding past each row left as it was.
  const int64_t rows = 70, classes = 1001, ld = 1008;
  const uint16_t kCanary = 0x7fc1;
  std::vector<float> x =
      roundedToBf16(randomVector(size_t(rows * classes), 181, 4.0f));
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = r % 9 == 4 ? -1 : int32_t((r * 37) % classes);
  std::vector<uint16_t> packed = bf16Bits(x), wide(size_t(rows * ld), kCanary);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c)
      wide[size_t(r * ld + c)] = packed[size_t(r * classes + c)];
  DeviceBuffer<uint16_t> gpacked(packed), gwide(wide), dpacked(packed.size()),
      dwide(std::vector<uint16_t>(wide.size(), kCanary));
  DeviceBuffer<int32_t> glabels(labels);
  DeviceBuffer<float> loss(static_cast<size_t>(1)),
      lossWide(static_cast<size_t>(1)), dloss(std::vector<float>{1.0f}),
      scratch(static_cast<size_t>(rows));
  dtk_cuda_cross_entropy_typed(gpacked.get(), DTK_CUDA_BF16, glabels.get(),
                               loss.get(), scratch.get(), rows, classes,
                               nullptr);
  dtk_cuda_cross_entropy_pitched(gwide.get(), DTK_CUDA_BF16, ld, glabels.get(),
                                 lossWide.get(), scratch.get(), rows, classes,
                                 nullptr);
  dtk_cuda_cross_entropy_grad_typed(gpacked.get(), DTK_CUDA_BF16, glabels.get(),
                                    dloss.get(), dpacked.get(), DTK_CUDA_BF16,
                                    scratch.get(), rows, classes, nullptr);
  dtk_cuda_cross_entropy_grad_pitched(
      gwide.get(), DTK_CUDA_BF16, ld, glabels.get(), dloss.get(), dwide.get(),
      DTK_CUDA_BF16, ld, scratch.get(), rows, classes, nullptr);
  ASSERT_EQ(dtk_cuda_last_error(), nullptr);
  EXPECT_EQ(lossWide.read(), loss.read());
  std::vector<uint16_t> want = dpacked.read(), got = dwide.read();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c)
      ASSERT_EQ(got[size_t(r * ld + c)],
                c < classes ? want[size_t(r * classes + c)] : kCanary)
          << r << ", " << c;
}

TEST(CudaKernelTest, Bf16AttentionReadsAndWritesBf16AsItsConversionsWould) {
  REQUIRE_GPU();
  // What a bf16 program's GPU plan relies on when it leaves out the
  // widenings before attention ("in": "bf16") and the narrowings after it
  // ("out": "bf16"): reading the bf16 values where they lie gives the f32
  // kernels' bits on their widenings, and each result is those bits rounded
  // to nearest. Every pairing of stored types, heads of 32, 64 and 128.
  for (auto [slices, t, d, causal] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{2, 1024, 64, 1},
        {3, 200, 128, 0},
        {2, 77, 32, 1}}) {
    SCOPED_TRACE(testing::Message() << "slices=" << slices << " t=" << t
                                    << " d=" << d << " causal=" << causal);
    size_t n = size_t(slices * t * d);
    std::vector<float> q = roundedToBf16(randomVector(n, 31)),
                       k = roundedToBf16(randomVector(n, 32)),
                       v = roundedToBf16(randomVector(n, 33)),
                       dout = roundedToBf16(randomVector(n, 34));
    size_t rows = size_t(slices * t);
    DeviceBuffer<float> gq(q), gk(k), gv(v), gdout(dout), go(n), glse(rows),
        gdq(n), gdk(n), gdv(n), scratch(2 * rows);
    DeviceBuffer<uint16_t> hq(bf16Bits(q)), hk(bf16Bits(k)), hv(bf16Bits(v)),
        hdout(bf16Bits(dout));
    dtk_cuda_attention_bf16(gq.get(), gk.get(), gv.get(), go.get(), glse.get(),
                            slices, t, d, causal, nullptr);
    // The gradient takes O back as the program keeps it: in bf16.
    std::vector<float> kept = roundedToBf16(go.read());
    DeviceBuffer<float> fo(kept);
    DeviceBuffer<uint16_t> ho(bf16Bits(kept));
    dtk_cuda_attention_grad_bf16(gq.get(), gk.get(), gv.get(), fo.get(),
                                 glse.get(), gdout.get(), gdq.get(), gdk.get(),
                                 gdv.get(), scratch.get(), slices, t, d, causal,
                                 nullptr);
    std::vector<std::vector<float>> want = {go.read(), gdq.read(), gdk.read(),
                                            gdv.read()};
    std::vector<float> wantLse = glse.read();
    for (int in : {DTK_CUDA_F32, DTK_CUDA_BF16})
      for (int out : {DTK_CUDA_F32, DTK_CUDA_BF16}) {
        if (in == DTK_CUDA_F32 && out == DTK_CUDA_F32)
          continue;
        SCOPED_TRACE(testing::Message() << "in " << in << ", out " << out);
        bool half = in == DTK_CUDA_BF16;
        const void *aq = half ? (void *)hq.get() : (void *)gq.get(),
                   *ak = half ? (void *)hk.get() : (void *)gk.get(),
                   *av = half ? (void *)hv.get() : (void *)gv.get(),
                   *ao = half ? (void *)ho.get() : (void *)fo.get(),
                   *adout = half ? (void *)hdout.get() : (void *)gdout.get();
        DeviceBuffer<float> f32[4] = {
            DeviceBuffer<float>(n), DeviceBuffer<float>(n),
            DeviceBuffer<float>(n), DeviceBuffer<float>(n)};
        DeviceBuffer<uint16_t> b16[4] = {
            DeviceBuffer<uint16_t>(n), DeviceBuffer<uint16_t>(n),
            DeviceBuffer<uint16_t>(n), DeviceBuffer<uint16_t>(n)};
        DeviceBuffer<float> lse(rows);
        auto result = [&](int r) -> void * {
          return out == DTK_CUDA_BF16 ? (void *)b16[r].get()
                                      : (void *)f32[r].get();
        };
        ASSERT_EQ(dtk_cuda_attention_bf16_typed(aq, ak, av, result(0),
                                                lse.get(), in, out, slices, t,
                                                d, causal, nullptr),
                  0);
        ASSERT_EQ(dtk_cuda_attention_grad_bf16_typed(
                      aq, ak, av, ao, glse.get(), adout, result(1), result(2),
                      result(3), in, out, scratch.get(), slices, t, d, causal,
                      nullptr),
                  0);
        ASSERT_EQ(dtk_cuda_last_error(), nullptr);
        EXPECT_EQ(lse.read(), wantLse);
        for (int r = 0; r < 4; ++r) {
          if (out == DTK_CUDA_BF16)
            EXPECT_EQ(b16[r].read(), bf16Bits(roundedToBf16(want[size_t(r)])))
                << "result " << r;
          else
            EXPECT_EQ(f32[r].read(), want[size_t(r)]) << "result " << r;
        }
      }
  }
  // A typed pairing takes no other width, and says so rather than falling
  // back (the plan promised bf16 buffers).
  DeviceBuffer<uint16_t> x(size_t(2 * 64 * 48));
  DeviceBuffer<float> lse(size_t(2 * 64));
  EXPECT_EQ(dtk_cuda_attention_bf16_typed(x.get(), x.get(), x.get(), x.get(),
                                          lse.get(), DTK_CUDA_BF16,
                                          DTK_CUDA_BF16, 2, 64, 48, 1, nullptr),
            1);
}

TEST(CudaKernelTest, AttentionPipelineAndWarpRowsGiveTheSameBits) {
  REQUIRE_GPU();
  // The bf16 attention kernels load the next tile by cp.async while they
  // work on this one; without (dtk_cuda_attention_pipeline(0)) they load
  // each tile once the last is done. The forward's warps own 32 query rows
  // for heads of 32 and 64, or 16 (dtk_cuda_attention_warp_rows(16)). The
  // arithmetic is the same, so are the bits: forward and gradient, bf16 and
  // f32 storage, ragged lengths (130: a block of 128 rows and one of 2).
  for (auto [slices, t, d, causal] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{2, 1024, 64, 1},
        {3, 200, 128, 0},
        {2, 77, 32, 1},
        {1, 64, 64, 0},
        {2, 130, 64, 0},
        {3, 200, 64, 1}}) {
    SCOPED_TRACE(testing::Message() << "slices=" << slices << " t=" << t
                                    << " d=" << d << " causal=" << causal);
    size_t n = size_t(slices * t * d);
    std::vector<float> q = roundedToBf16(randomVector(n, 41)),
                       k = roundedToBf16(randomVector(n, 42)),
                       v = roundedToBf16(randomVector(n, 43)),
                       dout = roundedToBf16(randomVector(n, 44));
    for (int in : {DTK_CUDA_F32, DTK_CUDA_BF16}) {
      bool half = in == DTK_CUDA_BF16;
      DeviceBuffer<float> fq(q), fk(k), fv(v), fdout(dout),
          scratch(size_t(2 * slices * t));
      DeviceBuffer<uint16_t> hq(bf16Bits(q)), hk(bf16Bits(k)), hv(bf16Bits(v)),
          hdout(bf16Bits(dout));
      const void *aq = half ? (void *)hq.get() : (void *)fq.get(),
                 *ak = half ? (void *)hk.get() : (void *)fk.get(),
                 *av = half ? (void *)hv.get() : (void *)fv.get(),
                 *adout = half ? (void *)hdout.get() : (void *)fdout.get();
      // {pipeline, warp rows}: the defaults first, then each other setting.
      const std::pair<int, int> settings[] = {
          {1, 32}, {0, 32}, {1, 16}, {0, 16}};
      std::vector<std::vector<uint16_t>> results[4];
      std::vector<float> lses[4];
      for (int i = 0; i < 4; ++i) {
        auto [pipeline, rows] = settings[i];
        dtk_cuda_attention_pipeline(pipeline);
        dtk_cuda_attention_warp_rows(rows);
        DeviceBuffer<uint16_t> o(n), dq(n), dk(n), dv(n);
        DeviceBuffer<float> lse(size_t(slices * t));
        ASSERT_EQ(dtk_cuda_attention_bf16_typed(aq, ak, av, o.get(), lse.get(),
                                                in, DTK_CUDA_BF16, slices, t, d,
                                                causal, nullptr),
                  0);
        // O back as the gradient's inputs are stored.
        DeviceBuffer<float> fo(widenedBf16(o.read()));
        const void *ao = half ? (void *)o.get() : (void *)fo.get();
        ASSERT_EQ(dtk_cuda_attention_grad_bf16_typed(
                      aq, ak, av, ao, lse.get(), adout, dq.get(), dk.get(),
                      dv.get(), in, DTK_CUDA_BF16, scratch.get(), slices, t, d,
                      causal, nullptr),
                  0);
        ASSERT_EQ(dtk_cuda_last_error(), nullptr);
        results[i] = {o.read(), dq.read(), dk.read(), dv.read()};
        lses[i] = lse.read();
      }
      dtk_cuda_attention_pipeline(1);
      dtk_cuda_attention_warp_rows(32);
      for (int i = 1; i < 4; ++i) {
        EXPECT_EQ(lses[i], lses[0]) << "lse, in " << in << ", setting " << i;
        for (size_t r = 0; r < results[0].size(); ++r)
          EXPECT_EQ(results[i][r], results[0][r])
              << "in " << in << ", pipeline " << settings[i].first
              << ", warp rows " << settings[i].second << ", result " << r;
      }
    }
  }
}

TEST(CudaKernelTest, StridedBf16AttentionReadsAndWritesHeadsWhereTheyLie) {
  REQUIRE_GPU();
  // What a bf16 program's GPU plan relies on when it leaves out the head
  // transposes around attention ("layouts"): Q, K and V read where the
  // [B, T, 3 H D] qkv product's heads lie, dO where the [B, T, H, D]
  // gradient lies, O written into [B, T, H, D] and read back from there by
  // the gradient, and dQ, dK, dV written
  // straight into their [B, T, 3 H D] concat give the contiguous kernels'
  // bits, moved as the transposes and the concat would move them.
  const int64_t b = 2, t = 200, h = 3, d = 64, c = h * d;
  const int64_t slices = b * h;
  size_t n = size_t(slices * t * d);
  auto bits = [&](unsigned seed) {
    return bf16Bits(roundedToBf16(randomVector(n, seed)));
  };
  std::vector<uint16_t> q = bits(61), k = bits(62), v = bits(63),
                        dout = bits(64);
  // [B, H, T, D] element (bi, hi, ti, di) in a [B, T, W] buffer whose
  // head hi starts `at` + hi * D along the last axis.
  auto merged = [&](const std::vector<uint16_t> &heads, int64_t width,
                    int64_t at, std::vector<uint16_t> &into) {
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t di = 0; di < d; ++di)
            into[size_t((bi * t + ti) * width + at + hi * d + di)] =
                heads[size_t(((bi * h + hi) * t + ti) * d + di)];
  };
  DeviceBuffer<uint16_t> gq(q), gk(k), gv(v), gdout(dout), go(n), gdq(n),
      gdk(n), gdv(n);
  DeviceBuffer<float> scratch(size_t(2 * slices * t)), glse(size_t(slices * t));
  ASSERT_EQ(dtk_cuda_attention_bf16_typed(
                gq.get(), gk.get(), gv.get(), go.get(), glse.get(),
                DTK_CUDA_BF16, DTK_CUDA_BF16, slices, t, d, 1, nullptr),
            0);
  ASSERT_EQ(dtk_cuda_attention_grad_bf16_typed(
                gq.get(), gk.get(), gv.get(), go.get(), glse.get(), gdout.get(),
                gdq.get(), gdk.get(), gdv.get(), DTK_CUDA_BF16, DTK_CUDA_BF16,
                scratch.get(), slices, t, d, 1, nullptr),
            0);
  std::vector<uint16_t> wantO(n), wantGrads(size_t(b * t * 3 * c)),
      doutMerged(n);
  merged(go.read(), c, 0, wantO);
  merged(gdq.read(), 3 * c, 0, wantGrads);
  merged(gdk.read(), 3 * c, c, wantGrads);
  merged(gdv.read(), 3 * c, 2 * c, wantGrads);
  merged(dout, c, 0, doutMerged);
  std::vector<uint16_t> qkvMerged(size_t(b * t * 3 * c));
  merged(q, 3 * c, 0, qkvMerged);
  merged(k, 3 * c, c, qkvMerged);
  merged(v, 3 * c, 2 * c, qkvMerged);

  DeviceBuffer<uint16_t> hdout(doutMerged), ho(n), grads(wantGrads.size()),
      qkv(qkvMerged);
  const uint16_t *hq = qkv.get(), *hk = hq + c, *hv = hq + 2 * c;
  DeviceBuffer<float> lse(size_t(slices * t));
  dtk_attention_layout heads{1, t * d, 0, d}, btc{h, t * c, d, c},
      bt3c{h, t * 3 * c, d, 3 * c};
  dtk_attention_layout forward[4] = {bt3c, bt3c, bt3c, btc};
  ASSERT_EQ(dtk_cuda_attention_bf16_strided(hq, hk, hv, ho.get(), lse.get(),
                                            DTK_CUDA_BF16, DTK_CUDA_BF16,
                                            forward, slices, t, d, 1, nullptr),
            0);
  dtk_attention_layout backward[8] = {bt3c, bt3c, bt3c, btc,
                                      btc,  bt3c, bt3c, bt3c};
  uint16_t *g = grads.get();
  ASSERT_EQ(dtk_cuda_attention_grad_bf16_strided(
                hq, hk, hv, ho.get(), lse.get(), hdout.get(), g, g + c,
                g + 2 * c, DTK_CUDA_BF16, DTK_CUDA_BF16, backward,
                scratch.get(), slices, t, d, 1, nullptr),
            0);
  ASSERT_EQ(dtk_cuda_last_error(), nullptr);
  EXPECT_EQ(ho.read(), wantO);
  EXPECT_EQ(lse.read(), glse.read());
  EXPECT_EQ(grads.read(), wantGrads);
  // Rows not 16-byte aligned: refused, nothing launched.
  dtk_attention_layout odd[4] = {heads, heads, heads, {h, t * c, d, c + 4}};
  EXPECT_EQ(dtk_cuda_attention_bf16_strided(
                gq.get(), gk.get(), gv.get(), ho.get(), lse.get(),
                DTK_CUDA_BF16, DTK_CUDA_BF16, odd, slices, t, d, 1, nullptr),
            1);
}

TEST(CudaKernelTest, NormsReadAndWriteBf16AsTheirConversionsWould) {
  REQUIRE_GPU();
  // What a bf16 program's GPU plan relies on when it leaves out the widenings
  // of a layer or RMS norm's x and its gradient's dy ("in", "grad_in") and
  // the narrowing of y or dx ("out"): the typed kernels give the f32
  // kernels' bits on the widened values, each 16-bit result those bits
  // rounded to nearest, and the same weight and bias gradients.
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{33, 768}, {1000, 37}, {600, 300}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    size_t n = size_t(rows * cols), c = size_t(cols);
    std::vector<float> x = roundedToBf16(randomVector(n, 51, 2.0f)),
                       dy = roundedToBf16(randomVector(n, 52)),
                       w = randomVector(c, 53), b = randomVector(c, 54);
    size_t statsSize = size_t(2 * rows + 2 * ((rows + 63) / 64) * cols);
    DeviceBuffer<float> gx(x), gdy(dy), gw(w), gb(b), gy(n), gdx(n), gdw(c),
        gdb(c), gdw16(c), gdb16(c), gdx32(n), stats(statsSize);
    DeviceBuffer<uint16_t> hx(bf16Bits(x)), hdy(bf16Bits(dy)), hy(n), hdx(n);
    dtk_cuda_layer_norm_f32(gx.get(), gw.get(), gb.get(), gy.get(), rows, cols,
                            1e-5f, nullptr);
    dtk_cuda_layer_norm_typed(hx.get(), DTK_CUDA_BF16, gw.get(), gb.get(),
                              hy.get(), DTK_CUDA_BF16, rows, cols, 1e-5f,
                              nullptr);
    dtk_cuda_layer_norm_grad_f32(gx.get(), gw.get(), gdy.get(), gdx.get(),
                                 gdw.get(), gdb.get(), stats.get(), rows, cols,
                                 1e-5f, nullptr);
    // x and dy as bf16, dx as bf16, then as f32.
    dtk_cuda_layer_norm_grad_typed(hx.get(), DTK_CUDA_BF16, gw.get(), hdy.get(),
                                   DTK_CUDA_BF16, hdx.get(), DTK_CUDA_BF16,
                                   gdw16.get(), gdb16.get(), stats.get(), rows,
                                   cols, 1e-5f, nullptr);
    std::vector<float> dw16 = gdw16.read(), db16 = gdb16.read();
    dtk_cuda_layer_norm_grad_typed(hx.get(), DTK_CUDA_BF16, gw.get(), hdy.get(),
                                   DTK_CUDA_BF16, gdx32.get(), DTK_CUDA_F32,
                                   gdw16.get(), gdb16.get(), stats.get(), rows,
                                   cols, 1e-5f, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    std::vector<float> dx = gdx.read();
    EXPECT_EQ(hy.read(), bf16Bits(roundedToBf16(gy.read())));
    EXPECT_EQ(hdx.read(), bf16Bits(roundedToBf16(dx)));
    EXPECT_EQ(gdx32.read(), dx);
    EXPECT_EQ(dw16, gdw.read());
    EXPECT_EQ(db16, gdb.read());

    // The RMS norm (LLaMA's) alike.
    DeviceBuffer<float> ry(n), rdx(n), rdw(c), rdw16(c);
    DeviceBuffer<uint16_t> rhy(n), rhdx(n);
    dtk_cuda_rms_norm_f32(gx.get(), gw.get(), ry.get(), rows, cols, 1e-5f,
                          nullptr);
    dtk_cuda_rms_norm_typed(hx.get(), DTK_CUDA_BF16, gw.get(), rhy.get(),
                            DTK_CUDA_BF16, rows, cols, 1e-5f, nullptr);
    dtk_cuda_rms_norm_grad_f32(gx.get(), gw.get(), gdy.get(), rdx.get(),
                               rdw.get(), stats.get(), rows, cols, 1e-5f,
                               nullptr);
    std::vector<float> rmsDx = rdx.read(), rmsDw = rdw.read();
    dtk_cuda_rms_norm_grad_typed(
        hx.get(), DTK_CUDA_BF16, gw.get(), hdy.get(), DTK_CUDA_BF16, rhdx.get(),
        DTK_CUDA_BF16, rdw16.get(), stats.get(), rows, cols, 1e-5f, nullptr);
    ASSERT_EQ(dtk_cuda_last_error(), nullptr);
    EXPECT_EQ(rhy.read(), bf16Bits(roundedToBf16(ry.read())));
    EXPECT_EQ(rhdx.read(), bf16Bits(roundedToBf16(rmsDx)));
    EXPECT_EQ(rdw16.read(), rmsDw);
  }
}

} // namespace
