//===- MeshTest.cpp - Ranks, groups and the one-rank communicator ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <vector>

using namespace dtrt;

namespace {

Mesh mesh(std::vector<std::string> names, std::vector<int> sizes) {
  Expected<Mesh> m = Mesh::create(std::move(names), std::move(sizes));
  EXPECT_TRUE(bool(m)) << (m ? "" : m.error().message());
  return *m;
}

TEST(MeshTest, RanksAreRowMajorInnermostNeighbouring) {
  Mesh m = mesh({"dp", "tp"}, {2, 3});
  EXPECT_EQ(m.worldSize(), 6);
  EXPECT_EQ(m.coordinates(0), (std::vector<int>{0, 0}));
  EXPECT_EQ(m.coordinates(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(m.coordinates(4), (std::vector<int>{1, 1}));
  EXPECT_EQ(m.describe(), "dp=2, tp=3");
  EXPECT_EQ(m.describeAxes(0b11), "{dp, tp}");
}

TEST(MeshTest, GroupsOverEachSetOfAxes) {
  Mesh m = mesh({"dp", "tp"}, {2, 3});
  // Over tp: the ranks of one dp row.
  EXPECT_EQ(m.group(4, 0b10), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(m.indexInGroup(4, 0b10), 1);
  // Over dp: the ranks of one tp column.
  EXPECT_EQ(m.group(4, 0b01), (std::vector<int>{1, 4}));
  EXPECT_EQ(m.indexInGroup(4, 0b01), 1);
  EXPECT_EQ(m.groupSize(0b01), 2);
  // Over both: the world; over none: the rank alone.
  EXPECT_EQ(m.group(4, 0b11), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(m.group(4, 0), (std::vector<int>{4}));
  // Every rank is in exactly one group of each mask, at a distinct index.
  for (AxisMask axes = 0; axes <= m.allAxes(); ++axes)
    for (int r = 0; r < m.worldSize(); ++r) {
      std::vector<int> g = m.group(r, axes);
      EXPECT_EQ(int(g.size()), m.groupSize(axes));
      EXPECT_EQ(g[m.indexInGroup(r, axes)], r);
    }
}

TEST(MeshTest, ThreeAxes) {
  Mesh m = mesh({"pp", "dp", "tp"}, {2, 2, 2});
  // rank 5 = (1, 0, 1); over {pp, tp} with dp = 0: (0,0,0..1), (1,0,0..1).
  EXPECT_EQ(m.group(5, 0b101), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(m.indexInGroup(5, 0b101), 3);
}

TEST(MeshTest, RejectsBadMeshes) {
  EXPECT_FALSE(Mesh::create({"dp", "dp"}, {2, 2}));
  EXPECT_FALSE(Mesh::create({"dp"}, {0}));
  EXPECT_FALSE(Mesh::create({""}, {2}));
  EXPECT_FALSE(Mesh::create({"dp"}, {2, 2}));
}

TEST(MeshTest, LocalCommunicatorCopies) {
  Expected<std::unique_ptr<Communicator>> comm =
      makeLocalCommunicator(mesh({"dp"}, {1}));
  ASSERT_TRUE(bool(comm));
  std::vector<float> src{1, 2, 3}, dst(3);
  ASSERT_TRUE(bool((*comm)->allReduceSum(src.data(), dst.data(), 3,
                                         DType::F32, 1, "x")));
  EXPECT_EQ(dst, src);
  EXPECT_FALSE((*comm)->allReduceSum(src.data(), dst.data(), 3, DType::F32,
                                     0b10, "x"));
  EXPECT_FALSE(makeLocalCommunicator(mesh({"dp"}, {2})));
}

TEST(MeshTest, OneRankHasNoNeighbourToExchangeWith) {
  Expected<std::unique_ptr<Communicator>> comm =
      makeLocalCommunicator(mesh({"pp"}, {1}));
  ASSERT_TRUE(bool(comm));
  float x = 1;
  EXPECT_TRUE(bool((*comm)->exchange(&x, 1, 0, &x, 1, 0, DType::F32, 1, "x")));
  Status s = (*comm)->exchange(&x, 1, 1, nullptr, 0, 0, DType::F32, 1, "x");
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("rank 0 is at 0 of 1 along {pp}, so a "
                                     "step of 1 leaves the axis"),
            std::string::npos)
      << s.error().message();
}

TEST(MeshTest, AOnePipelineRankReceivesWhatItSentItself) {
  Expected<std::unique_ptr<Communicator>> comm =
      makeLocalCommunicator(mesh({"pp"}, {1}));
  ASSERT_TRUE(bool(comm));
  float a[2] = {1, 2}, b[2] = {3, 4}, got[2] = {0, 0};
  ASSERT_TRUE(bool((*comm)->send(a, 2, DType::F32, 1, +1, 7, "a")));
  ASSERT_TRUE(bool((*comm)->send(b, 2, DType::F32, 1, +1, 8, "b")));
  a[0] = -1; // sent as a copy
  ASSERT_TRUE(bool((*comm)->receive(got, 2, DType::F32, 1, -1, 8, "b")));
  EXPECT_EQ(got[0], 3);
  ASSERT_TRUE(bool((*comm)->receive(got, 2, DType::F32, 1, -1, 7, "a")));
  EXPECT_EQ(got[0], 1);
  Status s = (*comm)->receive(got, 2, DType::F32, 1, -1, 7, "a");
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("nothing of 8 bytes was sent with tag 7"),
            std::string::npos)
      << s.error().message();
}

TEST(MeshTest, TakeShardPadsTheLastBlock) {
  Expected<std::unique_ptr<Communicator>> comm = makeLocalCommunicator();
  ASSERT_TRUE(bool(comm));
  setProgramCommunicator(comm->get());
  std::vector<int32_t> src{1, 2, 3}, dst(4, -1);
  dtrt_take_shard(src.data(), dst.data(), 3, 4, int32_t(DType::I32), 0, 0);
  EXPECT_EQ(dst, (std::vector<int32_t>{1, 2, 3, 0}));
  setProgramCommunicator(nullptr);
}

/// A communicator whose only state is its timeout.
class TimedComm final : public Communicator {
public:
  explicit TimedComm(std::chrono::milliseconds t)
      : Communicator(Mesh(), 0), timeout_(t) {}
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void setTimeout(std::chrono::milliseconds t) override { timeout_ = t; }
  std::string engine() const override { return "timed"; }
  Status allReduceSum(const void *, void *, int64_t, DType, AxisMask,
                      std::string_view) override {
    return Status::ok();
  }
  Status reduceScatterSum(const void *, void *, int64_t, DType, AxisMask,
                          std::string_view) override {
    return Status::ok();
  }
  Status allGather(const void *, void *, int64_t, DType, AxisMask,
                   std::string_view) override {
    return Status::ok();
  }
  Status allToAll(const void *, void *, int64_t, DType, AxisMask,
                  std::string_view) override {
    return Status::ok();
  }
  Status exchange(const void *, int64_t, int, void *, int64_t, int, DType,
                  AxisMask, std::string_view) override {
    return Status::ok();
  }
  Status send(const void *, int64_t, DType, AxisMask, int, int,
              std::string_view) override {
    return Status::ok();
  }
  Status receive(void *, int64_t, DType, AxisMask, int, int,
                 std::string_view) override {
    return Status::ok();
  }
  Status finishSends(std::string_view) override { return Status::ok(); }
  Status barrier(std::string_view) override { return Status::ok(); }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

private:
  std::chrono::milliseconds timeout_;
};

TEST(MeshTest, AnIoWaitLengthensTheTimeoutForItsScopeOnly) {
  using std::chrono::seconds;
  TimedComm comm(seconds(60));
  comm.setIoTimeout(seconds(1800));
  {
    IoWait wait(comm);
    EXPECT_EQ(comm.timeout(), seconds(1800));
  }
  EXPECT_EQ(comm.timeout(), seconds(60));
  // Never shorter than the step's timeout.
  comm.setIoTimeout(seconds(5));
  {
    IoWait wait(comm);
    EXPECT_EQ(comm.timeout(), seconds(60));
  }
  EXPECT_EQ(comm.timeout(), seconds(60));
  // An engine without a limit keeps none.
  TimedComm unlimited(seconds(0));
  {
    IoWait wait(unlimited);
    EXPECT_EQ(unlimited.timeout(), seconds(0));
  }
}

} // namespace
