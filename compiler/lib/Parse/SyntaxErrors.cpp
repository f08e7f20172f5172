//===- SyntaxErrors.cpp - ANTLR errors as located diagnostics -------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The wording works from the set of tokens the parser could accept. Sets that
// contain every expression starter collapse to "expression", every name token
// to "name"; operators that would merely continue an expression are dropped
// when something else is possible (a missing '+' is rarely the user's
// mistake); what remains is listed when short, else the message names the
// unexpected token.
//
//===----------------------------------------------------------------------===//

#include "SyntaxErrors.h"

#include "DTLexer.h"
#include "DTParser.h"
#include "Exceptions.h"
#include "InputMismatchException.h"
#include "Parser.h"
#include "Vocabulary.h"
#include "atn/ATN.h"
#include "atn/ATNState.h"
#include "atn/ParserATNSimulator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace dt;
using namespace dt::parse;
using dt_antlr::DTParser;

namespace {
bool isContinuation(llvm::StringRef literal) {
  return llvm::StringSwitch<bool>(literal)
      .Cases("'.'", "'('", "'['", "'*'", "'/'", "'@'", "'+'", "'-'", true)
      .Default(false);
}

bool isExpressionStart(size_t type, llvm::StringRef literal) {
  return type == DTParser::INT || type == DTParser::FLOAT ||
         type == DTParser::STRING ||
         llvm::StringSwitch<bool>(literal)
             .Cases("'('", "'['", "'{'", "'-'", "'true'", "'false'", true)
             .Default(false);
}

/// Whether `type` can be a name (identifiers and the keywords that may be
/// used as names).
bool isDeclarationStart(llvm::StringRef literal) {
  return llvm::StringSwitch<bool>(literal)
      .Cases("'model'", "'source'", "'train'", "'parallel'", "'deploy'", true)
      .Default(false);
}

bool isNameToken(size_t type, llvm::StringRef literal) {
  if (type == DTParser::ID)
    return true;
  return llvm::StringSwitch<bool>(literal)
      .Cases("'model'", "'param'", "'train'", "'parallel'", "'deploy'", true)
      .Cases("'import'", "'as'", "'forward'", "'source'", "'shard'", true)
      .Default(false);
}

std::string displayToken(size_t type, const antlr4::dfa::Vocabulary &vocab) {
  switch (type) {
  case antlr4::Token::EOF:
    return "end of file";
  case DTParser::ID:
    return "name";
  case DTParser::INT:
    return "integer";
  case DTParser::FLOAT:
    return "number";
  case DTParser::STRING:
    return "string";
  default:
    return vocab.getLiteralName(type);
  }
}

/// The message for an error at `offending` when the parser expected `expected`.
std::string describe(const antlr4::misc::IntervalSet &expected,
                     const antlr4::Token *offending,
                     const antlr4::dfa::Vocabulary &vocab) {
  llvm::SmallVector<size_t> types;
  for (ssize_t type : expected.toList())
    types.push_back(type < 0 ? antlr4::Token::EOF : static_cast<size_t>(type));

  bool anyExpr = false, anyName = false, anyOther = false, anyDecl = false;
  for (size_t type : types) {
    std::string literal = vocab.getLiteralName(type);
    anyExpr |= type == DTParser::INT;
    anyName |= type == DTParser::ID;
    anyDecl |= literal == "'train'";
    anyOther |= !isContinuation(literal) && !isExpressionStart(type, literal) &&
                !isNameToken(type, literal);
  }

  llvm::SmallVector<std::string> names;
  auto add = [&](std::string name) {
    if (llvm::find(names, name) == names.end())
      names.push_back(std::move(name));
  };
  for (size_t type : types) {
    std::string literal = vocab.getLiteralName(type);
    if (anyExpr &&
        (isExpressionStart(type, literal) || isNameToken(type, literal))) {
      add("an expression");
      continue;
    }
    if (anyName && isNameToken(type, literal)) {
      add("a name");
      continue;
    }
    if (anyDecl && isDeclarationStart(literal)) {
      add("a declaration (model, train, parallel, deploy)");
      continue;
    }
    if (isContinuation(literal) && (anyOther || anyExpr || anyName))
      continue;
    add(displayToken(type, vocab));
  }

  std::string found = offending->getType() == antlr4::Token::EOF
                          ? "end of file"
                          : "'" + offending->getText().substr(0, 32) + "'";
  // A misspelt keyword: `modle M() {}`.
  std::string hint;
  if (offending->getType() == DTParser::ID) {
    std::string text = offending->getText();
    for (size_t type : types) {
      std::string literal = vocab.getLiteralName(type);
      llvm::StringRef keyword = llvm::StringRef(literal).trim('\'');
      if (keyword.size() > 2 && llvm::isAlpha(keyword.front()) &&
          llvm::StringRef(text).edit_distance(keyword, true, 3) <=
              (keyword.size() >= 5 ? 2u : 1u)) {
        hint = "; did you mean '" + keyword.str() + "'?";
        break;
      }
    }
  }
  if (names.empty() || names.size() > 4)
    return "unexpected " + found + hint;
  std::string message = "expected ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      message += i + 1 == names.size() ? " or " : ", ";
    message += names[i];
  }
  if (offending->getType() == antlr4::Token::EOF)
    message += " before end of file";
  return message + hint;
}
} // namespace

void FirstErrorStrategy::reportError(antlr4::Parser *recognizer,
                                     const antlr4::RecognitionException &e) {
  if (inErrorRecoveryMode(recognizer))
    return;
  beginErrorCondition(recognizer);
  antlr4::Token *offending = e.getOffendingToken();
  if (!offending)
    offending = recognizer->getCurrentToken();
  antlr4::misc::IntervalSet expected;
  if (dynamic_cast<const antlr4::FailedPredicateException *>(&e))
    expected = recognizer->getExpectedTokens();
  else
    expected = e.getExpectedTokens();
  recognizer->notifyErrorListeners(
      offending, describe(expected, offending, recognizer->getVocabulary()),
      std::make_exception_ptr(e));
}

void FirstErrorStrategy::recover(antlr4::Parser *, std::exception_ptr) {
  throw antlr4::ParseCancellationException("syntax error");
}

antlr4::Token *FirstErrorStrategy::recoverInline(antlr4::Parser *recognizer) {
  // Reported by the rule's handler, which then calls recover().
  throw antlr4::InputMismatchException(recognizer);
}

void FirstErrorStrategy::sync(antlr4::Parser *recognizer) {
  // DefaultErrorStrategy::sync's detection at loop and block entries (where
  // the expected set is widest), without its single-token recovery.
  if (inErrorRecoveryMode(recognizer))
    return;
  antlr4::atn::ATNState *state =
      recognizer->getInterpreter<antlr4::atn::ATNSimulator>()
          ->atn.states[recognizer->getState()];
  size_t la = recognizer->getTokenStream()->LA(1);
  antlr4::misc::IntervalSet next = recognizer->getATN().nextTokens(state);
  if (next.contains(antlr4::Token::EPSILON) || next.contains(la))
    return;
  switch (state->getStateType()) {
  case antlr4::atn::ATNState::BLOCK_START:
  case antlr4::atn::ATNState::STAR_BLOCK_START:
  case antlr4::atn::ATNState::PLUS_BLOCK_START:
  case antlr4::atn::ATNState::STAR_LOOP_ENTRY:
  case antlr4::atn::ATNState::PLUS_LOOP_BACK:
  case antlr4::atn::ATNState::STAR_LOOP_BACK:
    throw antlr4::InputMismatchException(recognizer);
  default:
    return;
  }
}

void DiagnosticErrorListener::syntaxError(antlr4::Recognizer *recognizer,
                                          antlr4::Token *offending, size_t,
                                          size_t, const std::string &msg,
                                          std::exception_ptr) {
  if (reported)
    return;
  reported = true;
  llvm::SMLoc loc = offending ? locator.start(offending) : llvm::SMLoc();
  // Something missing at the end of a line is reported there, as clang does.
  // A word on a new line may start the next item (a misspelt keyword), so
  // the error is there, unless only punctuation could have come before it.
  auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
  llvm::StringRef text = offending ? locator.text(offending) : "";
  bool isWord =
      !text.empty() && (llvm::isAlpha(text.front()) || text.front() == '_');
  bool punctuationOnly = llvm::StringRef(msg).starts_with("expected '") &&
                         !llvm::StringRef(msg).contains("a name") &&
                         !llvm::StringRef(msg).contains("'import'");
  if (parser && offending && offending->getTokenIndex() > 0 &&
      offending->getTokenIndex() != INVALID_INDEX &&
      llvm::StringRef(msg).starts_with("expected") &&
      (!isWord || punctuationOnly)) {
    antlr4::Token *previous =
        parser->getTokenStream()->get(offending->getTokenIndex() - 1);
    if (offending->getType() == antlr4::Token::EOF ||
        offending->getLine() > previous->getLine())
      loc = locator.end(previous);
  }
  diag.error(loc, msg);
}
