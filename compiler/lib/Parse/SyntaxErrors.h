//===- SyntaxErrors.h - ANTLR errors as located diagnostics -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Two ANTLR hooks. The error strategy stops at the first syntax error (error
// recovery only produces cascades) and words it from the parser's expected
// token set ("expected '=' or ':'", "expected expression"). The error listener
// turns that into a DiagnosticEngine error at a sensible place: the offending
// token, or just after the previous token when the offending token starts a
// later line (the user forgot something at the end of a line).
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_PARSE_SYNTAXERRORS_H
#define DT_LIB_PARSE_SYNTAXERRORS_H

#include "TokenScan.h"

#include "BaseErrorListener.h"
#include "DefaultErrorStrategy.h"

namespace dt::parse {

/// Reports the first syntax error, then cancels the parse by throwing
/// antlr4::ParseCancellationException (caught at the library's edge).
class FirstErrorStrategy : public antlr4::DefaultErrorStrategy {
public:
  void reportError(antlr4::Parser *recognizer,
                   const antlr4::RecognitionException &e) override;
  void recover(antlr4::Parser *recognizer, std::exception_ptr e) override;
  antlr4::Token *recoverInline(antlr4::Parser *recognizer) override;
  void sync(antlr4::Parser *recognizer) override;
};

/// Forwards the first lexer or parser error to a DiagnosticEngine.
class DiagnosticErrorListener : public antlr4::BaseErrorListener {
public:
  DiagnosticErrorListener(const TokenLocator &locator, DiagnosticEngine &diag)
      : locator(locator), diag(diag) {}

  void syntaxError(antlr4::Recognizer *recognizer,
                   antlr4::Token *offendingSymbol, size_t line,
                   size_t charPositionInLine, const std::string &msg,
                   std::exception_ptr e) override;

  bool hasReported() const { return reported; }

private:
  const TokenLocator &locator;
  DiagnosticEngine &diag;
  bool reported = false;
};

} // namespace dt::parse

#endif // DT_LIB_PARSE_SYNTAXERRORS_H
