//===- tensorboard.cpp - TensorBoard event files --------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/tensorboard.h"

#include <boost/crc.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace dtrt {

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Protocol buffers' wire format, the few pieces an Event needs.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void key(std::string &out, int field, int wireType) {
  varint(out, uint64_t(field) << 3 | uint64_t(wireType));
}
template <typename T> void fixed(std::string &out, T v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v); // little-endian, as x86-64 is
  out.append(bytes, sizeof v);
}
void lengthDelimited(std::string &out, int field, const std::string &bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

/// Event{wall_time = 1 (double), step = 2 (int64), then `rest`}.
std::string event(int64_t step, const std::string &rest) {
  std::string e;
  key(e, 1, 1);
  fixed(e, now());
  if (step != 0) {
    key(e, 2, 0);
    varint(e, uint64_t(step));
  }
  return e + rest;
}

} // namespace

uint32_t maskedCrc32c(const std::string &bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

Expected<EventWriter> EventWriter::open(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error(fmt::format("cannot create the TensorBoard directory '{}': {}",
                             dir, ec.message()));
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  std::string path = fmt::format("{}/events.out.tfevents.{}.{}.{}.0", dir,
                                 int64_t(now()), host, int(getpid()));
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    return Error(fmt::format("cannot create the TensorBoard event file '{}': "
                             "{}",
                             path, std::strerror(errno)));
  EventWriter writer(file, path);
  std::string version;
  lengthDelimited(version, 3, "brain.Event:2");
  writer.record(event(0, version));
  return writer;
}

EventWriter::EventWriter(EventWriter &&other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)) {}

EventWriter::~EventWriter() {
  if (file_)
    std::fclose(file_);
}

void EventWriter::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  std::string summary;
  for (const auto &[tag, value] : values) {
    std::string v;
    lengthDelimited(v, 1, tag);
    key(v, 2, 5);
    fixed(v, float(value));
    lengthDelimited(summary, 1, v);
  }
  std::string rest;
  lengthDelimited(rest, 5, summary);
  record(event(step, rest));
}

void EventWriter::record(const std::string &bytes) {
  if (!file_)
    return;
  std::string length;
  fixed(length, uint64_t(bytes.size()));
  std::string framed = length;
  fixed(framed, maskedCrc32c(length));
  framed += bytes;
  fixed(framed, maskedCrc32c(bytes));
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size() ||
      std::fflush(file_) != 0) {
    // Training goes on without it.
    fmt::print(stderr, "warning: cannot write TensorBoard events to '{}' ({}); "
                       "training continues without them\n",
               path_, std::strerror(errno));
    std::fclose(file_);
    file_ = nullptr;
  }
}

} // namespace dtrt
