//===- MetricsTest.cpp - Tests of metrics.jsonl ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A fresh run starts the file empty; a resumed run keeps exactly the records
// up to the checkpoint's step (dropping those a killed run wrote after it and
// a torn last line) and appends after them.
//
//===----------------------------------------------------------------------===//

#include "dtrt/metrics.h"

#include "TestUtil.h"

using namespace dtrt;
using namespace dtrt::test;

TEST(Metrics, FreshRunStartsEmptyAndAppends) {
  TempDir dir;
  writeBytes(dir / "metrics.jsonl", "{\"step\": 1}\n");
  Expected<MetricsLog> log = MetricsLog::open(dir.path(), std::nullopt);
  ASSERT_TRUE(bool(log)) << log.error().message();
  nlohmann::ordered_json r = {{"step", 2}, {"loss", 0.5}};
  ASSERT_TRUE(bool(log->write(r)));
  ASSERT_TRUE(bool(log->sync()));
  EXPECT_EQ(readBytes(dir / "metrics.jsonl"), "{\"step\":2,\"loss\":0.5}\n");
}

TEST(Metrics, ResumeDropsRecordsAfterTheCheckpoint) {
  TempDir dir;
  writeBytes(dir / "metrics.jsonl", "{\"step\":10,\"loss\":1.0}\n"
                                    "{\"step\":20,\"loss\":0.8}\n"
                                    "{\"step\":20,\"eval_loss\":0.9}\n"
                                    "{\"step\":30,\"loss\":0.7}\n"
                                    "{\"step\":40,\"lo");
  Expected<MetricsLog> log = MetricsLog::open(dir / "", int64_t(20));
  ASSERT_TRUE(bool(log)) << log.error().message();
  ASSERT_TRUE(bool(log->write({{"step", 30}, {"loss", 0.75}})));
  EXPECT_EQ(readBytes(dir / "metrics.jsonl"),
            "{\"step\":10,\"loss\":1.0}\n"
            "{\"step\":20,\"loss\":0.8}\n"
            "{\"step\":20,\"eval_loss\":0.9}\n"
            "{\"step\":30,\"loss\":0.75}\n");
}

TEST(Metrics, CreatesTheDirectory) {
  TempDir dir;
  Expected<MetricsLog> log = MetricsLog::open(dir / "a/b", int64_t(5));
  ASSERT_TRUE(bool(log)) << log.error().message();
  EXPECT_EQ(log->path(), dir / "a/b/metrics.jsonl");
}
