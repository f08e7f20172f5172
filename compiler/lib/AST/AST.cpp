//===- AST.cpp - AST helpers and the source printer -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Small helpers of the AST and `toSource`, which prints an expression back in
// canonical spelling so that messages can quote the user's code
// ("dimension width / heads = 100 / 3 is not an integer").
//
//===----------------------------------------------------------------------===//

#include "dt/AST/AST.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace dt;
using namespace dt::ast;
using llvm::cast;

llvm::SMLoc Field::getLoc() const {
  return isNamed() ? nameLoc : value->getLoc();
}

llvm::StringRef ast::spell(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "+";
  case BinaryOp::Sub:
    return "-";
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return "/";
  case BinaryOp::MatMul:
    return "@";
  }
  llvm_unreachable("unknown binary operator");
}

namespace {
/// Binding strength, to print parentheses only where they are needed.
int precedence(const Expr &e) {
  if (const auto *b = llvm::dyn_cast<BinaryExpr>(&e))
    return b->getOp() == BinaryOp::Add || b->getOp() == BinaryOp::Sub ? 1 : 2;
  if (llvm::isa<NegExpr>(e))
    return 3;
  return 4;
}

void print(const Expr &e, llvm::raw_ostream &os);

void printWrapped(const Expr &e, int minPrecedence, llvm::raw_ostream &os) {
  bool wrap = precedence(e) < minPrecedence;
  if (wrap)
    os << '(';
  print(e, os);
  if (wrap)
    os << ')';
}

void printFields(llvm::ArrayRef<Field> fields, llvm::StringRef bind,
                 llvm::raw_ostream &os) {
  llvm::interleaveComma(fields, os, [&](const Field &f) {
    if (f.isNamed())
      os << f.name << bind;
    print(*f.value, os);
  });
}

void print(const Expr &e, llvm::raw_ostream &os) {
  switch (e.getKind()) {
  case Expr::Kind::Int:
    os << cast<IntExpr>(e).getValue();
    return;
  case Expr::Kind::Float:
    os << llvm::format("%g", cast<FloatExpr>(e).getValue());
    return;
  case Expr::Kind::Bool:
    os << (cast<BoolExpr>(e).getValue() ? "true" : "false");
    return;
  case Expr::Kind::String:
    os << '"';
    os.write_escaped(cast<StringExpr>(e).getValue());
    os << '"';
    return;
  case Expr::Kind::Name:
    os << cast<NameExpr>(e).getName();
    return;
  case Expr::Kind::Member: {
    const auto &m = cast<MemberExpr>(e);
    printWrapped(m.getBase(), 4, os);
    os << '.' << m.getName();
    return;
  }
  case Expr::Kind::Call: {
    const auto &c = cast<CallExpr>(e);
    printWrapped(c.getCallee(), 4, os);
    os << '(';
    printFields(c.getArgs(), " = ", os);
    os << ')';
    return;
  }
  case Expr::Kind::Index: {
    const auto &i = cast<IndexExpr>(e);
    printWrapped(i.getBase(), 4, os);
    os << '[';
    print(i.getIndex(), os);
    os << ']';
    return;
  }
  case Expr::Kind::Slice: {
    const auto &s = cast<SliceExpr>(e);
    printWrapped(s.getBase(), 4, os);
    os << '[';
    if (s.getLo())
      print(*s.getLo(), os);
    os << ':';
    if (s.getHi())
      print(*s.getHi(), os);
    os << ']';
    return;
  }
  case Expr::Kind::Binary: {
    const auto &b = cast<BinaryExpr>(e);
    int p = precedence(b);
    printWrapped(b.getLhs(), p, os);
    os << ' ' << spell(b.getOp()) << ' ';
    printWrapped(b.getRhs(), p + 1, os);
    return;
  }
  case Expr::Kind::Neg:
    os << '-';
    printWrapped(cast<NegExpr>(e).getOperand(), 3, os);
    return;
  case Expr::Kind::Tuple: {
    const auto &t = cast<TupleExpr>(e);
    os << '(';
    printFields(t.getItems(), " = ", os);
    if (t.getItems().size() == 1 && !t.getItems()[0].isNamed())
      os << ',';
    os << ')';
    return;
  }
  case Expr::Kind::List:
    os << '[';
    llvm::interleaveComma(cast<ListExpr>(e).getItems(), os,
                          [&](const ExprPtr &item) { print(*item, os); });
    os << ']';
    return;
  case Expr::Kind::Record:
    os << '{';
    printFields(cast<RecordExpr>(e).getFields(), ": ", os);
    os << '}';
    return;
  case Expr::Kind::Ellipsis:
    os << "...";
    return;
  }
}
} // namespace

std::string ast::toSource(const Expr &expr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(expr, os);
  return text;
}
