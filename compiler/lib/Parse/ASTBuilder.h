//===- ASTBuilder.h - ANTLR parse tree to dt AST ----------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Converts a complete parse tree into the project's AST right after parsing,
// with one typed function per grammar rule (no std::any visitor plumbing).
// It also reports the errors that need a token's text: integer literals that
// do not fit in 64 bits, unknown string escapes, a second forward.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_PARSE_ASTBUILDER_H
#define DT_LIB_PARSE_ASTBUILDER_H

#include "TokenScan.h"

#include "DTParser.h"

#include "dt/AST/AST.h"

namespace dt::parse {

/// Builds the AST of one file. Returns null after reporting errors.
std::unique_ptr<ast::Module> buildModule(dt_antlr::DTParser::File_Context *file,
                                         llvm::StringRef filename,
                                         unsigned bufferId,
                                         const TokenLocator &locator,
                                         DiagnosticEngine &diag);

} // namespace dt::parse

#endif // DT_LIB_PARSE_ASTBUILDER_H
