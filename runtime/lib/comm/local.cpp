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

#include <deque>
#include <map>
#include <vector>

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
  // A pipeline of one rank sends to itself: messages wait in a queue per
  // tag until received.
  Status send(const void *src, int64_t count, DType type, AxisMask axis,
              int step, int tag, std::string_view what) override {
    if (Expected<int> peer = ringPeer("send", count, type, axis, step, tag,
                                      what);
        !peer)
      return peer.error();
    const char *bytes = static_cast<const char *>(src);
    pending_[tag].emplace_back(bytes, bytes + count * dtypeSize(type));
    return Status::ok();
  }
  Status receive(void *dst, int64_t count, DType type, AxisMask axis, int step,
                 int tag, std::string_view what) override {
    if (Expected<int> peer = ringPeer("receive", count, type, axis, step, tag,
                                      what);
        !peer)
      return peer.error();
    auto it = pending_.find(tag);
    size_t bytes = size_t(count) * dtypeSize(type);
    if (it == pending_.end() || it->second.empty() ||
        it->second.front().size() != bytes)
      return Error(fmt::format("receive of '{}': nothing of {} bytes was "
                               "sent with tag {} (a one-rank pipeline "
                               "receives only what it sent itself before)",
                               what, bytes, tag));
    std::memcpy(dst, it->second.front().data(), bytes);
    it->second.pop_front();
    return Status::ok();
  }
  Status finishSends(std::string_view) override { return Status::ok(); }
  Status barrier(std::string_view) override { return Status::ok(); }
  [[noreturn]] void abort(int exitCode) override { std::_Exit(exitCode); }

private:
  std::map<int, std::deque<std::vector<char>>> pending_;

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
