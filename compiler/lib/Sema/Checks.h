//===- Checks.h - Checks of train, parallel and deploy blocks ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The block-level checks share three tools: a key evaluator (block values to
// constants with typed accessors and record checks), model paths
// (`model.blocks[0:4]`, `model.wte.weight`) resolved against the concrete
// instance tree, and the trace context that the Job keeps for traceLoss.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_CHECKS_H
#define DT_LIB_SEMA_CHECKS_H

#include "Eval.h"

#include "dt/Sema/Job.h"

namespace dt::sema {

/// What traceLoss needs: Sema's state, the concrete instance tree, the loss
/// and the data sources as the evaluator sees them.
class TraceContext {
public:
  std::unique_ptr<SemaContext> ctx;
  std::unique_ptr<Instance> root;
  const ast::Expr *loss = nullptr;
  const ModuleScope *main = nullptr;
  /// By DataRole; `hasEval` says whether the eval binding is meaningful.
  DataBinding data[2];
  bool hasEval = false;
};

/// Evaluates the values of block keys to constants.
class KeyEvaluator {
public:
  KeyEvaluator(SemaContext &ctx, const ModuleScope &scope)
      : ctx(ctx), ev(ctx, Evaluator::Mode::Concrete) {
    frame.module = &scope;
  }

  FailureOr<Constant> constant(const ast::Expr &expr);
  /// An integer >= `min`.
  FailureOr<int64_t> integer(const ast::Expr &expr, llvm::StringRef what,
                             int64_t min);
  /// A finite number (integers convert).
  FailureOr<double> number(const ast::Expr &expr, llvm::StringRef what);
  FailureOr<bool> boolean(const ast::Expr &expr, llvm::StringRef what);
  FailureOr<std::string> string(const ast::Expr &expr, llvm::StringRef what);
  /// A bare name (`dp`, `bf16`); a string is accepted as well.
  FailureOr<std::string> name(const ast::Expr &expr, llvm::StringRef what);

  /// A record whose keys are among `allowed` (name, required). Returns the
  /// field per allowed key, null when absent.
  FailureOr<std::vector<const ast::Field *>>
  record(const ast::Expr &expr, llvm::StringRef what,
         llvm::ArrayRef<std::pair<llvm::StringRef, bool>> allowed);

  SemaContext &ctx;
  Evaluator ev;
  Frame frame;
};

/// A path into the model.
struct PathTarget {
  enum class Kind { Layer, Layers, Param };
  Kind kind = Kind::Layer;
  const Instance *layer = nullptr; ///< Layer; for Param, its owner.
  const InstanceChild *list = nullptr;
  int64_t lo = 0, hi = 0; ///< Layers: the slice.
  const InstanceParam *param = nullptr;
  /// Normalised: `blocks[0:4]`, `blocks.0.attn`, `wte.weight`; "" is the root.
  std::string text;

  /// The layers the path covers (Layer: itself; Layers: the slice).
  std::vector<const Instance *> layers() const;
};

/// Resolves `model.a.b[i]`-style paths (the `model.` prefix is optional).
FailureOr<PathTarget> resolvePath(SemaContext &ctx, const ast::Expr &expr,
                                  const Instance &root);

/// Converts a concrete scalar or aggregate to a Constant.
FailureOr<Constant> toConstant(SemaContext &ctx, const EvalValue &value,
                               llvm::SMLoc loc);

/// Checks the parallel block and fills `job.parallel`. With a train block,
/// `job.model` and `root` are set and the model-dependent checks run.
LogicalResult checkParallel(SemaContext &ctx, const ModuleScope &main,
                            const ast::ParallelDecl &decl, Job &job,
                            const Instance *root);

/// Checks the train block (and the parallel block, which the batch layout
/// depends on) and builds the job.
LogicalResult checkTrain(SemaContext &ctx, const ModuleScope &main,
                         const ast::TrainDecl &train,
                         const ast::ParallelDecl *parallel, Job &job,
                         TraceContext &trace);

/// Checks one deploy block against its target's keys and, when `parallel`
/// is known (not null), its rank count against the mesh.
/// GPUs of a SageMaker instance type: 0 for a CPU instance, nullopt for a
/// GPU instance whose count dt does not know.
/// Names every parameter as a Hugging Face checkpoint does
/// (Job::checkpointNames); with `init = nn.safetensors(...)` (`expr`, or
/// null), checks it against the parameters (and the file's headers when it
/// exists) and sets Job::pretrained.
LogicalResult checkPretrained(SemaContext &ctx, KeyEvaluator &keys,
                              const ast::Expr *expr, Job &job);

/// Every path of the model that leads to parameters (layers, lists, items,
/// parameters), dotted: candidates for "did you mean".
std::vector<std::string> parameterPaths(const Job &job);

/// Which of `names` (dotted paths of the model) a path pattern or list of
/// them names: paths with slices, indices and globs, matching at or below
/// what they name. `what` names the key in errors, `noun` what `names` holds
/// ("parameter"); `candidates` are offered as "did you mean". A pattern that
/// names nothing is an error.
FailureOr<std::vector<bool>>
matchModelPaths(SemaContext &ctx, KeyEvaluator &keys, const ast::Expr &expr,
                const Job &job, llvm::ArrayRef<std::string> names,
                llvm::ArrayRef<std::string> candidates, llvm::StringRef what,
                llvm::StringRef noun);

/// The parameters a path pattern or list of them names (`freeze`,
/// `no_decay`: paths with slices, indices and globs; at or below what they
/// match); `what` names the key in errors. A pattern that names nothing is an
/// error.
FailureOr<std::vector<bool>> matchParamPaths(SemaContext &ctx,
                                             KeyEvaluator &keys,
                                             const ast::Expr &expr,
                                             const Job &job,
                                             llvm::StringRef what);

/// Checks `adapters = nn.lora(...)` against the model as declared and
/// records the Linear layers it targets in `ctx.adapted` (the model must then
/// be instantiated again) and its settings in `job.adapters`.
LogicalResult checkAdapters(SemaContext &ctx, KeyEvaluator &keys,
                            const ast::Expr &expr, Job &job);

/// With adapters in place: freezes every parameter but theirs.
void freezeAllButAdapters(Job &job);

/// Checks `freeze = [...]` and marks the parameters it names frozen.
LogicalResult checkFreeze(SemaContext &ctx, KeyEvaluator &keys,
                          const ast::Expr &expr, Job &job);

std::optional<int> sageMakerGpus(llvm::StringRef instance);

LogicalResult checkDeploy(SemaContext &ctx, const ModuleScope &main,
                          const ast::DeployDecl &decl,
                          const ParallelConfig *parallel, DeployConfig &config);

} // namespace dt::sema

#endif // DT_LIB_SEMA_CHECKS_H
