//===- Value.h - What expressions evaluate to during checking ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One evaluator serves model arguments, dimensions, forward bodies, the loss
// and the train/parallel/deploy keys, so its values cover all of them:
// scalars (integers are symbolic), tensors (dtype, symbolic shape and, in a
// trace, the builder's handle), aggregates, layers and lists of layers, and
// references to builtins, imported modules, models and data sources.
// `Unknown` is what a generic check cannot know; operations on it yield
// Unknown silently, so one error never cascades.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_VALUE_H
#define DT_LIB_SEMA_VALUE_H

#include "Shape.h"

#include "dt/AST/AST.h"
#include "dt/Sema/Trace.h"

namespace dt::sema {

struct Instance;
struct InstanceChild;
struct InstanceParam;
struct ModuleScope;

/// A value during evaluation.
struct EvalValue {
  enum class Kind {
    Unknown,
    Int,
    Float,
    Bool,
    String,
    Tensor,
    Tuple,
    List,
    Record,
    Absent,   ///< A `param ... if cond` member whose cond is false.
    Instance, ///< A layer.
    Layers,   ///< A list of layers, or a slice of one.
    Builtin,  ///< A builtin op or function.
    Module,   ///< An imported module.
    Model,    ///< A model declaration.
    Source,   ///< A data source declaration.
    Data,     ///< `data` in the loss.
  };

  Kind kind = Kind::Unknown;

  // Scalars. Unknown floats, bools and strings of a generic check are
  // their kind without a value.
  SymExpr intValue;
  std::optional<double> floatValue;
  std::optional<bool> boolValue;
  std::optional<std::string> stringValue;

  // Tensors.
  DType dtype = DType::F32;
  Shape shape;
  TraceValue handle;
  /// Integer tensors: every element is below this (set by iota), so that an
  /// embedding lookup out of the table can be found before run time.
  std::optional<SymExpr> upperBound;
  /// A parameter read as it is (`running_mean`, not `running_mean * 1`): the
  /// ops that update state (batch_norm's running statistics) need to know
  /// which.
  const InstanceParam *param = nullptr;

  // Tuple, List, Record (keys: one per item for records and named tuples).
  std::vector<EvalValue> items;
  std::vector<std::string> keys;

  // References.
  const sema::Instance *instance = nullptr;
  const InstanceChild *layers = nullptr;
  int64_t lo = 0, hi = 0; ///< Layers: the slice [lo, hi) of the list.
  std::string name;       ///< Builtin: its name. Absent: the member's name.
  const ModuleScope *module = nullptr;
  const ast::ModelDecl *model = nullptr;
  const ast::SourceDecl *source = nullptr;
  DataRole role = DataRole::Train;

  static EvalValue unknown() { return {}; }
  static EvalValue getInt(SymExpr value);
  static EvalValue getFloat(std::optional<double> value);
  static EvalValue getBool(std::optional<bool> value);
  static EvalValue getString(std::optional<std::string> value);
  static EvalValue getTensor(DType dtype, Shape shape, TraceValue handle = {});

  bool isUnknown() const { return kind == Kind::Unknown; }
  bool isTensor() const { return kind == Kind::Tensor; }
  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
};

/// A short description of a value's kind for messages: `an integer`,
/// `f32[B, 256]`, `a layer (nn.Linear)`.
std::string describe(const EvalValue &value, const SymContext &syms);

} // namespace dt::sema

#endif // DT_LIB_SEMA_VALUE_H
