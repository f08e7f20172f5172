//===- checked.cpp - Run-time checks of a checked program -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The checks compare what the generated machine code passes with what the
// compiler planned; they are cheap (a few comparisons per kernel call). The
// guards give AddressSanitizer something to catch inside one arena: a kernel
// that writes past its output lands in a neighbouring buffer, which is valid
// memory to ASan, so for the length of each kernel call the bytes on either
// side of the call's spans are poisoned (up to kGuardBytes, never inside
// another span of the same call). Entry points run on one thread at a time,
// so one set of spans suffices.
//
//===----------------------------------------------------------------------===//

#include "dtrt/checked.h"
#include "dtrt/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTRT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DTRT_ASAN 1
#endif
#ifdef DTRT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

const char *arenaBase = nullptr;
int64_t arenaBytes = 0;
/// The kernel spans checked since the last guard_end, as arena offsets
/// [lo, hi): the operands of the kernel call about to run.
std::vector<std::pair<int64_t, int64_t>> spans;
/// What guard_begin poisoned.
std::vector<std::pair<int64_t, int64_t>> poisoned;

[[noreturn]] void miscompile(const char *site, const char *what, int64_t lo,
                             int64_t hi, int64_t bufferOffset,
                             int64_t bufferBytes) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "internal error: checked program: %s %s bytes [%lld, %lld) of "
               "the arena, outside its planned buffer [%lld, %lld) (arena: "
               "%lld bytes); this is a bug in dtc, please report it with the "
               "program\n",
               site, what, (long long)lo, (long long)hi,
               (long long)bufferOffset, (long long)(bufferOffset + bufferBytes),
               (long long)arenaBytes);
#ifdef DTRT_ASAN
  __sanitizer_print_stack_trace();
#endif
  std::fflush(stderr);
  std::_Exit(dtrt::kExitFault);
}

} // namespace

bool dtrt::isCheckedBuild() {
#ifdef DTRT_CHECKED
  return true;
#else
  return false;
#endif
}

void dtrt::registerCheckedArena(const char *base, size_t bytes) {
  arenaBase = base;
  arenaBytes = int64_t(bytes);
}

/// Stops the program unless [p, p + bytes) lies in its buffer; returns the
/// span as arena offsets.
static std::pair<int64_t, int64_t> check(const char *site, const char *base,
                                         const char *p, int64_t bytes,
                                         int64_t bufferOffset,
                                         int64_t bufferBytes) {
  if (base != arenaBase) {
    std::fprintf(stderr,
                 "internal error: checked program: %s runs on an arena at %p, "
                 "not the program's (%p); this is a bug in dtc or libdtrt\n",
                 site, static_cast<const void *>(base),
                 static_cast<const void *>(arenaBase));
    std::_Exit(dtrt::kExitFault);
  }
  // Offsets, not pointers: an address far outside the arena must not wrap.
  int64_t lo = int64_t(reinterpret_cast<uintptr_t>(p) -
                       reinterpret_cast<uintptr_t>(base));
  int64_t hi = lo + bytes;
  bool bufferInArena = bufferOffset >= 0 && bufferBytes >= 0 &&
                       bufferOffset <= arenaBytes &&
                       bufferBytes <= arenaBytes - bufferOffset;
  bool inBuffer = bytes >= 0 && lo >= bufferOffset &&
                  lo <= bufferOffset + bufferBytes &&
                  bytes <= bufferOffset + bufferBytes - lo;
  if (!bufferInArena || !inBuffer)
    miscompile(site, "touches", lo, hi, bufferOffset, bufferBytes);
  return {lo, hi};
}

extern "C" void dtrt_check_span(const char *site, const char *base,
                                const char *p, int64_t bytes,
                                int64_t bufferOffset, int64_t bufferBytes) {
  spans.push_back(check(site, base, p, bytes, bufferOffset, bufferBytes));
}

extern "C" void dtrt_check_view(const char *site, const char *base,
                                const char *p, int64_t bytes,
                                int64_t bufferOffset, int64_t bufferBytes) {
  check(site, base, p, bytes, bufferOffset, bufferBytes);
}

extern "C" void dtrt_guard_begin(void) {
#ifdef DTRT_ASAN
  constexpr int64_t kGuardBytes = 4096;
  // The gaps around each span, clipped to the arena and to the other spans.
  std::vector<std::pair<int64_t, int64_t>> gaps;
  for (auto [lo, hi] : spans) {
    gaps.push_back({std::max<int64_t>(0, lo - kGuardBytes), lo});
    gaps.push_back({hi, std::min<int64_t>(arenaBytes, hi + kGuardBytes)});
  }
  for (auto [lo, hi] : gaps) {
    for (auto [slo, shi] : spans) {
      if (shi <= lo || slo >= hi)
        continue;
      // Keep the part of the gap on the far side from the span it overlaps.
      if (slo <= lo)
        lo = std::max(lo, shi);
      else
        hi = std::min(hi, slo);
    }
    // ASan poisons whole 8-byte granules: shrink to those inside the gap.
    lo = (lo + 7) / 8 * 8;
    hi = hi / 8 * 8;
    if (lo < hi) {
      ASAN_POISON_MEMORY_REGION(arenaBase + lo, size_t(hi - lo));
      poisoned.push_back({lo, hi});
    }
  }
#endif
}

extern "C" void dtrt_guard_end(void) {
#ifdef DTRT_ASAN
  for (auto [lo, hi] : poisoned)
    ASAN_UNPOISON_MEMORY_REGION(arenaBase + lo, size_t(hi - lo));
  poisoned.clear();
#endif
  spans.clear();
}
