//===- Parser.h - .dt text to AST -------------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The wall around ANTLR: nothing outside lib/Parse sees a token, a parse tree
// or an exception. A buffer goes in, an AST (or located errors) comes out.
// Before ANTLR runs, a token pre-scan rejects malformed tokens, unbalanced
// brackets and pathological nesting with located errors, which bounds the
// depth of every tree the rest of the compiler recurses over.
//
//===----------------------------------------------------------------------===//

#ifndef DT_PARSE_PARSER_H
#define DT_PARSE_PARSER_H

#include "dt/AST/AST.h"
#include "dt/AST/Diagnostics.h"

#include <memory>

namespace dt {

/// Bounds enforced by the token pre-scan so that no later recursion can
/// overflow the stack.
struct ParseLimits {
  /// Open brackets at once.
  unsigned maxNesting = 256;
  /// Operators chained in one expression (each adds a level to the tree), plus
  /// the operators of all enclosing bracket levels.
  unsigned maxChain = 1024;
};

/// Parses buffer `bufferId` of `diag`'s SourceMgr into an AST. Reports the
/// first lexical or syntax error (and any literal errors) and returns null on
/// failure. Never throws.
std::unique_ptr<ast::Module> parseModule(unsigned bufferId,
                                         DiagnosticEngine &diag,
                                         const ParseLimits &limits = {});

} // namespace dt

#endif // DT_PARSE_PARSER_H
