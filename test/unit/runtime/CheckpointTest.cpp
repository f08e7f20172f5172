//===- CheckpointTest.cpp - Tests of checkpoints --------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Round trips, and every way a checkpoint can be unusable: corrupt bytes, a
// truncated tensors.bin, a checkpoint of another program or of other shapes,
// a malformed manifest.json, leftovers of a killed write. Each must be
// refused (or ignored, for leftovers) with a message naming what is wrong.
//
//===----------------------------------------------------------------------===//

#include "dtrt/checkpoint.h"
#include "dtrt/init.h"

#include "TestUtil.h"

#include <filesystem>

using namespace dtrt;
using namespace dtrt::test;
namespace fs = std::filesystem;

namespace {

struct TinyRun {
  Manifest manifest;
  std::unique_ptr<Device> device;
  std::optional<Arena> arena;

  explicit TinyRun(const nlohmann::json &j = baseManifest())
      : manifest(mustParse(j)) {
    device = std::move(*openDevice(Backend::Cpu, Launch{}));
    arena.emplace(std::move(*Arena::create(*device, manifest)));
  }

  std::vector<char> bytes(const std::string &name) {
    const BufferDesc *b = manifest.find(name);
    std::vector<char> v(b->bytes);
    arena->read(*b, v.data());
    return v;
  }
};

TrainPosition position(int64_t step) {
  TrainPosition p;
  p.step = step;
  p.totalSteps = 100;
  p.stepsPerEpoch = 5;
  p.epoch = step / 5;
  p.epochStep = step % 5;
  p.seed = 9;
  p.trainSamples = 10;
  p.elapsedSeconds = 1.5;
  return p;
}

/// Writes a checkpoint of a run at `step` into `root`; returns its path.
std::string save(TinyRun &run, const std::string &root, int64_t step) {
  initParams(*run.arena, 1);
  std::vector<float> momentum(12, float(step));
  run.arena->write(*run.manifest.find("sgd.momentum/w"), momentum.data());
  run.arena->writeI64(*run.manifest.find("step"), step);
  Expected<std::string> path =
      writeCheckpoint(root, *run.arena, position(step));
  EXPECT_TRUE(bool(path)) << path.error().message();
  return path ? *path : "";
}

std::string loadError(const std::string &dir,
                      const nlohmann::json &j = baseManifest()) {
  TinyRun fresh(j);
  Expected<TrainPosition> pos = loadCheckpoint(dir, *fresh.arena);
  return pos ? std::string("(no error)") : pos.error().message();
}

void editManifest(const std::string &dir,
                  const std::function<void(nlohmann::json &)> &edit) {
  nlohmann::json j = nlohmann::json::parse(readBytes(dir + "/manifest.json"));
  edit(j);
  writeBytes(dir + "/manifest.json", j.dump());
}

} // namespace

TEST(Checkpoint, RoundTripsEveryParamAndState) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  EXPECT_EQ(fs::path(path).filename(), "step_00000005");
  EXPECT_TRUE(fs::exists(path + "/tensors.bin"));

  TinyRun fresh;
  Expected<TrainPosition> pos = loadCheckpoint(path, *fresh.arena);
  ASSERT_TRUE(bool(pos)) << pos.error().message();
  EXPECT_EQ(pos->step, 5);
  EXPECT_EQ(pos->epoch, 1);
  EXPECT_EQ(pos->epochStep, 0);
  EXPECT_EQ(pos->seed, 9u);
  EXPECT_EQ(pos->trainSamples, 10);
  EXPECT_EQ(pos->elapsedSeconds, 1.5);
  for (const char *name : {"w", "b", "sgd.momentum/w", "step"})
    EXPECT_EQ(fresh.bytes(name), run.bytes(name)) << name;
  // Gradients and inputs are not part of a checkpoint.
  nlohmann::json m = nlohmann::json::parse(readBytes(path + "/manifest.json"));
  EXPECT_EQ(m["tensors"].size(), 4u);
  EXPECT_EQ(m["program"], "tiny");
  EXPECT_EQ(m["data_order"]["epoch"], 1);
  for (const auto &t : m["tensors"])
    EXPECT_EQ(t["offset"].get<int64_t>() % 64, 0);
}

TEST(Checkpoint, ListsCompleteCheckpointsInStepOrderIgnoringLeftovers) {
  TempDir dir;
  TinyRun run;
  save(run, dir.path(), 20);
  save(run, dir.path(), 3);
  // A killed write and a directory without manifest are not checkpoints.
  fs::create_directories(dir / ".tmp-step_00000030");
  writeBytes(dir / ".tmp-step_00000030/tensors.bin", "partial");
  fs::create_directories(dir / "step_00000040");
  writeBytes(dir / "step_00000040/tensors.bin", "no manifest");
  fs::create_directories(dir / "step_00000050");
  writeBytes(dir / "step_00000050/manifest.json", "{\"format\": \"dt-chec");

  Expected<std::vector<CheckpointRef>> all = listCheckpoints(dir.path());
  ASSERT_TRUE(bool(all));
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].step, 3);
  EXPECT_EQ((*all)[1].step, 20);

  ASSERT_TRUE(bool(removeCheckpointLeftovers(dir.path())));
  EXPECT_FALSE(fs::exists(dir / ".tmp-step_00000030"));
  EXPECT_TRUE(fs::exists(dir / "step_00000020"));

  Expected<std::vector<CheckpointRef>> none = listCheckpoints(dir / "absent");
  ASSERT_TRUE(bool(none));
  EXPECT_TRUE(none->empty());
}

TEST(Checkpoint, ReplacesAStaleTemporaryButNeverACheckpoint) {
  TempDir dir;
  TinyRun run;
  fs::create_directories(dir / ".tmp-step_00000007");
  writeBytes(dir / ".tmp-step_00000007/junk", "x");
  std::string path = save(run, dir.path(), 7);
  EXPECT_FALSE(fs::exists(path + "/junk"));
  std::string before = readBytes(path + "/tensors.bin");
  Expected<std::string> again =
      writeCheckpoint(dir.path(), *run.arena, position(7));
  ASSERT_FALSE(bool(again));
  EXPECT_NE(again.error().message().find("refusing to overwrite"),
            std::string::npos);
  EXPECT_EQ(readBytes(path + "/tensors.bin"), before);
}

TEST(Checkpoint, PrunesToTheNewest) {
  TempDir dir;
  TinyRun run;
  for (int64_t s : {1, 2, 3, 4})
    save(run, dir.path(), s);
  ASSERT_TRUE(bool(pruneCheckpoints(dir.path(), 2)));
  Expected<std::vector<CheckpointRef>> left = listCheckpoints(dir.path());
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].step, 3);
  EXPECT_EQ((*left)[1].step, 4);
  ASSERT_TRUE(bool(pruneCheckpoints(dir.path(), 0))); // 0 keeps all
  EXPECT_EQ(listCheckpoints(dir.path())->size(), 2u);
}

TEST(Checkpoint, DetectsCorruptTensor) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  std::string bin = readBytes(path + "/tensors.bin");
  // "b" is the second tensor, at offset 64.
  bin[64 + 5] ^= 0x10;
  writeBytes(path + "/tensors.bin", bin);
  std::string msg = loadError(path);
  EXPECT_NE(msg.find("tensor 'b' is corrupt (CRC32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("resume from an older checkpoint"), std::string::npos);
}

/// The base manifest with a 100 MiB state tensor after the others: larger
/// than the 64 MiB chunks checkpoints are copied in.
nlohmann::json largeManifest() {
  nlohmann::json j = baseManifest();
  j["buffers"].push_back({{"name", "big"},
                          {"role", "state"},
                          {"dtype", "f32"},
                          {"shape", {25, 1 << 20}},
                          {"offset", 512}});
  j["arena"]["bytes"] = 512 + (int64_t(100) << 20);
  return j;
}

TEST(Checkpoint, RoundTripsATensorLargerThanAChunk) {
  TempDir dir;
  TinyRun run(largeManifest());
  const BufferDesc &big = *run.manifest.find("big");
  std::vector<float> values(size_t(big.elements));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float(i % 9973) - 17.0f;
  run.arena->write(big, values.data());
  std::string path = save(run, dir.path(), 5);

  TinyRun fresh(largeManifest());
  Expected<TrainPosition> pos = loadCheckpoint(path, *fresh.arena);
  ASSERT_TRUE(bool(pos)) << pos.error().message();
  EXPECT_EQ(fresh.bytes("big"), run.bytes("big"));

  // A flipped byte in the second chunk is caught by the tensor's CRC.
  std::string bin = readBytes(path + "/tensors.bin");
  bin[bin.size() - 1000] ^= 0x01;
  writeBytes(path + "/tensors.bin", bin);
  std::string msg = loadError(path, largeManifest());
  EXPECT_NE(msg.find("tensor 'big' is corrupt (CRC32"), std::string::npos)
      << msg;
}

TEST(Checkpoint, DetectsTruncatedTensorsFile) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  std::string bin = readBytes(path + "/tensors.bin");
  writeBytes(path + "/tensors.bin", bin.substr(0, bin.size() - 8));
  std::string msg = loadError(path);
  EXPECT_NE(msg.find("(truncated or damaged)"), std::string::npos) << msg;
}

TEST(Checkpoint, RefusesAnotherProgram) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  nlohmann::json other = baseManifest();
  other["name"] = "other";
  std::string msg = loadError(path, other);
  EXPECT_NE(msg.find("it was written by program 'tiny', this is 'other'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the checkpoint is from another program"),
            std::string::npos);
}

TEST(Checkpoint, NamesTheTensorThatDiffers) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  editManifest(path, [](nlohmann::json &j) { j["tensors"][1]["shape"] = {5}; });
  std::string msg = loadError(path);
  EXPECT_NE(msg.find("tensor 'b' is f32[5] in the checkpoint but f32[4] in "
                     "this program"),
            std::string::npos)
      << msg;

  path = save(run, dir.path(), 6);
  editManifest(path,
               [](nlohmann::json &j) { j["tensors"][1]["name"] = "bias"; });
  msg = loadError(path);
  EXPECT_NE(msg.find("it has no tensor 'b'"), std::string::npos) << msg;
}

TEST(Checkpoint, SurvivesMalformedManifestValues) {
  TempDir dir;
  TinyRun run;
  std::string path = save(run, dir.path(), 5);
  editManifest(path, [](nlohmann::json &j) { j["tensors"][0]["shape"] = "x"; });
  std::string msg = loadError(path);
  EXPECT_NE(msg.find("manifest.json is malformed"), std::string::npos) << msg;
}

TEST(Checkpoint, ExplainsARootPassedAsCheckpoint) {
  TempDir dir;
  TinyRun run;
  save(run, dir.path(), 5);
  std::string msg = loadError(dir.path());
  EXPECT_NE(msg.find("is not a checkpoint (it has no manifest.json); it holds "
                     "checkpoints"),
            std::string::npos)
      << msg;
}
