//===- BatchTest.cpp - Tests of staging batches into input buffers --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The stager must copy exactly the requested samples, pad with 0 / -1, and
// refuse data whose sample shape or fields do not match the program.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/batch.h"

#include "TestUtil.h"

using namespace dtrt;
using namespace dtrt::test;

namespace {

struct Fixture {
  Manifest manifest;
  std::unique_ptr<Device> device;
  std::optional<Arena> arena;
  std::unique_ptr<DataSource> source;

  explicit Fixture(nlohmann::json j) : manifest(mustParse(j)) {
    device = std::move(*openDevice(Backend::Cpu, Launch{}));
    arena.emplace(std::move(*Arena::create(*device, manifest)));
    source = std::move(*openDataSource(*manifest.trainData, "train"));
  }

  template <typename T> std::vector<T> read(const std::string &name) {
    const BufferDesc *b = manifest.find(name);
    std::vector<T> v(size_t(b->elements));
    arena->read(*b, v.data());
    return v;
  }
};

} // namespace

TEST(Batch, StagesSamplesAndPads) {
  Fixture f(baseManifest());
  Expected<BatchStager> stager =
      BatchStager::create(*f.source, f.manifest, "train", 2);
  ASSERT_TRUE(bool(stager)) << stager.error().message();
  EXPECT_EQ(stager->rows(), 2);

  int64_t rows[2] = {7, 2};
  stager->stage(*f.arena, rows, 2);
  std::vector<float> expect(6);
  f.source->read(0, 7, expect.data());
  f.source->read(0, 2, expect.data() + 3);
  EXPECT_EQ(f.read<float>("in/train.x"), expect);
  EXPECT_EQ(f.read<int32_t>("in/train.y"), (std::vector<int32_t>{7 % 4, 2}));

  // One valid row: the second is padding.
  stager->stage(*f.arena, rows, 1);
  std::vector<float> x = f.read<float>("in/train.x");
  EXPECT_EQ(std::vector<float>(x.begin() + 3, x.end()),
            std::vector<float>(3, 0.0f));
  EXPECT_EQ(f.read<int32_t>("in/train.y"), (std::vector<int32_t>{7 % 4, -1}));
}

TEST(Batch, RejectsSampleShapeMismatch) {
  nlohmann::json j = baseManifest();
  j["data"]["train"]["features"] = 5;
  Fixture f(j);
  Expected<BatchStager> stager =
      BatchStager::create(*f.source, f.manifest, "train", 2);
  ASSERT_FALSE(bool(stager));
  EXPECT_NE(
      stager.error().message().find("a sample's 'x' is 5 x f32 in the data"),
      std::string::npos)
      << stager.error().message();
  EXPECT_NE(stager.error().message().find("in/train.x takes 3 x f32"),
            std::string::npos);
}

TEST(Batch, RejectsRowMismatchAndUnknownField) {
  Fixture f(baseManifest());
  Expected<BatchStager> stager =
      BatchStager::create(*f.source, f.manifest, "train", 4);
  ASSERT_FALSE(bool(stager));
  EXPECT_NE(stager.error().message().find("has 2 rows, but the batch has 4"),
            std::string::npos);

  nlohmann::json j = baseManifest();
  j["buffers"][6]["name"] = "in/train.z";
  Fixture g(j);
  stager = BatchStager::create(*g.source, g.manifest, "train", 2);
  ASSERT_FALSE(bool(stager));
  EXPECT_NE(stager.error().message().find("has no field 'z'"),
            std::string::npos)
      << stager.error().message();
}

TEST(Batch, RequiresInputs) {
  Fixture f(baseManifest());
  Expected<BatchStager> stager =
      BatchStager::create(*f.source, f.manifest, "eval", 0);
  ASSERT_FALSE(bool(stager));
  EXPECT_NE(stager.error().message().find("no in/eval.* input buffers"),
            std::string::npos);
}
