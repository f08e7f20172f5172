//===- LaunchTest.cpp - Tests of launch detection -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each launcher's variables map to a rank, a world, a node and a place to
// meet; malformed or inconsistent variables are refused with a message that
// names them.
//
//===----------------------------------------------------------------------===//

#include "dtrt/launch.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
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

bool mentions(const Error &e, const std::string &text) {
  return e.message().find(text) != std::string::npos;
}

} // namespace

TEST(Launch, StandaloneByDefault) {
  Expected<Launch> l = detectLaunch(fakeEnv({}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Standalone);
  EXPECT_EQ(l->rank, 0);
  EXPECT_EQ(l->worldSize, 1);
  EXPECT_TRUE(l->isLeader());
  EXPECT_EQ(l->describe(), "standalone, one rank");
}

TEST(Launch, MpiLaunchersOwnTheWorld) {
  Expected<Launch> l =
      detectLaunch(fakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "8"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "1"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::OpenMPI);
  EXPECT_TRUE(l->mpiWorld);
  EXPECT_EQ(l->rank, 3);
  EXPECT_EQ(l->worldSize, 8);
  EXPECT_EQ(l->localRank, 1);
  EXPECT_EQ(l->localWorldSize, 4);
  EXPECT_EQ(l->node, 0);
  EXPECT_EQ(l->nodes, 2);
  EXPECT_FALSE(l->isLeader());
  EXPECT_EQ(l->describe(), "rank 3 of 8 (local 1 of 4 on node 0 of 2), "
                           "started by mpirun (Open MPI)");
  EXPECT_EQ(l->describeMeeting(), "");
}

TEST(Launch, SlurmMeetsAtTheFirstNodeUnlessPmixStartedMpi) {
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "3"},        {"SLURM_STEP_NUM_TASKS", "4"},
      {"SLURM_LOCALID", "1"},       {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
      {"SLURM_NODEID", "1"},        {"SLURM_STEP_NUM_NODES", "2"},
      {"SLURM_JOB_ID", "4242"},     {"SLURM_STEP_NODELIST", "node[07-08]"}};
  Expected<Launch> l = detectLaunch(fakeEnv(env));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Slurm);
  EXPECT_FALSE(l->mpiWorld);
  EXPECT_EQ(l->rank, 3);
  EXPECT_EQ(l->localWorldSize, 2);
  EXPECT_EQ(l->node, 1);
  EXPECT_EQ(l->nodes, 2);
  EXPECT_EQ(l->masterAddr, "node07");
  EXPECT_EQ(l->masterPort, kDefaultMasterPort + 242); // job id mod 1000
  env["MASTER_PORT"] = "6000";
  env["PMIX_RANK"] = "3";
  l = detectLaunch(fakeEnv(env));
  ASSERT_TRUE(bool(l));
  EXPECT_TRUE(l->mpiWorld);
  EXPECT_EQ(l->masterPort, 6000);

  // A batch script (no srun step) is one process.
  l = detectLaunch(fakeEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Standalone);
}

TEST(Launch, TorchrunMeetsBesideItsAgentStore) {
  std::map<std::string, std::string> env = {
      {"RANK", "2"},          {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "0"},    {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},    {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", "29600"}, {"TORCHELASTIC_RUN_ID", "none"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  Expected<Launch> l = detectLaunch(fakeEnv(env));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Torchrun);
  EXPECT_FALSE(l->mpiWorld);
  EXPECT_EQ(l->node, 1);
  EXPECT_EQ(l->nodes, 2);
  EXPECT_EQ(l->masterAddr, "127.0.0.1");
  EXPECT_EQ(l->masterPort, 29601);
  EXPECT_EQ(l->describe(), "rank 2 of 4 (local 0 of 2 on node 1 of 2), "
                           "started by torchrun");
  EXPECT_EQ(l->describeMeeting(), "ranks meet at 127.0.0.1:29601");

  // Kubernetes operators set the same variables, without an agent store.
  l = detectLaunch(fakeEnv({{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "job-master-0"},
                            {"MASTER_PORT", "23456"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::EnvVars);
  EXPECT_EQ(l->masterPort, 23456);
  EXPECT_EQ(l->localWorldSize, 1); // a pod per rank
  EXPECT_EQ(l->node, 1);
  EXPECT_EQ(l->nodes, 2);

  // Without MASTER_ADDR nobody knows where to meet: the program says so
  // when it needs to (a one-rank program refuses the launch first).
  l = detectLaunch(fakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_TRUE(l->masterAddr.empty());
  EXPECT_EQ(l->masterPort, kDefaultMasterPort);
}

TEST(Launch, SageMakerFromVariablesOrResourceConfig) {
  Expected<Launch> l = detectLaunch(
      fakeEnv({{"SM_HOSTS", R"(["algo-1","algo-2"])"},
               {"SM_CURRENT_HOST", "algo-2"},
               {"LOCAL_RANK", "1"},
               {"LOCAL_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::SageMaker);
  EXPECT_EQ(l->rank, 3);
  EXPECT_EQ(l->worldSize, 4);
  EXPECT_EQ(l->node, 1);
  EXPECT_EQ(l->masterAddr, "algo-1");
  EXPECT_EQ(l->masterPort, kDefaultMasterPort);

  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("dt-launch-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "resourceconfig.json")
      << R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"],
             "network_interface_name": "eth0"})";
  l = detectLaunch(fakeEnv({{"SM_INPUT_CONFIG_DIR", dir.string()}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::SageMaker);
  EXPECT_EQ(l->rank, 0);
  EXPECT_EQ(l->worldSize, 2);

  std::ofstream(dir / "resourceconfig.json") << R"({"hosts": ["algo-1"]})";
  l = detectLaunch(fakeEnv({{"SM_INPUT_CONFIG_DIR", dir.string()}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "not SageMaker's resource configuration"));
  std::filesystem::remove_all(dir);

  l = detectLaunch(fakeEnv(
      {{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-9"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "algo-9, is not among the hosts"));
}

TEST(Launch, VertexFromClusterSpec) {
  const char *spec = R"({"cluster": {
      "workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
      "workerpool1": ["cmle-training-workerpool1-ab-0:2222",
                      "cmle-training-workerpool1-ab-1:2222"]},
    "environment": "cloud",
    "task": {"type": "workerpool1", "index": 1}})";
  Expected<Launch> l = detectLaunch(fakeEnv({{"CLUSTER_SPEC", spec}}));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->launcher, Launcher::Vertex);
  EXPECT_EQ(l->rank, 2);
  EXPECT_EQ(l->worldSize, 3);
  EXPECT_EQ(l->nodes, 3);
  EXPECT_EQ(l->masterAddr, "cmle-training-workerpool0-ab-0");
  EXPECT_EQ(l->masterPort, 2222);

  l = detectLaunch(fakeEnv(
      {{"CLUSTER_SPEC",
        R"({"cluster": {"workerpool0": ["a:1"]},
            "task": {"type": "workerpool3", "index": 0}})"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "names no worker pool"));
  l = detectLaunch(fakeEnv({{"CLUSTER_SPEC", "{"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "not a JSON object"));
}

TEST(Launch, RefusesMalformedVariables) {
  Expected<Launch> l =
      detectLaunch(fakeEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "RANK=4 is not a rank of a world of "
                                  "WORLD_SIZE=4"));
  l = detectLaunch(fakeEnv({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}));
  ASSERT_FALSE(bool(l));
  l = detectLaunch(fakeEnv({{"RANK", "0"},
                            {"WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "h"},
                            {"MASTER_PORT", "70000"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "MASTER_PORT=70000 is not a port"));
  l = detectLaunch(fakeEnv({{"SLURM_PROCID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "2"},
                            {"SLURM_STEP_NODELIST", "node[3-"}}));
  ASSERT_FALSE(bool(l));
  EXPECT_TRUE(mentions(l.error(), "cannot read the Slurm host list"));
}

TEST(Launch, ExpandsSlurmHostLists) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expandHostList("node[01-03,07],gpu5"),
            (V{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(expandHostList("127.0.0.[1-2]"), (V{"127.0.0.1", "127.0.0.2"}));
  EXPECT_EQ(expandHostList("a,b"), (V{"a", "b"}));
  EXPECT_EQ(expandHostList("n[9-10]"), (V{"n9", "n10"}));
  EXPECT_TRUE(expandHostList("n[3-1]").empty());
  EXPECT_TRUE(expandHostList("n[1-2]x").empty());
}
