//===- CommMpiTest.cpp - The OpenMPI communicator on four ranks -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Runs under `mpirun -n 4` (see CMakeLists.txt) on a (dp = 2, tp = 2) mesh:
// every collective over every group, each dtype, through the C functions that
// generated code calls. Rank r contributes values derived from r, so each
// expected result is computed from the mesh's own group arithmetic.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

using namespace dtrt;

namespace {

Communicator *comm = nullptr;
constexpr AxisMask kDp = 0b01, kTp = 0b10, kWorld = 0b11;

TEST(CommMpiTest, AllReduceOverEachGroup) {
  for (AxisMask axes : {AxisMask(0), kDp, kTp, kWorld}) {
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(comm->rank() * 1000 + int(i));
    std::vector<float> sum(x.size());
    dtrt_all_reduce(x.data(), sum.data(), int64_t(x.size()),
                    int32_t(DType::F32), int32_t(axes), 0);
    std::vector<int> members = comm->mesh().group(comm->rank(), axes);
    for (size_t i = 0; i < x.size(); ++i) {
      float want = 0;
      for (int r : members)
        want += float(r * 1000 + int(i));
      ASSERT_EQ(sum[i], want) << "axes " << axes << " element " << i;
    }
  }
}

TEST(CommMpiTest, AllReduceInPlaceOfEachType) {
  std::vector<int64_t> a(5, int64_t(1) << 40);
  dtrt_all_reduce(a.data(), a.data(), 5, int32_t(DType::I64), kWorld, 0);
  EXPECT_EQ(a[4], int64_t(4) << 40);
  std::vector<float> b(3, 0.25f * float(comm->rank() + 1));
  dtrt_all_reduce(b.data(), b.data(), 3, int32_t(DType::F32), kDp, 0);
  std::vector<int> dp = comm->mesh().group(comm->rank(), kDp);
  EXPECT_EQ(b[0], 0.25f * float(dp[0] + 1) + 0.25f * float(dp[1] + 1));
  std::vector<int32_t> c(2, comm->rank());
  dtrt_all_reduce(c.data(), c.data(), 2, int32_t(DType::I32), kTp, 0);
  std::vector<int> tp = comm->mesh().group(comm->rank(), kTp);
  EXPECT_EQ(c[1], tp[0] + tp[1]);
}

TEST(CommMpiTest, ReduceScatterGivesEachRankItsBlock) {
  // Two blocks of 3 (the dp group has 2 members); element j of the input is
  // rank + j, so the sum of block i is sum over members of (rank + 3i + k).
  std::vector<float> in(6), out(3, -1);
  for (int j = 0; j < 6; ++j)
    in[j] = float(comm->rank() + j);
  dtrt_reduce_scatter(in.data(), out.data(), 3, 2, int32_t(DType::F32), kDp,
                      0);
  int index = comm->mesh().indexInGroup(comm->rank(), kDp);
  std::vector<int> members = comm->mesh().group(comm->rank(), kDp);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(out[k], float(members[0] + members[1] + 2 * (3 * index + k)));
}

TEST(CommMpiTest, AllGatherJoinsBlocksInGroupOrder) {
  std::vector<int32_t> mine{comm->rank(), 10 * comm->rank()}, all(8, -1);
  dtrt_all_gather(mine.data(), all.data(), 2, 4, int32_t(DType::I32), kWorld,
                  0);
  EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 1, 10, 2, 20, 3, 30}));
}

TEST(CommMpiTest, SixteenBitFloatsAreGatheredNotSummed) {
  // bf16 bit patterns travel unchanged; a sum of them is refused (mixed
  // precision reduces in f32).
  std::vector<uint16_t> mine{uint16_t(0x3f80 + comm->rank())}, all(4, 0);
  ASSERT_TRUE(bool(comm->allGather(mine.data(), all.data(), 1, DType::BF16,
                                   kWorld, "bf16")));
  EXPECT_EQ(all, (std::vector<uint16_t>{0x3f80, 0x3f81, 0x3f82, 0x3f83}));
  Status sum = comm->reduceScatterSum(all.data(), mine.data(), 1, DType::F16,
                                      kWorld, "f16");
  ASSERT_FALSE(bool(sum));
  EXPECT_NE(sum.error().message().find("does not sum f16"), std::string::npos)
      << sum.error().message();
}

TEST(CommMpiTest, AllToAllTransposesBlocksAcrossTheGroup) {
  // Block j of rank r holds 100 r + j; afterwards block j holds what member j
  // sent to this rank: 100 member(j) + index.
  for (AxisMask axes : {kDp, kTp, kWorld}) {
    std::vector<int> members = comm->mesh().group(comm->rank(), axes);
    int index = comm->mesh().indexInGroup(comm->rank(), axes);
    size_t k = members.size();
    std::vector<int64_t> in(2 * k), out(2 * k, -1);
    for (size_t j = 0; j < k; ++j)
      in[2 * j] = in[2 * j + 1] = 100 * comm->rank() + int64_t(j);
    dtrt_all_to_all(in.data(), out.data(), 2, int64_t(k), int32_t(DType::I64),
                    int32_t(axes), 0);
    for (size_t j = 0; j < k; ++j) {
      EXPECT_EQ(out[2 * j], 100 * members[j] + index) << "axes " << axes;
      EXPECT_EQ(out[2 * j + 1], 100 * members[j] + index);
    }
  }
}

TEST(CommMpiTest, AsynchronousCollectivesRunInIssueOrder) {
  // Started collectives run on the communication thread; a synchronous one
  // issued meanwhile queues behind them, so every rank's order holds.
  std::vector<float> a(5000, float(comm->rank() + 1)), sumA(a.size(), -1);
  std::vector<int32_t> b{comm->rank()}, sumB{-1};
  std::vector<int32_t> c{10 * comm->rank()}, all(4, -1);
  dtrt_all_reduce_start(a.data(), sumA.data(), int64_t(a.size()),
                        int32_t(DType::F32), kWorld, 1);
  dtrt_all_reduce(b.data(), sumB.data(), 1, int32_t(DType::I32), kWorld, 2);
  dtrt_all_gather_start(c.data(), all.data(), 1, 4, int32_t(DType::I32),
                        kWorld, 3);
  dtrt_wait(3);
  dtrt_wait(1);
  EXPECT_EQ(sumA[0], 10.0f);
  EXPECT_EQ(sumA[4999], 10.0f);
  EXPECT_EQ(sumB[0], 6);
  EXPECT_EQ(all, (std::vector<int32_t>{0, 10, 20, 30}));
  EXPECT_TRUE(bool(checkCollectivesDone("the test")));
  dtrt_wait(42); // never started: returns at once
}

TEST(CommMpiTest, TakeShardThenGatherRestoresAPaddedTensor) {
  // A bias of 3 elements sharded over dp = 2: blocks of 2, the last padded.
  std::vector<float> full{1, 2, 3}, shard(2, -1), back(4, -1);
  dtrt_take_shard(full.data(), shard.data(), 3, 2, int32_t(DType::F32), kDp,
                  0);
  int index = comm->mesh().indexInGroup(comm->rank(), kDp);
  EXPECT_EQ(shard, index == 0 ? (std::vector<float>{1, 2})
                              : (std::vector<float>{3, 0}));
  dtrt_all_gather(shard.data(), back.data(), 2, 2, int32_t(DType::F32), kDp,
                  0);
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 0}));
}

TEST(CommMpiTest, NeighboursExchangeBothWaysAtOnce) {
  // Along tp (size 2): each rank sends to the other and receives from it in
  // the same call, as pipeline stages pass activations forward and gradients
  // back; blocking sends would wait on each other.
  int tp = comm->mesh().indexInGroup(comm->rank(), kTp);
  int step = tp == 0 ? 1 : -1;
  std::vector<float> out(50000, float(comm->rank())), in(out.size(), -1.0f);
  ASSERT_TRUE(bool(comm->exchange(out.data(), int64_t(out.size()), step,
                                  in.data(), int64_t(in.size()), step,
                                  DType::F32, kTp, "activations")));
  int peer = comm->mesh().group(comm->rank(), kTp)[tp == 0 ? 1 : 0];
  for (float v : in)
    ASSERT_EQ(v, float(peer));

  // Along dp: the first rank only sends, the last only receives, and 16-bit
  // floats move unchanged.
  int dp = comm->mesh().indexInGroup(comm->rank(), kDp);
  std::vector<uint16_t> bits(7, uint16_t(0x3f80 + comm->rank()));
  std::vector<uint16_t> got(7, 0);
  Status s = dp == 0 ? comm->exchange(bits.data(), 7, +1, nullptr, 0, 0,
                                      DType::BF16, kDp, "h")
                     : comm->exchange(nullptr, 0, 0, got.data(), 7, -1,
                                      DType::BF16, kDp, "h");
  ASSERT_TRUE(bool(s)) << s.error().message();
  if (dp == 1) {
    int from = comm->mesh().group(comm->rank(), kDp)[0];
    for (uint16_t v : got)
      ASSERT_EQ(v, uint16_t(0x3f80 + from));
  }
}

TEST(CommMpiTest, PipelineMessagesDoNotWaitForTheReceiver) {
  // Along tp (size 2), as two pipeline stages: both send three large
  // messages before either receives (blocking sends of this size would
  // deadlock), the sender overwrites its buffer at once (the message is a
  // copy), and the receiver takes them by tag in another order than sent.
  int tp = comm->mesh().indexInGroup(comm->rank(), kTp);
  std::vector<float> buffer(300000);
  for (int tag : {3, 1, 2}) {
    std::fill(buffer.begin(), buffer.end(), float(100 * comm->rank() + tag));
    ASSERT_TRUE(bool(comm->send(buffer.data(), int64_t(buffer.size()),
                                DType::F32, kTp, +1, tag, "activations")));
    std::fill(buffer.begin(), buffer.end(), -1.0f);
  }
  int peer = comm->mesh().group(comm->rank(), kTp)[tp == 0 ? 1 : 0];
  for (int tag : {1, 2, 3}) {
    std::vector<float> in(buffer.size(), 0.0f);
    // Around the axis: -1 from the first rank is the last one.
    ASSERT_TRUE(bool(comm->receive(in.data(), int64_t(in.size()), DType::F32,
                                   kTp, -1, tag, "activations")));
    for (float v : in)
      ASSERT_EQ(v, float(100 * peer + tag));
  }
  ASSERT_TRUE(bool(comm->finishSends("activations")));

  float x = 0;
  Status bad = comm->send(&x, 1, DType::F32, kTp, 1, 40000, "x");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.error().message().find("outside 0..32767"), std::string::npos)
      << bad.error().message();
}

TEST(CommMpiTest, AnExchangeOffTheAxisIsAnError) {
  int tp = comm->mesh().indexInGroup(comm->rank(), kTp);
  float x = 0;
  Status s = comm->exchange(&x, 1, tp == 0 ? -1 : 1, nullptr, 0, 0,
                            DType::F32, kTp, "x");
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("leaves the axis"), std::string::npos)
      << s.error().message();
  s = comm->exchange(&x, 1, 1, nullptr, 0, 0, DType::F32, kWorld, "x");
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("is not one axis"), std::string::npos);
}

TEST(CommMpiTest, BadCallsAreErrorsNotCrashes) {
  float x = 0;
  EXPECT_FALSE(comm->allReduceSum(&x, &x, 1, DType::F32, 0b100, "x"));
  EXPECT_FALSE(comm->allReduceSum(&x, &x, -1, DType::F32, kDp, "x"));
  EXPECT_FALSE(comm->allReduceSum(&x, &x, 1, DType(7), kDp, "x"));
  EXPECT_FALSE(comm->allReduceSum(&x, &x, 1, DType::BF16, kDp, "x"));
  EXPECT_TRUE(bool(comm->barrier("end")));
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Expected<Mesh> mesh = Mesh::create({"dp", "tp"}, {2, 2});
  if (!mesh)
    return 1;
  Expected<std::unique_ptr<Communicator>> made =
      makeMpiCommunicator(*mesh, std::chrono::seconds(30));
  if (!made) {
    std::fprintf(stderr, "error: %s\n", made.error().message().c_str());
    return 1;
  }
  comm = made->get();
  setProgramCommunicator(comm);
  int failed = RUN_ALL_TESTS();
  // Any rank's failure fails the run (mpirun reports a non-zero exit).
  setProgramCommunicator(nullptr);
  made->reset();
  return failed;
}
