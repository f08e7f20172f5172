//===- Eval.cpp - Expressions: names, members, indexing, arithmetic -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Name lookup order: forward locals, the instance's members (in a forward),
// arguments, builtins, then the file's imports, models and data sources.
// Integer arithmetic is symbolic; `/` of integers stays an integer when it
// divides (or cannot be decided), else it is a float, which a dimension then
// rejects with the values that did not divide.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "TensorOps.h"

#include <cmath>

using namespace dt;
using namespace dt::sema;
using llvm::cast;
using llvm::failure;

/// Builtin ops and functions (see Builtins.cpp).
static const char *const kBuiltinNames[] = {
    "relu",       "gelu",          "tanh",
    "sigmoid",    "exp",           "log",
    "sqrt",       "softmax",       "layer_norm",
    "embedding",  "transpose",     "reshape",
    "split",      "slice",         "concat",
    "iota",       "attention",     "sum",
    "mean",       "cross_entropy", "mse",
    "rms_norm",   "rope",          "broadcast_to",
    "dropout",    "conv2d",        "conv_size",
    "max_pool2d", "avg_pool2d",    "adaptive_avg_pool2d",
    "batch_norm"};

static bool isBuiltinName(llvm::StringRef name) {
  return llvm::is_contained(kBuiltinNames, name);
}

std::vector<std::string> Evaluator::visibleNames(const Frame &frame) const {
  std::vector<std::string> names;
  for (const auto &local : frame.locals)
    names.push_back(local.getKey().str());
  if (frame.instance) {
    for (const auto &member : frame.instance->decl->getMembers())
      names.push_back(member->getName().str());
  }
  if (frame.args)
    for (const auto &arg : *frame.args)
      names.push_back(arg.first);
  if (frame.tensorContext)
    for (const char *builtin : kBuiltinNames)
      names.push_back(builtin);
  if (frame.module) {
    for (const auto &entry : frame.module->imports)
      names.push_back(entry.getKey().str());
    for (const auto &entry : frame.module->models)
      names.push_back(entry.getKey().str());
  }
  return names;
}

FailureOr<EvalValue> Evaluator::evalName(const ast::NameExpr &expr,
                                         Frame &frame) {
  llvm::StringRef name = expr.getName();
  auto local = frame.locals.find(name);
  if (local != frame.locals.end())
    return local->getValue();
  if (frame.instance) {
    bool isMember =
        llvm::any_of(frame.instance->decl->getMembers(),
                     [&](const auto &m) { return m->getName() == name; });
    if (isMember)
      return memberOfInstance(*frame.instance, name, expr.getLoc(), frame);
  }
  if (frame.args)
    for (const auto &arg : *frame.args)
      if (arg.first == name)
        return arg.second;
  if (isBuiltinName(name)) {
    EvalValue v;
    v.kind = EvalValue::Kind::Builtin;
    v.name = name.str();
    return v;
  }
  if (frame.module) {
    EvalValue v;
    v.module = frame.module;
    if (const ModuleScope *imported = frame.module->imports.lookup(name)) {
      v.kind = EvalValue::Kind::Module;
      v.module = imported;
      return v;
    }
    if (const ast::ModelDecl *model = frame.module->models.lookup(name)) {
      v.kind = EvalValue::Kind::Model;
      v.model = model;
      return v;
    }
    if (const ast::SourceDecl *source = frame.module->sources.lookup(name)) {
      v.kind = EvalValue::Kind::Source;
      v.source = source;
      return v;
    }
  }
  std::string hint = suggest(name, visibleNames(frame));
  if (frame.instance)
    ctx.error(expr.getLoc(), "'" + name + "' is not a member of " +
                                 frame.instance->decl->getName() + hint);
  else
    ctx.error(expr.getLoc(), "unknown name '" + name + "'" + hint);
  return failure();
}

FailureOr<EvalValue> Evaluator::memberOfInstance(const Instance &inst,
                                                 llvm::StringRef name,
                                                 llvm::SMLoc loc,
                                                 Frame &frame) {
  if (const InstanceParam *param = inst.findParam(name)) {
    if (!param->present) {
      EvalValue absent;
      absent.kind = EvalValue::Kind::Absent;
      absent.name = name.str();
      return absent;
    }
    EvalValue tensor = EvalValue::getTensor(DType::F32, Shape());
    tensor.shape.dims.assign(param->dims.begin(), param->dims.end());
    if (emitter && param->jobIndex >= 0)
      tensor.handle = emitter->param(param->jobIndex);
    tensor.param = param;
    return tensor;
  }
  if (const InstanceChild *child = inst.findChild(name)) {
    EvalValue v;
    if (!child->isList) {
      if (child->items.empty())
        return EvalValue::unknown();
      v.kind = EvalValue::Kind::Instance;
      v.instance = child->items[0].get();
      return v;
    }
    v.kind = EvalValue::Kind::Layers;
    v.layers = child;
    v.lo = 0;
    v.hi = static_cast<int64_t>(child->items.size());
    return v;
  }
  if (const EvalValue *arg = inst.findArg(name))
    return *arg;
  // A member that failed to instantiate has been reported already.
  for (const auto &member : inst.decl->getMembers())
    if (member->getName() == name)
      return EvalValue::unknown();
  std::vector<std::string> names;
  for (const auto &member : inst.decl->getMembers())
    names.push_back(member->getName().str());
  for (const auto &arg : inst.args)
    names.push_back(arg.first);
  ctx.error(loc, "'" + name + "' is not a member of " + inst.describe() +
                     suggest(name, names));
  return failure();
}

FailureOr<EvalValue> Evaluator::dataField(DataRole role, llvm::StringRef name,
                                          llvm::SMLoc loc) {
  const DataBinding *binding = dataBindings[static_cast<int>(role)];
  if (!binding)
    return EvalValue::unknown();
  for (const DataBinding::Field &field : binding->fields) {
    if (field.name != name)
      continue;
    usedFields[static_cast<int>(role)].insert(field.name);
    EvalValue v = EvalValue::getTensor(field.dtype, field.sample);
    v.shape.dims.insert(v.shape.dims.begin(), binding->batch);
    if (emitter) {
      Shape resolved;
      for (const SymExpr &dim : v.shape.dims)
        resolved.dims.push_back(ctx.syms.resolve(dim));
      TensorOps ops(*this, "");
      v.shape = resolved;
      v.handle =
          emitter->input(role, name, ops.concreteType(v.dtype, resolved));
    }
    return v;
  }
  std::vector<std::string> names;
  std::string list;
  for (const DataBinding::Field &field : binding->fields) {
    names.push_back(field.name);
    list += (list.empty() ? "" : ", ") + field.name;
  }
  ctx.error(loc, "the data source " + binding->sourceName + " has no field '" +
                     name + "' (its fields: " + list + ")" +
                     suggest(name, names));
  return failure();
}

FailureOr<EvalValue> Evaluator::evalMember(const ast::MemberExpr &expr,
                                           Frame &frame) {
  FailureOr<EvalValue> base = eval(expr.getBase(), frame);
  if (failed(base))
    return failure();
  llvm::StringRef name = expr.getName();
  switch (base->kind) {
  case EvalValue::Kind::Unknown:
    return EvalValue::unknown();
  case EvalValue::Kind::Instance:
    return memberOfInstance(*base->instance, name, expr.getLoc(), frame);
  case EvalValue::Kind::Module: {
    EvalValue v;
    v.module = base->module;
    if (const ast::ModelDecl *model = base->module->models.lookup(name)) {
      v.kind = EvalValue::Kind::Model;
      v.model = model;
      return v;
    }
    if (const ast::SourceDecl *source = base->module->sources.lookup(name)) {
      v.kind = EvalValue::Kind::Source;
      v.source = source;
      return v;
    }
    std::vector<std::string> names;
    for (const auto &entry : base->module->models)
      names.push_back(entry.getKey().str());
    for (const auto &entry : base->module->sources)
      names.push_back(entry.getKey().str());
    ctx.error(expr.getLoc(), "module '" + base->module->name +
                                 "' has no model or data source named '" +
                                 name + "'" + suggest(name, names));
    return failure();
  }
  case EvalValue::Kind::Data:
    return dataField(base->role, name, expr.getLoc());
  case EvalValue::Kind::Record:
  case EvalValue::Kind::Tuple:
    for (size_t i = 0; i < base->keys.size(); ++i)
      if (base->keys[i] == name)
        return base->items[i];
    ctx.error(expr.getLoc(),
              "no field named '" + name + "'" + suggest(name, base->keys));
    return failure();
  default:
    ctx.error(expr.getLoc(), describe(*base, ctx.syms) +
                                 " has no members (looking for '" + name +
                                 "')");
    return failure();
  }
}

FailureOr<EvalValue> Evaluator::evalCall(const ast::CallExpr &expr,
                                         Frame &frame) {
  FailureOr<EvalValue> callee = eval(expr.getCallee(), frame);
  if (failed(callee))
    return failure();
  switch (callee->kind) {
  case EvalValue::Kind::Unknown:
    // Evaluate the arguments for their own errors.
    for (const ast::Field &arg : expr.getArgs())
      if (failed(eval(*arg.value, frame)))
        return failure();
    return EvalValue::unknown();
  case EvalValue::Kind::Builtin:
    if (!frame.tensorContext && callee->name != "sqrt" &&
        callee->name != "exp" && callee->name != "log" &&
        callee->name != "tanh" && callee->name != "sigmoid") {
      ctx.error(expr.getLoc(), "the tensor op '" + callee->name +
                                   "' can only be used in a forward or the "
                                   "loss");
      return failure();
    }
    return callBuiltin(callee->name, expr, frame);
  case EvalValue::Kind::String: {
    // `act(x)` where `act` is a string argument naming an activation.
    static const char *const activations[] = {"relu", "gelu", "tanh", "sigmoid",
                                              "exp",  "log",  "sqrt"};
    if (!callee->stringValue) {
      if (expr.getArgs().size() != 1) {
        ctx.error(expr.getLoc(), "an activation takes one argument");
        return failure();
      }
      FailureOr<EvalValue> x = eval(*expr.getArgs()[0].value, frame);
      if (failed(x))
        return failure();
      return x->isTensor() ? EvalValue::getTensor(x->dtype, x->shape)
                           : EvalValue::unknown();
    }
    std::vector<std::string> names(std::begin(activations),
                                   std::end(activations));
    if (llvm::is_contained(names, *callee->stringValue))
      return callBuiltin(*callee->stringValue, expr, frame);
    ctx.error(expr.getLoc(), "\"" + *callee->stringValue +
                                 "\" does not name a builtin activation (" +
                                 "relu, gelu, tanh, sigmoid, exp, log, sqrt)" +
                                 suggest(*callee->stringValue, names));
    return failure();
  }
  case EvalValue::Kind::Instance:
  case EvalValue::Kind::Layers:
    if (!frame.tensorContext) {
      ctx.error(expr.getLoc(), "a layer can only be called in a forward or "
                               "the loss");
      return failure();
    }
    return callLayers(*callee, expr, frame);
  case EvalValue::Kind::Model:
    ctx.error(expr.getLoc(),
              "the model '" +
                  callee->module->qualify(callee->model->getName()) +
                  "' cannot be called here: declare it as a member "
                  "(`name = Model(...)`) and call the member");
    return failure();
  case EvalValue::Kind::Source:
    ctx.error(expr.getLoc(), "a data source can only be the value of the "
                             "train block's 'data' or 'eval'");
    return failure();
  default:
    ctx.error(expr.getLoc(), describe(*callee, ctx.syms) + " is not callable");
    return failure();
  }
}

/// A constant integer index from `value`, or nullopt (symbolic).
static std::optional<int64_t> constantIndex(SemaContext &ctx,
                                            const EvalValue &value) {
  if (value.kind != EvalValue::Kind::Int)
    return std::nullopt;
  return ctx.syms.resolve(value.intValue).getConstant();
}

FailureOr<EvalValue> Evaluator::evalIndex(const ast::IndexExpr &expr,
                                          Frame &frame) {
  FailureOr<EvalValue> base = eval(expr.getBase(), frame);
  if (failed(base))
    return failure();
  FailureOr<EvalValue> index = eval(expr.getIndex(), frame);
  if (failed(index))
    return failure();
  if (base->isUnknown() || index->isUnknown())
    return EvalValue::unknown();
  if (index->kind != EvalValue::Kind::Int) {
    ctx.error(expr.getIndex().getLoc(),
              "an index must be an integer, not " + describe(*index, ctx.syms));
    return failure();
  }
  std::optional<int64_t> i = constantIndex(ctx, *index);
  switch (base->kind) {
  case EvalValue::Kind::Layers: {
    const InstanceChild &child = *base->layers;
    if (child.symbolicCount) {
      // Generic: the representative layer stands for every index.
      EvalValue v;
      v.kind = EvalValue::Kind::Instance;
      v.instance = child.items[0].get();
      return v;
    }
    int64_t size = base->hi - base->lo;
    if (!i) {
      if (!isConcrete() && size > 0) {
        EvalValue v;
        v.kind = EvalValue::Kind::Instance;
        v.instance = child.items[base->lo].get();
        return v;
      }
      ctx.error(expr.getIndex().getLoc(), "a layer index must be a constant");
      return failure();
    }
    int64_t k = *i < 0 ? *i + size : *i;
    if (k < 0 || k >= size) {
      ctx.error(expr.getIndex().getLoc(),
                "index " + std::to_string(*i) + " is out of range for '" +
                    child.member->getName() + "', a list of " +
                    std::to_string(size) + " layers");
      return failure();
    }
    EvalValue v;
    v.kind = EvalValue::Kind::Instance;
    v.instance = child.items[base->lo + k].get();
    return v;
  }
  case EvalValue::Kind::Tuple:
  case EvalValue::Kind::List: {
    int64_t size = base->items.size();
    if (!i)
      return EvalValue::unknown();
    int64_t k = *i < 0 ? *i + size : *i;
    if (k < 0 || k >= size) {
      ctx.error(expr.getIndex().getLoc(),
                "index " + std::to_string(*i) + " is out of range for " +
                    describe(*base, ctx.syms) + " of " + std::to_string(size) +
                    " items");
      return failure();
    }
    return base->items[k];
  }
  case EvalValue::Kind::Tensor:
    ctx.error(expr.getLoc(), "indexing a tensor is not supported; use split, "
                             "reshape or a reduction");
    return failure();
  default:
    ctx.error(expr.getLoc(), describe(*base, ctx.syms) + " cannot be indexed");
    return failure();
  }
}

FailureOr<EvalValue> Evaluator::evalSlice(const ast::SliceExpr &expr,
                                          Frame &frame) {
  FailureOr<EvalValue> base = eval(expr.getBase(), frame);
  if (failed(base))
    return failure();
  std::optional<int64_t> bounds[2];
  const ast::Expr *bound[2] = {expr.getLo(), expr.getHi()};
  bool symbolic = false;
  for (int side = 0; side < 2; ++side) {
    if (!bound[side])
      continue;
    FailureOr<EvalValue> v = eval(*bound[side], frame);
    if (failed(v))
      return failure();
    if (v->isUnknown()) {
      symbolic = true;
      continue;
    }
    if (v->kind != EvalValue::Kind::Int) {
      ctx.error(bound[side]->getLoc(),
                "a slice bound must be an integer, not " +
                    describe(*v, ctx.syms));
      return failure();
    }
    bounds[side] = constantIndex(ctx, *v);
    symbolic |= !bounds[side];
  }
  if (base->isUnknown())
    return EvalValue::unknown();
  int64_t size;
  switch (base->kind) {
  case EvalValue::Kind::Layers:
    if (base->layers->symbolicCount || symbolic)
      return *base; // Generic: the representative stands for any slice.
    size = base->hi - base->lo;
    break;
  case EvalValue::Kind::Tuple:
  case EvalValue::Kind::List:
    if (symbolic)
      return EvalValue::unknown();
    size = base->items.size();
    break;
  case EvalValue::Kind::Tensor:
    ctx.error(expr.getLoc(), "slicing a tensor is not supported; use split");
    return failure();
  default:
    ctx.error(expr.getLoc(), describe(*base, ctx.syms) + " cannot be sliced");
    return failure();
  }
  int64_t lo = bounds[0].value_or(0), hi = bounds[1].value_or(size);
  if (lo < 0)
    lo += size;
  if (hi < 0)
    hi += size;
  if (lo < 0 || hi > size || lo > hi) {
    ctx.error(expr.getLoc(),
              "slice [" + std::to_string(bounds[0].value_or(0)) + ":" +
                  std::to_string(bounds[1].value_or(size)) +
                  "] is out of range for " + std::to_string(size) + " items");
    return failure();
  }
  EvalValue v = *base;
  if (v.kind == EvalValue::Kind::Layers) {
    v.hi = v.lo + hi;
    v.lo = v.lo + lo;
    return v;
  }
  v.items.assign(base->items.begin() + lo, base->items.begin() + hi);
  if (!v.keys.empty())
    v.keys.assign(base->keys.begin() + lo, base->keys.begin() + hi);
  return v;
}

FailureOr<EvalValue> Evaluator::scalarBinary(ast::BinaryOp op,
                                             const EvalValue &lhs,
                                             const EvalValue &rhs,
                                             llvm::SMLoc loc) {
  if (!lhs.isNumber() || !rhs.isNumber()) {
    const EvalValue &bad = lhs.isNumber() ? rhs : lhs;
    ctx.error(loc, "'" + ast::spell(op) + "' cannot be applied to " +
                       describe(bad, ctx.syms));
    return failure();
  }
  if (op == ast::BinaryOp::MatMul) {
    ctx.error(loc, "'@' needs two tensors; use '*' to multiply numbers");
    return failure();
  }
  if (lhs.kind == EvalValue::Kind::Int && rhs.kind == EvalValue::Kind::Int) {
    std::optional<SymExpr> result;
    switch (op) {
    case ast::BinaryOp::Add:
      result = lhs.intValue.add(rhs.intValue);
      break;
    case ast::BinaryOp::Sub:
      result = lhs.intValue.sub(rhs.intValue);
      break;
    case ast::BinaryOp::Mul:
      result = lhs.intValue.mul(rhs.intValue);
      break;
    default: {
      SymContext::Quotient q = ctx.syms.divide(lhs.intValue, rhs.intValue);
      switch (q.kind) {
      case SymContext::Quotient::Kind::Exact:
      case SymContext::Quotient::Kind::Atom:
        return EvalValue::getInt(q.value);
      case SymContext::Quotient::Kind::NotIntegral:
        return EvalValue::getFloat(q.approx);
      case SymContext::Quotient::Kind::DivByZero:
        ctx.error(loc, "division by zero");
        return failure();
      }
    }
    }
    if (!result) {
      ctx.error(loc, "integer overflow in '" + ast::spell(op) +
                         "' (or an expression too large to track)");
      return failure();
    }
    return EvalValue::getInt(*result);
  }
  // Floats: an integer that is still symbolic makes the result unknown.
  auto number = [&](const EvalValue &v) -> std::optional<double> {
    if (v.kind == EvalValue::Kind::Float)
      return v.floatValue;
    std::optional<int64_t> c = ctx.syms.resolve(v.intValue).getConstant();
    if (!c)
      return std::nullopt;
    return static_cast<double>(*c);
  };
  std::optional<double> a = number(lhs), b = number(rhs);
  if (!a || !b)
    return EvalValue::getFloat(std::nullopt);
  double r;
  switch (op) {
  case ast::BinaryOp::Add:
    r = *a + *b;
    break;
  case ast::BinaryOp::Sub:
    r = *a - *b;
    break;
  case ast::BinaryOp::Mul:
    r = *a * *b;
    break;
  default:
    if (*b == 0) {
      ctx.error(loc, "division by zero");
      return failure();
    }
    r = *a / *b;
    break;
  }
  if (!std::isfinite(r)) {
    ctx.error(loc, "the result of '" + ast::spell(op) + "' is not finite");
    return failure();
  }
  return EvalValue::getFloat(r);
}

FailureOr<EvalValue> Evaluator::evalBinary(const ast::BinaryExpr &expr,
                                           Frame &frame) {
  FailureOr<EvalValue> lhs = eval(expr.getLhs(), frame);
  if (failed(lhs))
    return failure();
  FailureOr<EvalValue> rhs = eval(expr.getRhs(), frame);
  if (failed(rhs))
    return failure();
  ast::BinaryOp op = expr.getOp();
  // An absent member (`bias` of `Linear(..., bias = false)`) is the identity
  // of `+`.
  bool lhsAbsent = lhs->kind == EvalValue::Kind::Absent;
  bool rhsAbsent = rhs->kind == EvalValue::Kind::Absent;
  if (lhsAbsent || rhsAbsent) {
    if (op == ast::BinaryOp::Add && !(lhsAbsent && rhsAbsent))
      return lhsAbsent ? *rhs : *lhs;
    const EvalValue &absent = lhsAbsent ? *lhs : *rhs;
    ctx.error(expr.getLoc(), "'" + absent.name +
                                 "' is absent here (its condition is false); "
                                 "an absent member can only be added");
    return failure();
  }
  if (lhs->isUnknown() || rhs->isUnknown()) {
    // A known tensor keeps its type: `x + unknown` is still shaped like x
    // only if the unknown is a scalar, which cannot be told; stay unknown.
    return EvalValue::unknown();
  }
  if (lhs->isTensor() || rhs->isTensor())
    return TensorOps(*this, frame.scope).binary(op, *lhs, *rhs, expr.getLoc());
  return scalarBinary(op, *lhs, *rhs, expr.getLoc());
}

FailureOr<EvalValue> Evaluator::evalNeg(const ast::NegExpr &expr,
                                        Frame &frame) {
  FailureOr<EvalValue> operand = eval(expr.getOperand(), frame);
  if (failed(operand))
    return failure();
  switch (operand->kind) {
  case EvalValue::Kind::Unknown:
    return EvalValue::unknown();
  case EvalValue::Kind::Int: {
    std::optional<SymExpr> negated = operand->intValue.neg();
    if (!negated) {
      ctx.error(expr.getLoc(), "integer overflow in '-'");
      return failure();
    }
    return EvalValue::getInt(*negated);
  }
  case EvalValue::Kind::Float:
    return EvalValue::getFloat(
        operand->floatValue ? std::optional<double>(-*operand->floatValue)
                            : std::nullopt);
  case EvalValue::Kind::Tensor:
    return TensorOps(*this, frame.scope).neg(*operand, expr.getLoc());
  default:
    ctx.error(expr.getLoc(),
              "'-' cannot be applied to " + describe(*operand, ctx.syms));
    return failure();
  }
}

FailureOr<EvalValue> Evaluator::eval(const ast::Expr &expr, Frame &frame) {
  switch (expr.getKind()) {
  case ast::Expr::Kind::Int:
    return EvalValue::getInt(SymExpr(cast<ast::IntExpr>(expr).getValue()));
  case ast::Expr::Kind::Float:
    return EvalValue::getFloat(cast<ast::FloatExpr>(expr).getValue());
  case ast::Expr::Kind::Bool:
    return EvalValue::getBool(cast<ast::BoolExpr>(expr).getValue());
  case ast::Expr::Kind::String:
    return EvalValue::getString(cast<ast::StringExpr>(expr).getValue().str());
  case ast::Expr::Kind::Name:
    return evalName(cast<ast::NameExpr>(expr), frame);
  case ast::Expr::Kind::Member:
    return evalMember(cast<ast::MemberExpr>(expr), frame);
  case ast::Expr::Kind::Call:
    return evalCall(cast<ast::CallExpr>(expr), frame);
  case ast::Expr::Kind::Index:
    return evalIndex(cast<ast::IndexExpr>(expr), frame);
  case ast::Expr::Kind::Slice:
    return evalSlice(cast<ast::SliceExpr>(expr), frame);
  case ast::Expr::Kind::Binary:
    return evalBinary(cast<ast::BinaryExpr>(expr), frame);
  case ast::Expr::Kind::Neg:
    return evalNeg(cast<ast::NegExpr>(expr), frame);
  case ast::Expr::Kind::Tuple:
  case ast::Expr::Kind::Record: {
    EvalValue v;
    bool isTuple = llvm::isa<ast::TupleExpr>(expr);
    v.kind = isTuple ? EvalValue::Kind::Tuple : EvalValue::Kind::Record;
    llvm::ArrayRef<ast::Field> fields =
        isTuple ? cast<ast::TupleExpr>(expr).getItems()
                : cast<ast::RecordExpr>(expr).getFields();
    bool named =
        llvm::any_of(fields, [](const ast::Field &f) { return f.isNamed(); });
    for (const ast::Field &field : fields) {
      FailureOr<EvalValue> item = eval(*field.value, frame);
      if (failed(item))
        return failure();
      if (named) {
        if (llvm::is_contained(v.keys, field.name)) {
          ctx.error(field.getLoc(), "'" + field.name + "' appears twice");
          return failure();
        }
        v.keys.push_back(field.name);
      }
      v.items.push_back(std::move(*item));
    }
    return v;
  }
  case ast::Expr::Kind::List: {
    EvalValue v;
    v.kind = EvalValue::Kind::List;
    for (const ast::ExprPtr &item : cast<ast::ListExpr>(expr).getItems()) {
      FailureOr<EvalValue> value = eval(*item, frame);
      if (failed(value))
        return failure();
      v.items.push_back(std::move(*value));
    }
    return v;
  }
  case ast::Expr::Kind::Ellipsis:
    ctx.error(expr.getLoc(), "'...' is only allowed as the first dimension of "
                             "a forward's input or result type");
    return failure();
  }
  return failure();
}

FailureOr<SymExpr> Evaluator::evalInt(const ast::Expr &expr, Frame &frame,
                                      llvm::StringRef what) {
  FailureOr<EvalValue> value = eval(expr, frame);
  if (failed(value))
    return failure();
  if (value->kind == EvalValue::Kind::Int)
    return value->intValue;
  if (value->isUnknown())
    return ctx.syms.symbol(ast::toSource(expr));
  if (value->kind == EvalValue::Kind::Float && value->floatValue) {
    ctx.error(expr.getLoc(), what + " must be an integer, but " +
                                 ast::toSource(expr) + " is " +
                                 std::to_string(*value->floatValue));
    return failure();
  }
  ctx.error(expr.getLoc(),
            what + " must be an integer, not " + describe(*value, ctx.syms));
  return failure();
}
