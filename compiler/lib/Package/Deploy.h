//===- Deploy.h - what a deploy block asks for ------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The package's pieces (Package.cpp, EntryPoint.cpp, Requests.cpp) read the
// deploy block and the job through these.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_PACKAGE_DEPLOY_H
#define DT_LIB_PACKAGE_DEPLOY_H

#include "dt/Package/Package.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dt::package {

/// The official CUDA runtime image the package builds on: the toolkit dt's
/// GPU kernels are built with, on an Ubuntu whose Open MPI, OpenBLAS and fmt
/// have the sonames the program links (libmpi.so.40, libopenblas.so.0,
/// libfmt.so.9).
inline constexpr const char *kBaseImage =
    "nvidia/cuda:13.0.0-runtime-ubuntu24.04";

/// The deploy block for `platform`, or null.
const DeployConfig *findDeploy(const Job &job, Platform platform);

/// A key's value, or `fallback` when the block does not give it.
std::string str(const DeployConfig &d, llvm::StringRef key,
                llvm::StringRef fallback = "");
int64_t num(const DeployConfig &d, llvm::StringRef key, int64_t fallback);
bool flag(const DeployConfig &d, llvm::StringRef key);
/// A duration key in seconds.
std::optional<int64_t> seconds(const DeployConfig &d, llvm::StringRef key);
/// A record key's entries, in the order written.
std::vector<std::pair<std::string, std::string>>
record(const DeployConfig &d, llvm::StringRef key);

/// Hosts (instances, replicas) the request starts.
int64_t hostCount(const DeployConfig &d, Platform platform);
/// The smaller host counts a restarted job can run on: the data-parallel
/// axis shrinks with the hosts, each rank keeps its micro-batch, and the
/// global batch stays (more micro-batches accumulate).
std::vector<int64_t> smallerHostCounts(const Job &job, int64_t hosts);

/// One file a data source reads: its role (train, eval), the option key
/// (path, images, labels) and the path the program was compiled with.
struct DataFile {
  std::string role, key, path;
};
std::vector<DataFile> dataFiles(const Job &job);
/// The SageMaker channel that holds `file`: the channel named after its role,
/// else the train channel when the file lies beside the train data.
std::optional<std::string> channelFor(const DataFile &file,
                                      const std::vector<DataFile> &files,
                                      const DeployConfig &d);

/// "1 host", "2 hosts".
std::string plural(int64_t n, llvm::StringRef noun);
/// `text` as one bash word.
std::string shellQuote(llvm::StringRef text);
/// A name both platforms accept: letters, digits and '-', at most 63.
std::string jobName(const Job &job);

/// entrypoint.sh and the Dockerfile (EntryPoint.cpp).
std::string entryPoint(const Job &job, Platform platform,
                       const DeployConfig &d, llvm::StringRef program);
std::string dockerfile(const Job &job, Platform platform,
                       llvm::StringRef program);

/// The batch script and README of a Slurm package (Slurm.cpp).
std::string sbatchScript(const Job &job, const DeployConfig &d,
                         llvm::StringRef packageDir, llvm::StringRef program);
std::string slurmReadme(const Job &job, const DeployConfig &d,
                        llvm::StringRef program);

/// The job requests (Requests.cpp).
llvm::json::Value sageMakerRequest(const Job &job, const DeployConfig &d);
/// Vertex's CustomJobSpec: pool 0 is the master's machine, pool 1 the rest.
llvm::json::Value vertexJobSpec(const DeployConfig &d);
/// `value` as indented JSON text.
std::string jsonText(llvm::json::Value value);

} // namespace dt::package

#endif // DT_LIB_PACKAGE_DEPLOY_H
