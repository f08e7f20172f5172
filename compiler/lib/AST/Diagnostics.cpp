//===- Diagnostics.cpp - Located errors for the dt front end --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Printing goes through llvm::SourceMgr so that the format, the source line
// and the caret are exactly clang's.
//
//===----------------------------------------------------------------------===//

#include "dt/AST/Diagnostics.h"

using namespace dt;

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &message,
                             llvm::ArrayRef<llvm::SMRange> ranges) {
  ++numErrors;
  lastErrorShown = numErrors <= errorLimit;
  if (numErrors == errorLimit + 1)
    os << "error: too many errors emitted, stopping now\n";
  if (!lastErrorShown)
    return;
  sourceMgr.PrintMessage(os, loc, llvm::SourceMgr::DK_Error, message, ranges);
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &message) {
  if (!lastErrorShown)
    return;
  sourceMgr.PrintMessage(os, loc, llvm::SourceMgr::DK_Note, message);
}

FileLineCol DiagnosticEngine::resolve(llvm::SMLoc loc) const {
  FileLineCol result;
  if (!loc.isValid())
    return result;
  unsigned buffer = sourceMgr.FindBufferContainingLoc(loc);
  if (buffer == 0)
    return result;
  result.file = sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier().str();
  std::tie(result.line, result.col) = sourceMgr.getLineAndColumn(loc, buffer);
  return result;
}
