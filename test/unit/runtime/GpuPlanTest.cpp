//===- GpuPlanTest.cpp - A GPU plan's collectives, read for a rank --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// readPlan needs no GPU: what a rank's launches of a sharded plan become (its
// shard's bytes, its block's first row, the groups its collectives need) is
// checked here on any machine; the GPU runs them (scripts/gpu-bundle.sh).
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/cudnn.h"
#include "dtrt/cuda/plan.h"

#include <gtest/gtest.h>

using namespace dtrt;
using namespace dtrt::cuda;

namespace {

Mesh dpTp() {
  Expected<Mesh> m = Mesh::create({"dp", "tp"}, {2, 2});
  EXPECT_TRUE(bool(m));
  return *m;
}

const char *kManifest = R"({"collectives": [
  {"id": 0, "what": "grad/fc.weight"}, {"id": 1, "what": "param/fc.weight"},
  {"id": 2, "what": "grad/wte.weight"}]})";

/// One entry point, grad_step, of the launches `thunks` (JSON).
std::string planOf(const std::string &thunks) {
  return R"({"version": 1, "arena_bytes": 4096, "scratch_bytes": 64,
            "entries": {"grad_step": [)" +
         thunks + "]}}";
}

const Thunk &only(const Plan &p) {
  EXPECT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].second.size(), 1u);
  return p.entries[0].second[0];
}

TEST(GpuPlanTest, CollectivesKeepTheirArgumentsAndNameTheirGroups) {
  // all_reduce over {dp} (mask 1), reduce_scatter over {dp, tp} (mask 3, 4
  // ranks), an asynchronous all_gather over {tp} (mask 2) and its wait.
  Expected<Plan> p =
      readPlan(planOf(R"({"op": "all_reduce", "p": [0, 64], "i": [16, 0, 1, 0]},
                {"op": "reduce_scatter", "p": [0, 64], "i": [4, 4, 0, 3, 2]},
                {"op": "all_gather", "p": [64, 0], "i": [8, 2, 3, 2, 1],
                 "async": true},
                {"op": "wait", "i": [1]})"),
               kManifest, dpTp(), 3);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_EQ(p->arenaBytes, 4096);
  EXPECT_EQ(p->scratchBytes, 64);
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].kind, Thunk::AllReduce);
  EXPECT_EQ(t[0].what, "grad/fc.weight");
  EXPECT_EQ(t[1].what, "grad/wte.weight");
  EXPECT_EQ(t[2].kind, Thunk::AllGather);
  EXPECT_EQ(t[2].i, (std::vector<int64_t>{8, 2, 3, 2, 1}));
  // Asynchronous (dtc --overlap): on the collectives' stream until its wait.
  EXPECT_TRUE(t[2].async);
  EXPECT_FALSE(t[0].async);
  EXPECT_EQ(t[2].collective, 1);
  EXPECT_EQ(t[3].kind, Thunk::Wait);
  EXPECT_EQ(p->groups, (std::vector<AxisMask>{1, 3, 2}));
}

TEST(GpuPlanTest, ATakenShardIsTheRanksBytesThenZeros) {
  // 10 f32 elements in shards of 4 over {dp, tp}: rank 2 (index 2) holds
  // elements 8 and 9 and two zeros; rank 3 holds only zeros. take_shard
  // needs no engine: no group is listed.
  std::string plan =
      planOf(R"({"op": "take_shard", "p": [0, 64], "i": [10, 4, 0, 3, 1]})");
  Expected<Plan> r2 = readPlan(plan, kManifest, dpTp(), 2);
  ASSERT_TRUE(bool(r2)) << r2.error().message();
  EXPECT_EQ(only(*r2).i, (std::vector<int64_t>{10, 4, 0, 3, 1, 32, 8, 8}));
  EXPECT_TRUE(r2->groups.empty());
  Expected<Plan> r3 = readPlan(plan, kManifest, dpTp(), 3);
  ASSERT_TRUE(bool(r3));
  EXPECT_EQ(only(*r3).i, (std::vector<int64_t>{10, 4, 0, 3, 1, 40, 0, 16}));
  // Shards that do not cover the value are a broken plan.
  Expected<Plan> bad = readPlan(
      planOf(R"({"op": "take_shard", "p": [0, 64], "i": [20, 4, 0, 3, 1]})"),
      kManifest, dpTp(), 0);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.error().message().find("4 shards of 4 of 'param/fc.weight' "
                                       "do not cover 20 elements"),
            std::string::npos)
      << bad.error().message();
}

TEST(GpuPlanTest, AShardsStartIsTheRanksIndexOverItsAxesTimesTheBlock) {
  // Over {tp} (axis 1) in blocks of 128: rank 3 is (dp 1, tp 1) -> 128;
  // over {dp, tp}: index 3 -> 384; rank 2 over {tp} -> 0.
  std::string tp =
      planOf(R"({"op": "shard_start", "p": [8], "i": [128], "axes": [1]})");
  std::string both =
      planOf(R"({"op": "shard_start", "p": [8], "i": [128], "axes": [0, 1]})");
  EXPECT_EQ(only(*readPlan(tp, "", dpTp(), 3)).i,
            (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(only(*readPlan(both, "", dpTp(), 3)).i,
            (std::vector<int64_t>{128, 384}));
  EXPECT_EQ(only(*readPlan(tp, "", dpTp(), 2)).i,
            (std::vector<int64_t>{128, 0}));
  Expected<Plan> beyond = readPlan(
      planOf(R"({"op": "shard_start", "p": [8], "i": [128], "axes": [2]})"), "",
      dpTp(), 0);
  ASSERT_FALSE(bool(beyond));
  EXPECT_NE(beyond.error().message().find("axis 2 of a mesh of 2 axes"),
            std::string::npos);
}

TEST(GpuPlanTest, AGroupOfAnotherSizeThanTheMeshGivesIsAnError) {
  // Compiled for {dp} of 4 ranks; this mesh's {dp} has 2.
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "all_gather", "p": [0, 64], "i": [8, 4, 0, 1, 1]})"),
      kManifest, dpTp(), 0);
  ASSERT_FALSE(bool(p));
  EXPECT_EQ(p.error().message(),
            "the GPU plan's collective of 'param/fc.weight' was compiled for "
            "a group of 4 ranks over {dp}, but the mesh (dp=2, tp=2) gives 2");
  // Axes the mesh lacks, an unknown dtype: a malformed plan.
  for (const char *bad :
       {R"({"op": "all_reduce", "p": [0, 64], "i": [16, 0, 4, 0]})",
        R"({"op": "all_reduce", "p": [0, 64], "i": [16, 9, 1, 0]})"}) {
    Expected<Plan> q = readPlan(planOf(bad), kManifest, dpTp(), 0);
    ASSERT_FALSE(bool(q)) << bad;
    EXPECT_NE(q.error().message().find("GPU plan is malformed"),
              std::string::npos)
        << q.error().message();
  }
}

TEST(GpuPlanTest, VocabularyParallelLaunchesAndMalformedOnesAreChecked) {
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "embedding_shard", "p": [0, 8, 16, 24],
                 "i": [32, 128, 256, 64], "span": 4})"),
      R"({"spans": [{"id": 4, "op": "embedding_shard", "layer": "wte"}]})",
      dpTp(), 1);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_EQ(only(*p).kind, Thunk::EmbeddingShard);
  EXPECT_EQ(only(*p).range, "embedding_shard wte");
  EXPECT_STREQ(kindName(Thunk::CrossEntropyGradShard),
               "cross_entropy_grad_shard");
  for (
      const char *bad :
      {R"({"op": "embedding_shard", "p": [0, 8, 16], "i": [32, 128, 256, 64]})",
       R"({"op": "all_reduce", "p": [0, 64], "i": [16, 0, 1]})",
       R"({"op": "no_such_launch"})"}) {
    Expected<Plan> q = readPlan(planOf(bad), "", dpTp(), 0);
    ASSERT_FALSE(bool(q)) << bad;
    EXPECT_NE(q.error().message().find("GPU plan is malformed"),
              std::string::npos)
        << q.error().message();
  }
  EXPECT_FALSE(bool(readPlan("[]", "", dpTp(), 0)));
}

} // namespace

TEST(GpuPlanTest, AnOffloadedArenaStartsOnTheDeviceAtDeviceFrom) {
  // offload = "optimizer": the arena's first 1024 bytes are the host's.
  std::string plan = R"({"version": 1, "arena_bytes": 4096, "device_from": 1024,
                         "entries": {"grad_step": []}})";
  Expected<Plan> p = readPlan(plan, kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_EQ(p->deviceFrom, 1024);
  EXPECT_EQ(p->arenaBytes, 4096);
  Expected<Plan> bad =
      readPlan(R"({"arena_bytes": 4096, "device_from": 8192, "entries": {}})",
               kManifest, dpTp(), 0);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.error().message().find("device_from lies outside the arena"),
            std::string::npos)
      << bad.error().message();
}

TEST(GpuPlanTest, SixteenBitReadsAndWritesAreCheckedWhenRead) {
  // A bf16 product writing bf16, the loss reading bf16 logits and its
  // gradient writing f16: what a mixed-precision plan's zero copies ask.
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "matmul", "p": [0, 64, 128], "i": [1, 2, 2, 2, 0, 0],
                 "half": "bf16", "out": "bf16", "cpu_p": [0, 64, 256]},
                {"op": "cross_entropy", "p": [0, 64, 128], "i": [2, 2],
                 "in": "bf16"},
                {"op": "cross_entropy_grad", "p": [0, 64, 128, 192],
                 "i": [2, 2], "in": "bf16", "out": "f16"},
                {"op": "cross_entropy_with_grad", "p": [0, 64, 128, 192, 256],
                 "i": [2, 2], "in": "bf16", "out": "bf16", "ld": [8, 8]})"),
      kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 4u);
  // The loss with its gradient: five pointers, the loss last.
  EXPECT_EQ(t[3].kind, Thunk::CrossEntropyWithGrad);
  EXPECT_EQ(t[3].result, Operands::BF16);
  EXPECT_EQ(t[3].ld, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(t[0].operands, Operands::BF16);
  EXPECT_EQ(t[0].result, Operands::BF16);
  EXPECT_EQ(t[0].p, (std::vector<int64_t>{0, 64, 128})); // the GPU's
  EXPECT_EQ(t[1].operands, Operands::BF16);
  EXPECT_EQ(t[1].result, Operands::F32);
  EXPECT_EQ(t[2].result, Operands::F16);
  // cuBLAS writes a 16-bit result of its operands' type only; only the
  // loss reads 16-bit logits.
  for (const char *bad :
       {R"({"op": "matmul", "p": [0, 64, 128], "i": [1, 2, 2, 2, 0, 0],
            "half": "bf16", "out": "f16"})",
        R"({"op": "matmul", "p": [0, 64, 128], "i": [1, 2, 2, 2, 0, 0],
            "out": "bf16"})",
        R"({"op": "softmax", "p": [0, 64], "i": [1, 2, 1], "in": "bf16"})",
        R"({"op": "cross_entropy", "p": [0, 64, 128], "i": [2, 2],
            "in": "f8"})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

TEST(GpuPlanTest, AGeluEpilogueTakesItsPreActivationLast) {
  // The MLP's products with GELU, and GELU's gradient, in cuBLASLt's
  // epilogue: 16-bit products writing 16 bits, the pre-activation one
  // pointer more.
  Expected<Plan> p =
      readPlan(planOf(R"({"op": "matmul_bias", "p": [0, 64, 128, 192, 256],
                 "i": [1, 2, 8, 2, 0, 1], "half": "bf16", "out": "bf16",
                 "bias": "bf16", "epilogue": "gelu"},
                {"op": "matmul", "p": [0, 64, 128, 256],
                 "i": [1, 2, 8, 2, 0, 0], "half": "bf16", "out": "bf16",
                 "epilogue": "gelu_grad"})"),
               kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].epilogue, dtrt::cuda::Epilogue::Gelu);
  EXPECT_EQ(t[0].p.back(), 256);
  EXPECT_EQ(t[1].epilogue, dtrt::cuda::Epilogue::GeluGrad);
  // Not on an f32 result, not GELU's gradient with a bias, nothing else,
  // and not without the pre-activation's pointer.
  for (const char *bad :
       {R"({"op": "matmul", "p": [0, 64, 128, 256], "i": [1, 2, 8, 2, 0, 0],
            "half": "bf16", "epilogue": "gelu"})",
        R"({"op": "matmul_bias", "p": [0, 64, 128, 192, 256],
            "i": [1, 2, 8, 2, 0, 1], "half": "bf16", "out": "bf16",
            "bias": "bf16", "epilogue": "gelu_grad"})",
        R"({"op": "matmul", "p": [0, 64, 128, 256], "i": [1, 2, 8, 2, 0, 0],
            "half": "bf16", "out": "bf16", "epilogue": "relu"})",
        R"({"op": "matmul", "p": [0, 64, 128], "i": [1, 2, 8, 2, 0, 0],
            "half": "bf16", "out": "bf16", "epilogue": "gelu"})",
        R"({"op": "softmax", "p": [0, 64, 128], "i": [1, 2, 1],
            "epilogue": "gelu"})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

TEST(GpuPlanTest, ABiasGradientIsWrittenBesideTheWeightGradient) {
  // dW = dY^T x with db, dY's column sums, in BGRADB's epilogue: a 16-bit
  // product of A transposed, the f32 sums one pointer more.
  Expected<Plan> p = readPlan(planOf(R"({"op": "matmul", "p": [0, 64, 128, 256],
                 "i": [1, 8, 4, 2, 1, 0], "half": "bf16",
                 "epilogue": "bias_grad"})"),
                              kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const Thunk &t = only(*p);
  EXPECT_EQ(t.epilogue, dtrt::cuda::Epilogue::BiasGrad);
  EXPECT_EQ(t.p.back(), 256);
  // Not with A untransposed, not on f32 (or tf32) operands, not on a
  // product with a bias, and not without the sums' pointer.
  for (const char *bad :
       {R"({"op": "matmul", "p": [0, 64, 128, 256], "i": [1, 8, 4, 2, 0, 0],
            "half": "bf16", "epilogue": "bias_grad"})",
        R"({"op": "matmul", "p": [0, 64, 128, 256], "i": [1, 8, 4, 2, 1, 0],
            "epilogue": "bias_grad"})",
        R"({"op": "matmul", "p": [0, 64, 128, 256], "i": [1, 8, 4, 2, 1, 0],
            "tf32": true, "epilogue": "bias_grad"})",
        R"({"op": "matmul_bias", "p": [0, 64, 128, 192, 256],
            "i": [1, 8, 4, 2, 1, 0], "half": "bf16", "bias": "bf16",
            "epilogue": "bias_grad"})",
        R"({"op": "matmul", "p": [0, 64, 128], "i": [1, 8, 4, 2, 1, 0],
            "half": "bf16", "epilogue": "bias_grad"})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

TEST(GpuPlanTest, APaddedProductsPitchesHoldItsRoundedExtents) {
  // GPT-2's gradient of the logits' input, at 4 x 12 x 6: k = 6 runs as 8,
  // A's columns 6 and 7 and B's rows 6 and 7 zeroed first (CudaPadding.h).
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
                 "half": "bf16", "out": "bf16", "ld": [8, 12, 12],
                 "pad": [12, 8], "zero": [[12, 4, 4, 16], [656, 48, 1, 48]]})"),
      kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const Thunk &t = only(*p);
  EXPECT_EQ(t.pad, (std::vector<int64_t>{12, 8}));
  ASSERT_EQ(t.zeros.size(), 2u);
  EXPECT_EQ(t.zeros[0], (std::array<int64_t, 4>{12, 4, 4, 16}));
  // A pitch narrower than the padded extent, a padding below the product's
  // own extent, a padded f32 product, zeros past the arena or wider than
  // their pitch: each one an error, not a launch that reads past a row.
  for (const char *bad :
       {R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
            "half": "bf16", "ld": [6, 12, 12], "pad": [12, 8]})",
        R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
            "half": "bf16", "ld": [8, 12, 12], "pad": [12, 4]})",
        R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
            "ld": [8, 12, 12], "pad": [12, 8]})",
        R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
            "half": "bf16", "ld": [8, 12, 12], "pad": [12, 8],
            "zero": [[4090, 8, 1, 8]]})",
        R"({"op": "matmul", "p": [0, 512, 1024], "i": [1, 4, 12, 6, 0, 0],
            "half": "bf16", "ld": [8, 12, 12], "pad": [12, 8],
            "zero": [[12, 4, 4, 2]]})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

TEST(GpuPlanTest, Bf16AttentionMayReadAndWriteBf16) {
  // Attention on bf16 tensor cores reading Q, K, V where their bf16
  // sources lie and writing O into its narrowing's buffer.
  Expected<Plan> p =
      readPlan(planOf(R"({"op": "attention", "p": [0, 64, 128, 192, 512],
                 "i": [1, 2, 32, 1], "bf16": true, "in": "bf16",
                 "out": "bf16", "cpu_p": [256, 320, 384, 448, 512]},
                {"op": "attention_grad",
                 "p": [0, 64, 128, 192, 512, 256, 320, 384, 448],
                 "i": [1, 2, 32, 1], "bf16": true, "out": "bf16"})"),
               kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].operands, Operands::BF16);
  EXPECT_EQ(t[0].in, Operands::BF16);
  EXPECT_EQ(t[0].result, Operands::BF16);
  EXPECT_EQ(t[1].in, Operands::F32);
  EXPECT_EQ(t[1].result, Operands::BF16);
  // Only the bf16 kernels, and only bf16.
  for (const char *bad :
       {R"({"op": "attention", "p": [0, 64, 128, 192, 512],
            "i": [1, 2, 32, 1], "in": "bf16"})",
        R"({"op": "attention", "p": [0, 64, 128, 192, 512],
            "i": [1, 2, 32, 1], "tf32": true, "out": "bf16"})",
        R"({"op": "attention", "p": [0, 64, 128, 192, 512],
            "i": [1, 2, 32, 1], "bf16": true, "in": "f16"})",
        R"({"op": "attention_grad",
            "p": [0, 64, 128, 192, 512, 256, 320, 384, 448],
            "i": [1, 2, 32, 1], "bf16": true, "out": "f16"})",
        // The log-sum-exp's pointer is not optional.
        R"({"op": "attention", "p": [0, 64, 128, 192], "i": [1, 2, 32, 1],
            "bf16": true})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

TEST(GpuPlanTest, NormsMayReadAndWriteSixteenBitData) {
  // A layer norm reading x as bf16 and writing y as bf16; its gradient
  // reading x as f16 and dy as bf16, writing dx in f32; an RMS norm and its
  // gradient alike.
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "layer_norm", "p": [0, 64, 128, 192], "i": [2, 8],
                 "f": [1e-5], "in": "bf16", "out": "bf16",
                 "cpu_p": [256, 64, 128, 320]},
                {"op": "layer_norm_grad", "p": [0, 64, 128, 192, 256, 320],
                 "i": [2, 8], "f": [1e-5], "in": "f16",
                 "grad_in": "bf16"},
                {"op": "rms_norm", "p": [0, 64, 128], "i": [2, 8],
                 "f": [1e-5], "in": "bf16", "out": "bf16"},
                {"op": "rms_norm_grad", "p": [0, 64, 128, 192, 256],
                 "i": [2, 8], "f": [1e-5], "grad_in": "f16",
                 "out": "bf16"})"),
      kManifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[2].in, Operands::BF16);
  EXPECT_EQ(t[2].result, Operands::BF16);
  EXPECT_EQ(t[3].in, Operands::F32);
  EXPECT_EQ(t[3].gradIn, Operands::F16);
  EXPECT_EQ(t[3].result, Operands::BF16);
  EXPECT_EQ(t[0].in, Operands::BF16);
  EXPECT_EQ(t[0].result, Operands::BF16);
  EXPECT_EQ(t[0].operands, Operands::F32);
  EXPECT_EQ(t[1].in, Operands::F16);
  EXPECT_EQ(t[1].gradIn, Operands::BF16);
  EXPECT_EQ(t[1].result, Operands::F32);
  // A dy only the gradient has, and 16-bit types only.
  for (const char *bad :
       {R"({"op": "layer_norm", "p": [0, 64, 128, 192], "i": [2, 8],
            "f": [1e-5], "grad_in": "bf16"})",
        R"({"op": "layer_norm", "p": [0, 64, 128, 192], "i": [2, 8],
            "f": [1e-5], "in": "f32"})",
        R"({"op": "layer_norm_grad", "p": [0, 64, 128, 192, 256, 320],
            "i": [2, 8], "f": [1e-5], "out": "i8"})",
        R"({"op": "rms_norm", "p": [0, 64, 128], "i": [2, 8], "f": [1e-5],
            "grad_in": "bf16"})",
        R"({"op": "softmax", "p": [0, 64], "i": [1, 2, 1], "out": "bf16"})"}) {
    Expected<Plan> r = readPlan(planOf(bad), kManifest, dpTp(), 0);
    EXPECT_FALSE(bool(r)) << bad;
  }
}

namespace {

TEST(GpuPlanTest, LaunchesCarryTheirSpansNameAndCost) {
  // What DTRT_CUDA_PROFILE divides by a launch's time, and its NVTX range.
  const char *manifest = R"json({"spans": [
    {"id": 0, "op": "fused(convert)", "layer": "blocks.0.attn", "bytes": 600,
     "flops": 100},
    {"id": 1, "op": "matmul", "bytes": 48, "flops": 16}]
})json";
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "kernel", "name": "grad_step_k0", "n": 100, "span": 0},
                {"op": "matmul", "p": [0, 64, 128], "i": [1, 2, 2, 2, 0, 0],
                 "span": 1},
                {"op": "kernel", "name": "grad_step_k1", "n": 1},
                {"op": "kernel", "name": "grad_step_m2", "n": 512, "grid": 2,
                 "members": 2, "kernels": ["grad_step_k2", "grad_step_k3"],
                 "span": 0, "spans": [0, 1]})"),
      manifest, dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &t = p->entries[0].second;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].range, "fused(convert) blocks.0.attn");
  EXPECT_EQ(t[0].bytes, 600);
  EXPECT_EQ(t[0].flops, 100);
  EXPECT_EQ(t[1].range, "matmul");
  EXPECT_EQ(t[1].bytes, 48);
  EXPECT_EQ(t[1].flops, 16);
  // Without a span: named after the kernel, no cost.
  EXPECT_EQ(t[2].range, "grad_step_k1");
  EXPECT_EQ(t[2].bytes, 0);
  EXPECT_TRUE(t[2].members.empty());
  // Merged kernels: their costs summed, their spans for the trace.
  EXPECT_EQ(t[3].range, "merged grad_step_m2 (2 kernels)");
  EXPECT_EQ(t[3].bytes, 648);
  EXPECT_EQ(t[3].flops, 116);
  EXPECT_EQ(t[3].members, (std::vector<int32_t>{0, 1}));
}

TEST(GpuPlanTest, ABf16AttentionIsDescribedToCuDnnWhereItsOperandsLie) {
  // GPT-2's layouts (2 batches of 3 heads of 64, 256 rows): Q, K, V in the
  // [B, T, 3C] qkv product, O and dO in [B, T, C], dQ, dK, dV into their
  // [B, T, 3C] concat; lse (the fifth) is [slices, t] and not an operand's
  // layout. cuDNN gets each operand's batch, head and row strides.
  const char *bt3c = "[3, 147456, 64, 576]", *btc = "[3, 49152, 64, 192]";
  std::string layouts = std::string("[") + bt3c + ", " + bt3c + ", " + bt3c +
                        ", " + btc + ", [1, 256, 0, 1]";
  Expected<Plan> p = readPlan(
      planOf(R"({"op": "attention", "bf16": true, "in": "bf16", "out": "bf16",
                 "p": [0, 128, 256, 1024, 2048], "i": [6, 256, 64, 1],
                 "layouts": )" +
             layouts + R"(]},
             {"op": "attention_grad", "bf16": true, "in": "bf16",
              "out": "bf16", "p": [0, 128, 256, 1024, 2048, 3072, 4096,
              4224, 4352], "i": [6, 256, 64, 1], "layouts": )" +
             layouts + ", " + btc + ", " + bt3c + ", " + bt3c + ", " + bt3c +
             "]}"),
      "", dpTp(), 0);
  ASSERT_TRUE(bool(p)) << p.error().message();
  const std::vector<Thunk> &thunks = p->entries.front().second;
  ASSERT_EQ(thunks.size(), 2u);
  Expected<Sdpa> forward = Sdpa::of(thunks[0]), grad = Sdpa::of(thunks[1]);
  ASSERT_TRUE(bool(forward)) << forward.error().message();
  ASSERT_TRUE(bool(grad)) << grad.error().message();
  EXPECT_FALSE(forward->backward);
  EXPECT_TRUE(grad->backward);
  EXPECT_EQ(forward->batch, 2);
  EXPECT_EQ(forward->heads, 3);
  EXPECT_EQ(forward->t, 256);
  EXPECT_EQ(forward->d, 64);
  EXPECT_TRUE(forward->causal);
  using S = std::array<int64_t, 3>;
  S qkv{147456, 64, 576}, merged{49152, 64, 192};
  EXPECT_EQ(forward->strides, (std::vector<S>{qkv, qkv, qkv, merged}));
  EXPECT_EQ(grad->strides,
            (std::vector<S>{qkv, qkv, qkv, merged, merged, qkv, qkv, qkv}));

  // Without layouts every operand is [slices, t, d]: one head a batch,
  // split as the other operands split theirs.
  Expected<Plan> packed =
      readPlan(planOf(R"({"op": "attention", "bf16": true, "in": "bf16",
                 "out": "bf16", "p": [0, 128, 256, 1024, 2048],
                 "i": [6, 256, 64, 0]})"),
               "", dpTp(), 0);
  ASSERT_TRUE(bool(packed)) << packed.error().message();
  Expected<Sdpa> plain = Sdpa::of(only(*packed));
  ASSERT_TRUE(bool(plain)) << plain.error().message();
  EXPECT_EQ(plain->batch, 6);
  EXPECT_EQ(plain->heads, 1);
  EXPECT_FALSE(plain->causal);
  EXPECT_EQ(plain->strides[0], (S{256 * 64, 256 * 64, 64}));

  // What cuDNN cannot take: f32 results, an operand not 16-byte aligned.
  const std::pair<const char *, const char *> refusals[] = {
      {R"({"op": "attention", "bf16": true, "in": "bf16",
           "p": [0, 128, 256, 1024, 2048], "i": [6, 256, 64, 1]})",
       "f32"},
      {R"({"op": "attention", "bf16": true, "in": "bf16", "out": "bf16",
           "p": [0, 136, 256, 1024, 2048], "i": [6, 256, 64, 1]})",
       "aligned"}};
  for (const auto &[launch, why] : refusals) {
    Expected<Plan> q = readPlan(planOf(launch), "", dpTp(), 0);
    ASSERT_TRUE(bool(q)) << q.error().message();
    Expected<Sdpa> refused = Sdpa::of(only(*q));
    ASSERT_FALSE(bool(refused)) << launch;
    EXPECT_NE(refused.error().message().find(why), std::string::npos)
        << refused.error().message();
  }
}

} // namespace
