//===- nccl.cpp - GPU collectives through NCCL ----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// NCCL is opened with dlopen, as cuBLAS is: an emitted program starts on a
// machine without it. Its communicators are non-blocking (config.blocking =
// 0): every call returns at once, ncclInProgress meaning "still starting",
// and the runtime polls ncclCommGetAsyncError with a deadline. That is what
// lets a rank whose peer died say so and end, rather than wait in NCCL
// forever (ncclCommAbort releases the kernels and the stream).
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/collectives.h"

#include "dtrt/cuda/library.h" // cudaFailure

#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace dtrt::cuda {

namespace {

using Clock = std::chrono::steady_clock;

/// The entry points used, by their exported names.
struct NcclApi {
  void *library = nullptr;
  ncclResult_t (*getVersion)(int *);
  ncclResult_t (*getUniqueId)(ncclUniqueId *);
  ncclResult_t (*commInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int,
                                     ncclConfig_t *);
  ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commFinalize)(ncclComm_t);
  ncclResult_t (*commDestroy)(ncclComm_t);
  const char *(*getErrorString)(ncclResult_t);
  const char *(*getLastError)(ncclComm_t);
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void *, void *, size_t, ncclDataType_t,
                                ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
};

template <typename F> bool bind(void *library, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

/// Opens libnccl.so.2: $DT_NCCL_LIBRARY when set, else the loader's path,
/// then the CUDA toolkit's folders.
Expected<NcclApi> loadNccl() {
  std::vector<std::string> candidates;
  // A library named is the one meant: no other stands in for it.
  if (const char *path = std::getenv("DT_NCCL_LIBRARY"); path && *path)
    candidates.push_back(path);
  else
    candidates.push_back("libnccl.so.2");
  if (candidates.front() == "libnccl.so.2") {
    if (const char *home = std::getenv("CUDA_HOME"))
      for (const char *dir : {"/lib64/", "/lib/"})
        candidates.push_back(std::string(home) + dir + "libnccl.so.2");
    for (const char *dir : {"/usr/local/cuda/lib64/", "/usr/local/cuda/lib/"})
      candidates.push_back(std::string(dir) + "libnccl.so.2");
  }
  NcclApi api;
  std::string tried;
  for (const std::string &path : candidates) {
    api.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library)
      break;
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (!api.library)
    return Error(fmt::format(
        "cannot load NCCL (libnccl.so.2), which collectives between GPUs "
        "need: install it (NVIDIA's libnccl2, or the nvidia-nccl-cu{} wheel) "
        "and put it on LD_LIBRARY_PATH or name it in DT_NCCL_LIBRARY; tried:{}",
        CUDART_VERSION / 1000, tried));
  void *l = api.library;
  if (!bind(l, "ncclGetVersion", api.getVersion) ||
      !bind(l, "ncclGetUniqueId", api.getUniqueId) ||
      !bind(l, "ncclCommInitRankConfig", api.commInitRankConfig) ||
      !bind(l, "ncclCommSplit", api.commSplit) ||
      !bind(l, "ncclCommGetAsyncError", api.commGetAsyncError) ||
      !bind(l, "ncclCommAbort", api.commAbort) ||
      !bind(l, "ncclCommFinalize", api.commFinalize) ||
      !bind(l, "ncclCommDestroy", api.commDestroy) ||
      !bind(l, "ncclGetErrorString", api.getErrorString) ||
      !bind(l, "ncclGetLastError", api.getLastError) ||
      !bind(l, "ncclAllReduce", api.allReduce) ||
      !bind(l, "ncclReduceScatter", api.reduceScatter) ||
      !bind(l, "ncclAllGather", api.allGather) ||
      !bind(l, "ncclSend", api.send) || !bind(l, "ncclRecv", api.recv) ||
      !bind(l, "ncclGroupStart", api.groupStart) ||
      !bind(l, "ncclGroupEnd", api.groupEnd)) {
    dlclose(l);
    // ncclCommSplit came with NCCL 2.18.
    return Error("the NCCL found lacks entry points dt uses (ncclCommSplit "
                 "and the non-blocking API): NCCL 2.18 or newer is needed");
  }
  return api;
}

std::optional<ncclDataType_t> ncclTypeOf(DType type) {
  switch (type) {
  case DType::F32:
    return ncclFloat32;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  }
  return std::nullopt;
}

class NcclCollectives final : public DeviceCollectives {
public:
  NcclCollectives(Communicator &host, NcclApi api,
                  std::chrono::milliseconds timeout)
      : DeviceCollectives(host), api_(api), timeout_(timeout) {}

  ~NcclCollectives() override {
    // A communicator that failed was aborted; the others end in order, but
    // never wait long for it: the program is ending.
    Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
    for (ncclComm_t c : owned_) {
      if (aborted_) {
        api_.commAbort(c);
        continue;
      }
      ncclResult_t r = api_.commFinalize(c);
      if (r == ncclInProgress)
        r = settle(c, deadline);
      if (r == ncclSuccess)
        api_.commDestroy(c);
      else
        api_.commAbort(c);
    }
  }

  /// Makes the world's communicator from rank 0's unique id, then one per
  /// set of axes (a split: NCCL orders its ranks by key, the rank's index
  /// in its group).
  Status start(std::vector<AxisMask> groups) {
    int version = 0;
    api_.getVersion(&version);
    version_ = fmt::format("NCCL {}.{}.{}", version / 10000,
                           version / 100 % 100, version % 100);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank() == 0)
      if (Status s =
              check(api_.getUniqueId(&id), nullptr, "drawing NCCL's unique id");
          !s)
        return s;
    // Rank 0's id to everyone: the host communicator gathers each rank's
    // (only rank 0's is drawn) and every rank takes the first.
    static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0);
    const int64_t words = sizeof(ncclUniqueId) / sizeof(int32_t);
    std::vector<int32_t> all(size_t(words) * size_t(host_.worldSize()));
    if (Status s = host_.allGather(&id, all.data(), words, DType::I32,
                                   mesh().allAxes(), "NCCL's unique id");
        !s)
      return s;
    std::memcpy(&id, all.data(), sizeof id);

    Clock::time_point deadline = Clock::now() + timeout_;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t world = nullptr;
    ncclResult_t r =
        api_.commInitRankConfig(&world, host_.worldSize(), id, rank(), &config);
    if (world)
      owned_.push_back(world);
    if (r == ncclInProgress)
      r = settle(world, deadline);
    if (Status s = check(r, world,
                         "starting NCCL's communicator over the "
                         "world");
        !s)
      return s;
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    for (AxisMask axes : groups) {
      axes &= mesh().allAxes();
      if (comms_.count(axes))
        continue;
      if (mesh().groupSize(axes) == host_.worldSize()) {
        comms_[axes] = world;
        continue;
      }
      ncclComm_t comm = nullptr;
      ncclConfig_t splitConfig = NCCL_CONFIG_INITIALIZER;
      splitConfig.blocking = 0;
      r = api_.commSplit(world, mesh().groupColor(rank(), axes),
                         mesh().indexInGroup(rank(), axes), &comm,
                         &splitConfig);
      if (comm)
        owned_.push_back(comm);
      if (r == ncclInProgress)
        r = settle(comm ? comm : world, deadline);
      if (Status s = check(r, comm,
                           fmt::format("splitting NCCL's "
                                       "communicator over {}",
                                       mesh().describeAxes(axes)));
          !s)
        return s;
      comms_[axes] = comm;
    }
    return Status::ok();
  }

  std::string engine() const override { return version_; }

  Status allReduceSum(const void *src, void *dst, int64_t count, DType type,
                      AxisMask axes, std::string_view what,
                      cudaStream_t stream) override {
    return issue("all-reduce", axes, type, what,
                 [&](ncclComm_t c, ncclDataType_t t) {
                   return api_.allReduce(src, dst, size_t(count), t, ncclSum, c,
                                         stream);
                 });
  }

  Status reduceScatterSum(const void *src, void *dst, int64_t count, DType type,
                          AxisMask axes, std::string_view what,
                          cudaStream_t stream) override {
    return issue("reduce-scatter", axes, type, what,
                 [&](ncclComm_t c, ncclDataType_t t) {
                   return api_.reduceScatter(src, dst, size_t(count), t,
                                             ncclSum, c, stream);
                 });
  }

  Status allGather(const void *src, void *dst, int64_t count, DType type,
                   AxisMask axes, std::string_view what,
                   cudaStream_t stream) override {
    return issue("all-gather", axes, type, what,
                 [&](ncclComm_t c, ncclDataType_t t) {
                   return api_.allGather(src, dst, size_t(count), t, c, stream);
                 });
  }

  /// Block j of src to the group's rank j, block j of dst from it: one
  /// send and one receive per peer in one NCCL group.
  Status allToAll(const void *src, void *dst, int64_t count, DType type,
                  AxisMask axes, std::string_view what,
                  cudaStream_t stream) override {
    int group = mesh().groupSize(axes & mesh().allAxes());
    size_t block = size_t(count) * dtypeSize(type);
    return issue(
        "all-to-all", axes, type, what, [&](ncclComm_t c, ncclDataType_t t) {
          ncclResult_t r = api_.groupStart();
          for (int j = 0;
               j < group && (r == ncclSuccess || r == ncclInProgress); ++j) {
            r = api_.send(static_cast<const char *>(src) + size_t(j) * block,
                          size_t(count), t, j, c, stream);
            if (r == ncclSuccess || r == ncclInProgress)
              r = api_.recv(static_cast<char *>(dst) + size_t(j) * block,
                            size_t(count), t, j, c, stream);
          }
          ncclResult_t end = api_.groupEnd();
          return r == ncclSuccess || r == ncclInProgress ? end : r;
        });
  }

  Status synchronize(cudaStream_t stream) override {
    Clock::time_point deadline = Clock::now() + timeout_;
    while (true) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e != cudaErrorNotReady && e != cudaSuccess)
        return cudaFailure("a GPU step failed", e);
      for (auto &[axes, comm] : comms_) {
        ncclResult_t state = ncclSuccess;
        api_.commGetAsyncError(comm, &state);
        if (state != ncclSuccess && state != ncclInProgress)
          return failed(fmt::format("NCCL failed in the collectives over {} "
                                    "(the last queued: {})",
                                    mesh().describeAxes(axes), last_),
                        state, comm);
      }
      if (e == cudaSuccess)
        return Status::ok();
      if (Clock::now() > deadline)
        return failed(
            fmt::format("a GPU step did not finish within {} s; its "
                        "collectives (the last queued: {}) wait for a rank "
                        "that died or stalled (--timeout sets the limit)",
                        timeout_.count() / 1000, last_),
            ncclSuccess, nullptr);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

private:
  /// Polls a communicator whose call returned ncclInProgress until it is
  /// done, or the deadline (then: ncclInProgress).
  ncclResult_t settle(ncclComm_t comm, Clock::time_point deadline) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      if (api_.commGetAsyncError(comm, &state) != ncclSuccess)
        return ncclInternalError;
      if (state == ncclInProgress) {
        if (Clock::now() > deadline)
          return ncclInProgress;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    return state;
  }

  /// An error for result `r` of `doing`, the communicators aborted.
  Status check(ncclResult_t r, ncclComm_t comm, const std::string &doing) {
    if (r == ncclSuccess)
      return Status::ok();
    if (r == ncclInProgress)
      return failed(fmt::format("{} did not finish within {} s: a rank did "
                                "not come or stalled",
                                doing, timeout_.count() / 1000),
                    ncclSuccess, nullptr);
    return failed(doing, r, comm);
  }

  /// Aborts every communicator (their kernels end, the stream drains) and
  /// says why, with NCCL's own words for `r`.
  Error failed(const std::string &why, ncclResult_t r, ncclComm_t comm) {
    std::string detail;
    if (r != ncclSuccess) {
      detail = fmt::format(": {}", api_.getErrorString(r));
      const char *last = api_.getLastError(comm);
      if (last && *last)
        detail += fmt::format(" ({})", last);
      if (detail.find("NCCL_DEBUG") == std::string::npos)
        detail += "; NCCL_DEBUG=WARN tells more";
    }
    if (!aborted_)
      for (ncclComm_t c : owned_)
        api_.commAbort(c);
    aborted_ = true;
    return Error(fmt::format("{}{}", why, detail));
  }

  template <typename Call>
  Status issue(const char *kind, AxisMask axes, DType type,
               std::string_view what, Call call) {
    if (aborted_)
      return Error("NCCL's communicators were aborted after a failure");
    auto comm = comms_.find(axes & mesh().allAxes());
    if (comm == comms_.end())
      return Error(fmt::format("internal error: a {} of '{}' over {}, a "
                               "group the GPU plan did not list",
                               kind, what, mesh().describeAxes(axes)));
    std::optional<ncclDataType_t> t = ncclTypeOf(type);
    if (!t)
      return Error(fmt::format("internal error: a {} of '{}' moves elements "
                               "NCCL has no type for",
                               kind, what));
    last_ = fmt::format("the {} of '{}' over {}", kind, what,
                        mesh().describeAxes(axes));
    ncclResult_t r = call(comm->second, *t);
    // A non-blocking communicator may still be enqueueing: wait for that
    // (not for the collective) before the next call.
    if (r == ncclInProgress)
      r = settle(comm->second, Clock::now() + timeout_);
    return check(r, comm->second, "queuing " + last_);
  }

  NcclApi api_;
  std::chrono::milliseconds timeout_;
  std::string version_;
  /// Each group's communicator (the world's may serve several masks).
  std::map<AxisMask, ncclComm_t> comms_;
  /// Every communicator made, for the end.
  std::vector<ncclComm_t> owned_;
  std::string last_ = "none";
  bool aborted_ = false;
};

} // namespace

Expected<std::unique_ptr<DeviceCollectives>>
openNcclCollectives(Communicator &host, std::vector<AxisMask> groups,
                    std::chrono::milliseconds timeout,
                    const std::string &obstacle, bool *unavailable) {
  Expected<NcclApi> api =
      obstacle.empty() ? loadNccl() : Expected<NcclApi>(Error(obstacle));
  // The ranks agree on whether NCCL is everywhere before any starts it:
  // one that could not would leave the others waiting for it.
  int32_t missing = api ? 0 : 1;
  if (Status s =
          host.allReduceSum(&missing, &missing, 1, DType::I32,
                            host.mesh().allAxes(), "whether NCCL loaded");
      !s)
    return s.error();
  if (missing > 0) {
    if (unavailable)
      *unavailable = true;
    if (!api)
      return api.error();
    return Error(fmt::format("NCCL did not load on {} of the {} ranks "
                             "(their messages say why)",
                             missing, host.worldSize()));
  }
  auto nccl = std::make_unique<NcclCollectives>(host, *api, timeout);
  if (Status s = nccl->start(std::move(groups)); !s)
    return s.error();
  return std::unique_ptr<DeviceCollectives>(std::move(nccl));
}

} // namespace dtrt::cuda
