//===- local.cpp - The communicator of a world of one rank ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every group has one member, so a sum is the operand and a gather is a copy.
//
//===----------------------------------------------------------------------===//

#include "dtrt/comm.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace dtrt {
namespace {

class LocalCommunicator final : public Communicator {
public:
  explicit LocalCommunicator(Mesh mesh) : Communicator(std::move(mesh), 0) {}

  std::string engine() const override { return "one rank"; }

  Status allReduceSum(const void *src, void *dst, int64_t count, DType type,
                      AxisMask axes, std::string_view what) override {
    return copy("all-reduce", src, dst, count, type, axes, what);
  }
  Status reduceScatterSum(const void *src, void *dst, int64_t count,
                          DType type, AxisMask axes,
                          std::string_view what) override {
    return copy("reduce-scatter", src, dst, count, type, axes, what);
  }
  Status allGather(const void *src, void *dst, int64_t count, DType type,
                   AxisMask axes, std::string_view what) override {
    return copy("all-gather", src, dst, count, type, axes, what);
  }
  Status allToAll(const void *src, void *dst, int64_t count, DType type,
                  AxisMask axes, std::string_view what) override {
    return copy("all-to-all", src, dst, count, type, axes, what);
  }
  Status exchange(const void *, int64_t sendCount, int sendStep, void *,
                  int64_t recvCount, int recvStep, DType type, AxisMask axis,
                  std::string_view what) override {
    // Every axis of one rank has size 1: only steps of 0 stay on it.
    return exchangePeers(sendCount, sendStep, recvCount, recvStep, type, axis,
                         what)
        .status();
  }
  Status barrier(std::string_view) override { return Status::ok(); }
  [[noreturn]] void abort(int exitCode) override { std::_Exit(exitCode); }

private:
  Status copy(const char *kind, const void *src, void *dst, int64_t count,
              DType type, AxisMask axes, std::string_view what) {
    if (Status s = checkCall(kind, count, type, axes, what); !s)
      return s;
    if (src != dst)
      std::memmove(dst, src, size_t(count) * dtypeSize(type));
    return Status::ok();
  }
};

} // namespace

Expected<std::unique_ptr<Communicator>> makeLocalCommunicator(Mesh mesh) {
  if (mesh.worldSize() != 1)
    return Error(fmt::format("a mesh of {} ranks ({}) needs a communicator "
                             "between processes, not the one-rank one",
                             mesh.worldSize(), mesh.describe()));
  return std::unique_ptr<Communicator>(new LocalCommunicator(std::move(mesh)));
}

} // namespace dtrt
