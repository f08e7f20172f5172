//===- TokenScan.cpp - Checks on the token stream before parsing ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Bracket matching here gives better messages than ANTLR's recovery ever
// could: the scan knows which opener is unmatched, so it says "expected ')'"
// where the user forgot it (right after the last token of the line when the
// mismatch is only noticed on a later line) and adds a note at the opener.
//
// The depth bound is an over-estimate of the AST depth: every open bracket is a
// level, and so is every operator (binary, unary minus, '.', a call's or an
// index's bracket) since the last separator (',' ':' '=' ';' '{' '}' and the
// keywords that start a sub-expression) at each open bracket level.
//
//===----------------------------------------------------------------------===//

#include "TokenScan.h"

#include "DTLexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"

using namespace dt;
using namespace dt::parse;

llvm::SMLoc TokenLocator::at(size_t offset) const {
  return llvm::SMLoc::getFromPointer(buffer.data() +
                                     std::min(offset, buffer.size()));
}

llvm::SMLoc TokenLocator::start(const antlr4::Token *token) const {
  return at(token->getStartIndex());
}

llvm::SMLoc TokenLocator::end(const antlr4::Token *token) const {
  if (token->getType() == antlr4::Token::EOF)
    return at(buffer.size());
  return at(token->getStopIndex() + 1);
}

llvm::StringRef TokenLocator::text(const antlr4::Token *token) const {
  if (token->getType() == antlr4::Token::EOF)
    return "";
  size_t begin = std::min<size_t>(token->getStartIndex(), buffer.size());
  size_t stop = std::min<size_t>(token->getStopIndex() + 1, buffer.size());
  return buffer.slice(begin, std::max(begin, stop));
}

namespace {
/// The closing bracket for an opener.
char closerOf(llvm::StringRef opener) {
  return opener == "(" ? ')' : opener == "[" ? ']' : '}';
}

bool isOpener(llvm::StringRef text) {
  return text == "(" || text == "[" || text == "{";
}

bool isCloser(llvm::StringRef text) {
  return text == ")" || text == "]" || text == "}";
}

/// Tokens after which '(' and '[' are a call or an index rather than a tuple
/// or a list.
bool endsOperand(const antlr4::Token *token, llvm::StringRef text) {
  switch (token->getType()) {
  case dt_antlr::DTLexer::ID:
  case dt_antlr::DTLexer::INT:
  case dt_antlr::DTLexer::FLOAT:
  case dt_antlr::DTLexer::STRING:
    return true;
  default:
    break;
  }
  if (isCloser(text))
    return true;
  // Keywords that may be names.
  return !text.empty() && llvm::isAlpha(text.front()) && text != "return" &&
         text != "if" && text != "import";
}

/// Tokens that end the current expression at their bracket level.
bool isSeparator(llvm::StringRef text) {
  return llvm::StringSwitch<bool>(text)
      .Cases(",", ":", "=", ";", "->", true)
      .Cases("return", "if", "param", true)
      .Default(false);
}

bool isOperator(llvm::StringRef text) {
  return llvm::StringSwitch<bool>(text)
      .Cases("+", "-", "*", "/", "@", ".", true)
      .Default(false);
}

/// A printable spelling of a stray character.
std::string describeChar(llvm::StringRef text) {
  unsigned char c = text.empty() ? 0 : text.front();
  if (llvm::isPrint(c))
    return ("'" + llvm::Twine(static_cast<char>(c)) + "'").str();
  std::string result;
  llvm::raw_string_ostream os(result);
  os << "'\\x" << llvm::format_hex_no_prefix(c, 2) << "'";
  return result;
}

class Scanner {
public:
  Scanner(const TokenLocator &locator, const ParseLimits &limits,
          DiagnosticEngine &diag)
      : locator(locator), limits(limits), diag(diag) {
    levels.push_back({nullptr, 0});
  }

  bool run(const std::vector<antlr4::Token *> &tokens);

private:
  struct Level {
    const antlr4::Token *opener;
    unsigned ops;
  };

  bool scanToken(const antlr4::Token *token);
  bool countOperator(const antlr4::Token *token);
  /// Where to report something missing before `token`: right after the
  /// previous token when `token` starts a later line, else at `token`.
  llvm::SMLoc missingBefore(const antlr4::Token *token) const;
  bool reportUnclosed(const antlr4::Token *token);

  const TokenLocator &locator;
  const ParseLimits &limits;
  DiagnosticEngine &diag;
  std::vector<Level> levels;
  unsigned totalOps = 0;
  const antlr4::Token *previous = nullptr;
};
} // namespace

llvm::SMLoc Scanner::missingBefore(const antlr4::Token *token) const {
  if (previous && (token->getType() == antlr4::Token::EOF ||
                   token->getLine() > previous->getLine()))
    return locator.end(previous);
  return locator.start(token);
}

bool Scanner::reportUnclosed(const antlr4::Token *token) {
  const antlr4::Token *opener = levels.back().opener;
  diag.error(missingBefore(token),
             llvm::Twine("expected '") +
                 llvm::Twine(closerOf(opener->getText())) + "'");
  diag.note(locator.start(opener),
            "to match this '" + llvm::Twine(opener->getText()) + "'");
  return false;
}

bool Scanner::countOperator(const antlr4::Token *token) {
  ++levels.back().ops;
  if (++totalOps <= limits.maxChain)
    return true;
  diag.error(locator.start(token),
             "expression is too long (more than " +
                 llvm::Twine(limits.maxChain) +
                 " chained operators); split it into named steps");
  return false;
}

bool Scanner::scanToken(const antlr4::Token *token) {
  llvm::StringRef text = locator.text(token);
  switch (token->getType()) {
  case dt_antlr::DTLexer::ERROR_CHAR:
    diag.error(locator.start(token),
               "unexpected character " + describeChar(text));
    return false;
  case dt_antlr::DTLexer::UNTERMINATED_STRING:
    diag.error(locator.start(token),
               "unterminated string: missing closing '\"'");
    return false;
  case dt_antlr::DTLexer::UNTERMINATED_COMMENT:
    diag.error(locator.start(token),
               "unterminated comment: missing closing '*/'");
    return false;
  default:
    break;
  }

  if (isOpener(text)) {
    // A call's or an index's bracket deepens the tree like an operator.
    if (text != "{" && previous &&
        endsOperand(previous, locator.text(previous)) && !countOperator(token))
      return false;
    if (levels.size() > limits.maxNesting) {
      diag.error(locator.start(token),
                 "brackets nested too deeply (more than " +
                     llvm::Twine(limits.maxNesting) + " levels)");
      return false;
    }
    levels.push_back({token, 0});
    return true;
  }
  if (isCloser(text)) {
    if (levels.size() == 1) {
      diag.error(locator.start(token),
                 "unmatched '" + text + "' with no opening bracket");
      return false;
    }
    if (closerOf(levels.back().opener->getText()) != text.front()) {
      // Some opener further out matches: the inner ones were not closed.
      // None does: this closer is one too many.
      bool matchesOuter = llvm::any_of(
          llvm::ArrayRef<Level>(levels).drop_front().drop_back(),
          [&](const Level &level) {
            return closerOf(level.opener->getText()) == text.front();
          });
      if (matchesOuter)
        return reportUnclosed(token);
      diag.error(locator.start(token),
                 "unmatched '" + text + "'; the innermost open bracket is '" +
                     llvm::Twine(levels.back().opener->getText()) + "'");
      diag.note(locator.start(levels.back().opener),
                "the innermost open bracket");
      return false;
    }
    totalOps -= levels.back().ops;
    levels.pop_back();
    return true;
  }
  if (isSeparator(text) || text == "{") {
    totalOps -= levels.back().ops;
    levels.back().ops = 0;
    return true;
  }
  if (isOperator(text))
    return countOperator(token);
  return true;
}

bool Scanner::run(const std::vector<antlr4::Token *> &tokens) {
  for (const antlr4::Token *token : tokens) {
    if (token->getType() == antlr4::Token::EOF) {
      if (levels.size() > 1)
        return reportUnclosed(token);
      return true;
    }
    if (!scanToken(token))
      return false;
    previous = token;
  }
  return levels.size() == 1;
}

bool parse::scanTokens(const std::vector<antlr4::Token *> &tokens,
                       const TokenLocator &locator, const ParseLimits &limits,
                       DiagnosticEngine &diag) {
  return Scanner(locator, limits, diag).run(tokens);
}
