//===- Eval.h - The evaluator behind checking and tracing -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One evaluator for every expression of a program. In Generic mode it checks a
// model's forward with symbolic dimensions: a call of a submodule is checked
// against the callee's declared forward signature and yields its declared
// result. In Concrete mode every dimension is known, calls inline the callee's
// body (lists unroll), and with an Emitter each primitive op is handed to a
// GraphBuilder (traceLoss). Shape rules exist only here (and in Shape.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_EVAL_H
#define DT_LIB_SEMA_EVAL_H

#include "Context.h"
#include "Instance.h"

#include "dt/Sema/Trace.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/LogicalResult.h"

#include <map>

namespace dt::sema {

using llvm::FailureOr;
using llvm::LogicalResult;

using ArgList = std::vector<std::pair<std::string, EvalValue>>;

/// Whether the model takes its sizes from a Hugging Face config.json
/// (`nn.Llama(config = "PATH")`, `nn.LlamaTied`, HFConfig.cpp).
bool takesHFConfig(const ModuleScope &scope, const ast::ModelDecl &decl);

/// The declaration a call of `decl` with `args` (bound from `fields`)
/// instantiates: `decl` itself, except for standard-library models whose
/// structure an argument chooses (nn.ResNet's depth; StdlibModels.cpp). A
/// value no declaration builds is a located error.
FailureOr<const ast::ModelDecl *>
chooseStdlibModel(SemaContext &ctx, const ModuleScope &scope,
                  const ast::ModelDecl &decl, const ArgList &args,
                  llvm::ArrayRef<ast::Field> fields, llvm::SMLoc callLoc);

/// The arguments of stdlib model `model` (Llama, LlamaTied) that a
/// LlamaConfig `config.json` at `path` gives, by argument name; a located
/// error at `loc` for a file that model cannot build.
FailureOr<llvm::StringMap<EvalValue>>
argsFromHFConfig(SemaContext &ctx, llvm::StringRef model, llvm::StringRef path,
                 llvm::SMLoc loc);

/// The `model_type` of the Hugging Face config.json at `path` (which
/// nn.SequenceClassifier(config = ...) chooses its classifier by); a located
/// error at `loc` for a missing file, no JSON or no model_type.
FailureOr<std::string> hfModelType(SemaContext &ctx, llvm::StringRef path,
                                   llvm::SMLoc loc);

/// Where names are looked up.
struct Frame {
  const ModuleScope *module = nullptr;
  /// The instance whose forward runs (its members are visible), or null.
  const Instance *instance = nullptr;
  /// Arguments visible by name.
  const ArgList *args = nullptr;
  llvm::StringMap<EvalValue> locals;
  /// The trace scope of ops emitted here.
  std::string scope;
  /// Tensor builtins are usable (forward bodies and the loss).
  bool tensorContext = false;
};

/// A data source as the loss sees it.
struct DataBinding {
  DataRole role = DataRole::Train;
  std::string sourceName; ///< `nn.tokens`, for messages.
  struct Field {
    std::string name;
    DType dtype;
    Shape sample; ///< Per-sample shape; may hold run-time sizes.
  };
  std::vector<Field> fields;
  SymExpr batch;
};

/// An attention op seen by a concrete trace (for tensor-parallel checks).
struct AttentionUse {
  llvm::SMLoc loc;
  std::string scope;
  int64_t heads;
};

/// Hands primitive ops to a GraphBuilder, once per parameter and input.
class Emitter {
public:
  Emitter(GraphBuilder &builder, const Job &job, const DiagnosticEngine &diag)
      : builder(builder), job(job), diag(diag) {}

  TraceValue param(unsigned index);
  TraceValue input(DataRole role, llvm::StringRef field,
                   const TensorType &type);
  TraceValue constant(double value, DType dtype);
  TraceValue constant(int64_t value, DType dtype);
  llvm::SmallVector<TraceValue, 1> op(PrimOp kind,
                                      llvm::ArrayRef<TraceValue> operands,
                                      const PrimAttrs &attrs,
                                      llvm::ArrayRef<TensorType> results,
                                      llvm::SMLoc loc, llvm::StringRef scope);

private:
  GraphBuilder &builder;
  const Job &job;
  const DiagnosticEngine &diag;
  std::map<unsigned, TraceValue> params;
  std::map<std::string, TraceValue> inputs;
};

/// A parameter of a builtin, model or source call.
struct ParamSpec {
  std::string name;
  bool required = true;
};

/// Binds `args` to `params` by position, then by name. Reports unknown,
/// repeated and missing arguments at the call. Result: per param, its
/// argument or null.
FailureOr<std::vector<const ast::Field *>>
bindCallArgs(SemaContext &ctx, llvm::ArrayRef<ast::Field> args,
             llvm::ArrayRef<ParamSpec> params, llvm::StringRef callee,
             llvm::SMLoc callLoc);

/// The evaluator.
class Evaluator {
public:
  enum class Mode { Generic, Concrete };

  Evaluator(SemaContext &ctx, Mode mode, Emitter *emitter = nullptr)
      : ctx(ctx), mode(mode), emitter(emitter) {}

  SemaContext &getContext() { return ctx; }
  Mode getMode() const { return mode; }
  bool isConcrete() const { return mode == Mode::Concrete; }

  /// Evaluates `expr` in `frame`. Failure means an error was reported.
  FailureOr<EvalValue> eval(const ast::Expr &expr, Frame &frame);

  /// Evaluates `expr` and requires an integer (symbolic allowed); `what`
  /// names it in messages.
  FailureOr<SymExpr> evalInt(const ast::Expr &expr, Frame &frame,
                             llvm::StringRef what);

  // --- models (Instantiate.cpp) -----------------------------------------

  /// A model call resolved: the declaration it instantiates and its bound
  /// arguments.
  struct BoundModel {
    const ModuleScope *scope = nullptr;
    const ast::ModelDecl *decl = nullptr;
    ArgList args;
  };
  /// Resolves and binds `call`, which `what` ("'model'", "'blocks'") must
  /// make a call of a model; `checkDecl` runs the declaration's generic
  /// check first. Standard-library calls may instantiate another declaration
  /// than the one written (nn.ResNet's depth, nn.SequenceClassifier's
  /// encoder; StdlibModels.cpp).
  FailureOr<BoundModel> bindModelCall(const ast::CallExpr &call, Frame &frame,
                                      llvm::StringRef what, bool checkDecl);
  /// Binds and type-checks a model constructor's arguments (defaults filled).
  FailureOr<ArgList> bindModelArgs(const ModuleScope &scope,
                                   const ast::ModelDecl &decl,
                                   llvm::ArrayRef<ast::Field> args,
                                   Frame &caller, llvm::SMLoc callLoc);
  /// The second half of bindModelArgs: `bound` holds, per argument of
  /// `decl`, the field that gives it or null; `configField`, if any, is a
  /// `config = "config.json"` that gives the rest (HFConfig.cpp).
  FailureOr<ArgList> bindModelFields(const ModuleScope &scope,
                                     const ast::ModelDecl &decl,
                                     llvm::ArrayRef<const ast::Field *> bound,
                                     const ast::Field *configField,
                                     Frame &caller, llvm::SMLoc callLoc);
  /// Checks `value` against an argument's declared type, converting ints to
  /// floats where a float is declared.
  FailureOr<EvalValue> checkArgType(const ast::ArgDecl &arg, EvalValue value,
                                    llvm::SMLoc loc, llvm::StringRef callee);
  /// Instantiates `decl` with bound `args`.
  FailureOr<std::unique_ptr<Instance>>
  instantiate(const ModuleScope &scope, const ast::ModelDecl &decl,
              ArgList args, std::string path, const Instance *parent,
              std::optional<Annotation> annotation, llvm::SMLoc createdAt);

  // --- forward (Forward.cpp) --------------------------------------------

  /// Generic check of `inst`'s forward with fresh symbolic inputs.
  LogicalResult checkForward(const Instance &inst);
  /// Calls a layer or a list of layers.
  FailureOr<EvalValue> callLayers(const EvalValue &callee,
                                  const ast::CallExpr &call, Frame &frame);
  /// Calls `inst`'s forward with evaluated `inputs`; `desc` names the callee
  /// in messages.
  FailureOr<EvalValue> callInstance(const Instance &inst,
                                    llvm::ArrayRef<EvalValue> inputs,
                                    const ast::CallExpr &call,
                                    const std::string &desc);

  // --- data and records of a concrete trace -----------------------------

  /// The data sources `data.<field>` reads from, by role.
  const DataBinding *dataBindings[2] = {nullptr, nullptr};
  /// Fields read by the trace, by role.
  std::set<std::string> usedFields[2];
  std::vector<AttentionUse> attentionUses;
  /// The operands of the last cross_entropy traced (a classifier's logits
  /// and labels when the loss is a top-level cross_entropy).
  std::optional<std::pair<EvalValue, EvalValue>> lastCrossEntropy;

private:
  friend class TensorOps;

  /// nn.SequenceClassifier(encoder, classes) as the encoder family's
  /// classifier (StdlibModels.cpp).
  FailureOr<BoundModel> bindSequenceClassifier(const ModuleScope &nn,
                                               const ast::CallExpr &call,
                                               Frame &frame, bool checkDecl);
  /// nn.SequenceClassifier(config = ..., classes): by the file's model_type.
  FailureOr<BoundModel> bindClassifierFromConfig(const ModuleScope &nn,
                                                 const ast::CallExpr &call,
                                                 const ast::Field &configField,
                                                 const ast::Field &classes,
                                                 Frame &frame, bool checkDecl);

  FailureOr<EvalValue> evalName(const ast::NameExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalMember(const ast::MemberExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalCall(const ast::CallExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalIndex(const ast::IndexExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalSlice(const ast::SliceExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalBinary(const ast::BinaryExpr &expr, Frame &frame);
  FailureOr<EvalValue> evalNeg(const ast::NegExpr &expr, Frame &frame);
  FailureOr<EvalValue> scalarBinary(ast::BinaryOp op, const EvalValue &lhs,
                                    const EvalValue &rhs, llvm::SMLoc loc);
  FailureOr<EvalValue> memberOfInstance(const Instance &inst,
                                        llvm::StringRef name, llvm::SMLoc loc,
                                        Frame &frame);
  FailureOr<EvalValue> dataField(DataRole role, llvm::StringRef name,
                                 llvm::SMLoc loc);
  /// The names visible in `frame` (for suggestions).
  std::vector<std::string> visibleNames(const Frame &frame) const;

  // Builtins.cpp
  FailureOr<EvalValue> callBuiltin(llvm::StringRef name,
                                   const ast::CallExpr &call, Frame &frame);

  // Forward.cpp
  struct Binding;
  LogicalResult bindInput(const ast::ForwardParam &param,
                          const EvalValue &actual, Frame &callee,
                          Binding &binding, llvm::SMLoc at, llvm::SMRange range,
                          const std::string &desc);
  FailureOr<std::vector<EvalValue>>
  declaredResults(const ast::ForwardDecl &forward, Frame &callee,
                  const Binding &binding);
  FailureOr<std::vector<EvalValue>> runBody(const ast::ForwardDecl &forward,
                                            Frame &frame);
  LogicalResult checkReturns(const ast::ForwardDecl &forward,
                             llvm::ArrayRef<EvalValue> actual,
                             llvm::ArrayRef<EvalValue> declared,
                             const Instance &inst);
  FailureOr<EvalValue> freshInput(const ast::ForwardParam &param, Frame &frame,
                                  Binding &binding);

  // Instantiate.cpp
  LogicalResult instantiateParam(Instance &inst, const ast::ParamMember &member,
                                 Frame &frame);
  LogicalResult instantiateChild(Instance &inst,
                                 const ast::SubmoduleMember &member,
                                 Frame &frame);
  FailureOr<Initializer> evalInitializer(const ast::Expr &init,
                                         const InstanceParam &param,
                                         Frame &frame);

  SemaContext &ctx;
  Mode mode;
  Emitter *emitter;
};

/// Checks a model declaration generically (once; memoized in the context).
/// Returns failure when the model has errors (reported once).
LogicalResult checkModelDecl(SemaContext &ctx, const ModuleScope &scope,
                             const ast::ModelDecl &decl);

/// The annotation named `name`, or nullopt.
std::optional<Annotation> parseAnnotation(llvm::StringRef name);

} // namespace dt::sema

#endif // DT_LIB_SEMA_EVAL_H
