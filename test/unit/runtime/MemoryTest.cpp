//===- MemoryTest.cpp - Tests of the arena's fit in host memory -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// An arena larger than the memory limit is refused with a message naming the
// plan's size and the limit; one larger than what is free only warns; the
// host device hands out zeroed, page-aligned arenas of any size the kernel
// maps, without touching them.
//
//===----------------------------------------------------------------------===//

#include "dtrt/device.h"
#include "dtrt/memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>

using namespace dtrt;

namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

/// This process's resident memory (the second field of /proc/self/statm).
uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * uint64_t(sysconf(_SC_PAGE_SIZE));
}

TEST(Memory, ArenaAboveTheLimitIsRefused) {
  HostMemory m{4 * kGiB, "the cgroup's limit (memory.max)", 3 * kGiB};
  Status s = checkArenaFits(6 * kGiB, m, "prog");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(),
            "the memory plan needs an arena of 6.0 GiB on this rank, but the "
            "cgroup's limit (memory.max) is 4.0 GiB: it cannot run here. "
            "Lower micro_batch (activations grow with it), shard the model "
            "over more ranks (a parallel block), or run on a machine with "
            "more memory; dtc --report shows the plan");
}

TEST(Memory, ArenaAboveWhatIsFreeOnlyWarns) {
  HostMemory m{4 * kGiB, "this machine's memory", 1 * kGiB};
  testing::internal::CaptureStderr();
  EXPECT_TRUE(checkArenaFits(2 * kGiB, m, "prog"));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("prog: warning: the memory plan needs an arena of 2.0 "
                     "GiB but only 1.0 GiB of memory is available now"),
            std::string::npos)
      << err;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(checkArenaFits(kGiB / 2, m, "prog"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(Memory, ThisMachineHasALimit) {
  HostMemory m = queryHostMemory();
  EXPECT_GT(m.limit, uint64_t(0));
  EXPECT_FALSE(m.limitSource.empty());
  if (m.available)
    EXPECT_LE(*m.available, m.limit);
}

TEST(Memory, HostArenasAreZeroedAndNotTouchedUpFront) {
  Expected<std::unique_ptr<Device>> d = openDevice(Backend::Cpu, Launch{});
  ASSERT_TRUE(bool(d));
  // Half the machine (at most 8 GiB): mapped lazily, so resident memory
  // must not grow by the arena's size until it is written.
  const size_t bytes = size_t(std::min<uint64_t>(queryHostMemory().limit / 2,
                                                 8 * kGiB));
  uint64_t before = residentBytes();
  Expected<char *> p = (*d)->allocate(bytes, 64);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_LT(residentBytes() - before, bytes / 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 4096, 0u);
  EXPECT_EQ((*p)[0], 0);
  EXPECT_EQ((*p)[bytes - 1], 0);
  (*p)[bytes / 2] = 7;
  EXPECT_EQ((*p)[bytes / 2], 7);
  (*d)->release(*p);
}

} // namespace
