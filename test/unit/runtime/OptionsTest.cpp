//===- OptionsTest.cpp - Tests of options and configuration ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The option names are a contract (DESIGN.md): each is parsed in both
// spellings, bad values are usage errors (exit 2), and the manifest's
// defaults give way to the command line.
//
//===----------------------------------------------------------------------===//

#include "dtrt/options.h"
#include "dtrt/config.h"

#include "TestUtil.h"

using namespace dtrt;
using namespace dtrt::test;

namespace {

Expected<Options> parse(std::vector<std::string> args) {
  std::vector<const char *> argv = {"train"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  return parseOptions(int(argv.size()), argv.data());
}

std::string usageError(std::vector<std::string> args) {
  Expected<Options> o = parse(std::move(args));
  if (o)
    return "(accepted)";
  EXPECT_EQ(o.error().exitCode(), kExitUsage);
  return o.error().message();
}

nlohmann::json idxManifest() {
  nlohmann::json j = baseManifest();
  j["data"]["train"] = {{"kind", "idx"},
                        {"images", "d/train-images-idx3-ubyte.gz"},
                        {"labels", "d/train-labels-idx1-ubyte.gz"},
                        {"scale", 1.0}};
  j["data"]["eval"] = {{"kind", "tokens"}, {"path", "d/val.bin"}, {"seq", 4}};
  return j;
}

Expected<RunConfig> resolve(const nlohmann::json &manifest,
                            std::vector<std::string> args) {
  Expected<Options> o = parse(std::move(args));
  EXPECT_TRUE(bool(o)) << o.error().message();
  static Manifest m; // kept alive for the returned config's lifetime
  m = mustParse(manifest);
  return resolveConfig(m, *o);
}

} // namespace

TEST(Options, ParsesEveryOptionInBothSpellings) {
  Expected<Options> o = parse({"--steps",
                               "10",
                               "--data=train=a.gz",
                               "--data",
                               "eval.path=v.bin",
                               "--log-dir",
                               "runs",
                               "--log-every=5",
                               "--checkpoint-dir=ck",
                               "--checkpoint-every",
                               "50",
                               "--checkpoint-keep",
                               "3",
                               "--resume",
                               "auto",
                               "--seed",
                               "18446744073709551615",
                               "--threads=4",
                               "--backend",
                               "cpu",
                               "--collectives",
                               "host",
                               "--eval-every",
                               "0",
                               "--init=gpt2",
                               "--export",
                               "out",
                               "--export-shard-size",
                               "2GB"});
  ASSERT_TRUE(bool(o)) << o.error().message();
  EXPECT_EQ(o->steps, 10);
  ASSERT_EQ(o->data.size(), 2u);
  EXPECT_EQ(o->data[0].role, "train");
  EXPECT_EQ(o->data[0].key, "");
  EXPECT_EQ(o->data[0].value, "a.gz");
  EXPECT_EQ(o->data[1].role, "eval");
  EXPECT_EQ(o->data[1].key, "path");
  EXPECT_EQ(o->logDir, "runs");
  EXPECT_EQ(o->logEvery, 5);
  EXPECT_EQ(o->checkpointDir, "ck");
  EXPECT_EQ(o->checkpointEvery, 50);
  EXPECT_EQ(o->checkpointKeep, 3);
  EXPECT_EQ(o->resume, ResumeMode::Auto);
  EXPECT_EQ(o->seed, 18446744073709551615ull);
  EXPECT_EQ(o->threads, 4);
  EXPECT_EQ(o->backend, Backend::Cpu);
  EXPECT_EQ(o->collectives, CollectiveEngine::Host);
  EXPECT_EQ(o->evalEvery, 0);
  EXPECT_EQ(o->init, "gpt2");
  EXPECT_EQ(o->exportDir, "out");
  EXPECT_EQ(o->exportShardBytes, 2'000'000'000u);

  o = parse({"--epochs", "2", "--resume", "ck/step_00000100", "--help",
             "--version", "--print-manifest", "--backend=cuda"});
  ASSERT_TRUE(bool(o));
  EXPECT_EQ(o->epochs, 2);
  EXPECT_EQ(o->resume, ResumeMode::Path);
  EXPECT_EQ(o->resumePath, "ck/step_00000100");
  EXPECT_TRUE(o->help && o->version && o->printManifest);
  EXPECT_EQ(o->backend, Backend::Cuda);
  EXPECT_FALSE(o->collectives.has_value());
  EXPECT_EQ(parse({"--collectives=nccl"})->collectives, CollectiveEngine::Nccl);
  EXPECT_EQ(parse({"--io-timeout", "600"})->ioTimeout, 600);
  EXPECT_FALSE(o->ioTimeout.has_value());
  EXPECT_TRUE(parse({"-h"})->help);
}

TEST(Options, RejectsBadUsage) {
  EXPECT_NE(usageError({"--stpes", "3"}).find("unknown option '--stpes'"),
            std::string::npos);
  EXPECT_NE(usageError({"--steps"}).find("--steps needs a value (N)"),
            std::string::npos);
  EXPECT_NE(usageError({"--steps", "-1"}).find("expected an integer >= 0"),
            std::string::npos);
  EXPECT_NE(usageError({"--export-shard-size", "5XB"})
                .find("expected a positive size in bytes, or with KB, MB, GB "
                      "or TB"),
            std::string::npos);
  EXPECT_NE(usageError({"--export-shard-size", "0"}).find("positive size"),
            std::string::npos);
  EXPECT_NE(usageError({"--steps", "12x"}).find("expected an integer"),
            std::string::npos);
  EXPECT_NE(usageError({"--seed", "-1"}).find("non-negative integer"),
            std::string::npos);
  EXPECT_NE(usageError({"--steps", "1", "--epochs", "1"}).find("give one"),
            std::string::npos);
  EXPECT_NE(usageError({"--data", "test=x"}).find("train or eval, not 'test'"),
            std::string::npos);
  EXPECT_NE(usageError({"--data", "train.foo=x"}).find("not 'foo'"),
            std::string::npos);
  EXPECT_NE(usageError({"--data", "train"}).find("expected NAME=PATH"),
            std::string::npos);
  EXPECT_NE(usageError({"--backend", "tpu"}).find("not cpu, cuda or auto"),
            std::string::npos);
  EXPECT_NE(usageError({"--io-timeout", "0"}).find("expected an integer >= 1"),
            std::string::npos);
  EXPECT_NE(usageError({"--collectives", "gloo"})
                .find("--collectives gloo is not auto, nccl or host"),
            std::string::npos);
  EXPECT_NE(usageError({"--help=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(usageError({"extra"}).find("unexpected argument 'extra'"),
            std::string::npos);
}

TEST(Config, ManifestDefaultsAndOverrides) {
  nlohmann::json j = baseManifest();
  j["train"]["log"] = {{"every", 7}, {"dir", "runs/tiny"}};
  j["train"]["checkpoint"] = {{"every", 100}, {"dir", "ck"}, {"keep", 2}};
  Expected<RunConfig> c = resolve(j, {});
  ASSERT_TRUE(bool(c));
  EXPECT_EQ(c->steps, 10);
  EXPECT_EQ(c->seed, 1u);
  EXPECT_FALSE(c->seedGiven);
  EXPECT_EQ(c->logDir, "runs/tiny");
  EXPECT_EQ(c->logEvery, 7);
  EXPECT_EQ(c->checkpointDir, "ck");
  EXPECT_EQ(c->checkpointEvery, 100);
  EXPECT_EQ(c->checkpointKeep, 2);
  EXPECT_GE(c->threads, 1);

  c = resolve(j, {"--epochs", "3", "--seed", "5", "--log-every", "1",
                  "--checkpoint-every", "0", "--threads", "2"});
  ASSERT_TRUE(bool(c));
  EXPECT_FALSE(c->steps.has_value());
  EXPECT_EQ(c->epochs, 3);
  EXPECT_EQ(c->seed, 5u);
  EXPECT_TRUE(c->seedGiven);
  EXPECT_EQ(c->logEvery, 1);
  EXPECT_EQ(c->checkpointEvery, 0);
  EXPECT_EQ(c->threads, 2);

  c = resolve(baseManifest(), {});
  EXPECT_EQ(c->logEvery, kDefaultLogEvery);
  EXPECT_EQ(c->logDir, "");
}

TEST(Config, IdxAndTokenDataOverrides) {
  Expected<RunConfig> c =
      resolve(idxManifest(), {"--data", "train=/x/t10k-images-idx3-ubyte"});
  ASSERT_TRUE(bool(c)) << c.error().message();
  EXPECT_EQ(c->trainData.images, "/x/t10k-images-idx3-ubyte");
  EXPECT_EQ(c->trainData.labels, "/x/t10k-labels-idx1-ubyte");

  // An explicit labels file wins whatever the order, and makes an
  // underivable images name acceptable.
  c = resolve(idxManifest(), {"--data", "train.labels=L", "--data", "train=I"});
  ASSERT_TRUE(bool(c)) << c.error().message();
  EXPECT_EQ(c->trainData.images, "I");
  EXPECT_EQ(c->trainData.labels, "L");

  c = resolve(idxManifest(), {"--data", "train=images.bin"});
  ASSERT_FALSE(bool(c));
  EXPECT_EQ(c.error().exitCode(), kExitUsage);
  EXPECT_NE(c.error().message().find("cannot derive the labels file"),
            std::string::npos);

  c = resolve(idxManifest(), {"--data", "eval=shards/val_*.bin"});
  ASSERT_TRUE(bool(c));
  EXPECT_EQ(c->evalData->path, "shards/val_*.bin");

  c = resolve(idxManifest(), {"--data", "train.path=x"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("is idx; its keys are images and labels"),
            std::string::npos);
  c = resolve(idxManifest(), {"--data", "eval.images=x"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("is tokens; its key is path"),
            std::string::npos);
}

TEST(Config, RejectsImpossibleCombinations) {
  Expected<RunConfig> c = resolve(baseManifest(), {"--data", "train=x"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("synthetic and reads no file"),
            std::string::npos);
  c = resolve(baseManifest(), {"--data", "eval=x"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("the program has no eval source"),
            std::string::npos);
  c = resolve(baseManifest(), {"--checkpoint-every", "5"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("add --checkpoint-dir"),
            std::string::npos);
  c = resolve(baseManifest(), {"--steps", "0"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("--steps 0 trains nothing"),
            std::string::npos);
  // A manifest without checkpoint names (from an older dtc) cannot export.
  c = resolve(baseManifest(), {"--export", "out"});
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().message().find("names no parameter for a checkpoint"),
            std::string::npos);
  c = resolve(baseManifest(), {"--resume", "auto"});
  ASSERT_FALSE(bool(c));
  EXPECT_EQ(c.error().exitCode(), kExitUsage);
  EXPECT_NE(c.error().message().find("--resume auto looks in the checkpoint "
                                     "directory"),
            std::string::npos);
}

TEST(Options, UsageNamesTheProgramAndItsDefaults) {
  nlohmann::json j = baseManifest();
  j["train"]["checkpoint"] = {{"every", 100}, {"dir", "ck/tiny"}, {"keep", 2}};
  Manifest m = mustParse(j);
  std::string u = usageText("train-tiny", m);
  for (const char *s : {"usage: train-tiny [options]",
                        "Trains 'tiny'",
                        "--steps N",
                        "(default: 10 steps)",
                        "--epochs N",
                        "--data NAME=PATH",
                        "train: synthetic, seed 3",
                        "--seed N",
                        "(default: 1)",
                        "--log-dir DIR",
                        "--log-every N",
                        "--checkpoint-dir DIR",
                        "(default: ck/tiny)",
                        "--checkpoint-every N",
                        "(default: 100)",
                        "--checkpoint-keep K",
                        "(default: 2)",
                        "--resume auto|DIR",
                        "--threads N",
                        "--backend cpu|cuda",
                        "--eval-every N",
                        "--help",
                        "--version",
                        "--print-manifest",
                        "--init PATH",
                        "--export DIR",
                        "--export-shard-size SIZE",
                        "143 stopped by SIGTERM"})
    EXPECT_NE(u.find(s), std::string::npos) << s << "\n" << u;
}
