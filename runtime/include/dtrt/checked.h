//===- dtrt/checked.h - Run-time checks of a checked program ----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc --checked` programs call these before every kernel call and for every
// view of the arena their loops use (compiler/lib/Conversion/ArenaSafety/
// CheckArena.cpp); they link the runtime built with AddressSanitizer and
// UBSan (libdtrt-checked.a). A span outside its planned buffer or the arena
// stops the program with the site's name: it is a miscompile, and nothing
// the program computes after it can be trusted.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CHECKED_H
#define DTRT_CHECKED_H

#include <cstddef>
#include <cstdint>

namespace dtrt {

/// Whether this runtime is the checked build (sanitizers, plan checks).
bool isCheckedBuild();

/// Makes [base, base + bytes) the arena spans are checked against (Arena
/// calls it; the last arena created wins, as a rank has one).
void registerCheckedArena(const char *base, size_t bytes);

} // namespace dtrt

extern "C" {
/// Stops the program unless [p, p + bytes) lies inside the planned buffer
/// [base + bufferOffset, + bufferBytes), which must lie inside the arena that
/// starts at `base`. `site` names the kernel and its source location. The
/// span is one operand of the kernel call that the next guards bracket.
void dtrt_check_span(const char *site, const char *base, const char *p,
                     int64_t bytes, int64_t bufferOffset, int64_t bufferBytes);
/// The same check for a view of the arena that loops use (no guards).
void dtrt_check_view(const char *site, const char *base, const char *p,
                     int64_t bytes, int64_t bufferOffset, int64_t bufferBytes);
/// Brackets a kernel call whose spans were just checked: under
/// AddressSanitizer the bytes around those spans (and not in any of them) are
/// poisoned for the call.
void dtrt_guard_begin(void);
void dtrt_guard_end(void);
}

#endif // DTRT_CHECKED_H
