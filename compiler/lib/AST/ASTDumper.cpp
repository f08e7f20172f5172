//===- ASTDumper.cpp - `dtc --emit=ast` -----------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Prints a module as an indented tree, one node per line with its line:col,
// so that parser tests can check structure (precedence, keyword-as-name,
// member forms) with FileCheck.
//
//===----------------------------------------------------------------------===//

#include "dt/AST/AST.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace dt;
using namespace dt::ast;
using llvm::cast;

namespace {
class Dumper {
public:
  Dumper(const llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
      : sourceMgr(sourceMgr), os(os) {}

  void dumpModule(const Module &module);

private:
  /// Starts a line at the current depth: `Kind <loc>`.
  llvm::raw_ostream &line(llvm::StringRef kind, llvm::SMLoc loc);
  void dumpExpr(const Expr &e);
  void dumpField(const Field &f, llvm::StringRef kind);
  void dumpType(const TypeExpr &type, llvm::StringRef kind,
                llvm::StringRef name = "");
  void dumpArgs(llvm::ArrayRef<ArgDecl> args);
  void dumpEntries(llvm::ArrayRef<KeyValue> entries);
  void dumpDecl(const Decl &decl);

  /// Indents by one level for its lifetime.
  struct Nest {
    explicit Nest(Dumper &d) : d(d) { ++d.depth; }
    ~Nest() { --d.depth; }
    Dumper &d;
  };

  const llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
  unsigned depth = 0;
};
} // namespace

llvm::raw_ostream &Dumper::line(llvm::StringRef kind, llvm::SMLoc loc) {
  os.indent(2 * depth) << kind << " <";
  if (loc.isValid()) {
    auto [l, c] = sourceMgr.getLineAndColumn(loc);
    os << l << ':' << c;
  }
  return os << '>';
}

void Dumper::dumpField(const Field &f, llvm::StringRef kind) {
  if (!f.isNamed())
    return dumpExpr(*f.value);
  line(kind, f.nameLoc) << ' ' << f.name << '\n';
  Nest nest(*this);
  dumpExpr(*f.value);
}

void Dumper::dumpExpr(const Expr &e) {
  switch (e.getKind()) {
  case Expr::Kind::Int:
    line("Int", e.getLoc()) << ' ' << cast<IntExpr>(e).getValue() << '\n';
    return;
  case Expr::Kind::Float:
    line("Float", e.getLoc())
        << ' ' << llvm::format("%g", cast<FloatExpr>(e).getValue()) << '\n';
    return;
  case Expr::Kind::Bool:
    line("Bool", e.getLoc())
        << (cast<BoolExpr>(e).getValue() ? " true\n" : " false\n");
    return;
  case Expr::Kind::String:
    line("String", e.getLoc()) << " \"";
    os.write_escaped(cast<StringExpr>(e).getValue()) << "\"\n";
    return;
  case Expr::Kind::Name:
    line("Name", e.getLoc()) << ' ' << cast<NameExpr>(e).getName() << '\n';
    return;
  case Expr::Kind::Ellipsis:
    line("Ellipsis", e.getLoc()) << '\n';
    return;
  case Expr::Kind::Member: {
    const auto &m = cast<MemberExpr>(e);
    line("Member", m.getLoc()) << ' ' << m.getName() << '\n';
    Nest nest(*this);
    return dumpExpr(m.getBase());
  }
  case Expr::Kind::Call: {
    const auto &c = cast<CallExpr>(e);
    line("Call", c.getLoc()) << '\n';
    Nest nest(*this);
    dumpExpr(c.getCallee());
    for (const Field &arg : c.getArgs())
      dumpField(arg, "NamedArg");
    return;
  }
  case Expr::Kind::Index: {
    const auto &i = cast<IndexExpr>(e);
    line("Index", i.getLoc()) << '\n';
    Nest nest(*this);
    dumpExpr(i.getBase());
    return dumpExpr(i.getIndex());
  }
  case Expr::Kind::Slice: {
    const auto &s = cast<SliceExpr>(e);
    line("Slice", s.getLoc())
        << (s.getLo() ? "" : " no-lo") << (s.getHi() ? "" : " no-hi") << '\n';
    Nest nest(*this);
    dumpExpr(s.getBase());
    if (s.getLo())
      dumpExpr(*s.getLo());
    if (s.getHi())
      dumpExpr(*s.getHi());
    return;
  }
  case Expr::Kind::Binary: {
    const auto &b = cast<BinaryExpr>(e);
    line("Binary", b.getLoc()) << " '" << spell(b.getOp()) << "'\n";
    Nest nest(*this);
    dumpExpr(b.getLhs());
    return dumpExpr(b.getRhs());
  }
  case Expr::Kind::Neg: {
    line("Neg", e.getLoc()) << '\n';
    Nest nest(*this);
    return dumpExpr(cast<NegExpr>(e).getOperand());
  }
  case Expr::Kind::Tuple: {
    line("Tuple", e.getLoc()) << '\n';
    Nest nest(*this);
    for (const Field &item : cast<TupleExpr>(e).getItems())
      dumpField(item, "NamedItem");
    return;
  }
  case Expr::Kind::List: {
    line("List", e.getLoc()) << '\n';
    Nest nest(*this);
    for (const ExprPtr &item : cast<ListExpr>(e).getItems())
      dumpExpr(*item);
    return;
  }
  case Expr::Kind::Record: {
    line("Record", e.getLoc()) << '\n';
    Nest nest(*this);
    for (const Field &field : cast<RecordExpr>(e).getFields())
      dumpField(field, "Field");
    return;
  }
  }
}

void Dumper::dumpType(const TypeExpr &type, llvm::StringRef kind,
                      llvm::StringRef name) {
  line(kind, type.loc) << ' ';
  if (!name.empty())
    os << name << ": ";
  os << type.name;
  if (type.hasDims) {
    os << '[';
    llvm::interleaveComma(type.dims, os,
                          [&](const ExprPtr &dim) { os << toSource(*dim); });
    os << ']';
  }
  os << '\n';
}

void Dumper::dumpArgs(llvm::ArrayRef<ArgDecl> args) {
  for (const ArgDecl &arg : args) {
    line("Arg", arg.loc) << ' ' << arg.name << ": " << arg.type << '\n';
    if (arg.defaultValue) {
      Nest nest(*this);
      dumpExpr(*arg.defaultValue);
    }
  }
}

void Dumper::dumpEntries(llvm::ArrayRef<KeyValue> entries) {
  for (const KeyValue &entry : entries) {
    line("Key", entry.keyLoc) << ' ' << entry.key << '\n';
    Nest nest(*this);
    dumpExpr(*entry.value);
  }
}

void Dumper::dumpDecl(const Decl &decl) {
  switch (decl.getKind()) {
  case Decl::Kind::Model: {
    const auto &model = cast<ModelDecl>(decl);
    line("Model", model.getLoc()) << ' ' << model.getName() << '\n';
    Nest nest(*this);
    dumpArgs(model.getArgs());
    for (const auto &member : model.getMembers()) {
      if (const auto *param = llvm::dyn_cast<ParamMember>(member.get())) {
        line("Param", param->getLoc()) << ' ' << param->getName() << " [";
        llvm::interleaveComma(param->getDims(), os, [&](const ExprPtr &dim) {
          os << toSource(*dim);
        });
        os << "]\n";
        Nest nest(*this);
        if (param->getInit()) {
          line("Init", param->getInit()->getLoc()) << '\n';
          Nest nest(*this);
          dumpExpr(*param->getInit());
        }
        if (param->getCond()) {
          line("If", param->getCond()->getLoc()) << '\n';
          Nest nest(*this);
          dumpExpr(*param->getCond());
        }
      } else {
        const auto &sub = cast<SubmoduleMember>(*member);
        line("Submodule", sub.getLoc()) << ' ' << sub.getName() << '\n';
        Nest nest(*this);
        dumpExpr(sub.getCall());
        if (sub.getCount()) {
          line("Count", sub.getCount()->getLoc()) << '\n';
          Nest nest(*this);
          dumpExpr(*sub.getCount());
        }
      }
      Nest nest(*this);
      for (const Annotation &a : member->getAnnotations())
        line("Annotation", a.loc) << " @" << a.name << '\n';
    }
    if (const ForwardDecl *forward = model.getForward()) {
      line("Forward", forward->loc) << '\n';
      Nest nest(*this);
      for (const ForwardParam &param : forward->params)
        dumpType(param.type, "Input", param.name);
      for (const TypeExpr &result : forward->results)
        dumpType(result, "Result");
      for (const auto &stmt : forward->body) {
        if (const auto *assign = llvm::dyn_cast<AssignStmt>(stmt.get())) {
          line("Assign", assign->getLoc()) << ' ' << assign->getName() << '\n';
          Nest nest(*this);
          dumpExpr(assign->getValue());
          continue;
        }
        line("Return", stmt->getLoc()) << '\n';
        Nest nest(*this);
        for (const ExprPtr &value : cast<ReturnStmt>(*stmt).getValues())
          dumpExpr(*value);
      }
    }
    return;
  }
  case Decl::Kind::Source: {
    const auto &source = cast<SourceDecl>(decl);
    line("Source", source.getLoc()) << ' ' << source.getName() << '\n';
    Nest nest(*this);
    dumpArgs(source.getArgs());
    for (const SourceField &field : source.getFields())
      dumpType(field.type, "SampleField", field.name);
    return;
  }
  case Decl::Kind::Train: {
    const auto &train = cast<TrainDecl>(decl);
    line("Train", train.getLoc());
    if (!train.getName().empty())
      os << ' ' << train.getName();
    os << '\n';
    Nest nest(*this);
    return dumpEntries(train.getEntries());
  }
  case Decl::Kind::Parallel: {
    const auto &parallel = cast<ParallelDecl>(decl);
    line("Parallel", parallel.getLoc()) << '\n';
    Nest nest(*this);
    dumpEntries(parallel.getEntries());
    for (const ShardEntry &shard : parallel.getShards()) {
      line("Shard", shard.loc) << '\n';
      Nest nest(*this);
      dumpExpr(*shard.path);
      dumpExpr(*shard.layout);
    }
    return;
  }
  case Decl::Kind::Deploy: {
    const auto &deploy = cast<DeployDecl>(decl);
    line("Deploy", deploy.getLoc()) << ' ' << deploy.getTarget() << '\n';
    Nest nest(*this);
    return dumpEntries(deploy.getEntries());
  }
  }
}

void Dumper::dumpModule(const Module &module) {
  os << "Module " << module.getFilename() << '\n';
  Nest nest(*this);
  for (const ImportDecl &import : module.getImports()) {
    line("Import", import.loc)
        << ' ' << (import.isStdlib ? import.path : '"' + import.path + '"');
    if (!import.isStdlib)
      os << " as " << import.alias;
    os << '\n';
  }
  for (const auto &decl : module.getDecls())
    dumpDecl(*decl);
}

void ast::dump(const Module &module, const llvm::SourceMgr &sourceMgr,
               llvm::raw_ostream &os) {
  Dumper(sourceMgr, os).dumpModule(module);
}
