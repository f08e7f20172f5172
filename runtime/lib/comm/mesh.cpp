//===- mesh.cpp - Ranks, coordinates and groups of a device mesh ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/comm.h"

#include <algorithm>

#include <fmt/format.h>

#include <set>

namespace dtrt {

Expected<Mesh> Mesh::create(std::vector<std::string> names,
                            std::vector<int> sizes) {
  if (names.size() != sizes.size())
    return Error(fmt::format("a mesh needs one size per axis ({} names, {} "
                             "sizes)",
                             names.size(), sizes.size()));
  // Masks are 32 bits and the MPI engine keeps one communicator per subset.
  if (names.size() > 16)
    return Error(fmt::format("a mesh of {} axes is too many (at most 16)",
                             names.size()));
  std::set<std::string> seen;
  int64_t world = 1;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty())
      return Error(fmt::format("mesh axis {} has no name", i));
    if (!seen.insert(names[i]).second)
      return Error(fmt::format("mesh axis '{}' is named twice", names[i]));
    if (sizes[i] < 1)
      return Error(fmt::format("mesh axis '{}' has size {}; sizes are >= 1",
                               names[i], sizes[i]));
    world *= sizes[i];
    if (world > (int64_t(1) << 24))
      return Error("a mesh of more than 2^24 ranks is not supported");
  }
  Mesh mesh;
  mesh.names_ = std::move(names);
  mesh.sizes_ = std::move(sizes);
  return mesh;
}

int Mesh::worldSize() const {
  int world = 1;
  for (int size : sizes_)
    world *= size;
  return world;
}

std::vector<int> Mesh::coordinates(int rank) const {
  std::vector<int> coords(sizes_.size());
  for (size_t i = sizes_.size(); i-- > 0;) {
    coords[i] = rank % sizes_[i];
    rank /= sizes_[i];
  }
  return coords;
}

int Mesh::groupSize(AxisMask axes) const {
  int size = 1;
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (axes & (AxisMask(1) << i))
      size *= sizes_[i];
  return size;
}

/// The row-major index of `rank`'s coordinates over the axes in (`inside`)
/// or outside (`!inside`) the mask.
static int linearIndex(const Mesh &mesh, int rank, AxisMask axes,
                       bool inside) {
  std::vector<int> coords = mesh.coordinates(rank);
  int index = 0;
  for (size_t i = 0; i < mesh.axisCount(); ++i) {
    bool masked = axes & (AxisMask(1) << i);
    if (masked == inside)
      index = index * mesh.axisSize(i) + coords[i];
  }
  return index;
}

int Mesh::indexInGroup(int rank, AxisMask axes) const {
  return linearIndex(*this, rank, axes, /*inside=*/true);
}

int Mesh::groupColor(int rank, AxisMask axes) const {
  return linearIndex(*this, rank, axes, /*inside=*/false);
}

std::pair<int64_t, int64_t>
Mesh::shardRange(int rank, AxisMask axes, int64_t total, int64_t each) const {
  int64_t first = std::min(total, int64_t(indexInGroup(rank, axes)) * each);
  return {first, std::min(total, first + each)};
}

std::vector<int> Mesh::group(int rank, AxisMask axes) const {
  std::vector<int> members(groupSize(axes), -1);
  int color = groupColor(rank, axes);
  for (int r = 0, world = worldSize(); r < world; ++r)
    if (groupColor(r, axes) == color)
      members[indexInGroup(r, axes)] = r;
  return members;
}

std::string Mesh::describe() const {
  if (names_.empty())
    return "one rank";
  std::string out;
  for (size_t i = 0; i < names_.size(); ++i)
    out += fmt::format("{}{}={}", i ? ", " : "", names_[i], sizes_[i]);
  return out;
}

std::string Mesh::describeAxes(AxisMask axes) const {
  std::string out = "{";
  bool first = true;
  for (size_t i = 0; i < names_.size(); ++i)
    if (axes & (AxisMask(1) << i)) {
      out += fmt::format("{}{}", first ? "" : ", ", names_[i]);
      first = false;
    }
  return out + "}";
}

Communicator::~Communicator() = default;

Status Communicator::checkCall(const char *kind, int64_t count, DType type,
                               AxisMask axes, std::string_view what) const {
  if (dtypeSize(type) == 0)
    return Error(fmt::format("{} of '{}': unknown element type {}", kind, what,
                             static_cast<int32_t>(type)));
  if (count < 0)
    return Error(fmt::format("{} of '{}': negative element count {}", kind,
                             what, count));
  if (axes & ~mesh_.allAxes())
    return Error(fmt::format("{} of '{}': axis mask {:#x} names axes outside "
                             "the mesh ({})",
                             kind, what, axes, mesh_.describe()));
  return Status::ok();
}

Expected<Communicator::ExchangePeers>
Communicator::exchangePeers(int64_t sendCount, int sendStep, int64_t recvCount,
                            int recvStep, DType type, AxisMask axis,
                            std::string_view what) const {
  for (int64_t count : {sendCount, recvCount})
    if (Status s = checkCall("exchange", count, type, axis, what); !s)
      return s.error();
  if (axis == 0 || (axis & (axis - 1)) != 0)
    return Error(fmt::format("exchange of '{}': axis mask {:#x} is not one "
                             "axis",
                             what, axis));
  int index = mesh_.indexInGroup(rank_, axis);
  int size = int(mesh_.group(rank_, axis).size());
  ExchangePeers peers;
  for (auto [step, out] : {std::pair{sendStep, &peers.sendTo},
                           std::pair{recvStep, &peers.recvFrom}}) {
    if (step == 0)
      continue;
    int peer = index + step;
    if (peer < 0 || peer >= size)
      return Error(fmt::format("exchange of '{}': rank {} is at {} of {} "
                               "along {}, so a step of {} leaves the axis",
                               what, rank_, index, size,
                               mesh_.describeAxes(axis), step));
    *out = peer;
  }
  return peers;
}

Expected<int> Communicator::ringPeer(const char *kind, int64_t count,
                                     DType type, AxisMask axis, int step,
                                     int tag, std::string_view what) const {
  if (Status s = checkCall(kind, count, type, axis, what); !s)
    return s.error();
  if (axis == 0 || (axis & (axis - 1)) != 0)
    return Error(fmt::format("{} of '{}': axis mask {:#x} is not one axis",
                             kind, what, axis));
  if (tag < 0 || tag > 32767)
    return Error(fmt::format("{} of '{}': tag {} is outside 0..32767", kind,
                             what, tag));
  int index = mesh_.indexInGroup(rank_, axis);
  int size = int(mesh_.group(rank_, axis).size());
  return ((index + step) % size + size) % size;
}

} // namespace dtrt
