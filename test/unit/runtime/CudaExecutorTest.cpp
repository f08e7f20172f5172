//===- CudaExecutorTest.cpp - a GPU plan's launches, run by the executor --===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What the executor does around a launch, beyond the kernel or library call:
// a padded product's zeroing (dt/Target's CudaPadding.h), a product's bias,
// GELU and a bias's gradient in cuBLASLt's epilogue (or after the classic
// API), and attention on
// cuDNN's fused kernels (dtrt/cuda/cudnn.h) against dt's own. Plans are
// written by hand, arenas filled with NaN where nothing should be read, and
// the entry point runs as a program's does (captured as a CUDA graph).
// Without a GPU each test is skipped, saying so; without cuDNN, the cuDNN
// tests too.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/cudnn.h"
#include "dtrt/cuda/executor.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

bool haveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/// A PTX module without kernels: the plans here launch none.
const char *kNoKernels = ".version 7.0\n.target sm_52\n.address_size 64\n";

const uint16_t kNaN = 0x7fc1;

uint16_t bf16(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return uint16_t(w >> 16);
}

/// f to the nearest bf16 (ties to even), as cuBLAS rounds its sums.
uint16_t bf16Rounded(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  w += 0x7fff + ((w >> 16) & 1);
  return uint16_t(w >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t w = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

/// Small multiples of 1/8: exact in bf16, their products' sums in f32.
float value(int64_t i, int64_t j, int64_t salt) {
  return float((i * 7 + j * 13 + salt) % 17 - 8) / 8.0f;
}

/// Runs `plan`'s grad_step with DTRT_CUDA_PRODUCTS=`engine` on an arena
/// holding `arena`, which it leaves as the run left the arena, the products
/// tuned first (which writes their results: the inputs go in again after);
/// returns why it failed, or "".
std::string runProducts(const std::string &plan, const char *engine,
                        std::vector<uint16_t> &arena) {
  setenv("DTRT_CUDA_PRODUCTS", engine, 1);
  auto executor = dtrt::cuda::Executor::create(kNoKernels, plan);
  unsetenv("DTRT_CUDA_PRODUCTS");
  if (!executor)
    return executor.error().message();
  size_t bytes = arena.size() * 2;
  char *device = nullptr;
  if (cudaMalloc(&device, size_t((*executor)->arenaBytes())) != cudaSuccess)
    return "cannot allocate the arena";
  auto in = [&] {
    return cudaMemcpy(device, arena.data(), bytes, cudaMemcpyHostToDevice) ==
                   cudaSuccess
               ? dtrt::Status::ok()
               : dtrt::Status(dtrt::Error("copy failed"));
  };
  dtrt::Status s = in();
  if (s)
    s = (*executor)->tuneProducts(device);
  if (s)
    s = in();
  if (s)
    s = (*executor)->run("grad_step", device);
  if (s)
    s = (*executor)->synchronize();
  cudaMemcpy(arena.data(), device, bytes, cudaMemcpyDeviceToHost);
  cudaFree(device);
  return s ? "" : s.error().message();
}

/// A plan of one entry point, grad_step, whose launches are `launches` (a
/// JSON list's elements) on an arena of `arena` bytes, without scratch.
std::string gradStep(int64_t arena, const std::string &launches) {
  return R"({"version": 1, "arena_bytes": )" + std::to_string(arena) +
         R"(, "scratch_bytes": 0, "entries": {"grad_step": [)" + launches +
         "]}}";
}

TEST(CudaExecutorTest, APaddedProductZeroesItsExtraTermsAndReadsNoNaN) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  // GPT-2's vocabulary products in small: C[37 x 101] = A[37 x 53] B^T with
  // B stored [101 x 53], run at n = 104 and k = 56 as a plan pads them.
  // Every byte past the values is a NaN: A's and B's columns 53 to 55 (the
  // plan zeroes them) and B's rows 101 to 103 (read only into C's columns
  // past 101, which nothing reads). Then D[37 x 24] = A[37 x 53] E with E
  // stored [53 x 24] and its rows 53 to 55 zeroed: the input gradient's
  // layout. A NaN that reached a sum shows; so would a zero missed.
  const int64_t m = 37, n = 101, k = 53, n8 = 104, k8 = 56, w = 24;
  const int64_t a = 0, b = 8192, c = 20480, e = 28672, d = 32768,
                arena = 36864;
  std::string plan = gradStep(arena, R"(
      {"op": "matmul", "p": [0, 8192, 20480], "i": [1, 37, 101, 53, 0, 1],
       "half": "bf16", "out": "bf16", "ld": [56, 56, 104], "pad": [104, 56],
       "zero": [[106, 6, 37, 112], [8298, 6, 101, 112]]},
      {"op": "matmul", "p": [0, 28672, 32768], "i": [1, 37, 24, 53, 0, 0],
       "half": "bf16", "out": "bf16", "ld": [56, 24, 24], "pad": [24, 56],
       "zero": [[106, 6, 37, 112], [31216, 144, 1, 144]]})");
  auto executor = dtrt::cuda::Executor::create(kNoKernels, plan);
  ASSERT_TRUE(bool(executor)) << executor.error().message();
  ASSERT_GE((*executor)->arenaBytes(), arena);

  std::vector<uint16_t> host(size_t(arena / 2), kNaN);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      host[size_t((a / 2) + i * k8 + l)] = bf16(value(i, l, 1));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l)
      host[size_t((b / 2) + j * k8 + l)] = bf16(value(j, l, 2));
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < w; ++j)
      host[size_t((e / 2) + l * w + j)] = bf16(value(l, j, 3));
  char *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, size_t((*executor)->arenaBytes())),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), size_t(arena),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  dtrt::Status s = (*executor)->run("grad_step", device);
  if (s)
    s = (*executor)->synchronize();
  ASSERT_TRUE(bool(s)) << s.error().message();
  ASSERT_EQ(cudaMemcpy(host.data(), device, size_t(arena),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(device);

  // Each result's rows against a host sum: C's (B's row j) and D's (E's
  // column j).
  auto check = [&](int64_t at, int64_t cols, int64_t ld, bool rowOfB) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += double(value(i, l, 1)) *
                 (rowOfB ? value(j, l, 2) : value(l, j, 3));
        float got = fromBf16(host[size_t(at / 2 + i * ld + j)]);
        ASSERT_NEAR(got, sum, (std::abs(sum) + 1.0) / 128) << i << ", " << j;
      }
  };
  check(c, n, n8, true);
  check(d, w, w, false);
  // The zeroed bytes are the extra terms' alone: A's and B's columns 53
  // to 55 and E's rows 53 to 55 are zeros, B's rows 101 to 103 untouched.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = k; l < k8; ++l)
      ASSERT_EQ(host[size_t(a / 2 + i * k8 + l)], 0) << i << ", " << l;
  for (int64_t j = 0; j < n8; ++j)
    for (int64_t l = k; l < k8; ++l)
      ASSERT_EQ(host[size_t(b / 2 + j * k8 + l)], j < n ? 0 : kNaN) << j;
  for (int64_t l = k; l < k8; ++l)
    for (int64_t j = 0; j < w; ++j)
      ASSERT_EQ(host[size_t(e / 2 + l * w + j)], 0) << l << ", " << j;
}

/// A Linear layer's bf16 operands in `host`: A [m x k] at byte `a` and B
/// [n x k] at `b`, value(.., 1) and value(.., 2) times `scale`, and a bias of
/// n at `bias`, value(j, j, 3) times `biasScale`.
void putLinear(std::vector<uint16_t> &host, int64_t a, int64_t b, int64_t bias,
               int64_t m, int64_t n, int64_t k, float scale, float biasScale) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      host[size_t(a / 2 + i * k + l)] = bf16(value(i, l, 1) * scale);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l)
      host[size_t(b / 2 + j * k + l)] = bf16(value(j, l, 2) * scale);
  for (int64_t j = 0; j < n; ++j)
    host[size_t(bias / 2 + j)] = bf16(value(j, j, 3) * biasScale);
}

TEST(CudaExecutorTest, ABf16ProductAddsItsBf16BiasBeforeItsOneRounding) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  // A bf16 program's Linear layer on the GPU (dt-fuse-epilogues' mixed-
  // precision fold): C[37 x 24] = A[37 x 40] B^T + bias, B stored [24 x 40],
  // the bias read as bf16 where it lies and added to the f32 sums before
  // the one rounding to bf16. Through cuBLASLt's epilogue, through
  // cuBLASLt timed, and through the classic API (the bias filled into C
  // first).
  const int64_t m = 37, n = 24, k = 40;
  const int64_t a = 0, b = 4096, bias = 8192, c = 8448, arena = 10496;
  std::string plan = gradStep(arena, R"(
      {"op": "matmul_bias", "p": [0, 4096, 8192, 8448], "i": [1, 37, 24, 40, 0, 1],
       "half": "bf16", "out": "bf16", "bias": "bf16"})");
  std::vector<uint16_t> host(size_t(arena / 2), kNaN);
  putLinear(host, a, b, bias, m, n, k, 1.0f, 1.0f / 3);
  for (const char *engine : {"lt", "tuned", "cublas"}) {
    std::vector<uint16_t> run = host;
    ASSERT_EQ(runProducts(plan, engine, run), "") << engine;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // Exact in f32 (multiples of 1/64 summed), then one rounding.
        float sum = fromBf16(host[size_t(bias / 2 + j)]);
        for (int64_t l = 0; l < k; ++l)
          sum += value(i, l, 1) * value(j, l, 2);
        ASSERT_EQ(run[size_t(c / 2 + i * n + j)], bf16Rounded(sum))
            << engine << ": " << i << ", " << j;
      }
  }
}

/// dt.gelu's formula (the tanh approximation) and its derivative, in double.
double gelu(double x, bool derivative) {
  const double k = 0.7978845608028654, c = 0.044715;
  double t = std::tanh(k * (x + c * x * x * x));
  if (!derivative)
    return 0.5 * x * (1 + t);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
}

TEST(CudaExecutorTest,
     GeluEpiloguesWriteTheActivationThePreActivationAndTheGradient) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  // A bf16 MLP's GELU in the products' epilogues (CudaZeroCopy.h), through
  // cuBLASLt, cuBLASLt timed and the classic API (then gelu.cu after a
  // rounded product): H[37 x 24] = gelu(A B^T + bias) with the
  // pre-activation X = A B^T + bias beside it, then G = (A B^T) gelu'(X).
  // The sums are exact in f32, so X is their one rounding, bit for bit;
  // H and G are within a rounding or two of bf16 (the classic path rounds
  // before GELU) of the formula's value in double.
  const int64_t m = 37, n = 24, k = 40;
  const int64_t a = 0, b = 4096, bias = 8192, h = 8448, x = 10496, g = 12544,
                arena = 14592;
  std::string plan = gradStep(arena, R"(
      {"op": "matmul_bias", "p": [0, 4096, 8192, 8448, 10496],
       "i": [1, 37, 24, 40, 0, 1], "half": "bf16", "out": "bf16",
       "bias": "bf16", "epilogue": "gelu"},
      {"op": "matmul", "p": [0, 4096, 12544, 10496], "i": [1, 37, 24, 40, 0, 1],
       "half": "bf16", "out": "bf16", "epilogue": "gelu_grad"})");
  std::vector<uint16_t> host(size_t(arena / 2), kNaN);
  putLinear(host, a, b, bias, m, n, k, 0.5f, 0.25f);
  for (const char *engine : {"lt", "tuned", "cublas"}) {
    std::vector<uint16_t> run = host;
    ASSERT_EQ(runProducts(plan, engine, run), "") << engine;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float product = 0;
        for (int64_t l = 0; l < k; ++l)
          product += value(i, l, 1) / 2 * (value(j, l, 2) / 2);
        float pre = product + fromBf16(host[size_t(bias / 2 + j)]);
        size_t at = size_t(i * n + j);
        ASSERT_EQ(run[x / 2 + at], bf16Rounded(pre))
            << engine << ": pre-activation " << i << ", " << j;
        double want = gelu(pre, false);
        ASSERT_NEAR(fromBf16(run[h / 2 + at]), want,
                    (std::abs(want) + std::abs(pre)) / 128 + 1e-3)
            << engine << ": activation " << i << ", " << j;
        want = product * gelu(fromBf16(run[x / 2 + at]), true);
        ASSERT_NEAR(fromBf16(run[g / 2 + at]), want,
                    (std::abs(want) + std::abs(product)) / 128 + 1e-3)
            << engine << ": gradient " << i << ", " << j;
      }
    // Nothing else written.
    for (int64_t at = 0; at < arena / 2; ++at)
      if (at < h / 2 || at >= (g + m * n * 2) / 2)
        ASSERT_EQ(run[size_t(at)], host[size_t(at)]) << engine << ": " << at;
  }
}

/// The f32 at byte `at` of `host` (bf16 halves, little-endian).
float f32At(const std::vector<uint16_t> &host, int64_t at) {
  uint32_t w =
      uint32_t(host[size_t(at / 2)]) | uint32_t(host[size_t(at / 2 + 1)]) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

TEST(CudaExecutorTest, AWeightGradientWritesItsBiasGradientBeside) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  // A bf16 Linear layer's backward (CudaZeroCopy.h's bias gradients):
  // dW[24 x 20] = dY^T X, dY stored [37 x 24] (A transposed), X [37 x 20],
  // in f32, and db[24] = dY's column sums beside it, f32: through
  // cuBLASLt's BGRADB epilogue, cuBLASLt timed, and the classic API (then
  // column_sums.cu). Every term is a small multiple of 1/64, so both are
  // exact in f32, in any order: bit for bit.
  const int64_t k = 37, m = 24, n = 20;
  const int64_t dy = 0, x = 2048, dw = 4096, db = 6144, arena = 6400;
  std::string plan = gradStep(arena, R"(
      {"op": "matmul", "p": [0, 2048, 4096, 6144], "i": [1, 24, 20, 37, 1, 0],
       "half": "bf16", "epilogue": "bias_grad"})");
  std::vector<uint16_t> host(size_t(arena / 2), kNaN);
  for (int64_t l = 0; l < k; ++l) {
    for (int64_t i = 0; i < m; ++i)
      host[size_t(dy / 2 + l * m + i)] = bf16(value(l, i, 1));
    for (int64_t j = 0; j < n; ++j)
      host[size_t(x / 2 + l * n + j)] = bf16(value(l, j, 2) / 8);
  }
  for (const char *engine : {"lt", "tuned", "cublas"}) {
    std::vector<uint16_t> run = host;
    ASSERT_EQ(runProducts(plan, engine, run), "") << engine;
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0;
      for (int64_t l = 0; l < k; ++l)
        sum += value(l, i, 1);
      ASSERT_EQ(f32At(run, db + 4 * i), sum) << engine << ": db " << i;
      for (int64_t j = 0; j < n; ++j) {
        float product = 0;
        for (int64_t l = 0; l < k; ++l)
          product += value(l, i, 1) * (value(l, j, 2) / 8);
        ASSERT_EQ(f32At(run, dw + 4 * (i * n + j)), product)
            << engine << ": dW " << i << ", " << j;
      }
    }
    // The operands untouched, nothing past db written.
    for (int64_t at = 0; at < dw / 2; ++at)
      ASSERT_EQ(run[size_t(at)], host[size_t(at)]) << engine << ": " << at;
    for (int64_t at = (db + 4 * m) / 2; at < arena / 2; ++at)
      ASSERT_EQ(run[size_t(at)], host[size_t(at)]) << engine << ": " << at;
  }
}

/// GPT-2's attention in small: B = 2, H = 3, T = 256, D = 64, causal. Q, K
/// and V lie in the [B, T, 3C] qkv product's heads, O and dO in [B, T, C],
/// and dQ, dK, dV go into their [B, T, 3C] concat: the layouts of a bf16
/// program's plan (test/dtc/gpu-plan-zero-copy.test).
struct SmallAttention {
  static constexpr int64_t b = 2, h = 3, t = 256, d = 64, c = h * d;
  static constexpr int64_t slices = b * h;
  // Byte offsets in the arena, 256 apart at least.
  static constexpr int64_t qkv = 0, o = qkv + b * t * 3 * c * 2,
                           lse = o + b * t * c * 2, dout = lse + slices * t * 4,
                           grads = dout + b * t * c * 2,
                           end = grads + b * t * 3 * c * 2;

  static dtrt::cuda::Sdpa sdpa(bool backward) {
    dtrt::cuda::Sdpa a;
    a.backward = backward;
    a.batch = b;
    a.heads = h;
    a.t = t;
    a.d = d;
    std::array<int64_t, 3> bt3c{t * 3 * c, d, 3 * c}, btc{t * c, d, c};
    a.strides = {bt3c, bt3c, bt3c, btc};
    if (backward)
      a.strides.insert(a.strides.end(), {btc, bt3c, bt3c, bt3c});
    return a;
  }

  static std::string plan() {
    auto layout = [](int64_t heads, int64_t batch, int64_t head, int64_t row) {
      return "[" + std::to_string(heads) + ", " + std::to_string(batch) + ", " +
             std::to_string(head) + ", " + std::to_string(row) + "]";
    };
    std::string bt3c = layout(h, t * 3 * c, d, 3 * c),
                btc = layout(h, t * c, d, c), rows = layout(1, t, 0, 1);
    std::string q = std::to_string(qkv), k = std::to_string(qkv + 2 * c),
                v = std::to_string(qkv + 4 * c);
    std::string shape = "[" + std::to_string(slices) + ", " +
                        std::to_string(t) + ", " + std::to_string(d) + ", 1]";
    return R"({"version": 1, "arena_bytes": )" + std::to_string(end) +
           R"(, "scratch_bytes": )" + std::to_string(2 * slices * t * 4) +
           R"(, "entries": {"grad_step": [
      {"op": "attention", "bf16": true, "in": "bf16", "out": "bf16",
       "p": [)" +
           q + ", " + k + ", " + v + ", " + std::to_string(o) + ", " +
           std::to_string(lse) + R"(], "i": )" + shape + R"(,
       "layouts": [)" +
           bt3c + ", " + bt3c + ", " + bt3c + ", " + btc + ", " + rows + R"(]},
      {"op": "attention_grad", "bf16": true, "in": "bf16", "out": "bf16",
       "p": [)" +
           q + ", " + k + ", " + v + ", " + std::to_string(o) + ", " +
           std::to_string(lse) + ", " + std::to_string(dout) + ", " +
           std::to_string(grads) + ", " + std::to_string(grads + 2 * c) + ", " +
           std::to_string(grads + 4 * c) + R"(], "i": )" + shape + R"(,
       "layouts": [)" +
           bt3c + ", " + bt3c + ", " + bt3c + ", " + btc + ", " + rows + ", " +
           btc + ", " + bt3c + ", " + bt3c + ", " + bt3c + R"(]}]}})";
  }
};

TEST(CudnnAttentionTest, DescribesTheAttentionAndGradientGraphs) {
  // Without a GPU, cuDNN still checks every tensor's and operation's
  // attributes as dt sets them; the graph and its plan need a device.
  // At GPT-2 124M's size too (16 x 12 heads x 1024 x 64, Q, K and V where
  // the qkv product wrote them, dQ, dK and dV in the [B, T, 3C] concat:
  // test/dtc/gpu-plan-zero-copy.test's layouts).
  dtrt::cuda::Sdpa gpt2 = SmallAttention::sdpa(true);
  gpt2.batch = 16;
  gpt2.heads = 12;
  gpt2.t = 1024;
  std::array<int64_t, 3> btc{786432, 64, 768}, bt3c{2359296, 64, 2304};
  gpt2.strides = {bt3c, bt3c, bt3c, btc, btc, bt3c, bt3c, bt3c};
  const char *graphs[] = {"forward", "gradient", "deterministic gradient",
                          "GPT-2's forward", "GPT-2's gradient"};
  for (int graph = 0; graph < 5; ++graph) {
    dtrt::cuda::Sdpa a = SmallAttention::sdpa(graph == 1 || graph == 2);
    a.deterministic = graph == 2;
    if (graph >= 3) {
      a = gpt2;
      a.backward = graph == 4;
      if (!a.backward)
        a.strides.resize(4);
    }
    dtrt::Status s = dtrt::cuda::Cudnn::describe(a);
    if (!s &&
        s.error().message().find("cannot load cuDNN") != std::string::npos)
      GTEST_SKIP() << s.error().message();
    EXPECT_TRUE(bool(s)) << graphs[graph] << ": " << s.error().message();
  }
}

/// Runs SmallAttention's plan with DTRT_CUDA_ATTENTION=`engine` (and
/// DTRT_CUDA_DETERMINISTIC=`deterministic`) on an arena holding `host`,
/// which it leaves as the run left the arena; returns why it failed, or "".
std::string runAttention(const char *engine, std::vector<uint16_t> &host,
                         std::string &which, const char *deterministic = "0") {
  setenv("DTRT_CUDA_DETERMINISTIC", deterministic, 1);
  setenv("DTRT_CUDA_ATTENTION", engine, 1);
  auto executor =
      dtrt::cuda::Executor::create(kNoKernels, SmallAttention::plan());
  unsetenv("DTRT_CUDA_ATTENTION");
  if (!executor)
    return executor.error().message();
  char *device = nullptr;
  if (cudaMalloc(&device, size_t((*executor)->arenaBytes())) != cudaSuccess)
    return "cannot allocate the arena";
  cudaMemcpy(device, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
  setenv("DTRT_CUDA_ATTENTION", engine, 1);
  dtrt::Status s = (*executor)->prepareAttention(device);
  unsetenv("DTRT_CUDA_ATTENTION");
  unsetenv("DTRT_CUDA_DETERMINISTIC");
  which = (*executor)->attentionEngine();
  // Preparing ran and checked cuDNN on random inputs in the arena: ours
  // again.
  cudaMemcpy(device, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
  if (s)
    s = (*executor)->run("grad_step", device);
  if (s)
    s = (*executor)->synchronize();
  cudaMemcpy(host.data(), device, host.size() * 2, cudaMemcpyDeviceToHost);
  cudaFree(device);
  return s ? "" : s.error().message();
}

TEST(CudnnAttentionTest, GivesWhatDtsKernelsGiveWhereTheyLie) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  using A = SmallAttention;
  // Q, K, V and dO random in [-2, 2), rounded to bf16; everything else NaN,
  // which any read past what attention should read would carry into a
  // result.
  std::vector<uint16_t> host(size_t(A::end / 2), kNaN);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (int64_t i = 0; i < A::b * A::t * 3 * A::c; ++i)
    host[size_t(A::qkv / 2 + i)] = bf16(uniform(rng));
  for (int64_t i = 0; i < A::b * A::t * A::c; ++i)
    host[size_t(A::dout / 2 + i)] = bf16(uniform(rng));
  std::vector<uint16_t> mine = host, theirs = host, fixed = host, again = host;
  std::string engine;
  std::string failed = runAttention("dt", mine, engine);
  ASSERT_EQ(failed, "");
  EXPECT_EQ(engine, "dt's kernels");
  failed = runAttention("cudnn", theirs, engine);
  if (failed.find("cannot load cuDNN") != std::string::npos)
    GTEST_SKIP() << failed;
  ASSERT_EQ(failed, "");
  EXPECT_NE(engine.find("cuDNN 9."), std::string::npos) << engine;

  // O and the gradients in bf16: within a few of bf16's roundings of the
  // largest value (the sums run in other orders, P rounds to bf16 in
  // both); lse in f32 closer.
  auto compare = [&](const char *what, int64_t at, int64_t rows, int64_t width,
                     int64_t pitch) {
    float largest = 0, worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j) {
        size_t i = size_t(at / 2 + r * pitch + j);
        float want = fromBf16(mine[i]), got = fromBf16(theirs[i]);
        ASSERT_TRUE(std::isfinite(got)) << what << " row " << r << " col " << j;
        largest = std::max(largest, std::abs(want));
        worst = std::max(worst, std::abs(got - want));
      }
    EXPECT_LE(worst, 0.02f * largest + 1e-3f)
        << what << ": largest " << largest << ", worst difference " << worst;
  };
  compare("O", A::o, A::b * A::t, A::c, A::c);
  compare("dQ dK dV", A::grads, A::b * A::t, 3 * A::c, 3 * A::c);
  float worst = 0;
  for (int64_t i = 0; i < A::slices * A::t; ++i) {
    float want, got;
    std::memcpy(&want, &mine[size_t(A::lse / 2 + 2 * i)], 4);
    std::memcpy(&got, &theirs[size_t(A::lse / 2 + 2 * i)], 4);
    worst = std::max(worst, std::abs(got - want));
  }
  EXPECT_LE(worst, 2e-3f) << "lse";
  // Nothing outside the results changed.
  for (int64_t i = 0; i < A::end / 2; ++i)
    if (std::isnan(fromBf16(mine[size_t(i)])))
      ASSERT_TRUE(std::isnan(fromBf16(theirs[size_t(i)]))) << "byte " << 2 * i;

  // cuDNN's deterministic gradient (DTRT_CUDA_DETERMINISTIC=1): as close,
  // and the same bits twice.
  ASSERT_EQ(runAttention("cudnn", fixed, engine, "1"), "");
  ASSERT_EQ(runAttention("cudnn", again, engine, "1"), "");
  EXPECT_EQ(fixed, again);
  theirs = fixed;
  compare("dQ dK dV, deterministic", A::grads, A::b * A::t, 3 * A::c, 3 * A::c);
}

} // namespace
