//===- Context.cpp - State shared by Sema's parts -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Reporting with re-pointing and de-duplication, and name suggestions.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

using namespace dt;
using namespace dt::sema;

std::string ModuleScope::qualify(llvm::StringRef declName) const {
  if (name.empty())
    return declName.str();
  return name + "." + declName.str();
}

std::string sema::suggest(llvm::StringRef name,
                          llvm::ArrayRef<std::string> candidates) {
  const std::string *best = nullptr;
  unsigned bestDistance = 0;
  // One edit for short names; two (a transposition) or a third of the
  // name for longer ones.
  unsigned limit =
      name.size() <= 3 ? 1 : std::max<unsigned>(2, name.size() / 3);
  for (const std::string &candidate : candidates)
    if (candidate != name &&
        llvm::StringRef(candidate).equals_insensitive(name))
      return "; did you mean '" + candidate + "'?";
  for (const std::string &candidate : candidates) {
    if (candidate == name || candidate.empty())
      continue;
    unsigned distance =
        name.edit_distance(candidate, /*AllowReplacements=*/true, limit + 1);
    if (distance <= limit && (!best || distance < bestDistance)) {
      best = &candidate;
      bestDistance = distance;
    }
  }
  if (!best)
    return "";
  return "; did you mean '" + *best + "'?";
}

void SemaContext::error(llvm::SMLoc loc, const llvm::Twine &message,
                        llvm::ArrayRef<llvm::SMRange> ranges) {
  ++errorCount;
  // The error is inside the innermost site's callee; it is reported at the
  // innermost site in the user's code.
  llvm::SMLoc at = loc;
  const Site *inside = sites.empty() ? nullptr : &sites.back();
  if (loader.isInStdlib(loc)) {
    for (auto it = sites.rbegin(); it != sites.rend(); ++it) {
      if (!loader.isInStdlib(it->loc)) {
        at = it->loc;
        break;
      }
    }
    if (at != loc)
      ranges = {};
  }
  std::string text = message.str();
  if (!reported.insert({at.getPointer(), text}).second) {
    lastSuppressed = true;
    return;
  }
  lastSuppressed = false;
  diag.error(at, text, ranges);
  if (at != loc)
    diag.note(loc, inside ? "in " + inside->what + ", here" : "here");
}

void SemaContext::note(llvm::SMLoc loc, const llvm::Twine &message) {
  if (!lastSuppressed)
    diag.note(loc, message);
}
