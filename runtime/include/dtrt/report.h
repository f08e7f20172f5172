//===- dtrt/report.h - Human-readable figures -------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Small formatting helpers shared by the start banner, the progress lines
// and the final summary, so that every line spells durations, sizes and
// rates the same way.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_REPORT_H
#define DTRT_REPORT_H

#include <cstdint>
#include <string>

namespace dtrt {

/// "0:42", "12:03", "1:02:03" (h:mm:ss); "--" for a negative or non-finite
/// duration.
std::string formatDuration(double seconds);

/// "512 B", "3.4 KiB", "2.1 MiB", "1.5 GiB".
std::string formatBytes(double bytes);

/// "950", "12.3k", "4.56M": three significant digits for rates and counts.
std::string formatCount(double n);

/// The process's peak resident set size in bytes (getrusage).
double peakRssBytes();

} // namespace dtrt

#endif // DTRT_REPORT_H
