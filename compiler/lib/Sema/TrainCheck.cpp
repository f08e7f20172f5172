//===- TrainCheck.cpp - The train block and the Job -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The train block is checked key by key, then as a whole:
//   1. keys: known, given once, the required ones present, steps xor epochs;
//   2. values: each key's type and range, optimizer/schedule arguments with
//      their defaults;
//   3. the model: instantiated with constants (lists expanded), flattened into
//      the Job's instance tree and parameter list;
//   4. the data sources, with per-sample field shapes;
//   5. the parallel block (its data axes fix the batch layout), then the batch
//      arithmetic: batch = micro_batch * data-parallel size * accumulation;
//   6. recompute paths; the checkpoint `init` names (PretrainedCheck.cpp) and
//      `freeze` (FreezeCheck.cpp);
//   7. the loss, traced concretely over the global micro-batch
//      (micro_batch * data-parallel size samples) for the train source and the
//      eval source; run-time sizes (the IDX image size) unify with the model's
//      input here;
//   8. tensor-parallel head counts seen by the trace.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "dtrt/data/idx.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {
const char *const kTrainKeys[] = {
    "model",     "data",   "eval",       "loss",     "batch",     "micro_batch",
    "steps",     "epochs", "optimizer",  "schedule", "clip",      "precision",
    "recompute", "seed",   "checkpoint", "log",      "eval_every",
    "init",      "freeze", "adapters"};

/// Whether `expr` calls the name `model` somewhere.
bool callsModel(const ast::Expr &expr) {
  if (const auto *call = llvm::dyn_cast<ast::CallExpr>(&expr)) {
    if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&call->getCallee()))
      if (name->getName() == "model")
        return true;
    if (callsModel(call->getCallee()))
      return true;
    for (const ast::Field &arg : call->getArgs())
      if (callsModel(*arg.value))
        return true;
    return false;
  }
  if (const auto *b = llvm::dyn_cast<ast::BinaryExpr>(&expr))
    return callsModel(b->getLhs()) || callsModel(b->getRhs());
  if (const auto *n = llvm::dyn_cast<ast::NegExpr>(&expr))
    return callsModel(n->getOperand());
  if (const auto *m = llvm::dyn_cast<ast::MemberExpr>(&expr))
    return callsModel(m->getBase());
  if (const auto *i = llvm::dyn_cast<ast::IndexExpr>(&expr))
    return callsModel(i->getBase()) || callsModel(i->getIndex());
  if (const auto *t = llvm::dyn_cast<ast::TupleExpr>(&expr))
    return llvm::any_of(t->getItems(), [](const ast::Field &f) {
      return callsModel(*f.value);
    });
  if (const auto *l = llvm::dyn_cast<ast::ListExpr>(&expr))
    return llvm::any_of(l->getItems(),
                        [](const ast::ExprPtr &e) { return callsModel(*e); });
  return false;
}

class TrainChecker {
public:
  TrainChecker(SemaContext &ctx, const ModuleScope &main,
               const ast::TrainDecl &train, const ast::ParallelDecl *parallel,
               Job &job, TraceContext &trace)
      : ctx(ctx), main(main), train(train), parallel(parallel), job(job),
        trace(trace), keys(ctx, main) {}

  LogicalResult run();

private:
  const ast::Expr *get(llvm::StringRef key) const {
    auto it = entries.find(key.str());
    return it == entries.end() ? nullptr : it->second->value.get();
  }
  llvm::SMLoc keyLoc(llvm::StringRef key) const {
    auto it = entries.find(key.str());
    return it == entries.end() ? train.getLoc() : it->second->keyLoc;
  }

  LogicalResult collectKeys();
  LogicalResult checkScalars();
  FailureOr<llvm::StringRef> recipeCall(const ast::Expr &expr,
                                        llvm::StringRef what,
                                        llvm::ArrayRef<std::string> kinds,
                                        llvm::StringRef expected);
  LogicalResult checkOptimizer(const ast::Expr &expr);
  LogicalResult checkSchedule(const ast::Expr &expr);
  LogicalResult checkRecords();
  LogicalResult checkModel(const ast::Expr &expr);
  std::unique_ptr<ModelInstance> buildTree(Instance &inst,
                                           const ModelInstance *parent);
  FailureOr<DataSource> checkSource(const ast::Expr &expr, llvm::StringRef key,
                                    DataBinding &binding);
  LogicalResult checkBatchLayout();
  LogicalResult resizeDataAxis(int64_t world);
  LogicalResult checkRecompute(const ast::Expr &expr);
  LogicalResult checkLoss(const ast::Expr &loss);
  LogicalResult resolveFields(DataSource &source, const DataBinding &binding,
                              const std::set<std::string> &used,
                              llvm::StringRef key);
  LogicalResult checkTensorParallelHeads(const Evaluator &ev);

  SemaContext &ctx;
  const ModuleScope &main;
  const ast::TrainDecl &train;
  const ast::ParallelDecl *parallel;
  Job &job;
  TraceContext &trace;
  KeyEvaluator keys;
  std::map<std::string, const ast::KeyValue *> entries;
  std::optional<int64_t> microBatchKey;
  /// The optimizer's `no_decay`, resolved against the model once it is built.
  const ast::Expr *noDecay = nullptr;
  std::string noDecayWhat;
};
} // namespace

LogicalResult TrainChecker::collectKeys() {
  bool ok = true;
  std::vector<std::string> known(std::begin(kTrainKeys), std::end(kTrainKeys));
  for (const ast::KeyValue &kv : train.getEntries()) {
    if (!llvm::is_contained(known, kv.key)) {
      ctx.error(kv.keyLoc,
                "unknown train key '" + kv.key + "'" + suggest(kv.key, known));
      ok = false;
      continue;
    }
    auto [it, inserted] = entries.try_emplace(kv.key, &kv);
    if (!inserted) {
      ctx.error(kv.keyLoc, "'" + kv.key + "' is given twice");
      ctx.note(it->second->keyLoc, "first given here");
      ok = false;
    }
  }
  if (get("steps") && get("epochs")) {
    const ast::KeyValue *second = entries["steps"]->keyLoc.getPointer() >
                                          entries["epochs"]->keyLoc.getPointer()
                                      ? entries["steps"]
                                      : entries["epochs"];
    const ast::KeyValue *first =
        second == entries["steps"] ? entries["epochs"] : entries["steps"];
    ctx.error(second->keyLoc, "'steps' and 'epochs' are both given; a job "
                              "trains for one or the other");
    ctx.note(first->keyLoc, "'" + first->key + "' is given here");
    ok = false;
  }
  for (const char *required : {"model", "data", "loss", "batch", "optimizer"}) {
    if (!get(required)) {
      ctx.error(train.getLoc(),
                "the train block needs '" + std::string(required) + "'");
      ok = false;
    }
  }
  if (!get("steps") && !get("epochs")) {
    ctx.error(train.getLoc(), "the train block needs 'steps' or 'epochs'");
    ok = false;
  }
  return success(ok);
}

LogicalResult TrainChecker::checkScalars() {
  bool ok = true;
  auto integer = [&](llvm::StringRef key,
                     int64_t min) -> std::optional<int64_t> {
    const ast::Expr *e = get(key);
    if (!e)
      return std::nullopt;
    FailureOr<int64_t> v = keys.integer(*e, "'" + key.str() + "'", min);
    if (failed(v)) {
      ok = false;
      return std::nullopt;
    }
    return *v;
  };
  job.batch = integer("batch", 1).value_or(0);
  microBatchKey = integer("micro_batch", 1);
  job.steps = integer("steps", 1);
  job.epochs = integer("epochs", 1);
  job.seed = integer("seed", 0).value_or(0);
  job.evalEvery = integer("eval_every", 1).value_or(0);
  if (microBatchKey && job.batch && *microBatchKey > job.batch) {
    ctx.error(get("micro_batch")->getLoc(),
              "micro_batch " + std::to_string(*microBatchKey) +
                  " is larger than batch " + std::to_string(job.batch));
    ok = false;
  }
  if (get("eval_every") && !get("eval")) {
    ctx.error(keyLoc("eval_every"), "'eval_every' needs an 'eval' data source");
    ok = false;
  }
  if (const ast::Expr *e = get("clip")) {
    FailureOr<double> clip = keys.number(*e, "'clip'");
    if (failed(clip)) {
      ok = false;
    } else if (*clip <= 0) {
      ctx.error(e->getLoc(),
                "'clip' must be positive, not " + std::to_string(*clip));
      ok = false;
    } else {
      job.clip = *clip;
    }
  }
  if (const ast::Expr *e = get("precision")) {
    FailureOr<std::string> name = keys.name(*e, "'precision'");
    std::optional<DType> dtype =
        succeeded(name) ? parseDType(*name) : std::nullopt;
    if (succeeded(name) && (!dtype || !isFloat(*dtype))) {
      ctx.error(e->getLoc(), "'precision' must be f32, bf16 or f16, not " +
                                 *name +
                                 suggest(*name, {"f32", "bf16", "f16"}));
      ok = false;
    } else if (dtype) {
      job.precision = *dtype;
      job.precisionLoc = ctx.diag.resolve(e->getLoc());
    } else {
      ok = false;
    }
  }
  return success(ok);
}

/// The name of the call `expr` makes, which must be one of `kinds` (reported
/// as "unknown WHAT '...'; expected EXPECTED").
FailureOr<llvm::StringRef>
TrainChecker::recipeCall(const ast::Expr &expr, llvm::StringRef what,
                         llvm::ArrayRef<std::string> kinds,
                         llvm::StringRef expected) {
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&expr);
  const auto *callee =
      call ? llvm::dyn_cast<ast::NameExpr>(&call->getCallee()) : nullptr;
  if (!callee || !llvm::is_contained(kinds, callee->getName())) {
    std::string written =
        callee ? callee->getName().str() : ast::toSource(expr);
    ctx.error(expr.getLoc(), "unknown " + what + " '" + written +
                                 "'; expected " + expected +
                                 suggest(written, kinds));
    return failure();
  }
  return callee->getName();
}

LogicalResult TrainChecker::checkOptimizer(const ast::Expr &expr) {
  FailureOr<llvm::StringRef> named =
      recipeCall(expr, "optimizer", {"SGD", "Adam", "AdamW"},
                 "SGD(...), Adam(...) or AdamW(...)");
  if (failed(named))
    return failure();
  llvm::StringRef kind = *named;
  const auto *call = llvm::cast<ast::CallExpr>(&expr);
  OptimizerConfig &opt = job.optimizer;
  opt.loc = ctx.diag.resolve(expr.getLoc());
  std::vector<ParamSpec> specs = {{"lr"}};
  if (kind == "SGD") {
    opt.kind = OptimizerConfig::Kind::SGD;
    specs.insert(
        specs.end(),
        {{"momentum", false}, {"nesterov", false}, {"weight_decay", false}});
  } else {
    opt.kind = kind == "Adam" ? OptimizerConfig::Kind::Adam
                              : OptimizerConfig::Kind::AdamW;
    specs.insert(specs.end(), {{"betas", false}, {"eps", false}});
    if (kind == "AdamW") {
      specs.push_back({"weight_decay", false});
      opt.weightDecay = 0.01;
    }
  }
  // Globs of parameters without decay, matched once the model is built.
  if (kind != "Adam")
    specs.push_back({"no_decay", false});
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call->getArgs(), specs, kind, call->getLoc());
  if (failed(bound))
    return failure();
  bool ok = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ast::Field *field = (*bound)[i];
    if (!field)
      continue;
    const ast::Expr &e = *field->value;
    llvm::StringRef name = specs[i].name;
    std::string what = "'" + name.str() + "' of " + kind.str();
    if (name == "no_decay") {
      noDecay = &e;
      noDecayWhat = what;
      continue;
    }
    if (name == "nesterov") {
      FailureOr<bool> b = keys.boolean(e, what);
      ok &= succeeded(b);
      opt.nesterov = succeeded(b) && *b;
      continue;
    }
    if (name == "betas") {
      const auto *tuple = llvm::dyn_cast<ast::TupleExpr>(&e);
      const auto *list = llvm::dyn_cast<ast::ListExpr>(&e);
      size_t n = tuple  ? tuple->getItems().size()
                 : list ? list->getItems().size()
                        : 0;
      if (n != 2) {
        ctx.error(e.getLoc(), what + " must be a pair such as (0.9, 0.999)");
        ok = false;
        continue;
      }
      for (size_t j = 0; j < 2; ++j) {
        const ast::Expr &item =
            tuple ? *tuple->getItems()[j].value : *list->getItems()[j];
        FailureOr<double> beta = keys.number(item, what);
        if (failed(beta)) {
          ok = false;
        } else if (*beta < 0 || *beta >= 1) {
          ctx.error(item.getLoc(),
                    what + " must lie in [0, 1), not " + std::to_string(*beta));
          ok = false;
        } else {
          (j == 0 ? opt.beta1 : opt.beta2) = *beta;
        }
      }
      continue;
    }
    FailureOr<double> v = keys.number(e, what);
    if (failed(v)) {
      ok = false;
      continue;
    }
    bool valid = true;
    if (name == "lr" || name == "eps")
      valid = *v > 0;
    else if (name == "momentum")
      valid = *v >= 0 && *v < 1;
    else
      valid = *v >= 0;
    if (!valid) {
      ctx.error(e.getLoc(), what + " must be " +
                                (name == "momentum"       ? "in [0, 1)"
                                 : name == "weight_decay" ? "non-negative"
                                                          : "positive") +
                                ", not " + std::to_string(*v));
      ok = false;
      continue;
    }
    if (name == "lr")
      opt.lr = *v;
    else if (name == "momentum")
      opt.momentum = *v;
    else if (name == "eps")
      opt.eps = *v;
    else
      opt.weightDecay = *v;
  }
  if (ok && opt.nesterov && opt.momentum == 0) {
    ctx.error(call->getLoc(), "SGD with nesterov = true needs a momentum "
                              "above 0");
    ok = false;
  }
  return success(ok);
}

LogicalResult TrainChecker::checkSchedule(const ast::Expr &expr) {
  FailureOr<llvm::StringRef> named =
      recipeCall(expr, "schedule", {"constant", "cosine", "linear", "step"},
                 "constant(), cosine(...), linear(...) or step(...)");
  if (failed(named))
    return failure();
  llvm::StringRef kind = *named;
  const auto *call = llvm::cast<ast::CallExpr>(&expr);
  ScheduleConfig &s = job.schedule;
  s.loc = ctx.diag.resolve(expr.getLoc());
  std::vector<ParamSpec> specs;
  if (kind == "constant") {
    s.kind = ScheduleConfig::Kind::Constant;
  } else if (kind == "cosine") {
    s.kind = ScheduleConfig::Kind::Cosine;
    specs = {{"warmup", false}, {"min", false}};
  } else if (kind == "linear") {
    s.kind = ScheduleConfig::Kind::Linear;
    specs = {{"warmup", false}, {"final", false}};
  } else {
    s.kind = ScheduleConfig::Kind::Step;
    specs = {{"every"}, {"gamma"}};
  }
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call->getArgs(), specs, kind, call->getLoc());
  if (failed(bound))
    return failure();
  bool ok = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ast::Field *field = (*bound)[i];
    if (!field)
      continue;
    llvm::StringRef name = specs[i].name;
    std::string what = "'" + name.str() + "' of " + kind.str();
    const ast::Expr &e = *field->value;
    if (name == "warmup" || name == "every") {
      FailureOr<int64_t> n = keys.integer(e, what, name == "warmup" ? 0 : 1);
      if (failed(n)) {
        ok = false;
        continue;
      }
      (name == "warmup" ? s.warmup : s.every) = *n;
      if (name == "warmup" && job.steps && *n >= *job.steps) {
        ctx.error(e.getLoc(), "the warm-up of " + std::to_string(*n) +
                                  " steps is not shorter than the " +
                                  std::to_string(*job.steps) +
                                  " training steps");
        ok = false;
      }
      continue;
    }
    FailureOr<double> v = keys.number(e, what);
    if (failed(v)) {
      ok = false;
      continue;
    }
    if (name == "gamma" ? (*v <= 0 || *v > 1) : *v < 0) {
      ctx.error(e.getLoc(),
                what + " must be " +
                    (name == "gamma" ? "in (0, 1]" : "non-negative") +
                    ", not " + std::to_string(*v));
      ok = false;
      continue;
    }
    if ((name == "min" || name == "final") && job.optimizer.lr > 0 &&
        *v > job.optimizer.lr) {
      ctx.error(e.getLoc(), what + " (" + std::to_string(*v) +
                                ") is above the optimizer's lr (" +
                                std::to_string(job.optimizer.lr) + ")");
      ok = false;
      continue;
    }
    if (name == "min")
      s.min = *v;
    else if (name == "final")
      s.final = *v;
    else
      s.gamma = *v;
  }
  return success(ok);
}

LogicalResult TrainChecker::checkRecords() {
  bool ok = true;
  if (const ast::Expr *e = get("checkpoint")) {
    FailureOr<std::vector<const ast::Field *>> fields = keys.record(
        *e, "'checkpoint'", {{"every", true}, {"dir", true}, {"keep", false}});
    if (failed(fields)) {
      ok = false;
    } else {
      CheckpointConfig config;
      config.loc = ctx.diag.resolve(e->getLoc());
      FailureOr<int64_t> every =
          keys.integer(*(*fields)[0]->value, "'every' of 'checkpoint'", 1);
      FailureOr<std::string> dir =
          keys.string(*(*fields)[1]->value, "'dir' of 'checkpoint'");
      FailureOr<int64_t> keep =
          (*fields)[2]
              ? keys.integer(*(*fields)[2]->value, "'keep' of 'checkpoint'", 1)
              : FailureOr<int64_t>(0);
      if (failed(every) || failed(dir) || failed(keep)) {
        ok = false;
      } else if (dir->empty()) {
        ctx.error((*fields)[1]->value->getLoc(), "'dir' of 'checkpoint' must "
                                                 "not be empty");
        ok = false;
      } else {
        config.every = *every;
        config.dir = *dir;
        config.keep = *keep;
        job.checkpoint = config;
      }
    }
  }
  if (const ast::Expr *e = get("log")) {
    FailureOr<std::vector<const ast::Field *>> fields =
        keys.record(*e, "'log'", {{"every", true}, {"dir", false}});
    if (failed(fields)) {
      ok = false;
    } else {
      LogConfig config;
      config.loc = ctx.diag.resolve(e->getLoc());
      FailureOr<int64_t> every =
          keys.integer(*(*fields)[0]->value, "'every' of 'log'", 1);
      FailureOr<std::string> dir =
          (*fields)[1] ? keys.string(*(*fields)[1]->value, "'dir' of 'log'")
                       : FailureOr<std::string>(std::string());
      if (failed(every) || failed(dir)) {
        ok = false;
      } else {
        config.every = *every;
        config.dir = *dir;
        job.log = config;
      }
    }
  }
  return success(ok);
}

std::unique_ptr<ModelInstance>
TrainChecker::buildTree(Instance &inst, const ModelInstance *parent) {
  auto node = std::make_unique<ModelInstance>();
  node->model = inst.displayName;
  node->path = inst.path;
  node->parent = parent;
  node->loc = ctx.diag.resolve(inst.loc);
  if (inst.annotation)
    node->annotations.push_back(*inst.annotation);
  for (const auto &[name, value] : inst.args) {
    FailureOr<Constant> c = toConstant(ctx, value, inst.loc);
    node->args.push_back({name, succeeded(c) ? *c : Constant()});
  }
  for (const auto &member : inst.decl->getMembers()) {
    for (InstanceParam &param : inst.params) {
      if (param.member != member.get() || !param.present)
        continue;
      ParamInfo info;
      info.name = childPath(inst, member->getName(), std::nullopt);
      info.type.dtype = DType::F32;
      for (const SymExpr &dim : param.dims)
        info.type.shape.push_back(
            ctx.syms.resolve(dim).getConstant().value_or(0));
      info.init = param.init;
      info.tensorDim = param.tensorDim;
      info.annotation = param.annotation;
      info.buffer = param.buffer;
      info.loc = ctx.diag.resolve(member->getLoc());
      info.owner = node.get();
      info.index = job.params.size();
      param.jobIndex = info.index;
      node->params.push_back(info.index);
      job.params.push_back(std::move(info));
    }
    for (InstanceChild &child : inst.children) {
      if (child.member != member.get())
        continue;
      ModelInstance::Child entry;
      entry.name = member->getName().str();
      entry.isList = child.isList;
      entry.loc = ctx.diag.resolve(member->getLoc());
      if (child.annotation)
        entry.annotations.push_back(*child.annotation);
      for (auto &item : child.items)
        entry.items.push_back(buildTree(*item, node.get()));
      node->children.push_back(std::move(entry));
    }
  }
  return node;
}

LogicalResult TrainChecker::checkModel(const ast::Expr &expr) {
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&expr);
  if (!call) {
    ctx.error(expr.getLoc(), "'model' must be a call of a model, such as "
                             "GPT(vocab = 256, ...)");
    return failure();
  }
  // The generic check ran for every declaration; a broken one was reported.
  FailureOr<Evaluator::BoundModel> bound =
      keys.ev.bindModelCall(*call, keys.frame, "'model'", /*checkDecl=*/true);
  if (failed(bound))
    return failure();
  const ModuleScope &scope = *bound->scope;
  ctx.instanceCount = 0;
  ctx.rootLoc = call->getLoc();
  SemaContext::SiteGuard site(ctx, call->getLoc(),
                              "'model' (" +
                                  scope.qualify(bound->decl->getName()) + ")");
  FailureOr<std::unique_ptr<Instance>> root =
      keys.ev.instantiate(scope, *bound->decl, std::move(bound->args), "",
                          nullptr, std::nullopt, call->getLoc());
  ctx.rootLoc = llvm::SMLoc();
  if (failed(root))
    return failure();
  trace.root = std::move(*root);
  job.params.clear(); // A second instantiation (with adapters) replaces all.
  job.model = buildTree(*trace.root, nullptr);
  return success();
}

FailureOr<DataSource> TrainChecker::checkSource(const ast::Expr &expr,
                                                llvm::StringRef key,
                                                DataBinding &binding) {
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&expr);
  if (!call) {
    ctx.error(expr.getLoc(), "'" + key +
                                 "' must be a data source, such as "
                                 "nn.tokens(path = \"...\", seq = 1024)");
    return failure();
  }
  FailureOr<EvalValue> callee = keys.ev.eval(call->getCallee(), keys.frame);
  if (failed(callee))
    return failure();
  if (callee->kind != EvalValue::Kind::Source) {
    ctx.error(call->getLoc(), "'" + key +
                                  "' must be a data source (nn.idx, "
                                  "nn.tokens, nn.token_classes or "
                                  "nn.synthetic), but " +
                                  ast::toSource(call->getCallee()) + " is " +
                                  describe(*callee, ctx.syms));
    return failure();
  }
  const ast::SourceDecl &decl = *callee->source;
  std::string name = callee->module->qualify(decl.getName());
  std::vector<ParamSpec> specs;
  for (const ast::ArgDecl &arg : decl.getArgs())
    specs.push_back({arg.name, arg.defaultValue == nullptr});
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call->getArgs(), specs, name, call->getLoc());
  if (failed(bound))
    return failure();

  DataSource source;
  source.kind = decl.getName().str();
  source.loc = ctx.diag.resolve(expr.getLoc());
  ArgList args;
  bool ok = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ast::ArgDecl &arg = decl.getArgs()[i];
    const ast::Expr &valueExpr =
        (*bound)[i] ? *(*bound)[i]->value : *arg.defaultValue;
    Frame frame;
    frame.module = (*bound)[i] ? &main : callee->module;
    frame.args = &args;
    FailureOr<EvalValue> value = keys.ev.eval(valueExpr, frame);
    if (failed(value)) {
      ok = false;
      continue;
    }
    FailureOr<EvalValue> checked =
        keys.ev.checkArgType(arg, *value, valueExpr.getLoc(), name);
    if (failed(checked)) {
      ok = false;
      continue;
    }
    FailureOr<Constant> c = toConstant(ctx, *checked, valueExpr.getLoc());
    if (failed(c)) {
      ok = false;
      continue;
    }
    // Sizes and counts of a source are positive; paths are not empty.
    if ((c->isInt() && c->getInt() < 1 && arg.name != "seed") ||
        (c->getKind() == Constant::Kind::String && c->getString().empty()) ||
        (c->getKind() == Constant::Kind::Float && c->getNumber() == 0)) {
      ctx.error(valueExpr.getLoc(),
                "'" + arg.name + "' of " + name + " must be " +
                    (c->getKind() == Constant::Kind::String ? "a non-empty path"
                                                            : "positive") +
                    ", not " + c->str());
      ok = false;
      continue;
    }
    if (c->isInt() && arg.name == "seed" && c->getInt() < 0) {
      ctx.error(valueExpr.getLoc(),
                "'seed' of " + name + " must not be negative");
      ok = false;
      continue;
    }
    source.args.push_back({arg.name, *c});
    args.push_back({arg.name, std::move(*checked)});
  }
  if (!ok)
    return failure();

  binding.sourceName = name;
  Frame fieldFrame;
  fieldFrame.module = callee->module;
  fieldFrame.args = &args;
  for (const ast::SourceField &field : decl.getFields()) {
    DataBinding::Field f;
    f.name = field.name;
    f.dtype = parseDType(field.type.name).value_or(DType::F32);
    for (const ast::ExprPtr &dim : field.type.dims) {
      // A name that is not an argument is a size known only at run time.
      const auto *dimName = llvm::dyn_cast<ast::NameExpr>(dim.get());
      if (dimName && !llvm::any_of(args, [&](const auto &a) {
            return a.first == dimName->getName();
          })) {
        f.sample.dims.push_back(ctx.syms.runtimeSize(
            name + "." + field.name + ":" + dimName->getName().str()));
        continue;
      }
      FailureOr<SymExpr> value =
          keys.ev.evalInt(*dim, fieldFrame, "a dimension");
      if (failed(value))
        return failure();
      f.sample.dims.push_back(*value);
    }
    // `nn.idx(..., image = true)`: the same bytes as [1, rows, cols], so a
    // convolution takes them as they are. A model that takes any size (a
    // ResNet's H and W) cannot fix rows and cols, so dtc reads them from the
    // file's header when the file is there; the program checks them again.
    if (callee->module->isStdlib && decl.getName() == "idx" &&
        f.name == "x" &&
        llvm::any_of(args, [](const auto &a) {
          return a.first == "image" && a.second.boolValue.value_or(false);
        })) {
      f.sample.dims = {SymExpr(1),
                       ctx.syms.runtimeSize(name + ".x:rows"),
                       ctx.syms.runtimeSize(name + ".x:cols")};
      auto images = llvm::find_if(
          args, [](const auto &a) { return a.first == "images"; });
      if (images != args.end() && images->second.stringValue &&
          llvm::sys::fs::exists(*images->second.stringValue)) {
        dtrt::Expected<std::vector<int64_t>> dims =
            dtrt::readIdxDims(*images->second.stringValue, 0);
        if (!dims || dims->size() != 3) {
          ctx.error(expr.getLoc(),
                    dims ? "image = true reads [rows, cols] images, but '" +
                               *images->second.stringValue + "' holds " +
                               std::to_string(dims->size() - 1) +
                               "-dimensional samples"
                         : dims.error().message());
          return failure();
        }
        f.sample.dims = {SymExpr(1), SymExpr((*dims)[1]), SymExpr((*dims)[2])};
      }
    }
    binding.fields.push_back(std::move(f));
  }
  return source;
}

LogicalResult TrainChecker::resizeDataAxis(int64_t world) {
  ParallelConfig &p = job.parallel;
  auto fail = [&](const std::string &why) {
    ctx.error(train.getLoc(), "cannot compile job '" + job.name + "' for " +
                                  std::to_string(world) + " ranks: " + why);
    return failure();
  };
  if (p.dataAxes.size() != 1)
    return fail("its mesh needs exactly one data-parallel axis to resize");
  if (p.pipeline)
    return fail("pipeline jobs are not resized");
  MeshAxis *axis = nullptr;
  for (MeshAxis &a : p.mesh)
    if (a.name == p.dataAxes.front())
      axis = &a;
  int64_t others = p.getWorldSize() / axis->size;
  if (world < 1 || world % others != 0)
    return fail("the other mesh axes have " + std::to_string(others) +
                " ranks, which do not divide it");
  // Each rank keeps its micro-batch; the steps accumulate more of them.
  int64_t perRank =
      microBatchKey ? *microBatchKey : job.batch / p.getDataParallelSize();
  int64_t dp = world / others;
  if (job.batch % (perRank * dp) != 0)
    return fail("batch " + std::to_string(job.batch) +
                " is not a whole number of micro-batches of " +
                std::to_string(perRank) + " on " + std::to_string(dp) +
                " data-parallel ranks");
  axis->size = dp;
  microBatchKey = perRank;
  return success();
}

LogicalResult TrainChecker::checkBatchLayout() {
  const ParallelConfig &p = job.parallel;
  int64_t dp = p.getDataParallelSize();
  int64_t batch = job.batch;
  int64_t microbatches = p.pipeline ? p.pipeline->microbatches : 0;
  if (microBatchKey) {
    int64_t perStep;
    if (llvm::MulOverflow(*microBatchKey, dp, perStep) ||
        batch % perStep != 0) {
      std::string ranks = dp == 1 ? ""
                                  : " times " + std::to_string(dp) +
                                        " data-parallel ranks (" +
                                        std::to_string(perStep) + ")";
      ctx.error(get("micro_batch")->getLoc(),
                "micro_batch " + std::to_string(*microBatchKey) + ranks +
                    " does not divide batch " + std::to_string(batch));
      return failure();
    }
    job.microBatch = *microBatchKey;
    job.accumulation = batch / perStep;
    if (microbatches && job.accumulation != microbatches) {
      ctx.error(get("micro_batch")->getLoc(),
                "the pipeline runs " + std::to_string(microbatches) +
                    " microbatches per step, but batch / (micro_batch * " +
                    "data-parallel size) = " + std::to_string(batch) + " / (" +
                    std::to_string(*microBatchKey) + " * " +
                    std::to_string(dp) +
                    ") = " + std::to_string(job.accumulation));
      return failure();
    }
    return success();
  }
  int64_t parts = dp * std::max<int64_t>(microbatches, 1);
  if (batch % parts != 0) {
    ctx.error(get("batch")->getLoc(),
              "batch " + std::to_string(batch) + " is not divisible by " +
                  (microbatches
                       ? std::to_string(dp) + " data-parallel ranks times " +
                             std::to_string(microbatches) +
                             " pipeline microbatches (" +
                             std::to_string(parts) + ")"
                       : std::to_string(dp) + " data-parallel ranks"));
    return failure();
  }
  job.microBatch = batch / parts;
  job.accumulation = std::max<int64_t>(microbatches, 1);
  return success();
}

LogicalResult TrainChecker::checkRecompute(const ast::Expr &expr) {
  std::vector<const ast::Expr *> paths;
  if (const auto *list = llvm::dyn_cast<ast::ListExpr>(&expr))
    for (const ast::ExprPtr &item : list->getItems())
      paths.push_back(item.get());
  else
    paths.push_back(&expr);
  bool ok = true;
  for (const ast::Expr *path : paths) {
    FailureOr<PathTarget> target = resolvePath(ctx, *path, *trace.root);
    if (failed(target)) {
      ok = false;
      continue;
    }
    if (target->kind == PathTarget::Kind::Param) {
      ctx.error(path->getLoc(), "'recompute' names layers, but '" +
                                    target->text + "' is a parameter");
      ok = false;
      continue;
    }
    for (const Instance *layer : target->layers())
      if (!llvm::is_contained(job.recompute, layer->path))
        job.recompute.push_back(layer->path);
  }
  return success(ok);
}

LogicalResult TrainChecker::resolveFields(DataSource &source,
                                          const DataBinding &binding,
                                          const std::set<std::string> &used,
                                          llvm::StringRef key) {
  bool ok = true;
  for (const DataBinding::Field &field : binding.fields) {
    SampleField out;
    out.name = field.name;
    out.dtype = field.dtype;
    bool known = true;
    for (const SymExpr &dim : field.sample.dims) {
      std::optional<int64_t> c = ctx.syms.resolve(dim).getConstant();
      known &= c.has_value();
      out.shape.push_back(c.value_or(0));
    }
    if (!known) {
      // Unused fields whose size is only known at run time stay out of the
      // job; a used one must have met the model's input.
      if (used.count(field.name)) {
        ctx.error(keyLoc(key), "the size of " + key.str() + "." + field.name +
                                   " is only known when the files are read; "
                                   "pass it to a model whose input type "
                                   "fixes it (or, for nn.idx images, compile "
                                   "where the images file is, so that dtc "
                                   "reads its header)");
        ok = false;
      }
      continue;
    }
    source.fields.push_back(std::move(out));
  }
  return success(ok);
}

LogicalResult TrainChecker::checkTensorParallelHeads(const Evaluator &ev) {
  const ParallelConfig &p = job.parallel;
  if (p.tensorAxis.empty() || !parallel)
    return success();
  int64_t tp = p.getAxisSize(p.tensorAxis);
  for (const AttentionUse &use : ev.attentionUses) {
    if (use.heads % tp == 0)
      continue;
    llvm::SMLoc at = parallel->getLoc();
    for (const ast::KeyValue &kv : parallel->getEntries())
      if (kv.key == "tensor")
        at = kv.value->getLoc();
    ctx.error(at, "tensor parallelism over '" + p.tensorAxis + "' (" +
                      std::to_string(tp) + ") splits attention heads, but '" +
                      use.scope + "' has " + std::to_string(use.heads) +
                      " heads, which " + std::to_string(tp) +
                      " does not divide");
    ctx.note(use.loc, "the attention");
    return failure();
  }
  return success();
}

LogicalResult TrainChecker::checkLoss(const ast::Expr &loss) {
  if (!callsModel(loss)) {
    ctx.error(loss.getLoc(), "the loss must call the model, such as "
                             "cross_entropy(model(data.x), data.y)");
    return failure();
  }
  int64_t globalBatch = job.microBatch * job.parallel.getDataParallelSize();
  trace.data[0].batch = SymExpr(globalBatch);
  trace.data[1].batch = SymExpr(globalBatch);
  trace.data[0].role = DataRole::Train;
  trace.data[1].role = DataRole::Eval;
  trace.loss = &loss;
  trace.main = &main;

  Evaluator ev(ctx, Evaluator::Mode::Concrete);
  ev.dataBindings[0] = &trace.data[0];
  if (trace.hasEval)
    ev.dataBindings[1] = &trace.data[1];
  for (DataRole role : {DataRole::Train, DataRole::Eval}) {
    if (role == DataRole::Eval && !trace.hasEval)
      continue;
    Frame frame;
    frame.module = &main;
    frame.tensorContext = true;
    EvalValue model;
    model.kind = EvalValue::Kind::Instance;
    model.instance = trace.root.get();
    frame.locals["model"] = model;
    EvalValue data;
    data.kind = EvalValue::Kind::Data;
    data.role = role;
    frame.locals["data"] = data;
    FailureOr<EvalValue> value = ev.eval(loss, frame);
    if (failed(value))
      return failure();
    if (!value->isTensor() || !value->shape.hasRank() ||
        !value->shape.dims.empty() || !isFloat(value->dtype)) {
      ctx.error(
          loss.getLoc(),
          "the loss must be a floating-point scalar, "
          "but it is " +
              describe(*value, ctx.syms) +
              (value->isTensor() ? "; reduce it, e.g. with mean(...)" : ""));
      return failure();
    }
  }
  if (failed(resolveFields(job.data, trace.data[0], ev.usedFields[0], "data")))
    return failure();
  if (job.eval &&
      failed(resolveFields(*job.eval, trace.data[1], ev.usedFields[1], "eval")))
    return failure();
  // Later traces see constant sample shapes.
  for (DataBinding &binding : trace.data)
    for (DataBinding::Field &field : binding.fields)
      for (SymExpr &dim : field.sample.dims)
        dim = ctx.syms.resolve(dim);
  if (const auto *call = llvm::dyn_cast<ast::CallExpr>(&loss))
    if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&call->getCallee()))
      job.classifier = name->getName() == "cross_entropy";
  return checkTensorParallelHeads(ev);
}

LogicalResult TrainChecker::run() {
  job.name = train.getName().str();
  if (job.name.empty())
    job.name = llvm::sys::path::stem(main.loaded->ast->getFilename()).str();
  job.loc = ctx.diag.resolve(train.getLoc());
  if (failed(collectKeys()))
    return failure();
  bool ok = succeeded(checkScalars());
  ok &= succeeded(checkOptimizer(*get("optimizer")));
  if (const ast::Expr *e = get("schedule"))
    ok &= succeeded(checkSchedule(*e));
  ok &= succeeded(checkRecords());

  bool modelOk = succeeded(checkModel(*get("model")));
  FailureOr<DataSource> data = checkSource(*get("data"), "data", trace.data[0]);
  if (succeeded(data))
    job.data = std::move(*data);
  bool dataOk = succeeded(data);
  if (const ast::Expr *e = get("eval")) {
    FailureOr<DataSource> eval = checkSource(*e, "eval", trace.data[1]);
    dataOk &= succeeded(eval);
    if (succeeded(eval)) {
      job.eval = std::move(*eval);
      trace.hasEval = true;
    }
  }
  if (const ast::Expr *e = get("adapters"); e && modelOk) {
    // The targets name layers of the model as declared; then the model is
    // made again with the adapted layers in place.
    modelOk = succeeded(checkAdapters(ctx, keys, *e, job));
    if (modelOk) {
      ctx.totalInstances -= ctx.instanceCount;
      modelOk = succeeded(checkModel(*get("model")));
    }
    if (modelOk)
      freezeAllButAdapters(job);
    if (const ast::Expr *f = get("freeze"); f && modelOk) {
      ctx.error(f->getLoc(), "'freeze' and 'adapters' both say what trains: "
                             "with adapters only the adapters train, and "
                             "every other parameter is frozen");
      ctx.note(e->getLoc(), "the adapters");
      modelOk = false;
    }
  }
  ok &= modelOk && dataOk;
  if (modelOk)
    ok &= succeeded(checkPretrained(ctx, keys, get("init"), job));
  if (const ast::Expr *e = get("freeze"); e && modelOk && !job.adapters)
    ok &= succeeded(checkFreeze(ctx, keys, *e, job));
  if (noDecay && modelOk) {
    FailureOr<std::vector<bool>> named =
        matchParamPaths(ctx, keys, *noDecay, job, noDecayWhat);
    ok &= succeeded(named);
    if (succeeded(named))
      for (size_t i = 0; i < job.params.size(); ++i)
        job.params[i].noDecay = (*named)[i];
  }

  if (parallel && failed(checkParallel(ctx, main, *parallel, job,
                                       modelOk ? trace.root.get() : nullptr)))
    return failure();
  if (!ok)
    return failure();
  if (ctx.options.worldSize && failed(resizeDataAxis(*ctx.options.worldSize)))
    return failure();
  if (failed(checkBatchLayout()))
    return failure();
  if (const ast::Expr *e = get("recompute")) {
    if (failed(checkRecompute(*e)))
      return failure();
    job.recomputeLoc = ctx.diag.resolve(e->getLoc());
  }
  return checkLoss(*get("loss"));
}

LogicalResult sema::checkTrain(SemaContext &ctx, const ModuleScope &main,
                               const ast::TrainDecl &train,
                               const ast::ParallelDecl *parallel, Job &job,
                               TraceContext &trace) {
  return TrainChecker(ctx, main, train, parallel, job, trace).run();
}
