//===- Instance.h - Instantiated models -------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A model declaration with its arguments bound: its parameters' shapes and
// its submodules, recursively. Generic checks instantiate with symbolic
// arguments (a list of symbolic length keeps one representative layer);
// the train job instantiates with constants, expanding every list. The Job's
// ModelInstance tree is made from the concrete one.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_INSTANCE_H
#define DT_LIB_SEMA_INSTANCE_H

#include "Value.h"

#include "dt/Sema/Job.h"

#include <deque>

namespace dt::sema {

struct Instance;

/// A parameter member of an instance.
struct InstanceParam {
  const ast::ParamMember *member = nullptr;
  /// False for `param ... if cond` with a false cond.
  bool present = true;
  llvm::SmallVector<SymExpr, 2> dims;
  /// Concrete instances only.
  Initializer init;
  std::optional<Annotation> annotation;
  std::optional<unsigned> tensorDim;
  /// `@buffer`: state that an op updates (running statistics), not trained.
  bool buffer = false;
  /// Index in Job::params (concrete instances), or -1.
  int jobIndex = -1;
};

/// A submodule member of an instance: one layer or a list.
struct InstanceChild {
  const ast::SubmoduleMember *member = nullptr;
  bool isList = false;
  /// The list length; for a generic list of symbolic length, `items` holds a
  /// single representative layer.
  SymExpr count;
  bool symbolicCount = false;
  std::vector<std::unique_ptr<Instance>> items;
  std::optional<Annotation> annotation;
};

/// A model with its arguments bound.
struct Instance {
  const ModuleScope *module = nullptr;
  const ast::ModelDecl *decl = nullptr;
  /// `nn.Linear`.
  std::string displayName;
  /// `blocks.0.attn`; empty for a root.
  std::string path;
  bool concrete = false;
  /// Every argument in declaration order (defaults filled).
  std::vector<std::pair<std::string, EvalValue>> args;
  std::vector<InstanceParam> params;
  /// A deque: children hold move-only layers and are referred to by pointer.
  std::deque<InstanceChild> children;
  const Instance *parent = nullptr;
  std::optional<Annotation> annotation;
  /// Where it was created (the member, or the train block's `model =`).
  llvm::SMLoc loc;
  /// A generic instance some of whose members failed (and were reported).
  bool incomplete = false;

  const InstanceParam *findParam(llvm::StringRef name) const;
  const InstanceChild *findChild(llvm::StringRef name) const;
  const EvalValue *findArg(llvm::StringRef name) const;
  /// `'fc1' (nn.Linear)` style description for messages.
  std::string describe() const;
};

/// The path of item `index` of list `child` of `parent`: `blocks.3`.
std::string childPath(const Instance &parent, llvm::StringRef name,
                      std::optional<int64_t> index);

} // namespace dt::sema

#endif // DT_LIB_SEMA_INSTANCE_H
