//===- dtrt/file.h - Durable file writes ------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Checkpoints and the rewritten metrics file must survive a crash or power
// loss as either the old or the new version, never a torn one. The recipe is
// POSIX's: write into a temporary name, fsync the file, rename it into place,
// fsync the directory that holds it. These helpers do the error handling
// (short writes, EINTR) and turn errno into messages that name the path.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_FILE_H
#define DTRT_FILE_H

#include "dtrt/error.h"

#include <cstddef>
#include <string>
#include <utility>

namespace dtrt {

/// A file open for writing with its POSIX descriptor.
class OutputFile {
public:
  /// Creates (or truncates) `path`; with `append`, appends instead.
  static Expected<OutputFile> open(const std::string &path,
                                   bool append = false);

  OutputFile(OutputFile &&other) noexcept;
  OutputFile &operator=(OutputFile &&other) noexcept;
  OutputFile(const OutputFile &) = delete;
  ~OutputFile();

  /// Writes all of `bytes`.
  Status write(const void *data, size_t bytes);
  /// fsync.
  Status sync();
  /// Closes; reports a failed close (a delayed write error).
  Status close();
  const std::string &path() const { return path_; }

private:
  OutputFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// A whole file mapped into memory: read-only and private for reading
/// (safetensors weights, each rank touching only the pages of its slice),
/// shared and writable for writing in place (an export's files, which
/// several ranks fill).
class MappedFile {
public:
  static Expected<MappedFile> open(const std::string &path, bool writable);

  MappedFile() = default;
  MappedFile(MappedFile &&o) noexcept { *this = std::move(o); }
  MappedFile &operator=(MappedFile &&o) noexcept;
  MappedFile(const MappedFile &) = delete;
  ~MappedFile();

  char *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// Makes what was written through the mapping durable.
  Status sync();

private:
  char *data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  std::string path_;
};

/// Writes `content` to `path`, fsyncs and closes it.
Status writeFileSynced(const std::string &path, const std::string &content);

/// fsyncs a directory, making the renames and creations inside it durable.
Status syncDirectory(const std::string &path);

/// Renames `from` to `to` (atomically replacing a file, or a directory by
/// a new name) and fsyncs the parent directory of `to`.
Status renameSynced(const std::string &from, const std::string &to);

/// Reads a whole file.
Expected<std::string> readFile(const std::string &path);

} // namespace dtrt

#endif // DTRT_FILE_H
