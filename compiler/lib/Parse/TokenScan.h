//===- TokenScan.h - Checks on the token stream before parsing --*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The pre-scan sees every token once, before ANTLR builds a tree: malformed
// tokens (stray characters, unterminated strings and comments), brackets that
// do not match (reported clang-style: "expected ')'" after the last good token,
// with a note at the unmatched opener) and nesting beyond ParseLimits.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_PARSE_TOKENSCAN_H
#define DT_LIB_PARSE_TOKENSCAN_H

#include "dt/AST/Diagnostics.h"
#include "dt/Parse/Parser.h"

#include "llvm/ADT/StringRef.h"

#include <vector>

namespace antlr4 {
class Token;
} // namespace antlr4

namespace dt::parse {

/// Maps ANTLR token positions (byte offsets: the input stream holds one code
/// point per byte) back to SMLocs in the buffer.
class TokenLocator {
public:
  explicit TokenLocator(llvm::StringRef buffer) : buffer(buffer) {}
  llvm::SMLoc start(const antlr4::Token *token) const;
  /// One past the token's last character.
  llvm::SMLoc end(const antlr4::Token *token) const;
  llvm::SMLoc at(size_t offset) const;
  llvm::StringRef text(const antlr4::Token *token) const;

private:
  llvm::StringRef buffer;
};

/// Runs the pre-scan over `tokens` (ending with EOF). Reports the first
/// problem and returns false, or returns true.
bool scanTokens(const std::vector<antlr4::Token *> &tokens,
                const TokenLocator &locator, const ParseLimits &limits,
                DiagnosticEngine &diag);

} // namespace dt::parse

#endif // DT_LIB_PARSE_TOKENSCAN_H
