//===- LaunchTest.cpp - Tests of launch detection
//--------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each launcher's variables map to a rank and world; this build refuses
// worlds above one with a message that says who started it.
//
//===----------------------------------------------------------------------===//

#include "dtrt/launch.h"

#include <gtest/gtest.h>
#include <map>
#include <string>

using namespace dtrt;

namespace {

GetEnv fakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

} // namespace

TEST(Launch, StandaloneByDefault) {
  Expected<Launch> l = detectLaunch(fakeEnv({}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Standalone);
  EXPECT_EQ(l->rank, 0);
  EXPECT_EQ(l->worldSize, 1);
  EXPECT_TRUE(l->isLeader());
  EXPECT_TRUE(bool(checkLaunchSupported(*l)));
}

TEST(Launch, DetectsLaunchers) {
  Expected<Launch> l =
      detectLaunch(fakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "8"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "1"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::OpenMPI);
  EXPECT_EQ(l->rank, 3);
  EXPECT_EQ(l->worldSize, 8);
  EXPECT_EQ(l->localRank, 1);
  EXPECT_EQ(l->localWorldSize, 4);
  EXPECT_FALSE(l->isLeader());

  l = detectLaunch(fakeEnv({{"SLURM_PROCID", "1"},
                            {"SLURM_STEP_NUM_TASKS", "2"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x1)"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Slurm);
  EXPECT_EQ(l->localWorldSize, 2);

  // A batch script (no srun step) is one process.
  l = detectLaunch(fakeEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Standalone);

  l = detectLaunch(fakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::EnvVars);
  EXPECT_TRUE(bool(checkLaunchSupported(*l)));
}

TEST(Launch, RefusesMalformedAndMultiRank) {
  Expected<Launch> l =
      detectLaunch(fakeEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_NE(l.error().message().find("RANK=4 is not a rank of a world of "
                                     "WORLD_SIZE=4"),
            std::string::npos);
  l = detectLaunch(fakeEnv({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}));
  ASSERT_FALSE(bool(l));

  l = detectLaunch(fakeEnv({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(bool(l));
  Status s = checkLaunchSupported(*l);
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(s.error().exitCode(), kExitUsage);
  EXPECT_NE(s.error().message().find("rank 1 of 2"), std::string::npos);
  EXPECT_NE(s.error().message().find("trains on one rank only"),
            std::string::npos);
}
