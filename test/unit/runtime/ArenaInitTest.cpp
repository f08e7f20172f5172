//===- ArenaInitTest.cpp - Tests of the arena and initialisation ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The arena must be zeroed and aligned, and parameter values must depend only
// on (seed, name, index): the same whatever the buffer order, the offsets or
// the chunking, and equal to an independent transcription of the algorithm.
//
//===----------------------------------------------------------------------===//

#include "dtrt/arena.h"
#include "dtrt/init.h"

#include "TestUtil.h"

#include <cmath>
#include <cstdint>

using namespace dtrt;
using namespace dtrt::test;

namespace {

std::vector<float> readParam(Arena &arena, const std::string &name) {
  const BufferDesc *b = arena.manifest().find(name);
  std::vector<float> v(size_t(b->elements));
  arena.read(*b, v.data());
  return v;
}

std::unique_ptr<Device> host() {
  Expected<std::unique_ptr<Device>> d = openDevice(Backend::Cpu, Launch{});
  EXPECT_TRUE(bool(d));
  return std::move(*d);
}

} // namespace

TEST(Arena, IsZeroedAlignedAndTyped) {
  Manifest m = mustParse(baseManifest());
  auto device = host();
  Expected<Arena> arena = Arena::create(*device, m);
  ASSERT_TRUE(bool(arena));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena->base()) % 64, 0u);
  for (size_t i = 0; i < m.arenaBytes; ++i)
    ASSERT_EQ(arena->base()[i], 0) << "byte " << i;

  const BufferDesc &step = *m.find("step");
  arena->writeI64(step, 1234567890123);
  EXPECT_EQ(arena->readI64(step), 1234567890123);
  EXPECT_EQ(arena->readScalar(step), 1234567890123.0);
  const BufferDesc &loss = *m.find("out/loss");
  float f = 2.5f;
  arena->write(loss, &f);
  EXPECT_EQ(arena->readScalar(loss), 2.5);
}

TEST(Init, MatchesIndependentTranscription) {
  // Values from a Python transcription of dtrt/rng.h and dtrt/init.h.
  BufferDesc w;
  w.name = "w";
  w.elements = 3;
  w.init = InitSpec{InitSpec::Kind::Uniform, -1.0, 1.0, ""};
  std::vector<float> v(3);
  initValues(w, 1, 0, v);
  EXPECT_EQ(v, (std::vector<float>{0.7749196887016296f, -0.22155152261257172f,
                                   -0.3894290030002594f}));

  BufferDesc emb;
  emb.name = "emb";
  emb.elements = 3;
  emb.init = InitSpec{InitSpec::Kind::Normal, 0.5, 0.02, ""};
  initValues(emb, 5, 0, v);
  EXPECT_EQ(v, (std::vector<float>{0.5053568482398987f, 0.5140169262886047f,
                                   0.48643627762794495f}));
}

TEST(Init, IndependentOfBufferOrderAndOffsets) {
  nlohmann::json a = baseManifest();
  nlohmann::json b = baseManifest();
  // Swap the two params' positions in the list and in the arena.
  std::swap(b["buffers"][0], b["buffers"][1]);
  b["buffers"][0]["offset"] = 0;  // b
  b["buffers"][1]["offset"] = 64; // w
  Manifest ma = mustParse(a), mb = mustParse(b);
  auto device = host();
  Expected<Arena> arenaA = Arena::create(*device, ma);
  Expected<Arena> arenaB = Arena::create(*device, mb);
  initParams(*arenaA, 77);
  initParams(*arenaB, 77);
  EXPECT_EQ(readParam(*arenaA, "w"), readParam(*arenaB, "w"));
  EXPECT_EQ(readParam(*arenaA, "b"), readParam(*arenaB, "b"));
  // Only params are written.
  std::vector<float> grad(12, -1);
  arenaA->read(*ma.find("grad/w"), grad.data());
  EXPECT_EQ(grad, std::vector<float>(12, 0.0f));
}

TEST(Init, IndependentOfChunking) {
  BufferDesc p;
  p.name = "blocks.0.attn.qkv.weight";
  p.elements = 1000;
  p.init = InitSpec{InitSpec::Kind::Normal, 0.0, 0.02, ""};
  std::vector<float> all(1000), part(10);
  initValues(p, 9, 0, all);
  initValues(p, 9, 500, part);
  for (size_t i = 0; i < part.size(); ++i)
    EXPECT_EQ(part[i], all[500 + i]);
}

TEST(Init, KindsAndSeeds) {
  Manifest m = mustParse(baseManifest());
  auto device = host();
  Expected<Arena> arena = Arena::create(*device, m);
  initParams(*arena, 1);
  std::vector<float> w1 = readParam(*arena, "w");
  for (float x : w1) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
  EXPECT_EQ(readParam(*arena, "b"), std::vector<float>(4, 0.5f));
  initParams(*arena, 2);
  EXPECT_NE(readParam(*arena, "w"), w1);

  BufferDesc n;
  n.name = "big";
  n.elements = 100000;
  n.init = InitSpec{InitSpec::Kind::Normal, 1.0, 0.5, ""};
  std::vector<float> v(100000);
  initValues(n, 3, 0, v);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
  }
  double mean = sum / v.size();
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / v.size() - mean * mean), 0.5, 0.01);
}
