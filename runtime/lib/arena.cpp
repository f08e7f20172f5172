//===- arena.cpp - The arena and typed access to its buffers --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Buffers were checked to lie inside the arena when the manifest was parsed,
// so reads and writes here need no bounds checks of their own.
//
//===----------------------------------------------------------------------===//

#include "dtrt/arena.h"
#include "dtrt/checked.h"

#include <cassert>
#include <cstring>

namespace dtrt {

Expected<Arena> Arena::create(Device &device, const Manifest &manifest) {
  Expected<char *> memory =
      device.allocate(manifest.arenaBytes, manifest.arenaAlign);
  if (!memory)
    return memory.error();
  registerCheckedArena(*memory, manifest.arenaBytes);
  return Arena(device, manifest, *memory);
}

Arena::Arena(Arena &&other) noexcept
    : device_(other.device_), manifest_(other.manifest_), base_(other.base_) {
  other.base_ = nullptr;
}

Arena::~Arena() {
  if (base_)
    device_->release(base_);
}

void Arena::write(const BufferDesc &buffer, const void *src) {
  device_->copyIn(base_ + buffer.offset, src, buffer.bytes);
}

void Arena::read(const BufferDesc &buffer, void *dst) const {
  device_->copyOut(dst, base_ + buffer.offset, buffer.bytes);
}

void Arena::readPart(const BufferDesc &buffer, size_t from, size_t bytes,
                     void *dst) const {
  assert(from <= buffer.bytes && bytes <= buffer.bytes - from);
  device_->copyOut(dst, base_ + buffer.offset + from, bytes);
}

void Arena::writePart(const BufferDesc &buffer, size_t from, size_t bytes,
                      const void *src) {
  assert(from <= buffer.bytes && bytes <= buffer.bytes - from);
  device_->copyIn(base_ + buffer.offset + from, src, bytes);
}

double Arena::readScalar(const BufferDesc &buffer) const {
  assert(buffer.elements == 1 && "not a scalar");
  switch (buffer.dtype) {
  case DType::F32: {
    float v;
    device_->copyOut(&v, base_ + buffer.offset, sizeof v);
    return v;
  }
  case DType::I32: {
    int32_t v;
    device_->copyOut(&v, base_ + buffer.offset, sizeof v);
    return v;
  }
  case DType::I64:
    return double(readI64(buffer));
  default:
    assert(false && "scalar outputs are f32, i32 or i64");
    return 0.0;
  }
}

int64_t Arena::readI64(const BufferDesc &buffer) const {
  assert(buffer.dtype == DType::I64 && buffer.elements == 1);
  int64_t v;
  device_->copyOut(&v, base_ + buffer.offset, sizeof v);
  return v;
}

void Arena::writeI64(const BufferDesc &buffer, int64_t value) {
  assert(buffer.dtype == DType::I64 && buffer.elements == 1);
  device_->copyIn(base_ + buffer.offset, &value, sizeof value);
}

} // namespace dtrt
