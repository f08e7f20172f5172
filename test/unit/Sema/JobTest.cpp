//===- JobTest.cpp - Tests of the checked Job -----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What Sema hands to MLIRGen: the instance tree and parameters (names, shapes,
// initialisers, tensor-parallel dims), the data sources (with run-time sizes
// unified), hyper-parameters with defaults, and the parallel layout.
//
//===----------------------------------------------------------------------===//

#include "Compile.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace dt;
using namespace dt::test;

namespace {
TEST(Job, MlpFashionParameters) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  EXPECT_EQ(job.name, "fashion_mlp");
  ASSERT_EQ(job.params.size(), 4u);
  EXPECT_EQ(job.params[0].name, "fc1.weight");
  EXPECT_EQ(job.params[1].name, "fc1.bias");
  EXPECT_EQ(job.params[2].name, "fc2.weight");
  EXPECT_EQ(job.params[3].name, "fc2.bias");
  EXPECT_EQ(job.params[0].type.shape,
            (llvm::SmallVector<int64_t, 4>{256, 784}));
  EXPECT_EQ(job.params[0].type.dtype, DType::F32);
  // kaiming_uniform is PyTorch's Linear default: bound 1/sqrt(fan_in).
  const Initializer &w = job.params[0].init;
  EXPECT_EQ(w.kind, Initializer::Kind::Uniform);
  EXPECT_EQ(w.from, "kaiming_uniform");
  EXPECT_NEAR(w.high, 1 / std::sqrt(784.0), 1e-12);
  EXPECT_NEAR(w.low, -1 / std::sqrt(784.0), 1e-12);
  const Initializer &bias = job.params[1].init;
  EXPECT_EQ(bias.kind, Initializer::Kind::Uniform);
  EXPECT_NEAR(bias.high, 1 / std::sqrt(784.0), 1e-12);
  EXPECT_EQ(job.params[1].owner->path, "fc1");
  EXPECT_EQ(job.params[0].loc.line, 16u); // weight in stdlib/nn.dt
  EXPECT_FALSE(job.params[0].tensorDim);
}

TEST(Job, MlpFashionTrainKeys) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  EXPECT_EQ(job.batch, 128);
  EXPECT_EQ(job.microBatch, 128);
  EXPECT_EQ(job.accumulation, 1);
  EXPECT_FALSE(job.steps);
  EXPECT_EQ(job.epochs, 3);
  EXPECT_EQ(job.seed, 42);
  EXPECT_TRUE(job.classifier);
  EXPECT_EQ(job.precision, DType::F32);
  EXPECT_EQ(job.optimizer.kind, OptimizerConfig::Kind::AdamW);
  EXPECT_DOUBLE_EQ(job.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(job.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(job.optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(job.optimizer.eps, 1e-8);
  EXPECT_DOUBLE_EQ(job.optimizer.weightDecay, 0.01);
  EXPECT_EQ(job.schedule.kind, ScheduleConfig::Kind::Cosine);
  EXPECT_EQ(job.schedule.warmup, 100);
  EXPECT_DOUBLE_EQ(job.schedule.min, 0);
  ASSERT_TRUE(job.log);
  EXPECT_EQ(job.log->every, 50);
  EXPECT_EQ(job.log->dir, "runs/fashion_mlp");
  EXPECT_FALSE(job.checkpoint);
  EXPECT_TRUE(job.parallel.mesh.empty());
  EXPECT_EQ(job.parallel.getWorldSize(), 1);
}

TEST(Job, IdxImageSizeComesFromTheModel) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  EXPECT_EQ(job.data.kind, "idx");
  const SampleField *x = job.data.findField("x");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->dtype, DType::F32);
  EXPECT_EQ(x->shape, (llvm::SmallVector<int64_t, 2>{784}));
  const SampleField *y = job.data.findField("y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->dtype, DType::I32);
  EXPECT_TRUE(y->shape.empty());
  const Constant *scale = lookup(job.data.args, "scale");
  ASSERT_TRUE(scale);
  EXPECT_DOUBLE_EQ(scale->getNumber(), 1.0 / 255);
  ASSERT_TRUE(job.eval);
  EXPECT_EQ(job.eval->findField("x")->shape[0], 784);
}

TEST(Job, InstanceTree) {
  Compiled c(gptProgram(
      "batch = 32\n micro_batch = 8\n steps = 300\n"
      "optimizer = AdamW(lr = 1e-3)\n recompute = model.blocks\n"
      "precision = bf16\n checkpoint = {every: 100, dir: \"c\", keep: 3}\n",
      "mesh = (dp = 2, tp = 2)\n data = dp\n zero = 1\n tensor = tp\n"));
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  ASSERT_TRUE(job.model);
  EXPECT_EQ(job.model->model, "GPT");
  const ModelInstance::Child *blocks = job.model->findChild("blocks");
  ASSERT_TRUE(blocks);
  EXPECT_TRUE(blocks->isList);
  ASSERT_EQ(blocks->items.size(), 4u);
  EXPECT_EQ(blocks->items[2]->path, "blocks.2");
  EXPECT_EQ(blocks->items[2]->model, "nn.Block");
  const ModelInstance *attn = job.findInstance("blocks.1.attn");
  ASSERT_TRUE(attn);
  EXPECT_EQ(attn->model, "nn.CausalSelfAttention");
  EXPECT_EQ(lookup(attn->args, "heads")->getInt(), 4);
  EXPECT_EQ(attn->parent->path, "blocks.1");
  const ModelInstance *mlp = job.findInstance("blocks.0.mlp");
  ASSERT_TRUE(mlp);
  EXPECT_EQ(lookup(mlp->args, "act")->getString(), "gelu");
  EXPECT_EQ(lookup(mlp->args, "hidden")->getInt(), 512);
  // 2 embeddings + 4 blocks * 12 + final norm 2.
  EXPECT_EQ(job.params.size(), 2u + 4 * 12 + 2);
  EXPECT_EQ(job.recompute, (std::vector<std::string>{"blocks.0", "blocks.1",
                                                     "blocks.2", "blocks.3"}));
  EXPECT_EQ(job.precision, DType::BF16);
  ASSERT_TRUE(job.checkpoint);
  EXPECT_EQ(job.checkpoint->keep, 3);
}

TEST(Job, TensorParallelDims) {
  Compiled c(gptProgram("batch = 32\n micro_batch = 8\n steps = 300\n"
                        "optimizer = AdamW(lr = 1e-3)\n",
                        "mesh = (dp = 2, tp = 2)\n data = dp\n tensor = tp\n"));
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  auto dim = [&](llvm::StringRef name) -> std::optional<unsigned> {
    const ParamInfo *p = job.findParam(name);
    EXPECT_TRUE(p) << name.str();
    return p ? p->tensorDim : std::nullopt;
  };
  EXPECT_EQ(dim("wte.weight"), 0u); // @vocab: rows
  EXPECT_EQ(dim("wpe.weight"), std::nullopt);
  EXPECT_EQ(dim("blocks.0.attn.qkv.weight"), 0u); // @column: out features
  EXPECT_EQ(dim("blocks.0.attn.qkv.bias"), 0u);
  EXPECT_EQ(dim("blocks.0.attn.proj.weight"), 1u); // @row: in features
  EXPECT_EQ(dim("blocks.0.attn.proj.bias"), std::nullopt);
  EXPECT_EQ(dim("blocks.3.mlp.up.weight"), 0u);
  EXPECT_EQ(dim("blocks.3.mlp.down.weight"), 1u);
  EXPECT_EQ(job.findParam("blocks.0.mlp.up.weight")->annotation,
            Annotation::Column);
  EXPECT_EQ(job.parallel.tensorAxis, "tp");
  EXPECT_EQ(job.parallel.getDataParallelSize(), 2);
  EXPECT_EQ(job.parallel.getWorldSize(), 4);
  EXPECT_EQ(job.microBatch, 8);
  EXPECT_EQ(job.accumulation, 2);
}

TEST(Job, Pipeline) {
  Compiled c(
      gptProgram("batch = 64\n micro_batch = 4\n steps = 200\n"
                 "optimizer = AdamW(lr = 1e-3, betas = (0.9, 0.95))\n",
                 "mesh = (dp = 2, pp = 2)\n data = dp\n"
                 "pipeline = {axis: pp, stages: [model.blocks[0:2], "
                 "model.blocks[2:4]], schedule: \"1f1b\", microbatches: 8}\n"));
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  ASSERT_TRUE(job.parallel.pipeline);
  const PipelineConfig &p = *job.parallel.pipeline;
  EXPECT_EQ(p.axis, "pp");
  EXPECT_EQ(p.schedule, PipelineConfig::Schedule::OneFOneB);
  EXPECT_EQ(p.microbatches, 8);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].path, "blocks[0:2]");
  ASSERT_EQ(p.stages[1].instances.size(), 2u);
  EXPECT_EQ(p.stages[1].instances[0]->path, "blocks.2");
  EXPECT_EQ(job.accumulation, 8);
  EXPECT_DOUBLE_EQ(job.optimizer.beta2, 0.95);
}

TEST(Job, ShardsAndDeploys) {
  Compiled c(
      gptProgram("batch = 32\n steps = 10\n optimizer = SGD(lr = 0.1)\n",
                 "mesh = (dp = 4, tp = 2)\n data = dp\n"
                 "shard model.wte.weight = [tp, _]\n"
                 "shard model.blocks.1.mlp.up.weight = [(dp, tp), _]\n") +
      "deploy slurm { nodes = 1; gpus_per_node = 8; time = \"1:00:00\" }\n");
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  ASSERT_EQ(job.parallel.shards.size(), 2u);
  const ShardSpec &wte = job.parallel.shards[0];
  EXPECT_EQ(wte.param, "wte.weight");
  EXPECT_EQ(job.params[wte.paramIndex].name, "wte.weight");
  EXPECT_EQ(wte.dims[0], (std::vector<std::string>{"tp"}));
  EXPECT_TRUE(wte.dims[1].empty());
  EXPECT_EQ(job.parallel.shards[1].dims[0],
            (std::vector<std::string>{"dp", "tp"}));
  ASSERT_EQ(job.deploys.size(), 1u);
  EXPECT_EQ(job.deploys[0].target, "slurm");
  EXPECT_EQ(job.deploys[0].get("gpus_per_node")->getInt(), 8);
  EXPECT_EQ(job.deploys[0].get("time")->getString(), "1:00:00");
  EXPECT_EQ(job.optimizer.kind, OptimizerConfig::Kind::SGD);
  EXPECT_EQ(job.microBatch, 8); // batch / data-parallel size
}

TEST(Job, AbsentBiasAndSgd) {
  Compiled c(R"(
import nn
model Wide(features: int, hidden: int, classes: int) {
  l1 = nn.Linear(features, hidden)
  l3 = nn.Linear(hidden, classes, bias = false)
  forward(x: f32[B, features]) -> f32[B, classes] { return l3(gelu(l1(x))) }
}
train {
  model     = Wide(features = 64, hidden = 1024, classes = 8)
  data      = nn.synthetic(features = 64, classes = 8, count = 8192, seed = 11)
  loss      = cross_entropy(model(data.x), data.y)
  batch     = 64
  steps     = 100
  optimizer = SGD(lr = 0.05, momentum = 0.9, nesterov = true)
  clip      = 5.0
}
)");
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  EXPECT_TRUE(job.findParam("l1.bias"));
  EXPECT_FALSE(job.findParam("l3.bias"));
  EXPECT_EQ(job.findInstance("l3")->params.size(), 1u);
  EXPECT_EQ(lookup(job.findInstance("l3")->args, "bias")->getBool(), false);
  EXPECT_TRUE(job.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(job.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(job.optimizer.weightDecay, 0);
  EXPECT_EQ(job.clip, 5.0);
  EXPECT_EQ(job.data.findField("x")->shape[0], 64);
  EXPECT_EQ(lookup(job.data.args, "seed")->getInt(), 11);
  EXPECT_EQ(job.schedule.kind, ScheduleConfig::Kind::Constant);
}

TEST(Job, ErrorsAreReportedNotJobs) {
  Compiled c(R"(
import nn
model M() {
  fc = nn.Linear(8, 2)
  forward(x: f32[B, 8]) -> f32[B, 2] { return fc(x) }
}
train {
  model = M()
  data = nn.synthetic(features = 8, classes = 2, count = 16)
  loss = cross_entropy(model(data.x), data.y)
  batch = 16
  steps = 1
  epochs = 1
  optimizer = SGD(lr = 0.1)
}
)");
  EXPECT_FALSE(c.program);
  EXPECT_EQ(c.diag.getNumErrors(), 1u);
  EXPECT_NE(c.messages.find("'steps' and 'epochs' are both given"),
            std::string::npos)
      << c.messages;
}

TEST(Job, ModelsWithoutTrainBlock) {
  Compiled c("import nn\nmodel M(n: int) {\n fc = nn.Linear(n, n)\n"
             " forward(x: f32[..., n]) -> f32[..., n] { return fc(x) }\n}\n");
  ASSERT_TRUE(c.program) << c.messages;
  EXPECT_FALSE(c.program->getJob());
}
} // namespace
