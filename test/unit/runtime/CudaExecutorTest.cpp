//===- CudaExecutorTest.cpp - a GPU plan's launches, run by the executor --===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What the executor does around a launch, beyond the kernel or library call:
// here, a padded product's zeroing (dt/Target's CudaPadding.h). Plans are
// written by hand, arenas filled with NaN where nothing should be read, and
// the entry point runs as a program's does (captured as a CUDA graph).
// Without a GPU each test is skipped, saying so.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/executor.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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
  std::string plan = R"({"version": 1, "arena_bytes": )" +
                     std::to_string(arena) +
                     R"(, "scratch_bytes": 0, "entries": {"grad_step": [
      {"op": "matmul", "p": [0, 8192, 20480], "i": [1, 37, 101, 53, 0, 1],
       "half": "bf16", "out": "bf16", "ld": [56, 56, 104], "pad": [104, 56],
       "zero": [[106, 6, 37, 112], [8298, 6, 101, 112]]},
      {"op": "matmul", "p": [0, 28672, 32768], "i": [1, 37, 24, 53, 0, 0],
       "half": "bf16", "out": "bf16", "ld": [56, 24, 24], "pad": [24, 56],
       "zero": [[106, 6, 37, 112], [31216, 144, 1, 144]]}]}})";
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

} // namespace
