//===- Deploy.cpp - what a deploy block asks for --------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "Deploy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <map>

namespace dt::package {

/// The deploy block for `platform`, or null.
const DeployConfig *findDeploy(const Job &job, Platform platform) {
  for (const DeployConfig &d : job.deploys)
    if (d.target == platformName(platform))
      return &d;
  return nullptr;
}

std::string str(const DeployConfig &d, llvm::StringRef key,
                llvm::StringRef fallback) {
  const Constant *c = d.get(key);
  return c ? c->getString().str() : fallback.str();
}
int64_t num(const DeployConfig &d, llvm::StringRef key, int64_t fallback) {
  const Constant *c = d.get(key);
  return c ? c->getInt() : fallback;
}
bool flag(const DeployConfig &d, llvm::StringRef key) {
  const Constant *c = d.get(key);
  return c && c->getBool();
}
std::optional<int64_t> seconds(const DeployConfig &d, llvm::StringRef key) {
  const Constant *c = d.get(key);
  if (!c)
    return std::nullopt;
  return c->isInt() ? std::optional<int64_t>(c->getInt())
                    : parseDuration(c->getString());
}
/// A record key's entries, in the order written.
std::vector<std::pair<std::string, std::string>>
record(const DeployConfig &d, llvm::StringRef key) {
  std::vector<std::pair<std::string, std::string>> out;
  if (const Constant *c = d.get(key))
    for (size_t i = 0; i < c->getItems().size(); ++i)
      out.push_back({c->getKeys()[i], c->getItems()[i].getString().str()});
  return out;
}

/// Hosts (instances, replicas) the request starts.
int64_t hostCount(const DeployConfig &d, Platform platform) {
  switch (platform) {
  case Platform::SageMaker:
    return num(d, "count", 1);
  case Platform::Vertex:
    return num(d, "replicas", 1);
  case Platform::Slurm:
    return num(d, "nodes", 1);
  }
  return 1;
}

/// The smaller host counts a restarted job can run on: the data-parallel
/// axis shrinks with the hosts, each rank keeps its micro-batch, and the
/// global batch stays (more micro-batches accumulate).
std::vector<int64_t> smallerHostCounts(const Job &job, int64_t hosts) {
  std::vector<int64_t> counts;
  const ParallelConfig &p = job.parallel;
  if (p.dataAxes.size() != 1 || p.pipeline)
    return counts;
  int64_t world = p.getWorldSize();
  int64_t dp = p.getDataParallelSize();
  int64_t others = world / dp;
  int64_t perHost = world / hosts;
  int64_t perRank = job.microBatch;
  for (int64_t h = hosts - 1; h >= 1; --h) {
    int64_t ranks = h * perHost;
    if (ranks % others != 0)
      continue;
    int64_t newDp = ranks / others;
    if (job.batch % (perRank * newDp) == 0)
      counts.push_back(h);
  }
  return counts;
}

std::vector<DataFile> dataFiles(const Job &job) {
  std::vector<DataFile> files;
  auto add = [&](const char *role, const DataSource &source) {
    for (const NamedConstant &arg : source.args)
      if ((arg.name == "path" || arg.name == "images" ||
           arg.name == "labels") &&
          arg.value.getKind() == Constant::Kind::String)
        files.push_back({role, arg.name, arg.value.getString().str()});
  };
  add("train", job.data);
  if (job.eval)
    add("eval", *job.eval);
  return files;
}

/// The SageMaker channel that holds `file`: the channel named after its role,
/// else the train channel when the file lies beside the train data.
std::optional<std::string> channelFor(const DataFile &file,
                                      const std::vector<DataFile> &files,
                                      const DeployConfig &d) {
  std::map<std::string, std::string> channels;
  for (auto &[name, uri] : record(d, "channels"))
    channels[name] = uri;
  if (channels.count(file.role))
    return file.role;
  if (!channels.count("train"))
    return std::nullopt;
  llvm::StringRef dir = llvm::sys::path::parent_path(file.path);
  for (const DataFile &f : files)
    if (f.role == "train" && llvm::sys::path::parent_path(f.path) == dir)
      return std::string("train");
  return std::nullopt;
}

std::string plural(int64_t n, llvm::StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

std::string shellQuote(llvm::StringRef text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// A name both platforms accept: letters, digits and '-', at most 63.
std::string jobName(const Job &job) {
  std::string name;
  for (char c : job.name)
    name += llvm::isAlnum(c) ? c : '-';
  return name.substr(0, 63);
}

} // namespace dt::package
