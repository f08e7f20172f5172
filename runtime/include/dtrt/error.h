//===- dtrt/error.h - Errors as values for the runtime ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every fallible runtime function returns a `Status` or an `Expected<T>`
// instead of printing and exiting, so that the pieces stay testable and only
// the program's `main` decides what to print and which exit code to use. An
// `Error` carries the whole message a user reads (what went wrong, which file
// or tensor, what to do about it) and the process exit code it maps to.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_ERROR_H
#define DTRT_ERROR_H

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dtrt {

/// Process exit codes of an emitted program (documented in
/// docs/operations.md).
enum ExitCode : int {
  kExitOk = 0,
  /// A fault at run time: bad data file, checkpoint mismatch or corruption,
  /// I/O error, an invalid manifest, a non-finite loss.
  kExitFault = 1,
  /// A usage error: unknown option, bad option value, unsupported backend.
  kExitUsage = 2,
  /// Stopped by SIGINT after checkpointing (128 + SIGINT).
  kExitInterrupted = 130,
  /// Stopped by SIGTERM after checkpointing (128 + SIGTERM); launchers treat
  /// >= 128 as retryable.
  kExitTerminated = 143,
};

/// A failure: the message shown to the user and the exit code it maps to.
class Error {
public:
  explicit Error(std::string message, int exitCode = kExitFault)
      : message_(std::move(message)), exitCode_(exitCode) {}

  const std::string &message() const { return message_; }
  int exitCode() const { return exitCode_; }

  /// Returns a copy whose message is prefixed by `context` ("context: msg").
  Error withContext(const std::string &context) const {
    return Error(context + ": " + message_, exitCode_);
  }

private:
  std::string message_;
  int exitCode_;
};

/// Success, or an Error.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}
  static Status ok() { return Status(); }

  explicit operator bool() const { return !error_.has_value(); }
  const Error &error() const { return *error_; }

private:
  std::optional<Error> error_;
};

/// A value of type T, or an Error.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : storage_(std::move(value)) {}
  Expected(Error error) : storage_(std::move(error)) {}

  explicit operator bool() const { return storage_.index() == 0; }
  T &operator*() { return std::get<0>(storage_); }
  const T &operator*() const { return std::get<0>(storage_); }
  T *operator->() { return &std::get<0>(storage_); }
  const T *operator->() const { return &std::get<0>(storage_); }
  const Error &error() const { return std::get<1>(storage_); }
  /// The status of this value, dropping the value.
  Status status() const { return *this ? Status::ok() : Status(error()); }

private:
  std::variant<T, Error> storage_;
};

} // namespace dtrt

#endif // DTRT_ERROR_H
