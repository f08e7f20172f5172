//===- CudaCollectivesTest.cpp - GPU collectives on one GPU ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Both engines of dtrt/cuda/collectives.h over one rank's GPU: NCCL (a world
// of one rank, as the issue has it: one GPU per machine here) and the host
// engine (over the one-rank communicator). Every collective of a group of
// one moves its block unchanged, on the stream, in every dtype; the
// partitioned programs' several-rank runs are the CPU's tests. Without a GPU
// (or, for NCCL, without libnccl.so.2) the tests skip, saying why.
//
// On the GPU machine: scripts/gpu-bundle.sh carries this binary
// (build/gpu/run-tests.sh points DT_NCCL_LIBRARY at the machine's NCCL).
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/collectives.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

using namespace dtrt;
using namespace dtrt::cuda;

namespace {

bool haveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/// A one-rank communicator over a mesh of two axes of size 1.
std::unique_ptr<Communicator> oneRank() {
  Expected<Mesh> mesh = Mesh::create({"dp", "tp"}, {1, 1});
  EXPECT_TRUE(bool(mesh));
  Expected<std::unique_ptr<Communicator>> c = makeLocalCommunicator(*mesh);
  EXPECT_TRUE(bool(c));
  return std::move(*c);
}

/// Runs each collective of a group of one through `engine` on the GPU and
/// checks that it moved `count` elements unchanged.
void checkIdentity(DeviceCollectives &engine) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int64_t count = 1 << 20;
  for (DType type :
       {DType::F32, DType::I32, DType::I64, DType::BF16, DType::F16}) {
    size_t bytes = size_t(count) * dtypeSize(type);
    std::vector<unsigned char> host(bytes);
    // Small integers' bytes: a sum over one rank changes nothing, in any
    // type (no NaN patterns).
    for (size_t b = 0; b < bytes; ++b)
      host[b] = (b % dtypeSize(type)) == 0 ? (unsigned char)(b % 7) : 0;
    void *src = nullptr, *dst = nullptr;
    ASSERT_EQ(cudaMalloc(&src, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice),
              cudaSuccess);
    for (int kind = 0; kind < 4; ++kind) {
      ASSERT_EQ(cudaMemset(dst, 0xff, bytes), cudaSuccess);
      AxisMask axes = kind % 2 ? 0b01 : 0b11;
      Status s =
          kind == 0 ? engine.allReduceSum(src, dst, count, type, axes, "grad/w",
                                          stream)
          : kind == 1 ? engine.reduceScatterSum(src, dst, count, type, axes,
                                                "grad/w", stream)
          : kind == 2
              ? engine.allGather(src, dst, count, type, axes, "param/w", stream)
              : engine.allToAll(src, dst, count, type, axes, "act", stream);
      ASSERT_TRUE(bool(s)) << s.error().message();
      Status done = engine.synchronize(stream);
      ASSERT_TRUE(bool(done)) << done.error().message();
      std::vector<unsigned char> back(bytes);
      ASSERT_EQ(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(std::memcmp(back.data(), host.data(), bytes), 0)
          << "collective " << kind << " of " << dtypeName(type);
    }
    cudaFree(src);
    cudaFree(dst);
  }
  // All-reduce in place, as gradients are reduced.
  std::vector<float> x(1000);
  std::iota(x.begin(), x.end(), 1.0f);
  float *d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&d), x.size() * 4),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, x.data(), x.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(bool(engine.allReduceSum(d, d, int64_t(x.size()), DType::F32,
                                       0b10, "grad/b", stream)));
  ASSERT_TRUE(bool(engine.synchronize(stream)));
  std::vector<float> y(x.size());
  ASSERT_EQ(cudaMemcpy(y.data(), d, y.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(x, y);
  cudaFree(d);
  cudaStreamDestroy(stream);
}

TEST(CudaCollectivesTest, NcclOverOneRankMovesEveryBlockUnchanged) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  std::unique_ptr<Communicator> host = oneRank();
  bool unavailable = false;
  Expected<std::unique_ptr<DeviceCollectives>> nccl = openNcclCollectives(
      *host, {0b11, 0b01, 0b10}, std::chrono::seconds(60), "", &unavailable);
  if (!nccl && unavailable)
    GTEST_SKIP() << nccl.error().message();
  ASSERT_TRUE(bool(nccl)) << nccl.error().message();
  EXPECT_EQ((*nccl)->engine().rfind("NCCL 2.", 0), 0u) << (*nccl)->engine();
  checkIdentity(**nccl);
}

TEST(CudaCollectivesTest, TheHostEngineMovesEveryBlockUnchanged) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  std::unique_ptr<Communicator> host = oneRank();
  Expected<std::unique_ptr<DeviceCollectives>> engine =
      openDeviceCollectives(CollectiveEngine::Host, *host, {0b11},
                            std::chrono::seconds(60), "", nullptr);
  ASSERT_TRUE(bool(engine));
  EXPECT_EQ((*engine)->engine(), "one rank through host memory");
  checkIdentity(**engine);
}

TEST(CudaCollectivesTest, AutoFallsBackToTheHostEngineWhereNcclCannotServe) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  std::unique_ptr<Communicator> host = oneRank();
  std::string note;
  Expected<std::unique_ptr<DeviceCollectives>> engine = openDeviceCollectives(
      CollectiveEngine::Auto, *host, {0b11}, std::chrono::seconds(60),
      "the 2 ranks on this machine share its 1 GPU, which NCCL refuses", &note);
  ASSERT_TRUE(bool(engine));
  EXPECT_EQ((*engine)->engine(), "one rank through host memory");
  EXPECT_EQ(note,
            "the 2 ranks on this machine share its 1 GPU, which NCCL refuses");
  // Asked for by name, NCCL's obstacle is the error.
  Expected<std::unique_ptr<DeviceCollectives>> nccl = openDeviceCollectives(
      CollectiveEngine::Nccl, *host, {0b11}, std::chrono::seconds(60),
      "the 2 ranks on this machine share its 1 GPU, which NCCL refuses",
      nullptr);
  ASSERT_FALSE(bool(nccl));
}

} // namespace
