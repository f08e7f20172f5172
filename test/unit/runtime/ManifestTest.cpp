//===- ManifestTest.cpp - Tests of manifest parsing and validation --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The fixture's manifest (what dtc's output looks like) must parse and agree
// with the fixture's hand-planned offsets; each way a manifest can be wrong
// must be refused with a message that names the culprit.
//
//===----------------------------------------------------------------------===//

#include "dtrt/manifest.h"
#include "dtrt/abi.h"

#include "TestUtil.h"
#include "mlp_layout.h"

using namespace dtrt;
using namespace dtrt::test;
using nlohmann::json;

TEST(Manifest, FixtureParsesAndMatchesItsLayout) {
  Expected<Manifest> m = parseManifest(dt_manifest);
  ASSERT_TRUE(bool(m)) << m.error().message();
  EXPECT_EQ(m->name, "mlp_synthetic");
  EXPECT_EQ(m->arenaBytes, mlp::kArenaBytes);
  EXPECT_EQ(m->find("fc1.weight")->offset, mlp::kW1);
  EXPECT_EQ(m->find("fc2.bias")->offset, mlp::kB2);
  EXPECT_EQ(m->find("grad/fc2.weight")->offset, mlp::kGrad + mlp::kW2);
  EXPECT_EQ(m->find("adamw.m/fc1.bias")->offset, mlp::kAdamM + mlp::kB1);
  EXPECT_EQ(m->find("adamw.v/fc2.bias")->offset, mlp::kAdamV + mlp::kB2);
  EXPECT_EQ(m->find("step")->offset, mlp::kStep);
  EXPECT_EQ(m->find("in/train.x")->offset, mlp::kTrainX);
  EXPECT_EQ(m->find("in/train.y")->offset, mlp::kTrainY);
  EXPECT_EQ(m->find("in/eval.x")->offset, mlp::kEvalX);
  EXPECT_EQ(m->find("in/eval.y")->offset, mlp::kEvalY);
  EXPECT_EQ(m->find("in/total_steps")->offset, mlp::kTotalSteps);
  EXPECT_EQ(m->find("out/loss")->offset, mlp::kLoss);
  EXPECT_EQ(m->find("out/lr")->offset, mlp::kLr);
  EXPECT_EQ(m->find("out/grad_norm")->offset, mlp::kGradNorm);
  EXPECT_EQ(m->find("out/eval_loss")->offset, mlp::kEvalLoss);
  EXPECT_EQ(m->find("out/eval_correct")->offset, mlp::kEvalCorrect);
  // The transients start after the last named buffer.
  EXPECT_LE(m->find("out/eval_correct")->offset + 4, mlp::kHiddenAct);

  EXPECT_EQ(m->train.batch, 32);
  EXPECT_EQ(m->train.microBatch, 16);
  EXPECT_EQ(m->train.accumulation, 2);
  EXPECT_EQ(m->train.epochs, 3);
  EXPECT_FALSE(m->train.steps.has_value());
  EXPECT_TRUE(m->train.classifier);
  EXPECT_TRUE(m->train.evalPad);
  ASSERT_TRUE(m->evalData.has_value());
  EXPECT_EQ(m->trainData->kind, DataKind::Synthetic);
  EXPECT_EQ(m->trainData->count, 1024);
  const BufferDesc *w = m->find("fc2.weight");
  ASSERT_TRUE(w->init.has_value());
  EXPECT_EQ(w->init->kind, InitSpec::Kind::Normal);
  EXPECT_EQ(w->init->b, 0.1);
  EXPECT_EQ(w->bytes, 4u * 32 * 4);
}

namespace {

/// Parses `j`, expecting failure with a message containing `fragment`.
void expectInvalid(const json &j, const std::string &fragment) {
  Expected<Manifest> m = parseManifest(j.dump());
  ASSERT_FALSE(bool(m)) << "accepted: " << fragment;
  EXPECT_NE(m.error().message().find(fragment), std::string::npos)
      << m.error().message();
  EXPECT_EQ(m.error().exitCode(), kExitFault);
}

} // namespace

TEST(Manifest, BaseIsValid) { mustParse(baseManifest()); }

TEST(Manifest, RejectsMalformedJson) {
  Expected<Manifest> m = parseManifest("{\"abi\": 1,");
  ASSERT_FALSE(bool(m));
  EXPECT_NE(m.error().message().find("manifest is invalid"), std::string::npos);
}

TEST(Manifest, RejectsOtherAbi) {
  json j = baseManifest();
  j["abi"] = 2;
  expectInvalid(j, "ABI version 2");
}

TEST(Manifest, RejectsMisalignedOffset) {
  json j = baseManifest();
  j["buffers"][1]["offset"] = 60;
  expectInvalid(j, "buffer \"b\" has offset 60, not a multiple of 64");
}

TEST(Manifest, RejectsBufferOutsideArena) {
  json j = baseManifest();
  j["buffers"][7]["offset"] = 512;
  expectInvalid(j, "\"out/loss\" ([512, 516)) lies outside the arena");
}

TEST(Manifest, RejectsOverlap) {
  json j = baseManifest();
  j["buffers"][0]["shape"] = {8, 3}; // 96 bytes from 0 runs into b at 64
  expectInvalid(j, "buffers \"w\" and \"b\" overlap");
}

TEST(Manifest, ReadsTheOffloadSplitAndChecksIt) {
  // A pipeline's manifest names what it offloads without a split.
  json j = baseManifest();
  j["offload"] = {{"what", "optimizer"}};
  Manifest plain = mustParse(j);
  EXPECT_TRUE(plain.offloadOptimizer);
  EXPECT_FALSE(plain.offloadSplit.has_value());
  // The first 192 bytes are the host's; the device's [192, 512) mirrors
  // [256, 320) and [384, 448), copying one down and one up.
  j["offload"] = {{"what", "optimizer"},
                  {"host_bytes", 192},
                  {"mirrored", {{256, 64}, {384, 64}}},
                  {"down", {{384, 64}}},
                  {"up", {{256, 8}}}};
  Manifest m = mustParse(j);
  ASSERT_TRUE(m.offloadSplit.has_value());
  EXPECT_EQ(m.offloadSplit->hostBytes, 192);
  EXPECT_EQ(m.offloadSplit->mirrored, (ArenaRanges{{256, 64}, {384, 64}}));
  EXPECT_EQ(m.offloadSplit->up, (ArenaRanges{{256, 8}}));
  EXPECT_TRUE(m.offloadSplit->zero.empty()); // optional
  j["offload"]["zero"] = {{384, 64}};
  EXPECT_EQ(mustParse(j).offloadSplit->zero, (ArenaRanges{{384, 64}}));

  json bad = j;
  bad["offload"]["what"] = "params";
  expectInvalid(bad, "offload is \"params\"");
  bad = j;
  bad["offload"]["host_bytes"] = 100;
  expectInvalid(bad, "offload.host_bytes 100 is not an aligned offset");
  bad = j;
  bad["offload"]["mirrored"] = {{384, 64}, {256, 64}};
  expectInvalid(bad, "offload.mirrored has [256, 320), which is out of order");
  bad = j;
  bad["offload"]["down"] = {{64, 64}}; // the host's own bytes
  expectInvalid(bad, "offload.down has [64, 128), which is out of order or "
                     "outside [192, 512)");
  bad = j;
  bad["offload"]["up"] = {{320, 8}};
  expectInvalid(
      bad, "offload copies or clears [320, 328), which it does not mirror");
  bad = j;
  bad["offload"]["zero"] = {{320, 8}};
  expectInvalid(
      bad, "offload copies or clears [320, 328), which it does not mirror");
}

TEST(Manifest, RejectsUnknownRoleAndDtype) {
  json j = baseManifest();
  j["buffers"][0]["role"] = "weights";
  expectInvalid(j, "unknown role \"weights\"");
  j = baseManifest();
  j["buffers"][0]["dtype"] = "f8";
  expectInvalid(j, "unknown dtype \"f8\"");
}

TEST(Manifest, RejectsMissingStepCounter) {
  json j = baseManifest();
  j["buffers"].erase(4);
  expectInvalid(j, "there is no \"step\" buffer");
}

TEST(Manifest, ChecksTheTypesOfRuntimeScalars) {
  json j = baseManifest();
  j["buffers"][4]["dtype"] = "i32";
  expectInvalid(j, "buffer \"step\" must be a scalar of role state (it is a "
                   "state i32 of 1 elements)");
  j = baseManifest();
  j["buffers"].push_back({{"name", "in/total_steps"},
                          {"role", "input"},
                          {"dtype", "i32"},
                          {"shape", json::array()},
                          {"offset", 512}});
  j["arena"]["bytes"] = 576;
  expectInvalid(j, "buffer \"in/total_steps\" must be a scalar of role input");
  j = baseManifest();
  j["buffers"][7]["shape"] = {2};
  expectInvalid(j, "\"out/loss\" must be a scalar");
}

TEST(Manifest, RejectsWrongRoleNaming) {
  json j = baseManifest();
  j["buffers"][5]["role"] = "state";
  expectInvalid(j, "inputs are named in/...");
}

TEST(Manifest, RejectsParamWithoutInit) {
  json j = baseManifest();
  j["buffers"][0].erase("init");
  expectInvalid(j, "param without \"init\"");
}

TEST(Manifest, RequiresExactlyOneLength) {
  json j = baseManifest();
  j["train"]["epochs"] = 2;
  expectInvalid(j, "exactly one of \"steps\" and \"epochs\"");
  j["train"]["steps"] = nullptr;
  j["train"]["epochs"] = nullptr;
  expectInvalid(j, "exactly one of \"steps\" and \"epochs\"");
}

TEST(Manifest, RequiresConsistentAccumulation) {
  json j = baseManifest();
  j["train"]["batch"] = 6;
  j["train"]["micro_batch"] = 4;
  expectInvalid(j, "batch 6 is not micro_batch 4 x accumulation 1");
}

TEST(Manifest, RejectsUnknownDataKind) {
  json j = baseManifest();
  j["data"]["train"]["kind"] = "csv";
  expectInvalid(j, "data.train.kind \"csv\" is not idx, tokens, token_classes or "
                    "synthetic");
}

TEST(Manifest, ReadsOptionalKeys) {
  json j = baseManifest();
  j["train"]["log"] = {{"every", 5}, {"dir", "runs/x"}};
  j["train"]["checkpoint"] = {{"every", 100}, {"dir", "ck"}, {"keep", 2}};
  j["train"]["eval_partial"] = "drop";
  Manifest m = mustParse(j);
  EXPECT_EQ(m.train.log->every, 5);
  EXPECT_EQ(m.train.log->dir, "runs/x");
  EXPECT_EQ(m.train.checkpoint->every, 100);
  EXPECT_EQ(m.train.checkpoint->keep, 2);
  EXPECT_FALSE(m.train.evalPad);
  EXPECT_EQ(m.train.accumulation, 1);
}
