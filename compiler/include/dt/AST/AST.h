//===- AST.h - The abstract syntax tree of .dt files ------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The AST is what the parser hands to Sema: plain, owned nodes with no trace of
// ANTLR. Each node family (expressions, model members, forward statements,
// top-level declarations) has a kind enum and `classof`, so `llvm::isa`,
// `llvm::cast` and `llvm::dyn_cast` work without C++ RTTI, as in MLIR's Toy
// tutorial. Every node carries `loc`, the position a diagnostic about the node
// points at (the operator of a binary expression, the first token otherwise),
// and most carry the full source `range` for underlining.
//
//===----------------------------------------------------------------------===//

#ifndef DT_AST_AST_H
#define DT_AST_AST_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
class raw_ostream;
} // namespace llvm

namespace dt::ast {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// Base of every expression.
class Expr {
public:
  enum class Kind {
    Int,
    Float,
    Bool,
    String,
    Name,
    Member,
    Call,
    Index,
    Slice,
    Binary,
    Neg,
    Tuple,
    List,
    Record,
    Ellipsis, ///< `...`, only as the leading dim of a tensor type.
  };

  Expr(Kind kind, llvm::SMLoc loc, llvm::SMRange range)
      : kind(kind), loc(loc), range(range) {}
  virtual ~Expr() = default;

  Kind getKind() const { return kind; }
  /// Where diagnostics about this expression point.
  llvm::SMLoc getLoc() const { return loc; }
  /// The whole expression's source text.
  llvm::SMRange getRange() const { return range; }

private:
  const Kind kind;
  llvm::SMLoc loc;
  llvm::SMRange range;
};

using ExprPtr = std::unique_ptr<Expr>;

/// An optionally named expression: a call argument (`axis = -1`), a tuple item
/// (`dp = 4` in a mesh) or a record field (`every: 100`). `name` is empty for
/// positional items.
struct Field {
  std::string name;
  llvm::SMLoc nameLoc;
  ExprPtr value;

  bool isNamed() const { return !name.empty(); }
  /// The location to blame for this item: its name if any, else its value.
  llvm::SMLoc getLoc() const;
};

/// An integer literal; underscores are already removed.
class IntExpr : public Expr {
public:
  IntExpr(llvm::SMLoc loc, llvm::SMRange range, int64_t value)
      : Expr(Kind::Int, loc, range), value(value) {}
  int64_t getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Int; }

private:
  int64_t value;
};

/// A floating-point literal (`3.0`, `6e-4`).
class FloatExpr : public Expr {
public:
  FloatExpr(llvm::SMLoc loc, llvm::SMRange range, double value)
      : Expr(Kind::Float, loc, range), value(value) {}
  double getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Float; }

private:
  double value;
};

/// `true` or `false`.
class BoolExpr : public Expr {
public:
  BoolExpr(llvm::SMLoc loc, llvm::SMRange range, bool value)
      : Expr(Kind::Bool, loc, range), value(value) {}
  bool getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }

private:
  bool value;
};

/// A string literal with its escapes decoded.
class StringExpr : public Expr {
public:
  StringExpr(llvm::SMLoc loc, llvm::SMRange range, std::string value)
      : Expr(Kind::String, loc, range), value(std::move(value)) {}
  llvm::StringRef getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::String; }

private:
  std::string value;
};

/// A reference to a name: a local, a member, an argument, a builtin, a model or
/// an imported module.
class NameExpr : public Expr {
public:
  NameExpr(llvm::SMLoc loc, llvm::SMRange range, std::string name)
      : Expr(Kind::Name, loc, range), name(std::move(name)) {}
  llvm::StringRef getName() const { return name; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }

private:
  std::string name;
};

/// `base.name`. `loc` is the member name.
class MemberExpr : public Expr {
public:
  MemberExpr(llvm::SMLoc loc, llvm::SMRange range, ExprPtr base,
             std::string name)
      : Expr(Kind::Member, loc, range), base(std::move(base)),
        name(std::move(name)) {}
  const Expr &getBase() const { return *base; }
  llvm::StringRef getName() const { return name; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Member; }

private:
  ExprPtr base;
  std::string name;
};

/// `callee(args)`. `loc` is the callee's start.
class CallExpr : public Expr {
public:
  CallExpr(llvm::SMLoc loc, llvm::SMRange range, ExprPtr callee,
           std::vector<Field> args)
      : Expr(Kind::Call, loc, range), callee(std::move(callee)),
        args(std::move(args)) {}
  const Expr &getCallee() const { return *callee; }
  llvm::ArrayRef<Field> getArgs() const { return args; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }

private:
  ExprPtr callee;
  std::vector<Field> args;
};

/// `base[index]`; also `base.0`, which means the same.
class IndexExpr : public Expr {
public:
  IndexExpr(llvm::SMLoc loc, llvm::SMRange range, ExprPtr base, ExprPtr index)
      : Expr(Kind::Index, loc, range), base(std::move(base)),
        index(std::move(index)) {}
  const Expr &getBase() const { return *base; }
  const Expr &getIndex() const { return *index; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Index; }

private:
  ExprPtr base, index;
};

/// `base[lo:hi]`; either bound may be absent.
class SliceExpr : public Expr {
public:
  SliceExpr(llvm::SMLoc loc, llvm::SMRange range, ExprPtr base, ExprPtr lo,
            ExprPtr hi)
      : Expr(Kind::Slice, loc, range), base(std::move(base)), lo(std::move(lo)),
        hi(std::move(hi)) {}
  const Expr &getBase() const { return *base; }
  /// The lower bound, or null.
  const Expr *getLo() const { return lo.get(); }
  /// The upper bound, or null.
  const Expr *getHi() const { return hi.get(); }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Slice; }

private:
  ExprPtr base, lo, hi;
};

/// The binary operators, in no particular order.
enum class BinaryOp { Add, Sub, Mul, Div, MatMul };

/// The operator's spelling (`+`, `@`, ...).
llvm::StringRef spell(BinaryOp op);

/// `lhs op rhs`. `loc` is the operator.
class BinaryExpr : public Expr {
public:
  BinaryExpr(llvm::SMLoc loc, llvm::SMRange range, BinaryOp op, ExprPtr lhs,
             ExprPtr rhs)
      : Expr(Kind::Binary, loc, range), op(op), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  BinaryOp getOp() const { return op; }
  const Expr &getLhs() const { return *lhs; }
  const Expr &getRhs() const { return *rhs; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }

private:
  BinaryOp op;
  ExprPtr lhs, rhs;
};

/// Unary minus.
class NegExpr : public Expr {
public:
  NegExpr(llvm::SMLoc loc, llvm::SMRange range, ExprPtr operand)
      : Expr(Kind::Neg, loc, range), operand(std::move(operand)) {}
  const Expr &getOperand() const { return *operand; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Neg; }

private:
  ExprPtr operand;
};

/// `(a, b)` or `(dp = 4, tp = 2)`; `(x)` alone is just `x` and `()` is empty.
class TupleExpr : public Expr {
public:
  TupleExpr(llvm::SMLoc loc, llvm::SMRange range, std::vector<Field> items)
      : Expr(Kind::Tuple, loc, range), items(std::move(items)) {}
  llvm::ArrayRef<Field> getItems() const { return items; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Tuple; }

private:
  std::vector<Field> items;
};

/// `[a, b, ...]`.
class ListExpr : public Expr {
public:
  ListExpr(llvm::SMLoc loc, llvm::SMRange range, std::vector<ExprPtr> items)
      : Expr(Kind::List, loc, range), items(std::move(items)) {}
  llvm::ArrayRef<ExprPtr> getItems() const { return items; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }

private:
  std::vector<ExprPtr> items;
};

/// `{key: value, ...}`; keys are names or strings.
class RecordExpr : public Expr {
public:
  RecordExpr(llvm::SMLoc loc, llvm::SMRange range, std::vector<Field> fields)
      : Expr(Kind::Record, loc, range), fields(std::move(fields)) {}
  llvm::ArrayRef<Field> getFields() const { return fields; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Record; }

private:
  std::vector<Field> fields;
};

/// `...` as the leading dimension of a tensor type.
class EllipsisExpr : public Expr {
public:
  EllipsisExpr(llvm::SMLoc loc, llvm::SMRange range)
      : Expr(Kind::Ellipsis, loc, range) {}
  static bool classof(const Expr *e) { return e->getKind() == Kind::Ellipsis; }
};

//===----------------------------------------------------------------------===//
// Types, models and their members
//===----------------------------------------------------------------------===//

/// A written type: `int`, `f32`, `f32[B, T, width]`, `i32[...]`. Whether the
/// name is a valid dtype or argument type is Sema's business.
struct TypeExpr {
  std::string name;
  llvm::SMLoc loc;
  bool hasDims = false;      ///< `f32[]` has dims (none); `f32` has not.
  std::vector<ExprPtr> dims; ///< May start with an EllipsisExpr.
};

/// `name: type [= default]` in a model's or source's argument list.
struct ArgDecl {
  std::string name;
  llvm::SMLoc loc;
  std::string type;
  llvm::SMLoc typeLoc;
  ExprPtr defaultValue; ///< May be null.
};

/// `@column` and friends; the name is checked by Sema.
struct Annotation {
  std::string name;
  llvm::SMLoc loc;
};

/// A model member: a learnable parameter or a submodule.
class Member {
public:
  enum class Kind { Param, Submodule };

  Member(Kind kind, std::string name, llvm::SMLoc loc,
         std::vector<Annotation> annotations)
      : kind(kind), name(std::move(name)), loc(loc),
        annotations(std::move(annotations)) {}
  virtual ~Member() = default;

  Kind getKind() const { return kind; }
  llvm::StringRef getName() const { return name; }
  llvm::SMLoc getLoc() const { return loc; }
  llvm::ArrayRef<Annotation> getAnnotations() const { return annotations; }

private:
  const Kind kind;
  std::string name;
  llvm::SMLoc loc;
  std::vector<Annotation> annotations;
};

/// `name: param[dims] [= init] [if cond] annotation*`.
class ParamMember : public Member {
public:
  ParamMember(std::string name, llvm::SMLoc loc,
              std::vector<Annotation> annotations, std::vector<ExprPtr> dims,
              ExprPtr init, ExprPtr cond)
      : Member(Kind::Param, std::move(name), loc, std::move(annotations)),
        dims(std::move(dims)), init(std::move(init)), cond(std::move(cond)) {}
  llvm::ArrayRef<ExprPtr> getDims() const { return dims; }
  /// The initialiser call, or null.
  const Expr *getInit() const { return init.get(); }
  /// The presence condition, or null.
  const Expr *getCond() const { return cond.get(); }
  static bool classof(const Member *m) { return m->getKind() == Kind::Param; }

private:
  std::vector<ExprPtr> dims;
  ExprPtr init, cond;
};

/// `name = Call(...) [* count] annotation*`.
class SubmoduleMember : public Member {
public:
  SubmoduleMember(std::string name, llvm::SMLoc loc,
                  std::vector<Annotation> annotations, ExprPtr call,
                  ExprPtr count)
      : Member(Kind::Submodule, std::move(name), loc, std::move(annotations)),
        call(std::move(call)), count(std::move(count)) {}
  /// The constructor expression (Sema requires a call of a model).
  const Expr &getCall() const { return *call; }
  /// The list length of `* n`, or null for a single submodule.
  const Expr *getCount() const { return count.get(); }
  static bool classof(const Member *m) {
    return m->getKind() == Kind::Submodule;
  }

private:
  ExprPtr call, count;
};

/// A statement of a forward body.
class Stmt {
public:
  enum class Kind { Assign, Return };
  Stmt(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  llvm::SMLoc getLoc() const { return loc; }

private:
  const Kind kind;
  llvm::SMLoc loc;
};

/// `name = value`: binds a new value (rebinding makes a new SSA value).
class AssignStmt : public Stmt {
public:
  AssignStmt(llvm::SMLoc loc, std::string name, ExprPtr value)
      : Stmt(Kind::Assign, loc), name(std::move(name)),
        value(std::move(value)) {}
  llvm::StringRef getName() const { return name; }
  const Expr &getValue() const { return *value; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Assign; }

private:
  std::string name;
  ExprPtr value;
};

/// `return a, b`.
class ReturnStmt : public Stmt {
public:
  ReturnStmt(llvm::SMLoc loc, std::vector<ExprPtr> values)
      : Stmt(Kind::Return, loc), values(std::move(values)) {}
  llvm::ArrayRef<ExprPtr> getValues() const { return values; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Return; }

private:
  std::vector<ExprPtr> values;
};

/// `input: Type` of a forward.
struct ForwardParam {
  std::string name;
  llvm::SMLoc loc;
  TypeExpr type;
};

/// `forward(params) -> results { body }`.
struct ForwardDecl {
  llvm::SMLoc loc;
  std::vector<ForwardParam> params;
  std::vector<TypeExpr> results;
  std::vector<std::unique_ptr<Stmt>> body;
  llvm::SMLoc endLoc; ///< The closing '}'.
};

//===----------------------------------------------------------------------===//
// Top-level declarations
//===----------------------------------------------------------------------===//

/// `KEY = value` in train, parallel and deploy blocks.
struct KeyValue {
  std::string key;
  llvm::SMLoc keyLoc;
  ExprPtr value;
};

/// A top-level declaration.
class Decl {
public:
  enum class Kind { Model, Source, Train, Parallel, Deploy };
  Decl(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
  virtual ~Decl() = default;
  Kind getKind() const { return kind; }
  /// The declaration's keyword.
  llvm::SMLoc getLoc() const { return loc; }

private:
  const Kind kind;
  llvm::SMLoc loc;
};

/// `model Name(args) { members forward }`.
class ModelDecl : public Decl {
public:
  ModelDecl(llvm::SMLoc loc, std::string name, llvm::SMLoc nameLoc,
            std::vector<ArgDecl> args,
            std::vector<std::unique_ptr<Member>> members,
            std::unique_ptr<ForwardDecl> forward)
      : Decl(Kind::Model, loc), name(std::move(name)), nameLoc(nameLoc),
        args(std::move(args)), members(std::move(members)),
        forward(std::move(forward)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMLoc getNameLoc() const { return nameLoc; }
  llvm::ArrayRef<ArgDecl> getArgs() const { return args; }
  llvm::ArrayRef<std::unique_ptr<Member>> getMembers() const { return members; }
  /// The forward, or null when the model declares none.
  const ForwardDecl *getForward() const { return forward.get(); }
  static bool classof(const Decl *d) { return d->getKind() == Kind::Model; }

private:
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<ArgDecl> args;
  std::vector<std::unique_ptr<Member>> members;
  std::unique_ptr<ForwardDecl> forward;
};

/// `field: Type` of a data source: one sample's field.
struct SourceField {
  std::string name;
  llvm::SMLoc loc;
  TypeExpr type;
};

/// `source name(args) { fields }`: a data reader the runtime implements,
/// declared in the standard library (a dt extension, see grammar/DT.g4).
class SourceDecl : public Decl {
public:
  SourceDecl(llvm::SMLoc loc, std::string name, llvm::SMLoc nameLoc,
             std::vector<ArgDecl> args, std::vector<SourceField> fields)
      : Decl(Kind::Source, loc), name(std::move(name)), nameLoc(nameLoc),
        args(std::move(args)), fields(std::move(fields)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMLoc getNameLoc() const { return nameLoc; }
  llvm::ArrayRef<ArgDecl> getArgs() const { return args; }
  llvm::ArrayRef<SourceField> getFields() const { return fields; }
  static bool classof(const Decl *d) { return d->getKind() == Kind::Source; }

private:
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<ArgDecl> args;
  std::vector<SourceField> fields;
};

/// `train [name] { KEY = value ... }`.
class TrainDecl : public Decl {
public:
  TrainDecl(llvm::SMLoc loc, std::string name, llvm::SMLoc nameLoc,
            std::vector<KeyValue> entries)
      : Decl(Kind::Train, loc), name(std::move(name)), nameLoc(nameLoc),
        entries(std::move(entries)) {}
  /// The job's name, empty when not written.
  llvm::StringRef getName() const { return name; }
  llvm::SMLoc getNameLoc() const { return nameLoc; }
  llvm::ArrayRef<KeyValue> getEntries() const { return entries; }
  static bool classof(const Decl *d) { return d->getKind() == Kind::Train; }

private:
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<KeyValue> entries;
};

/// `shard PATH = [axis-or-_, ...]` in a parallel block.
struct ShardEntry {
  llvm::SMLoc loc; ///< The `shard` keyword.
  ExprPtr path;
  ExprPtr layout;
};

/// `parallel { KEY = value ... shard PATH = [...] }`.
class ParallelDecl : public Decl {
public:
  ParallelDecl(llvm::SMLoc loc, std::vector<KeyValue> entries,
               std::vector<ShardEntry> shards)
      : Decl(Kind::Parallel, loc), entries(std::move(entries)),
        shards(std::move(shards)) {}
  llvm::ArrayRef<KeyValue> getEntries() const { return entries; }
  llvm::ArrayRef<ShardEntry> getShards() const { return shards; }
  static bool classof(const Decl *d) { return d->getKind() == Kind::Parallel; }

private:
  std::vector<KeyValue> entries;
  std::vector<ShardEntry> shards;
};

/// `deploy target { KEY = value ... }`.
class DeployDecl : public Decl {
public:
  DeployDecl(llvm::SMLoc loc, std::string target, llvm::SMLoc targetLoc,
             std::vector<KeyValue> entries)
      : Decl(Kind::Deploy, loc), target(std::move(target)),
        targetLoc(targetLoc), entries(std::move(entries)) {}
  llvm::StringRef getTarget() const { return target; }
  llvm::SMLoc getTargetLoc() const { return targetLoc; }
  llvm::ArrayRef<KeyValue> getEntries() const { return entries; }
  static bool classof(const Decl *d) { return d->getKind() == Kind::Deploy; }

private:
  std::string target;
  llvm::SMLoc targetLoc;
  std::vector<KeyValue> entries;
};

/// `import nn` (stdlib) or `import "path.dt" as name`.
struct ImportDecl {
  llvm::SMLoc loc; ///< The `import` keyword.
  bool isStdlib = false;
  std::string path; ///< The stdlib module name, or the file path as written.
  llvm::SMLoc pathLoc;
  std::string alias; ///< The name the importing file uses.
  llvm::SMLoc aliasLoc;
};

/// One parsed file.
class Module {
public:
  Module(std::string filename, unsigned bufferId)
      : filename(std::move(filename)), bufferId(bufferId) {}

  llvm::StringRef getFilename() const { return filename; }
  /// The file's buffer in the SourceMgr it was parsed from.
  unsigned getBufferId() const { return bufferId; }
  llvm::ArrayRef<ImportDecl> getImports() const { return imports; }
  llvm::ArrayRef<std::unique_ptr<Decl>> getDecls() const { return decls; }

  void addImport(ImportDecl import) { imports.push_back(std::move(import)); }
  void addDecl(std::unique_ptr<Decl> decl) { decls.push_back(std::move(decl)); }

private:
  std::string filename;
  unsigned bufferId;
  std::vector<ImportDecl> imports;
  std::vector<std::unique_ptr<Decl>> decls;
};

/// Prints `module` as an indented tree with line:col positions, the output of
/// `dtc --emit=ast`.
void dump(const Module &module, const llvm::SourceMgr &sourceMgr,
          llvm::raw_ostream &os);

/// Prints `expr` back as source text (canonical spacing); used in messages.
std::string toSource(const Expr &expr);

} // namespace dt::ast

#endif // DT_AST_AST_H
