//===- OffloadTest.cpp - The optimizer's arena split between host and device ===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// offloadOptimizer's decorator over the host device, as a GPU run uses it
// over a CUDA device: copies routed by offset, writes to mirrored ranges
// kept on both sides, and dt_apply_step run over the host's mirror between
// the gradients' copy down and the parameters' copy up.
//
//===----------------------------------------------------------------------===//

#include "dtrt/offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <unistd.h>
#include <vector>

using namespace dtrt;

namespace {

// A 512-byte arena: [0, 128) the host's (the optimizer's state), the rest
// the device's; a parameter at [192, 256) and its gradient at [256, 320).
constexpr int64_t kHost = 128, kState = 0, kParam = 192, kGrad = 256;
constexpr size_t kArena = 512, kFloats = 16;

OffloadSplit split() {
  OffloadSplit s;
  s.hostBytes = kHost;
  s.mirrored = {{kParam, 64}, {kGrad, 64}};
  s.down = {{kGrad, 64}};
  s.up = {{kParam, 64}};
  return s;
}

std::unique_ptr<Device> hostDevice() {
  Expected<std::unique_ptr<Device>> d = openDevice(Backend::Cpu, Launch{});
  EXPECT_TRUE(bool(d));
  return std::move(*d);
}

/// What the update saw, and the arena it ran on.
std::array<float, kFloats> seenGrad, seenParam;
char *updatedArena = nullptr;

/// An update: state += 1, param -= grad, as the program's CPU entry point
/// runs over whichever arena it is given.
void update(char *arena) {
  updatedArena = arena;
  std::memcpy(seenGrad.data(), arena + kGrad, sizeof seenGrad);
  std::memcpy(seenParam.data(), arena + kParam, sizeof seenParam);
  auto *p = reinterpret_cast<float *>(arena + kParam);
  auto *g = reinterpret_cast<const float *>(arena + kGrad);
  for (size_t i = 0; i < kFloats; ++i)
    p[i] -= g[i];
  *reinterpret_cast<int64_t *>(arena + kState) += 1;
}

/// A backward pass on the device: writes the gradient in place.
void backward(char *arena) {
  auto *g = reinterpret_cast<float *>(arena + kGrad);
  for (size_t i = 0; i < kFloats; ++i)
    g[i] = float(i);
}

} // namespace

TEST(Offload, CopiesAreRoutedByOffsetAndSpanTheSplit) {
  std::unique_ptr<Device> d = offloadOptimizer(hostDevice(), split());
  EXPECT_FALSE(d->hostAddressable());
  EXPECT_NE(d->describe().find("the optimizer in host memory (128 B)"),
            std::string::npos)
      << d->describe();
  Expected<char *> base = d->allocate(kArena, 64);
  ASSERT_TRUE(bool(base)) << base.error().message();
  // One copy across the host's part and the device's, and back.
  std::array<unsigned char, 256> in, out{};
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<unsigned char>(i * 7 + 1);
  d->copyIn(*base + 64, in.data(), in.size());
  d->copyOut(out.data(), *base + 64, out.size());
  EXPECT_EQ(in, out);
  // The device's memory starts at the host's end: its first bytes are the
  // copy's from there.
  EXPECT_EQ(static_cast<unsigned char>((*base)[kHost]), in[kHost - 64]);
  d->release(*base);
}

TEST(Offload, TheUpdateRunsOnTheHostBetweenTheCopies) {
  std::unique_ptr<Device> d = offloadOptimizer(hostDevice(), split());
  Program cpu;
  cpu.gradStep = &backward;
  cpu.applyStep = &update;
  Expected<Program> p = d->programFor(cpu);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_EQ(p->gradStep, &backward); // the host device's own entry points
  ASSERT_NE(p->applyStep, &update);

  Expected<char *> base = d->allocate(kArena, 64);
  ASSERT_TRUE(bool(base));
  // The initial parameters are written through the device: both copies.
  std::array<float, kFloats> init;
  init.fill(100.0f);
  d->copyIn(*base + kParam, init.data(), sizeof init);

  p->gradStep(*base);
  p->applyStep(*base);
  // The update ran over the host's mirror and saw the device's gradient and
  // the parameters as written.
  EXPECT_NE(updatedArena, *base);
  for (size_t i = 0; i < kFloats; ++i) {
    EXPECT_EQ(seenGrad[i], float(i));
    EXPECT_EQ(seenParam[i], 100.0f);
  }
  // The parameters are back on the device; the state is the host's.
  std::array<float, kFloats> param;
  d->copyOut(param.data(), *base + kParam, sizeof param);
  for (size_t i = 0; i < kFloats; ++i)
    EXPECT_EQ(param[i], 100.0f - float(i)) << i;
  EXPECT_EQ(*reinterpret_cast<const float *>(*base + kParam + 4), 99.0f);
  int64_t state = 0;
  d->copyOut(&state, *base + kState, sizeof state);
  EXPECT_EQ(state, 1);
  p->gradStep(*base);
  p->applyStep(*base);
  d->copyOut(&state, *base + kState, sizeof state);
  EXPECT_EQ(state, 2);
  d->copyOut(param.data(), *base + kParam, sizeof param);
  EXPECT_EQ(param[3], 94.0f);
  d->release(*base);
}

TEST(Offload, AnArenaThatEndsInTheHostsPartIsRefused) {
  std::unique_ptr<Device> d = offloadOptimizer(hostDevice(), split());
  Expected<char *> base = d->allocate(kHost, 64);
  ASSERT_FALSE(bool(base));
  EXPECT_NE(base.error().message().find("ends before its device part"),
            std::string::npos)
      << base.error().message();
}

namespace {

/// A backward pass that accumulates, and an update that clears the
/// gradient for the next step's, as a program with micro-batches has them.
void accumulate(char *arena) {
  auto *g = reinterpret_cast<float *>(arena + kGrad);
  for (size_t i = 0; i < kFloats; ++i)
    g[i] += float(i);
}

void updateAndClear(char *arena) {
  update(arena);
  std::memset(arena + kGrad, 0, kFloats * sizeof(float));
}

} // namespace

TEST(Offload, WhatTheUpdateClearsTheDeviceClears) {
  // The gradient is read by the update and cleared, not copied back up.
  OffloadSplit s = split();
  s.zero = {{kGrad, 64}};
  std::unique_ptr<Device> d = offloadOptimizer(hostDevice(), s);
  Program cpu;
  cpu.gradStep = &accumulate;
  cpu.applyStep = &updateAndClear;
  Expected<Program> p = d->programFor(cpu);
  ASSERT_TRUE(bool(p));
  Expected<char *> base = d->allocate(kArena, 64);
  ASSERT_TRUE(bool(base));
  for (int step = 0; step < 2; ++step) {
    p->gradStep(*base);
    p->gradStep(*base); // two micro-batches
    p->applyStep(*base);
    // Each step saw its own two micro-batches' sum, not the last step's too.
    for (size_t i = 0; i < kFloats; ++i)
      EXPECT_EQ(seenGrad[i], 2.0f * float(i)) << step << " " << i;
    std::array<float, kFloats> grad;
    d->copyOut(grad.data(), *base + kGrad, sizeof grad);
    for (float g : grad)
      EXPECT_EQ(g, 0.0f);
  }
  // Zeros written through the device land on both sides of the split.
  std::array<unsigned char, 256> ones;
  ones.fill(1);
  d->copyIn(*base, ones.data(), ones.size());
  d->zero(*base + 64, 192);
  std::array<unsigned char, 256> back;
  d->copyOut(back.data(), *base, back.size());
  for (size_t i = 0; i < back.size(); ++i)
    EXPECT_EQ(back[i], i < 64 ? 1 : 0) << i;
  d->release(*base);
}

namespace {

/// The host device, recording what it is asked to pin, as a GPU pins.
class PinningDevice final : public Device {
public:
  explicit PinningDevice(std::vector<std::pair<size_t, size_t>> &pins)
      : host_(hostDevice()), pins_(pins) {}
  std::string describe() const override { return host_->describe(); }
  Backend backend() const override { return host_->backend(); }
  Expected<char *> allocate(size_t bytes, size_t align) override {
    return host_->allocate(bytes, align);
  }
  void release(char *memory) override { host_->release(memory); }
  void copyIn(char *dst, const void *src, size_t bytes) override {
    host_->copyIn(dst, src, bytes);
  }
  void copyOut(void *dst, const char *src, size_t bytes) override {
    host_->copyOut(dst, src, bytes);
  }
  bool pinHost(void *host, size_t bytes) override {
    pins_.push_back({reinterpret_cast<uintptr_t>(host), bytes});
    return true;
  }
  void unpinHost(void *host) override {
    pins_.erase(std::find_if(pins_.begin(), pins_.end(), [&](auto &p) {
      return p.first == reinterpret_cast<uintptr_t>(host);
    }));
  }

private:
  std::unique_ptr<Device> host_;
  std::vector<std::pair<size_t, size_t>> &pins_;
};

} // namespace

TEST(Offload, PinsEachMirroredRangeInWholePagesOnly) {
  // Two mirrored ranges a few pages apart, and two in one page: three
  // ranges pinned as two spans of whole pages, not the gap between them.
  size_t page = size_t(sysconf(_SC_PAGE_SIZE));
  OffloadSplit s;
  s.hostBytes = int64_t(page);
  s.mirrored = {{int64_t(page) + 64, 64},
                {int64_t(page) + 192, 64},
                {int64_t(5 * page) + 128, int64_t(page)}};
  std::vector<std::pair<size_t, size_t>> pins;
  std::unique_ptr<Device> d =
      offloadOptimizer(std::make_unique<PinningDevice>(pins), s);
  Expected<char *> base = d->allocate(8 * page, 64);
  ASSERT_TRUE(bool(base)) << base.error().message();
  ASSERT_EQ(pins.size(), 2u);
  EXPECT_EQ(pins[0].first % page, 0u);
  EXPECT_EQ(pins[0].second, page);
  EXPECT_EQ(pins[1].first - pins[0].first, 4 * page);
  EXPECT_EQ(pins[1].second, 2 * page);
  d->release(*base);
  EXPECT_TRUE(pins.empty());
}
