//===- Parser.cpp - .dt text to AST, the ANTLR wall -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The library's edge: every exception ANTLR (or the standard library inside
// it) can throw is caught here, because the rest of the compiler is built
// without exceptions and an escaping one would abort. The steps:
//   1. lex the whole buffer (the lexer cannot fail: malformed input becomes
//      error tokens);
//   2. pre-scan the tokens (TokenScan.cpp) for error tokens, brackets and
//      nesting bounds;
//   3. parse, stopping at the first syntax error;
//   4. convert the parse tree to the AST at once.
//
//===----------------------------------------------------------------------===//

#include "dt/Parse/Parser.h"

#include "ASTBuilder.h"
#include "SyntaxErrors.h"
#include "TokenScan.h"

#include "ANTLRInputStream.h"
#include "CommonTokenStream.h"
#include "DTLexer.h"
#include "DTParser.h"
#include "Exceptions.h"

#include "llvm/Support/MemoryBuffer.h"

#include <exception>

using namespace dt;
using namespace dt::parse;

namespace {
/// An input stream holding one code point per byte of the buffer, so that
/// ANTLR's character indices are byte offsets (SMLocs) and no UTF-8 decoding
/// can fail. Only ASCII forms tokens; other bytes are stray characters or
/// parts of strings and comments, which are read back from the buffer.
class ByteInputStream : public antlr4::ANTLRInputStream {
public:
  explicit ByteInputStream(llvm::StringRef bytes) {
    _data.reserve(bytes.size());
    for (unsigned char c : bytes)
      _data.push_back(static_cast<char32_t>(c));
  }
};

std::unique_ptr<ast::Module> parseWithAntlr(const llvm::MemoryBuffer &buffer,
                                            unsigned bufferId,
                                            DiagnosticEngine &diag,
                                            const ParseLimits &limits) {
  TokenLocator locator(buffer.getBuffer());
  ByteInputStream input(buffer.getBuffer());
  DiagnosticErrorListener listener(locator, diag);
  dt_antlr::DTLexer lexer(&input);
  // The lexer turns every malformed input into an error token, so this
  // listener only guards the grammar's invariants.
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();
  if (listener.hasReported() ||
      !scanTokens(tokens.getTokens(), locator, limits, diag))
    return nullptr;

  dt_antlr::DTParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  parser.setErrorHandler(std::make_shared<FirstErrorStrategy>());
  dt_antlr::DTParser::File_Context *file = nullptr;
  try {
    file = parser.file_();
  } catch (const antlr4::ParseCancellationException &) {
    // Already reported by the listener.
  }
  if (listener.hasReported() || !file)
    return nullptr;
  return buildModule(file, buffer.getBufferIdentifier(), bufferId, locator,
                     diag);
}
} // namespace

std::unique_ptr<ast::Module> dt::parseModule(unsigned bufferId,
                                             DiagnosticEngine &diag,
                                             const ParseLimits &limits) {
  const llvm::MemoryBuffer *buffer =
      diag.getSourceMgr().getMemoryBuffer(bufferId);
  llvm::SMLoc start = llvm::SMLoc::getFromPointer(buffer->getBufferStart());
  try {
    return parseWithAntlr(*buffer, bufferId, diag, limits);
  } catch (const std::bad_alloc &) {
    diag.error(start, "out of memory while parsing");
  } catch (const std::exception &e) {
    diag.error(start, llvm::Twine("internal parser error: ") + e.what());
  } catch (...) {
    diag.error(start, "internal parser error");
  }
  return nullptr;
}
