//===- Instantiate.cpp - Models with their arguments bound ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Instantiation evaluates a model's members in the scope of its arguments:
// parameter dims, presence conditions and initialisers, submodule
// constructors and list lengths, and annotations. A model declaration is first
// checked generically on its own (checkModelDecl, memoized): its arguments
// become symbols, so its forward is checked once for every instantiation, and
// a broken declaration fails silently wherever it is used (its errors were
// reported once, where they are).
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

std::optional<Annotation> sema::parseAnnotation(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Annotation>>(name)
      .Case("column", Annotation::Column)
      .Case("row", Annotation::Row)
      .Case("vocab", Annotation::Vocab)
      .Default(std::nullopt);
}

const InstanceParam *Instance::findParam(llvm::StringRef name) const {
  for (const InstanceParam &param : params)
    if (param.member->getName() == name)
      return &param;
  return nullptr;
}

const InstanceChild *Instance::findChild(llvm::StringRef name) const {
  for (const InstanceChild &child : children)
    if (child.member->getName() == name)
      return &child;
  return nullptr;
}

const EvalValue *Instance::findArg(llvm::StringRef name) const {
  for (const auto &arg : args)
    if (arg.first == name)
      return &arg.second;
  return nullptr;
}

std::string Instance::describe() const {
  return "'" + (path.empty() ? std::string("model") : path) + "' (" +
         displayName + ")";
}

std::string sema::childPath(const Instance &parent, llvm::StringRef name,
                            std::optional<int64_t> index) {
  std::string path =
      parent.path.empty() ? name.str() : parent.path + "." + name.str();
  if (index)
    path += "." + std::to_string(*index);
  return path;
}

/// Reads the annotations of a member: at most one layout, of a known name,
/// and for a parameter (`buffer` non-null) `@buffer`.
static FailureOr<std::optional<Annotation>>
readAnnotation(SemaContext &ctx, const ast::Member &member,
               bool *buffer = nullptr) {
  std::optional<Annotation> result;
  const ast::Annotation *first = nullptr;
  for (const ast::Annotation &a : member.getAnnotations()) {
    if (a.name == "buffer") {
      if (!buffer) {
        ctx.error(a.loc, "@buffer marks a parameter as state that an op "
                         "updates; '" +
                             member.getName() + "' is a layer");
        return failure();
      }
      *buffer = true;
      continue;
    }
    std::optional<Annotation> kind = parseAnnotation(a.name);
    if (!kind) {
      ctx.error(a.loc, "unknown annotation '@" + a.name +
                           "'; expected @column, @row, @vocab or @buffer" +
                           suggest(a.name, {"column", "row", "vocab", "buffer"}));
      return failure();
    }
    if (first) {
      ctx.error(a.loc, "'" + member.getName() + "' has two annotations (@" +
                           first->name + " and @" + a.name +
                           "); a member splits one way");
      return failure();
    }
    first = &a;
    result = kind;
  }
  return result;
}

/// The dim a tensor-parallel annotation splits for a parameter of `rank`,
/// following the [out, in] layout of Linear and the [count, width] layout of
/// Embedding: @column splits output features (dim 0, biases too), @row input
/// features (dim 1; a bias stays whole), @vocab an embedding table's rows.
static std::optional<unsigned> splitDim(Annotation annotation, size_t rank) {
  switch (annotation) {
  case Annotation::Column:
    return rank >= 1 ? std::optional<unsigned>(0) : std::nullopt;
  case Annotation::Row:
    return rank == 2 ? std::optional<unsigned>(1) : std::nullopt;
  case Annotation::Vocab:
    return rank == 2 ? std::optional<unsigned>(0) : std::nullopt;
  }
  return std::nullopt;
}

FailureOr<EvalValue> Evaluator::checkArgType(const ast::ArgDecl &arg,
                                             EvalValue value, llvm::SMLoc loc,
                                             llvm::StringRef callee) {
  llvm::StringRef type = arg.type;
  if (type != "int" && type != "float" && type != "bool" && type != "string") {
    ctx.error(arg.typeLoc,
              "unknown argument type '" + type +
                  "'; expected int, float, bool or string" +
                  suggest(type, {"int", "float", "bool", "string"}));
    return failure();
  }
  if (value.isUnknown()) {
    if (type == "int")
      return EvalValue::getInt(ctx.syms.symbol(arg.name));
    if (type == "float")
      return EvalValue::getFloat(std::nullopt);
    if (type == "bool")
      return EvalValue::getBool(std::nullopt);
    return EvalValue::getString(std::nullopt);
  }
  bool ok = false;
  if (type == "int") {
    ok = value.kind == EvalValue::Kind::Int;
  } else if (type == "float") {
    if (value.kind == EvalValue::Kind::Int) {
      std::optional<int64_t> c = ctx.syms.resolve(value.intValue).getConstant();
      value = EvalValue::getFloat(c ? std::optional<double>(*c) : std::nullopt);
    }
    ok = value.kind == EvalValue::Kind::Float;
  } else if (type == "bool") {
    ok = value.kind == EvalValue::Kind::Bool;
  } else {
    ok = value.kind == EvalValue::Kind::String;
  }
  if (!ok) {
    ctx.error(loc, "'" + callee + "' expects " + type + " for '" + arg.name +
                       "' but receives " + describe(value, ctx.syms));
    ctx.note(arg.loc, "'" + arg.name + "' is declared here");
    return failure();
  }
  if (isConcrete()) {
    bool known =
        value.kind == EvalValue::Kind::Int
            ? ctx.syms.resolve(value.intValue).isConstant()
        : value.kind == EvalValue::Kind::Float ? value.floatValue.has_value()
        : value.kind == EvalValue::Kind::Bool  ? value.boolValue.has_value()
                                               : value.stringValue.has_value();
    if (!known) {
      ctx.error(loc, "the argument '" + arg.name + "' of '" + callee +
                         "' must be a constant here");
      return failure();
    }
  }
  return value;
}

FailureOr<ArgList> Evaluator::bindModelArgs(const ModuleScope &scope,
                                            const ast::ModelDecl &decl,
                                            llvm::ArrayRef<ast::Field> args,
                                            Frame &caller,
                                            llvm::SMLoc callLoc) {
  std::vector<ParamSpec> specs;
  for (const ast::ArgDecl &arg : decl.getArgs())
    specs.push_back({arg.name, arg.defaultValue == nullptr});
  // `config = "config.json"` gives every size (nn.Llama, nn.Bert, ...).
  const ast::Field *configField = nullptr;
  for (const ast::Field &f : args)
    if (f.name == "config" && takesHFConfig(scope, decl))
      configField = &f;
  if (configField) {
    // The file gives the required ones; what neither gives is reported later.
    for (ParamSpec &spec : specs)
      spec.required = false;
    specs.push_back({"config", false});
  }
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, args, specs, scope.qualify(decl.getName()), callLoc);
  if (failed(bound))
    return failure();
  if (configField)
    bound->pop_back();
  return bindModelFields(scope, decl, *bound, configField, caller, callLoc);
}

FailureOr<ArgList>
Evaluator::bindModelFields(const ModuleScope &scope, const ast::ModelDecl &decl,
                           llvm::ArrayRef<const ast::Field *> bound,
                           const ast::Field *configField, Frame &caller,
                           llvm::SMLoc callLoc) {
  std::string name = scope.qualify(decl.getName());
  std::optional<llvm::StringMap<EvalValue>> fromConfig;
  if (configField) {
    FailureOr<EvalValue> path = eval(*configField->value, caller);
    if (failed(path))
      return failure();
    if (path->kind != EvalValue::Kind::String || !path->stringValue) {
      ctx.error(configField->value->getLoc(),
                "'config' must be the path of a config.json, not " +
                    describe(*path, ctx.syms));
      return failure();
    }
    FailureOr<llvm::StringMap<EvalValue>> read =
        argsFromHFConfig(ctx, decl.getName(), *path->stringValue,
                         configField->value->getLoc());
    if (failed(read))
      return failure();
    fromConfig = std::move(*read);
    // Arguments beside it give what the file does not (a classifier's
    // classes); one the file sets too is ambiguous.
    for (size_t i = 0; i < bound.size(); ++i)
      if (bound[i] && fromConfig->count(decl.getArgs()[i].name)) {
        ctx.error(bound[i]->value->getLoc(),
                  "'" + decl.getArgs()[i].name + "' of " + name +
                      " is also set by 'config'; give it in one place");
        return failure();
      }
  }
  ArgList result;
  for (size_t i = 0; i < bound.size(); ++i) {
    const ast::ArgDecl &arg = decl.getArgs()[i];
    FailureOr<EvalValue> value;
    llvm::SMLoc at;
    const EvalValue *configured = nullptr;
    if (fromConfig)
      if (auto it = fromConfig->find(arg.name); it != fromConfig->end())
        configured = &it->second;
    if (configured) {
      value = *configured;
      at = configField->value->getLoc();
    } else if (const ast::Field *field = bound[i]) {
      value = eval(*field->value, caller);
      at = field->value->getLoc();
    } else if (!arg.defaultValue) {
      ctx.error(configField ? configField->value->getLoc() : callLoc,
                "nothing gives '" + arg.name + "' of " + name);
      return failure();
    } else {
      // Defaults see the arguments before them.
      Frame defaults;
      defaults.module = &scope;
      defaults.args = &result;
      value = eval(*arg.defaultValue, defaults);
      at = arg.defaultValue->getLoc();
    }
    if (failed(value))
      return failure();
    FailureOr<EvalValue> checked =
        checkArgType(arg, std::move(*value), at, name);
    if (failed(checked))
      return failure();
    result.push_back({arg.name, std::move(*checked)});
  }
  return result;
}

FailureOr<Initializer> Evaluator::evalInitializer(const ast::Expr &init,
                                                  const InstanceParam &param,
                                                  Frame &frame) {
  static const char *const kinds[] = {"normal",          "uniform",
                                      "zeros",           "ones",
                                      "kaiming_uniform", "xavier_uniform"};
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&init);
  const auto *callee =
      call ? llvm::dyn_cast<ast::NameExpr>(&call->getCallee()) : nullptr;
  std::vector<std::string> names(std::begin(kinds), std::end(kinds));
  if (!callee || !llvm::is_contained(names, callee->getName())) {
    std::string written =
        callee ? callee->getName().str() : ast::toSource(init);
    ctx.error(init.getLoc(), "'" + written +
                                 "' is not an initialiser; expected normal, "
                                 "uniform, zeros, ones, kaiming_uniform or "
                                 "xavier_uniform" +
                                 suggest(written, names));
    return failure();
  }
  llvm::StringRef kind = callee->getName();
  std::vector<ParamSpec> specs;
  if (kind == "normal")
    specs = {{"std"}, {"mean", false}};
  else if (kind == "uniform")
    specs = {{"low"}, {"high"}};
  else if (kind == "xavier_uniform")
    specs = {{"gain", false}};
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call->getArgs(), specs, kind, call->getLoc());
  if (failed(bound))
    return failure();
  std::vector<std::optional<double>> values;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ast::Field *field = (*bound)[i];
    if (!field) {
      values.push_back(std::nullopt);
      continue;
    }
    FailureOr<EvalValue> v = eval(*field->value, frame);
    if (failed(v))
      return failure();
    if (v->kind == EvalValue::Kind::Int) {
      std::optional<int64_t> c = ctx.syms.resolve(v->intValue).getConstant();
      values.push_back(c ? std::optional<double>(*c) : std::nullopt);
    } else if (v->kind == EvalValue::Kind::Float) {
      values.push_back(v->floatValue);
    } else if (v->isUnknown()) {
      values.push_back(std::nullopt);
    } else {
      ctx.error(field->value->getLoc(), "'" + kind + "' needs a number for '" +
                                            specs[i].name + "', not " +
                                            describe(*v, ctx.syms));
      return failure();
    }
  }

  Initializer result;
  result.from = kind.str();
  if (kind == "normal") {
    if (values[0] && *values[0] <= 0) {
      ctx.error((*bound)[0]->value->getLoc(), "'normal' needs a positive std");
      return failure();
    }
    result.kind = Initializer::Kind::Normal;
    result.std = values[0].value_or(0);
    result.mean = values[1].value_or(0);
    return result;
  }
  if (kind == "uniform") {
    if (values[0] && values[1] && *values[0] >= *values[1]) {
      ctx.error(call->getLoc(), "'uniform' needs low < high");
      return failure();
    }
    result.kind = Initializer::Kind::Uniform;
    result.low = values[0].value_or(0);
    result.high = values[1].value_or(0);
    return result;
  }
  if (kind == "zeros" || kind == "ones") {
    result.kind = Initializer::Kind::Constant;
    result.value = kind == "ones" ? 1 : 0;
    return result;
  }
  // kaiming_uniform, xavier_uniform: bounds from the fans, as PyTorch's
  // nn.init computes them (fan_in = dim 1 times the receptive field).
  if (param.dims.size() < 2) {
    ctx.error(call->getLoc(), "'" + kind +
                                  "' uses the fan-in, so it needs a parameter "
                                  "of rank 2 or more");
    return failure();
  }
  result.kind = Initializer::Kind::Uniform;
  std::optional<double> receptive = 1;
  for (size_t i = 2; i < param.dims.size(); ++i) {
    std::optional<int64_t> d = ctx.syms.resolve(param.dims[i]).getConstant();
    receptive =
        d && receptive ? std::optional<double>(*receptive * *d) : std::nullopt;
  }
  std::optional<int64_t> out = ctx.syms.resolve(param.dims[0]).getConstant();
  std::optional<int64_t> in = ctx.syms.resolve(param.dims[1]).getConstant();
  if (!out || !in || !receptive)
    return result; // Generic: bounds are known once the dims are.
  double fanIn = *in * *receptive, fanOut = *out * *receptive;
  double limit;
  if (kind == "kaiming_uniform") {
    // PyTorch's Linear default: kaiming_uniform_(a = sqrt(5)), whose gain
    // sqrt(2 / (1 + 5)) makes the bound 1 / sqrt(fan_in).
    limit = 1 / std::sqrt(fanIn);
  } else {
    double gain = values[0].value_or(1.0);
    if (gain <= 0) {
      ctx.error(call->getLoc(), "'xavier_uniform' needs a positive gain");
      return failure();
    }
    limit = gain * std::sqrt(6.0 / (fanIn + fanOut));
  }
  result.low = -limit;
  result.high = limit;
  return result;
}

LogicalResult Evaluator::instantiateParam(Instance &inst,
                                          const ast::ParamMember &member,
                                          Frame &frame) {
  InstanceParam param;
  param.member = &member;
  llvm::StringRef name = member.getName();
  for (size_t i = 0; i < member.getDims().size(); ++i) {
    const ast::Expr &dim = *member.getDims()[i];
    FailureOr<SymExpr> value =
        evalInt(dim, frame,
                "dimension " + std::to_string(i) + " of '" + name.str() + "'");
    if (failed(value))
      return failure();
    std::optional<int64_t> c = ctx.syms.resolve(*value).getConstant();
    if (c && *c <= 0) {
      ctx.error(dim.getLoc(), "dimension " + std::to_string(i) + " of '" +
                                  name + "' is " + std::to_string(*c) +
                                  "; dimensions must be positive");
      return failure();
    }
    param.dims.push_back(*value);
  }
  if (isConcrete()) {
    int64_t elements = 1;
    for (const SymExpr &dim : param.dims)
      if (llvm::MulOverflow(elements, *dim.getConstant(), elements) ||
          elements > (int64_t(1) << 40)) {
        ctx.error(member.getLoc(), "'" + name +
                                       "' has more than 2^40 "
                                       "elements");
        return failure();
      }
  }
  if (const ast::Expr *cond = member.getCond()) {
    FailureOr<EvalValue> value = eval(*cond, frame);
    if (failed(value))
      return failure();
    if (value->kind != EvalValue::Kind::Bool && !value->isUnknown()) {
      ctx.error(cond->getLoc(), "the condition of '" + name +
                                    "' must be a boolean, not " +
                                    describe(*value, ctx.syms));
      return failure();
    }
    param.present = value->boolValue.value_or(true);
  }
  FailureOr<std::optional<Annotation>> annotation =
      readAnnotation(ctx, member, &param.buffer);
  if (failed(annotation))
    return failure();
  if (*annotation) {
    param.annotation = *annotation;
    param.tensorDim = splitDim(**annotation, param.dims.size());
    if (!param.tensorDim) {
      ctx.error(member.getAnnotations()[0].loc,
                "@" + toString(**annotation) +
                    " needs a parameter of rank 2 ([out, in] or [count, "
                    "width]), but '" +
                    name + "' has rank " + std::to_string(param.dims.size()));
      return failure();
    }
  } else if (inst.annotation) {
    param.annotation = inst.annotation;
    param.tensorDim = splitDim(*inst.annotation, param.dims.size());
    // A LoRA factor splits only along the Linear weight's split dimension:
    // B [out, rank] with @column (the output features), A [rank, in] with
    // @row (the input features); the other factor stays whole on every rank,
    // as Megatron's LoRA layers keep it.
    bool rankFirst = name == "lora_A", rankLast = name == "lora_B";
    if (inst.decl->getName() == "LoraLinear" && inst.module->isStdlib &&
        ((rankFirst && param.tensorDim == 0u) ||
         (rankLast && param.tensorDim == 1u))) {
      param.annotation.reset();
      param.tensorDim.reset();
    }
  }
  param.init.kind = Initializer::Kind::Constant;
  param.init.from = "zeros";
  if (const ast::Expr *init = member.getInit()) {
    FailureOr<Initializer> value = evalInitializer(*init, param, frame);
    if (failed(value))
      return failure();
    param.init = *value;
  }
  inst.params.push_back(std::move(param));
  return success();
}

LogicalResult Evaluator::instantiateChild(Instance &inst,
                                          const ast::SubmoduleMember &member,
                                          Frame &frame) {
  llvm::StringRef name = member.getName();
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&member.getCall());
  if (!call) {
    ctx.error(member.getCall().getLoc(),
              "'" + name +
                  "' must be a call of a model, such as "
                  "nn.Linear(4, 2)");
    return failure();
  }
  FailureOr<BoundModel> bound =
      bindModelCall(*call, frame, "'" + name.str() + "'", !isConcrete());
  if (failed(bound))
    return failure();
  const ModuleScope &scope = *bound->scope;
  const ast::ModelDecl *chosen = bound->decl;

  InstanceChild child;
  child.member = &member;
  child.count = SymExpr(1);
  if (const ast::Expr *count = member.getCount()) {
    FailureOr<SymExpr> n = evalInt(*count, frame, "the number of layers");
    if (failed(n))
      return failure();
    child.isList = true;
    child.count = ctx.syms.resolve(*n);
    std::optional<int64_t> c = child.count.getConstant();
    // An empty list is allowed: called, it is the identity (an optional
    // layer, such as a residual block's downsample shortcut).
    if (c && (*c < 0 || *c > SemaContext::kMaxInstances)) {
      ctx.error(count->getLoc(),
                "a list of layers needs between 0 and " +
                    std::to_string(SemaContext::kMaxInstances) +
                    " layers, not " + std::to_string(*c));
      return failure();
    }
    child.symbolicCount = !c;
  }
  FailureOr<std::optional<Annotation>> annotation = readAnnotation(ctx, member);
  if (failed(annotation))
    return failure();
  child.annotation = *annotation;

  int64_t n = child.symbolicCount ? 1 : child.count.getConstant().value_or(1);
  for (int64_t i = 0; i < n; ++i) {
    std::string path = childPath(
        inst, name, child.isList ? std::optional<int64_t>(i) : std::nullopt);
    SemaContext::SiteGuard site(ctx, member.getLoc(),
                                "'" + path + "' (" +
                                    scope.qualify(chosen->getName()) + ")");
    // A Linear that `adapters` targets is a LoraLinear with the adapter's
    // sizes.
    const ast::ModelDecl *itemDecl = chosen;
    ArgList itemArgs = bound->args;
    if (auto it = ctx.adapted.find(path); it != ctx.adapted.end()) {
      itemDecl = scope.models.lookup("LoraLinear");
      assert(scope.isStdlib && chosen->getName() == "Linear" && itemDecl &&
             "adapters target the standard library's Linear layers");
      itemArgs.push_back(
          {"rank", EvalValue::getInt(SymExpr(it->second.rank))});
      itemArgs.push_back({"alpha", EvalValue::getFloat(it->second.alpha)});
      itemArgs.push_back(
          {"lora_dropout", EvalValue::getFloat(it->second.dropout)});
    }
    FailureOr<std::unique_ptr<Instance>> item = instantiate(
        scope, *itemDecl, std::move(itemArgs), path, &inst, *annotation,
        member.getLoc());
    // A layer with errors (already reported) makes this member fail too.
    if (failed(item) || (*item)->incomplete)
      return failure();
    if (*annotation && !(*item)->children.empty()) {
      ctx.error(member.getAnnotations()[0].loc,
                "@" + toString(**annotation) +
                    " splits the parameters of one "
                    "layer, but '" +
                    name + "' (" + (*item)->displayName +
                    ") has submodules; annotate those instead");
      return failure();
    }
    child.items.push_back(std::move(*item));
  }
  inst.children.push_back(std::move(child));
  return success();
}

FailureOr<std::unique_ptr<Instance>>
Evaluator::instantiate(const ModuleScope &scope, const ast::ModelDecl &decl,
                       ArgList args, std::string path, const Instance *parent,
                       std::optional<Annotation> annotation,
                       llvm::SMLoc createdAt) {
  if (ctx.depth >= SemaContext::kMaxDepth) {
    ctx.error(ctx.rootLoc.isValid() ? ctx.rootLoc : createdAt,
              "models are nested more than " +
                  std::to_string(SemaContext::kMaxDepth) + " deep");
    ctx.note(createdAt, "the innermost level");
    return failure();
  }
  if (++ctx.totalInstances > SemaContext::kMaxTotalInstances) {
    ctx.error(createdAt, "the program instantiates more than " +
                             std::to_string(SemaContext::kMaxTotalInstances) +
                             " layers in all");
    return failure();
  }
  if (++ctx.instanceCount > SemaContext::kMaxInstances) {
    ctx.error(createdAt, "the model has more than " +
                             std::to_string(SemaContext::kMaxInstances) +
                             " layers");
    return failure();
  }
  auto inst = std::make_unique<Instance>();
  inst->module = &scope;
  inst->decl = &decl;
  inst->displayName = scope.qualify(decl.getName());
  inst->path = std::move(path);
  inst->concrete = isConcrete();
  inst->args = std::move(args);
  inst->parent = parent;
  inst->annotation = annotation;
  inst->loc = createdAt;

  Frame frame;
  frame.module = &scope;
  frame.args = &inst->args;
  bool ok = true;
  llvm::StringMap<llvm::SMLoc> seen;
  ++ctx.depth;
  for (const auto &member : decl.getMembers()) {
    llvm::StringRef name = member->getName();
    auto [first, inserted] = seen.try_emplace(name, member->getLoc());
    if (!inserted) {
      ctx.error(member->getLoc(),
                "'" + name + "' is declared twice in " + decl.getName());
      ctx.note(first->second, "the first declaration");
      ok = false;
      continue;
    }
    // A member may share an argument's name (Linear's `bias` is both, as in
    // PyTorch): member definitions see the arguments, the forward sees the
    // members.
    LogicalResult result =
        llvm::isa<ast::ParamMember>(*member)
            ? instantiateParam(*inst, llvm::cast<ast::ParamMember>(*member),
                               frame)
            : instantiateChild(*inst, llvm::cast<ast::SubmoduleMember>(*member),
                               frame);
    ok &= succeeded(result);
  }
  --ctx.depth;
  // Generic checks go on with the members that worked (a failed one reads as
  // unknown); a concrete instance must be complete.
  if (!ok && isConcrete())
    return failure();
  if (!ok)
    inst->incomplete = true;
  return inst;
}

LogicalResult sema::checkModelDecl(SemaContext &ctx, const ModuleScope &scope,
                                   const ast::ModelDecl &decl) {
  auto [it, inserted] =
      ctx.modelStates.try_emplace(&decl, SemaContext::CheckState::InProgress);
  if (!inserted) {
    if (it->second == SemaContext::CheckState::InProgress) {
      ctx.error(decl.getNameLoc(),
                "model '" + decl.getName() + "' contains itself");
      return failure();
    }
    return success(it->second == SemaContext::CheckState::Ok);
  }
  SemaContext::SiteIsolation isolation(ctx);
  unsigned savedCount = ctx.instanceCount;
  ctx.instanceCount = 0;
  llvm::SMLoc savedRoot = ctx.rootLoc;
  if (!savedRoot.isValid())
    ctx.rootLoc = decl.getNameLoc();
  Evaluator ev(ctx, Evaluator::Mode::Generic);
  unsigned errorsBefore = ctx.getErrorCount();
  bool ok = true;
  ArgList args;
  for (const ast::ArgDecl &arg : decl.getArgs()) {
    if (llvm::any_of(args,
                     [&](const auto &a) { return a.first == arg.name; })) {
      ctx.error(arg.loc, "the argument '" + arg.name + "' is declared twice");
      ok = false;
      continue;
    }
    EvalValue value;
    if (arg.defaultValue) {
      Frame defaults;
      defaults.module = &scope;
      defaults.args = &args;
      FailureOr<EvalValue> v = ev.eval(*arg.defaultValue, defaults);
      if (failed(v)) {
        ok = false;
      } else {
        FailureOr<EvalValue> checked = ev.checkArgType(
            arg, *v, arg.defaultValue->getLoc(), scope.qualify(decl.getName()));
        if (failed(checked))
          ok = false;
        else
          value = *checked;
      }
    }
    // Integers stay symbolic, whatever their default, so the forward is
    // checked for every value.
    if (arg.type == "int")
      value = EvalValue::getInt(ctx.syms.symbol(arg.name));
    else if (value.isUnknown()) {
      FailureOr<EvalValue> typed =
          ev.checkArgType(arg, EvalValue::unknown(), arg.loc, decl.getName());
      if (failed(typed))
        ok = false;
      else
        value = *typed;
    }
    args.push_back({arg.name, value});
  }
  FailureOr<std::unique_ptr<Instance>> inst =
      ev.instantiate(scope, decl, std::move(args), "", nullptr, std::nullopt,
                     decl.getNameLoc());
  if (failed(inst)) {
    ok = false;
  } else {
    ok &= !(*inst)->incomplete;
    ok &= succeeded(ev.checkForward(**inst));
  }
  // Any error on the way (in this model or one it uses) breaks it.
  ok &= ctx.getErrorCount() == errorsBefore;
  ctx.instanceCount = savedCount;
  ctx.rootLoc = savedRoot;
  ctx.modelStates[&decl] =
      ok ? SemaContext::CheckState::Ok : SemaContext::CheckState::Broken;
  return success(ok);
}
