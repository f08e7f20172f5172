//===- file.cpp - Durable file writes -------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Thin wrappers over open/write/fsync/rename that keep going on EINTR and
// short writes and report errno with the path.
//
//===----------------------------------------------------------------------===//

#include "dtrt/file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dtrt {

static Error errnoError(const char *what, const std::string &path) {
  return Error(
      fmt::format("cannot {} '{}': {}", what, path, std::strerror(errno)));
}

Expected<OutputFile> OutputFile::open(const std::string &path, bool append) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  int fd;
  do
    fd = ::open(path.c_str(), flags, 0644);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return errnoError("create", path);
  return OutputFile(fd, path);
}

OutputFile::OutputFile(OutputFile &&other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

OutputFile &OutputFile::operator=(OutputFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status OutputFile::write(const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errnoError("write", path_);
    }
    p += n;
    bytes -= size_t(n);
  }
  return Status::ok();
}

Status OutputFile::sync() {
  if (::fsync(fd_) != 0)
    return errnoError("sync", path_);
  return Status::ok();
}

Status OutputFile::close() {
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    return errnoError("close", path_);
  return Status::ok();
}

Status writeFileSynced(const std::string &path, const std::string &content) {
  Expected<OutputFile> f = OutputFile::open(path);
  if (!f)
    return f.error();
  if (Status s = f->write(content.data(), content.size()); !s)
    return s;
  if (Status s = f->sync(); !s)
    return s;
  return f->close();
}

Status syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errnoError("open directory", path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0)
    return errnoError("sync directory", path);
  return Status::ok();
}

Status renameSynced(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return Error(fmt::format("cannot rename '{}' to '{}': {}", from, to,
                             std::strerror(errno)));
  std::string parent = std::filesystem::path(to).parent_path().string();
  return syncDirectory(parent.empty() ? "." : parent);
}

Expected<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(
        fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return Error(fmt::format("cannot read '{}'", path));
  return ss.str();
}

Expected<MappedFile> MappedFile::open(const std::string &path,
                                      bool writable) {
  int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0)
    return errnoError("open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Error e = errnoError("stat", path);
    ::close(fd);
    return e;
  }
  MappedFile m;
  m.fd_ = fd;
  m.size_ = size_t(st.st_size);
  m.path_ = path;
  if (m.size_ == 0)
    return m;
  void *p = ::mmap(nullptr, m.size_,
                   writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED)
    return errnoError("map", path);
  m.data_ = static_cast<char *>(p);
  return m;
}

MappedFile &MappedFile::operator=(MappedFile &&o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  std::swap(fd_, o.fd_);
  std::swap(path_, o.path_);
  return *this;
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(data_, size_);
  if (fd_ >= 0)
    ::close(fd_);
}

Status MappedFile::sync() {
  if (data_ && ::msync(data_, size_, MS_SYNC) != 0)
    return errnoError("write", path_);
  if (fd_ >= 0 && ::fsync(fd_) != 0)
    return errnoError("write", path_);
  return Status::ok();
}

} // namespace dtrt
