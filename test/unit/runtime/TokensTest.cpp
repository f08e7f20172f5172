//===- TokensTest.cpp - Tests of llm.c token shards -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Shards are written here in llm.c's format; the source must window them as
// dtrt/data/tokens.h says (never across shards, shards in sorted order) and
// refuse bad magic, bad versions and sizes that disagree with the header.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/tokens.h"
#include "dtrt/data/source.h"

#include "TestUtil.h"

#include <cstring>

using namespace dtrt;
using namespace dtrt::test;

namespace {

std::string shard(const std::vector<uint16_t> &tokens, int32_t magic = 20240520,
                  int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : int32_t(tokens.size());
  std::string s(reinterpret_cast<const char *>(header.data()), 1024);
  s.append(reinterpret_cast<const char *>(tokens.data()), tokens.size() * 2);
  return s;
}

std::vector<uint16_t> range(uint16_t from, uint16_t n) {
  std::vector<uint16_t> v(n);
  for (uint16_t i = 0; i < n; ++i)
    v[i] = uint16_t(from + i);
  return v;
}

DataSpec tokensSpec(const std::string &path, int64_t seq) {
  DataSpec s;
  s.kind = DataKind::Tokens;
  s.path = path;
  s.seq = seq;
  return s;
}

} // namespace

TEST(Tokens, WindowCount) {
  EXPECT_EQ(tokenWindows(10, 4), 2); // [0..4], [4..8]; [8..12] does not fit
  EXPECT_EQ(tokenWindows(9, 4), 2);
  EXPECT_EQ(tokenWindows(8, 4), 1);
  EXPECT_EQ(tokenWindows(4, 4), 0);
}

TEST(Tokens, WindowsShardsInSortedOrder) {
  TempDir dir;
  // Written out of order: the glob result is sorted.
  writeBytes(dir / "train_01.bin", shard(range(1000, 9))); // 2 windows of 4
  writeBytes(dir / "train_00.bin", shard(range(0, 13)));   // 3 windows
  auto src = openDataSource(tokensSpec(dir / "train_*.bin", 4), "train");
  ASSERT_TRUE(bool(src)) << src.error().message();
  EXPECT_EQ((*src)->size(), 5);
  EXPECT_EQ((*src)->tokensPerSample(), 4);
  int32_t x[4], y[4];
  (*src)->read(0, 2, x);
  (*src)->read(1, 2, y);
  EXPECT_EQ(std::vector<int32_t>(x, x + 4),
            (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(std::vector<int32_t>(y, y + 4),
            (std::vector<int32_t>{9, 10, 11, 12}));
  // Sample 3 is the second shard's first window: no straddling.
  (*src)->read(0, 3, x);
  (*src)->read(1, 4, y);
  EXPECT_EQ(x[0], 1000);
  EXPECT_EQ(std::vector<int32_t>(y, y + 4),
            (std::vector<int32_t>{1005, 1006, 1007, 1008}));
}

TEST(Tokens, ReportsMissingFileAndEmptyGlob) {
  TempDir dir;
  auto src = openDataSource(tokensSpec(dir / "val.bin", 4), "eval");
  ASSERT_FALSE(bool(src));
  EXPECT_NE(src.error().message().find("cannot open the eval token shard"),
            std::string::npos);
  EXPECT_NE(src.error().message().find("--data eval=PATH"), std::string::npos);
  src = openDataSource(tokensSpec(dir / "x_*.bin", 4), "train");
  ASSERT_FALSE(bool(src));
  EXPECT_NE(src.error().message().find("no train token shard matches"),
            std::string::npos)
      << src.error().message();
}

TEST(Tokens, ReportsBadHeaders) {
  TempDir dir;
  auto errorFor = [&](const std::string &bytes) {
    writeBytes(dir / "s.bin", bytes);
    auto src = openDataSource(tokensSpec(dir / "s.bin", 4), "train");
    return src ? std::string("(no error)") : src.error().message();
  };
  EXPECT_NE(errorFor(shard(range(0, 20), 1234)).find("bad magic number 1234"),
            std::string::npos);
  EXPECT_NE(
      errorFor(shard(range(0, 20), 20240520, 2)).find("version 2 is not 1"),
      std::string::npos);
  std::string msg = errorFor(shard(range(0, 20), 20240520, 1, 30));
  EXPECT_NE(msg.find("promises 30 tokens (1084 bytes) but the file holds 1064 "
                     "bytes (truncated)"),
            std::string::npos)
      << msg;
  EXPECT_NE(errorFor("short").find("less than the 1024-byte header"),
            std::string::npos);
  EXPECT_NE(errorFor(shard(range(0, 3))).find("hold no window of 4 + 1 tokens"),
            std::string::npos);
}

TEST(Tokens, ReadsWideShardsAndLossMasks) {
  TempDir dir;
  // llm.c's LLaMA 3 variant: uint32 tokens, magic 20240801, version 7; and
  // dt's loss mask: header word 3 = 1, one byte per token after them.
  std::vector<uint32_t> tokens = {70000, 1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint8_t> mask = {1, 1, 0, 0, 1, 1, 0, 1, 1};
  std::vector<int32_t> header(256, 0);
  header[0] = 20240801;
  header[1] = 7;
  header[2] = int32_t(tokens.size());
  header[3] = 1;
  std::string bytes(reinterpret_cast<const char *>(header.data()), 1024);
  bytes.append(reinterpret_cast<const char *>(tokens.data()), 4 * 9);
  bytes.append(reinterpret_cast<const char *>(mask.data()), 9);
  writeBytes(dir / "wide.bin", bytes);
  auto src = openDataSource(tokensSpec(dir / "wide.bin", 4), "train");
  ASSERT_TRUE(bool(src)) << src.error().message();
  ASSERT_EQ((*src)->size(), 2);
  int32_t x[4], y[4];
  (*src)->read(0, 0, x);
  (*src)->read(1, 0, y);
  EXPECT_EQ(std::vector<int32_t>(x, x + 4),
            (std::vector<int32_t>{70000, 1, 2, 3}));
  // Targets 1, 2, 3, 4 with mask bytes 1, 0, 0, 1.
  EXPECT_EQ(std::vector<int32_t>(y, y + 4), (std::vector<int32_t>{1, -1, -1, 4}));
  (*src)->read(1, 1, y);
  EXPECT_EQ(std::vector<int32_t>(y, y + 4), (std::vector<int32_t>{5, -1, 7, 8}));

  // The mask counts in the size check.
  writeBytes(dir / "cut.bin", bytes.substr(0, bytes.size() - 1));
  src = openDataSource(tokensSpec(dir / "cut.bin", 4), "train");
  ASSERT_FALSE(bool(src));
  EXPECT_NE(src.error().message().find("promises 9 tokens and their loss mask "
                                       "(1069 bytes) but the file holds 1068"),
            std::string::npos)
      << src.error().message();
  header[3] = 2;
  std::memcpy(bytes.data(), header.data(), 1024);
  writeBytes(dir / "flag.bin", bytes);
  src = openDataSource(tokensSpec(dir / "flag.bin", 4), "train");
  ASSERT_FALSE(bool(src));
  EXPECT_NE(src.error().message().find("loss-mask flag) is 2"),
            std::string::npos)
      << src.error().message();
}
