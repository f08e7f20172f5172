//===- Diagnostics.h - Located errors for the dt front end ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every front-end error is a value reported here: a location in one of the
// SourceMgr's buffers (the main file and every file it imports) and a message,
// printed as clang prints them (`FILE:LINE:COL: error: MESSAGE`, the source
// line, a caret). Libraries never exit; they report and return failure, and the
// driver turns "any error" into exit status 1.
//
//===----------------------------------------------------------------------===//

#ifndef DT_AST_DIAGNOSTICS_H
#define DT_AST_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace dt {

/// A resolved source position: what a user (and an MLIR FileLineColLoc) sees.
struct FileLineCol {
  std::string file;
  unsigned line = 0;
  unsigned col = 0;
};

/// Collects and prints located diagnostics. Errors beyond `errorLimit` are
/// counted but not printed, so that a file of garbage yields a screenful, not a
/// flood.
class DiagnosticEngine {
public:
  DiagnosticEngine(llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
      : sourceMgr(sourceMgr), os(os) {}

  /// Reports an error at `loc`; `ranges` are underlined.
  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<llvm::SMRange> ranges = {});
  /// Attaches a note to the last error (dropped when that error was dropped).
  void note(llvm::SMLoc loc, const llvm::Twine &message);

  unsigned getNumErrors() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }

  llvm::SourceMgr &getSourceMgr() { return sourceMgr; }
  const llvm::SourceMgr &getSourceMgr() const { return sourceMgr; }

  /// Resolves `loc` to file, line and column (all empty/zero for an invalid
  /// loc).
  FileLineCol resolve(llvm::SMLoc loc) const;

  /// How many errors are printed before the rest are only counted.
  unsigned errorLimit = 20;

private:
  llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
  unsigned numErrors = 0;
  bool lastErrorShown = false;
};

} // namespace dt

#endif // DT_AST_DIAGNOSTICS_H
