//===- launch.cpp - Detect how the program was started --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Launchers are tried from the most specific to the most generic variables:
// an mpirun inside a Slurm allocation sets both OMPI_* and SLURM_*, and the
// MPI variables describe the processes that will actually talk to each other;
// torchrun inside a SageMaker or Vertex job sets RANK per process, which says
// more than the platform's per-host variables.
//
// Ranks are numbered node-major (rank = node * ranks per node + local rank)
// by every launcher here, so the mesh's innermost axis, whose ranks are
// consecutive, stays inside a node when the node's rank count is a multiple
// of it.
//
//===----------------------------------------------------------------------===//

#include "dtrt/launch.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

namespace dtrt {

static const char *launcherName(Launcher l) {
  switch (l) {
  case Launcher::Standalone:
    return "standalone";
  case Launcher::OpenMPI:
    return "mpirun (Open MPI)";
  case Launcher::Pmi:
    return "a PMI launcher (MPICH/Hydra)";
  case Launcher::Slurm:
    return "Slurm (srun)";
  case Launcher::Torchrun:
    return "torchrun";
  case Launcher::EnvVars:
    return "RANK/WORLD_SIZE variables";
  case Launcher::SageMaker:
    return "SageMaker";
  case Launcher::Vertex:
    return "Vertex AI (CLUSTER_SPEC)";
  }
  return "?";
}

std::string Launch::describe() const {
  if (launcher == Launcher::Standalone && worldSize == 1)
    return "standalone, one rank";
  std::string where =
      nodes > 1 ? fmt::format(" on node {} of {}", node, nodes) : "";
  return fmt::format("rank {} of {} (local {} of {}{}), started by {}", rank,
                     worldSize, localRank, localWorldSize, where,
                     launcherName(launcher));
}

std::string Launch::describeMeeting() const {
  if (worldSize == 1 || mpiWorld)
    return "";
  return fmt::format("ranks meet at {}:{}", masterAddr, masterPort);
}

std::vector<std::string> expandHostList(const std::string &list) {
  // Commas inside brackets separate ranges, outside them hosts.
  std::vector<std::string> hosts;
  size_t i = 0;
  while (i < list.size()) {
    size_t open = list.find_first_of("[,", i);
    if (open == std::string::npos || list[open] == ',') {
      size_t end = open == std::string::npos ? list.size() : open;
      if (end > i)
        hosts.push_back(list.substr(i, end - i));
      i = end + 1;
      continue;
    }
    size_t close = list.find(']', open);
    if (close == std::string::npos)
      return {};
    std::string prefix = list.substr(i, open - i);
    std::stringstream ranges(list.substr(open + 1, close - open - 1));
    std::string range;
    while (std::getline(ranges, range, ',')) {
      size_t dash = range.find('-');
      std::string lo = range.substr(0, dash);
      std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      char *end = nullptr;
      long a = std::strtol(lo.c_str(), &end, 10);
      if (lo.empty() || *end)
        return {};
      long b = std::strtol(hi.c_str(), &end, 10);
      if (hi.empty() || *end || b < a || b - a > 100000)
        return {};
      // node[01-10] keeps the width of its lower bound: node01 ... node10.
      for (long n = a; n <= b; ++n)
        hosts.push_back(prefix + fmt::format("{:0{}}", n, lo.size()));
    }
    i = close + 1;
    if (i < list.size() && list[i] == ',')
      ++i;
    else if (i < list.size())
      return {}; // a suffix after a range ("n[1-2]x") is not supported
  }
  return hosts;
}

namespace {

Expected<int> readInt(const GetEnv &getEnv, const char *name, int fallback,
                      int max = 1 << 24) {
  const char *v = getEnv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  // Slurm writes SLURM_STEP_TASKS_PER_NODE as "4(x2)" on uneven allocations;
  // the leading number is this node's count.
  if (end == v || n < 0 || n > max)
    return Error(fmt::format("launcher variable {}={} is not {}", name, v,
                             max == 65535 ? "a port" : "a rank count"));
  return int(n);
}

/// Checks the numbers every launcher must agree on.
Status checkPlace(const Launch &l, const char *rankName,
                  const char *sizeName) {
  if (l.worldSize < 1 || l.rank >= l.worldSize)
    return Error(fmt::format("{}={} is not a rank of a world of {}={}",
                             rankName, l.rank, sizeName, l.worldSize));
  if (l.localWorldSize < 1 || l.localRank >= l.localWorldSize)
    return Error(fmt::format("the local rank {} is not below the local world "
                             "size {} ({} set them)",
                             l.localRank, l.localWorldSize,
                             launcherName(l.launcher)));
  return Status::ok();
}

/// Nodes from the local sizes, for launchers that do not name them.
void nodesFromLocalSizes(Launch &l) {
  int perNode = std::max(1, l.localWorldSize);
  l.node = l.rank / perNode;
  l.nodes = (l.worldSize + perNode - 1) / perNode;
}

/// The node and node count where the launcher names them (else what the
/// local sizes gave).
Status readNodes(const GetEnv &getEnv, Launch &l, const char *nodeName,
                 const char *nodesName) {
  Expected<int> node = readInt(getEnv, nodeName, l.node);
  Expected<int> nodes = readInt(getEnv, nodesName, l.nodes);
  if (!node)
    return node.error();
  if (!nodes)
    return nodes.error();
  l.node = *node;
  l.nodes = std::max(1, *nodes);
  return Status::ok();
}

/// MASTER_ADDR / MASTER_PORT, which override what a platform says.
Status readMaster(const GetEnv &getEnv, Launch &l, int defaultPort) {
  if (const char *addr = getEnv("MASTER_ADDR"); addr && *addr)
    l.masterAddr = addr;
  Expected<int> port = readInt(getEnv, "MASTER_PORT", defaultPort, 65535);
  if (!port)
    return port.error();
  l.masterPort = *port;
  return Status::ok();
}

/// The MPI launchers: the world is MPI's.
Expected<Launch> fromMpi(const GetEnv &getEnv, Launcher launcher,
                         const char *rank, const char *size,
                         const char *localRank, const char *localSize,
                         bool oneNodeByDefault = true) {
  Launch l;
  l.launcher = launcher;
  l.mpiWorld = true;
  struct Field {
    int *out;
    const char *name;
  };
  // Local values default to the global ones (one node), or to a node per
  // rank.
  for (Field f : {Field{&l.rank, rank}, Field{&l.worldSize, size},
                  Field{&l.localRank, localRank},
                  Field{&l.localWorldSize, localSize}}) {
    int fallback = f.out == &l.rank        ? 0
                   : f.out == &l.worldSize ? 1
                   : f.out == &l.localRank ? (oneNodeByDefault ? l.rank : 0)
                   : oneNodeByDefault      ? l.worldSize
                                           : 1;
    Expected<int> v = readInt(getEnv, f.name, fallback);
    if (!v)
      return v.error();
    *f.out = *v;
  }
  if (Status s = checkPlace(l, rank, size); !s)
    return s.error();
  nodesFromLocalSizes(l);
  return l;
}

Expected<Launch> fromSlurm(const GetEnv &getEnv) {
  Expected<Launch> l =
      fromMpi(getEnv, Launcher::Slurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
              "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE");
  if (!l)
    return l;
  // srun --mpi=pmix starts MPI programs directly: MPI_Init asks PMIx for the
  // world. Without it the tasks are plain processes and meet at the first
  // node.
  l->mpiWorld = getEnv("PMIX_RANK") != nullptr;
  if (Status s = readNodes(getEnv, *l, "SLURM_NODEID", "SLURM_STEP_NUM_NODES");
      !s)
    return s.error();
  for (const char *name :
       {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    const char *list = getEnv(name);
    if (!list || !*list)
      continue;
    std::vector<std::string> hosts = expandHostList(list);
    if (hosts.empty())
      return Error(fmt::format("cannot read the Slurm host list {}={}", name,
                               list));
    l->masterAddr = hosts.front();
    break;
  }
  // Jobs sharing a node get different ports unless told one.
  Expected<int> job = readInt(getEnv, "SLURM_JOB_ID", 0, 1 << 30);
  if (!job)
    return job.error();
  if (Status s = readMaster(getEnv, *l, kDefaultMasterPort + *job % 1000); !s)
    return s.error();
  return l;
}

Expected<Launch> fromEnvVars(const GetEnv &getEnv) {
  // torchrun always sets the local variables; without them (Kubernetes
  // operators start a pod per rank) each rank has its node.
  Expected<Launch> l =
      fromMpi(getEnv, Launcher::EnvVars, "RANK", "WORLD_SIZE", "LOCAL_RANK",
              "LOCAL_WORLD_SIZE", /*oneNodeByDefault=*/false);
  if (!l)
    return l;
  l->mpiWorld = false;
  if (getEnv("TORCHELASTIC_RUN_ID"))
    l->launcher = Launcher::Torchrun;
  if (Status s = readNodes(getEnv, *l, "GROUP_RANK", "GROUP_WORLD_SIZE"); !s)
    return s.error();
  if (Status s = readMaster(getEnv, *l, kDefaultMasterPort); !s)
    return s.error();
  // torchrun's agent serves its own key-value store on MASTER_PORT; the ranks
  // meet on the next port.
  if (const char *store = getEnv("TORCHELASTIC_USE_AGENT_STORE");
      store && std::string(store) == "True")
    l->masterPort += 1;
  return l;
}

/// SageMaker and Vertex start one process per host; an entry point that
/// starts several (one per GPU) numbers them with LOCAL_RANK and
/// LOCAL_WORLD_SIZE.
Expected<Launch> fromHosts(const GetEnv &getEnv, Launcher launcher,
                           int hostIndex, int hosts,
                           const std::string &master, int masterPort) {
  Launch l;
  l.launcher = launcher;
  Expected<int> perHost = readInt(getEnv, "LOCAL_WORLD_SIZE", 1);
  Expected<int> local = readInt(getEnv, "LOCAL_RANK", 0);
  if (!perHost)
    return perHost.error();
  if (!local)
    return local.error();
  l.localWorldSize = std::max(1, *perHost);
  l.localRank = *local;
  l.node = hostIndex;
  l.nodes = hosts;
  l.worldSize = hosts * l.localWorldSize;
  l.rank = hostIndex * l.localWorldSize + l.localRank;
  if (Status s = checkPlace(l, "rank", "world size"); !s)
    return s.error();
  l.masterAddr = master;
  if (Status s = readMaster(getEnv, l, masterPort); !s)
    return s.error();
  return l;
}

Expected<std::optional<Launch>> fromSageMaker(const GetEnv &getEnv) {
  // The training toolkit's variables, else the file SageMaker always writes.
  nlohmann::json hosts;
  std::string current;
  std::string source;
  if (const char *h = getEnv("SM_HOSTS"); h && getEnv("SM_CURRENT_HOST")) {
    hosts = nlohmann::json::parse(h, nullptr, false);
    current = getEnv("SM_CURRENT_HOST");
    source = "SM_HOSTS";
  } else {
    const char *dir = getEnv("SM_INPUT_CONFIG_DIR");
    std::string path = fmt::format(
        "{}/resourceconfig.json", dir && *dir ? dir : "/opt/ml/input/config");
    std::ifstream in(path);
    if (!in)
      return std::optional<Launch>();
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json config = nlohmann::json::parse(text.str(), nullptr, false);
    if (config.is_discarded() || !config.is_object() ||
        !config.contains("hosts") || !config.contains("current_host") ||
        !config["current_host"].is_string())
      return Error(fmt::format("{} is not SageMaker's resource configuration "
                               "(an object with hosts and current_host)",
                               path));
    hosts = config["hosts"];
    current = config["current_host"].get<std::string>();
    source = path;
  }
  if (hosts.is_discarded() || !hosts.is_array() || hosts.empty())
    return Error(fmt::format("{} does not list the job's hosts as a JSON "
                             "array of names",
                             source));
  int index = -1;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!hosts[i].is_string())
      return Error(fmt::format("{} lists a host that is not a name", source));
    if (hosts[i].get<std::string>() == current)
      index = int(i);
  }
  if (index < 0)
    return Error(fmt::format("this host, {}, is not among the hosts {} lists",
                             current, source));
  Expected<Launch> l =
      fromHosts(getEnv, Launcher::SageMaker, index, int(hosts.size()),
                hosts[0].get<std::string>(), kDefaultMasterPort);
  if (!l)
    return l.error();
  return std::optional<Launch>(*l);
}

Expected<std::optional<Launch>> fromVertex(const GetEnv &getEnv) {
  const char *text = getEnv("CLUSTER_SPEC");
  if (!text)
    return std::optional<Launch>();
  nlohmann::json spec = nlohmann::json::parse(text, nullptr, false);
  auto bad = [](const std::string &why) {
    return Error("CLUSTER_SPEC is not Vertex AI's cluster specification: " +
                 why);
  };
  if (spec.is_discarded() || !spec.is_object())
    return bad("it is not a JSON object");
  const nlohmann::json &cluster = spec.value("cluster", nlohmann::json());
  const nlohmann::json &task = spec.value("task", nlohmann::json());
  if (!cluster.is_object() || !task.is_object() ||
      !task.value("type", nlohmann::json()).is_string() ||
      !task.value("index", nlohmann::json()).is_number_integer())
    return bad("it needs cluster {...} and task {type, index}");
  std::string type = task["type"].get<std::string>();
  int index = task["index"].get<int>();
  // Worker pools in order; a job's machines are pool 0's, then pool 1's...
  int hosts = 0, hostIndex = -1;
  for (int pool = 0; pool < 4; ++pool) {
    std::string name = fmt::format("workerpool{}", pool);
    if (!cluster.contains(name))
      continue;
    const nlohmann::json &members = cluster[name];
    if (!members.is_array())
      return bad(name + " is not a list of host:port");
    if (name == type) {
      if (index < 0 || index >= int(members.size()))
        return bad(fmt::format("task {} #{} is not in the pool of {}", type,
                               index, members.size()));
      hostIndex = hosts + index;
    }
    hosts += int(members.size());
  }
  if (hostIndex < 0)
    return bad("task type " + type + " names no worker pool of the cluster");
  const nlohmann::json &pool0 = cluster.value("workerpool0", nlohmann::json());
  if (!pool0.is_array() || pool0.empty() || !pool0[0].is_string())
    return bad("workerpool0, where the master runs, is empty");
  std::string master = pool0[0].get<std::string>();
  int port = kDefaultMasterPort;
  if (size_t colon = master.rfind(':'); colon != std::string::npos) {
    port = std::atoi(master.c_str() + colon + 1);
    master.resize(colon);
    if (port <= 0 || port > 65535)
      return bad("the master's address " + pool0[0].get<std::string>() +
                 " has no port");
  }
  Expected<Launch> l =
      fromHosts(getEnv, Launcher::Vertex, hostIndex, hosts, master, port);
  if (!l)
    return l.error();
  return std::optional<Launch>(*l);
}

} // namespace

Expected<Launch> detectLaunch(const GetEnv &getEnvArg) {
  GetEnv getEnv =
      getEnvArg ? getEnvArg : [](const char *n) { return std::getenv(n); };
  auto has = [&](const char *a, const char *b) {
    return getEnv(a) && getEnv(b);
  };
  if (has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"))
    return fromMpi(getEnv, Launcher::OpenMPI, "OMPI_COMM_WORLD_RANK",
                   "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (has("PMI_RANK", "PMI_SIZE"))
    return fromMpi(getEnv, Launcher::Pmi, "PMI_RANK", "PMI_SIZE",
                   "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
  // The STEP variables are set by srun only: a batch script that runs the
  // program directly is one process, whatever the allocation's size.
  if (has("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"))
    return fromSlurm(getEnv);
  if (has("RANK", "WORLD_SIZE"))
    return fromEnvVars(getEnv);
  for (auto from : {fromSageMaker, fromVertex}) {
    Expected<std::optional<Launch>> l = from(getEnv);
    if (!l)
      return l.error();
    if (*l)
      return **l;
  }
  return Launch{};
}

} // namespace dtrt
