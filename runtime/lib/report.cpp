//===- report.cpp - Human-readable figures --------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// See dtrt/report.h.
//
//===----------------------------------------------------------------------===//

#include "dtrt/report.h"

#include <cmath>
#include <fmt/format.h>
#include <sys/resource.h>

namespace dtrt {

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "--";
  auto s = int64_t(std::llround(seconds));
  if (s >= 3600)
    return fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

std::string formatBytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes)
                : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string formatCount(double n) {
  if (!std::isfinite(n))
    return "--";
  if (n < 1000)
    return fmt::format("{:.0f}", n);
  static const char *units[] = {"k", "M", "G", "T"};
  int u = -1;
  while (n >= 1000 && u < 3) {
    n /= 1000;
    ++u;
  }
  return fmt::format("{:.{}f}{}", n, n < 10 ? 2 : n < 100 ? 1 : 0, units[u]);
}

double peakRssBytes() {
  struct rusage ru = {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0; // Linux reports KiB
}

} // namespace dtrt
