//===- Forward.cpp - Calling forwards and checking them -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A call binds the callee's declared input types against the actual inputs:
// a dim written as a free name (`B`, `T`) binds to the actual dim, any other
// dim is evaluated with the callee's arguments and must not be provably
// different, and a leading `...` binds to the actual leading dims. Errors
// point at the call, with a note at the declaration. Generic checks then take
// the declared result types; concrete traces run the body (inlining it) and
// check what it returns against the declaration.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"
#include "TensorOps.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

/// Per-call state of input binding.
struct Evaluator::Binding {
  /// What `...` stands for (a shape whose dims are the leading dims), once
  /// bound.
  std::optional<Shape> ellipsis;
};

namespace {
/// `f32[..., in]` as written.
std::string typeText(const ast::TypeExpr &type) {
  std::string text = type.name;
  if (!type.hasDims)
    return text;
  text += "[";
  for (size_t i = 0; i < type.dims.size(); ++i)
    text += (i ? ", " : "") + ast::toSource(*type.dims[i]);
  return text + "]";
}

/// Whether `name` is resolvable in `frame` without binding it.
bool isBound(llvm::StringRef name, const Frame &frame) {
  if (frame.locals.count(name))
    return true;
  if (frame.args)
    for (const auto &arg : *frame.args)
      if (arg.first == name)
        return true;
  if (frame.instance)
    for (const auto &member : frame.instance->decl->getMembers())
      if (member->getName() == name)
        return true;
  return false;
}

/// Returns a tensor dtype or reports it.
FailureOr<DType> tensorDType(SemaContext &ctx, const ast::TypeExpr &type) {
  if (std::optional<DType> dtype = parseDType(type.name))
    return *dtype;
  std::string hint = suggest(type.name, {"f32", "bf16", "f16", "i32", "i64"});
  if (type.name == "int" || type.name == "float" || type.name == "bool" ||
      type.name == "string")
    ctx.error(type.loc, "forward inputs and results are tensors: write a "
                        "dtype and dims, such as f32[B, " +
                            std::string("8]"));
  else
    ctx.error(type.loc, "unknown tensor type '" + type.name +
                            "'; expected f32, bf16, f16, i32 or i64" + hint);
  return failure();
}

EvalValue pack(std::vector<EvalValue> values) {
  if (values.size() == 1)
    return std::move(values[0]);
  EvalValue tuple;
  tuple.kind = EvalValue::Kind::Tuple;
  tuple.items = std::move(values);
  return tuple;
}
} // namespace

LogicalResult Evaluator::bindInput(const ast::ForwardParam &param,
                                   const EvalValue &actual, Frame &callee,
                                   Binding &binding, llvm::SMLoc at,
                                   llvm::SMRange range,
                                   const std::string &desc) {
  const ast::TypeExpr &type = param.type;
  FailureOr<DType> dtype = tensorDType(ctx, type);
  if (failed(dtype))
    return failure();
  auto declNote = [&] {
    ctx.note(param.loc, "declared as " + param.name + ": " + typeText(type));
  };

  bool hasEllipsis =
      !type.dims.empty() && llvm::isa<ast::EllipsisExpr>(*type.dims[0]);
  llvm::ArrayRef<ast::ExprPtr> declared(type.dims);
  if (hasEllipsis)
    declared = declared.drop_front();

  auto bindUnknown = [&](llvm::ArrayRef<ast::ExprPtr> dims) {
    for (const ast::ExprPtr &dim : dims)
      if (const auto *name = llvm::dyn_cast<ast::NameExpr>(dim.get()))
        if (!isBound(name->getName(), callee))
          callee.locals[name->getName()] = EvalValue::unknown();
  };

  if (actual.isUnknown()) {
    bindUnknown(declared);
    if (hasEllipsis && !binding.ellipsis)
      binding.ellipsis = Shape::unknown();
    return success();
  }
  if (!actual.isTensor()) {
    ctx.error(at,
              desc + " expects a tensor for '" + param.name +
                  "' but receives " + describe(actual, ctx.syms),
              range);
    declNote();
    return failure();
  }
  if (actual.dtype != *dtype) {
    ctx.error(at,
              desc + " expects " + toString(*dtype) + " for '" + param.name +
                  "' but receives " + str(actual.dtype, actual.shape, ctx.syms),
              range);
    declNote();
    return failure();
  }

  const Shape &shape = actual.shape;
  size_t k = declared.size();
  if (shape.unknownRank) {
    bindUnknown(declared);
    if (hasEllipsis && !binding.ellipsis)
      binding.ellipsis = Shape::unknown();
    return success();
  }
  size_t t = shape.dims.size();
  // Which actual dims the declared ones meet: the last min(k, t).
  size_t matched = std::min(k, t);
  auto rankError = [&](const std::string &expected) {
    ctx.error(at,
              desc + " expects '" + param.name + "' of " + expected +
                  " but receives " + str(actual.dtype, actual.shape, ctx.syms),
              range);
    declNote();
    return failure();
  };
  if (shape.ellipsis < 0) {
    if (hasEllipsis && t < k)
      return rankError("rank " + std::to_string(k) + " or more");
    if (!hasEllipsis && t != k)
      return rankError("rank " + std::to_string(k));
  } else if (!hasEllipsis && t > k) {
    return rankError("rank " + std::to_string(k));
  }
  // Declared dims the actual shape cannot be matched against bind unknown.
  bindUnknown(declared.drop_back(matched));

  if (hasEllipsis) {
    Shape prefix;
    if (shape.ellipsis >= 0 && t < k) {
      prefix = Shape::unknown();
    } else {
      prefix.ellipsis = shape.ellipsis;
      prefix.dims.assign(shape.dims.begin(), shape.dims.end() - matched);
    }
    if (!binding.ellipsis)
      binding.ellipsis = prefix;
  }

  for (size_t j = 0; j < matched; ++j) {
    const ast::Expr &dimExpr = *declared[k - matched + j];
    size_t actualIndex = t - matched + j;
    const SymExpr &actualDim = shape.dims[actualIndex];
    if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&dimExpr)) {
      if (!isBound(name->getName(), callee)) {
        callee.locals[name->getName()] = EvalValue::getInt(actualDim);
        continue;
      }
    }
    FailureOr<EvalValue> expected = eval(dimExpr, callee);
    if (failed(expected))
      return failure();
    if (expected->isUnknown())
      continue;
    if (expected->kind != EvalValue::Kind::Int) {
      ctx.error(dimExpr.getLoc(), "a dimension must be an integer, not " +
                                      describe(*expected, ctx.syms));
      return failure();
    }
    if (ctx.syms.compare(expected->intValue, actualDim) != SymCmp::Unequal)
      continue;
    std::string want = ctx.syms.str(ctx.syms.resolve(expected->intValue));
    std::string got = ctx.syms.str(ctx.syms.resolve(actualDim));
    if (hasEllipsis && j + 1 == matched && matched == k)
      ctx.error(at,
                desc + " expects input features " + want + " but receives " +
                    got + " (" + str(actual.dtype, actual.shape, ctx.syms) +
                    ")",
                range);
    else
      ctx.error(
          at,
          desc + " expects dimension " +
              (shape.ellipsis < 0 ? std::to_string(actualIndex)
                                  : "-" + std::to_string(t - actualIndex)) +
              " of '" + param.name + "' to be " + want + " but receives " +
              got + " (" + str(actual.dtype, actual.shape, ctx.syms) + ")",
          range);
    declNote();
    return failure();
  }
  return success();
}

FailureOr<std::vector<EvalValue>>
Evaluator::declaredResults(const ast::ForwardDecl &forward, Frame &callee,
                           const Binding &binding) {
  std::vector<EvalValue> results;
  bool ok = true;
  for (const ast::TypeExpr &type : forward.results) {
    FailureOr<DType> dtype = tensorDType(ctx, type);
    if (failed(dtype)) {
      ok = false;
      continue;
    }
    Shape shape;
    for (const ast::ExprPtr &dim : type.dims) {
      if (llvm::isa<ast::EllipsisExpr>(*dim)) {
        if (!binding.ellipsis) {
          ctx.error(dim->getLoc(), "'...' in a result needs an input whose "
                                   "type starts with '...'");
          ok = false;
          break;
        }
        if (binding.ellipsis->unknownRank) {
          shape = Shape::unknown();
          break;
        }
        shape.ellipsis = binding.ellipsis->ellipsis;
        shape.dims.assign(binding.ellipsis->dims.begin(),
                          binding.ellipsis->dims.end());
        continue;
      }
      if (const auto *name = llvm::dyn_cast<ast::NameExpr>(dim.get())) {
        if (!isBound(name->getName(), callee)) {
          ctx.error(dim->getLoc(), "the result dimension '" + name->getName() +
                                       "' is neither an argument nor bound "
                                       "by an input");
          ok = false;
          break;
        }
      }
      FailureOr<EvalValue> value = eval(*dim, callee);
      if (failed(value)) {
        ok = false;
        break;
      }
      if (value->isUnknown()) {
        shape.dims.push_back(ctx.syms.symbol(ast::toSource(*dim)));
        continue;
      }
      if (value->kind != EvalValue::Kind::Int) {
        ctx.error(dim->getLoc(), "a dimension must be an integer, not " +
                                     describe(*value, ctx.syms));
        ok = false;
        break;
      }
      shape.dims.push_back(value->intValue);
    }
    results.push_back(EvalValue::getTensor(*dtype, shape));
  }
  if (!ok)
    return failure();
  return results;
}

FailureOr<std::vector<EvalValue>>
Evaluator::runBody(const ast::ForwardDecl &forward, Frame &frame) {
  std::vector<EvalValue> results;
  bool ok = true, returned = false;
  for (const auto &stmt : forward.body) {
    if (returned) {
      ctx.error(stmt->getLoc(), "a statement after 'return' never runs");
      return failure();
    }
    if (const auto *assign = llvm::dyn_cast<ast::AssignStmt>(stmt.get())) {
      llvm::StringRef name = assign->getName();
      bool shadows =
          (frame.instance &&
           llvm::any_of(frame.instance->decl->getMembers(),
                        [&](const auto &m) { return m->getName() == name; })) ||
          (frame.args && llvm::any_of(*frame.args, [&](const auto &arg) {
             return arg.first == name;
           }));
      if (shadows) {
        ctx.error(
            assign->getLoc(),
            "'" + name + "' is " +
                (frame.args && frame.instance && frame.instance->findArg(name)
                     ? "an argument"
                     : "a member") +
                " of " + frame.instance->decl->getName() +
                "; a forward cannot rebind it");
        ok = false;
        frame.locals[name] = EvalValue::unknown();
        continue;
      }
      FailureOr<EvalValue> value = eval(assign->getValue(), frame);
      if (failed(value)) {
        ok = false;
        frame.locals[name] = EvalValue::unknown();
        continue;
      }
      frame.locals[name] = std::move(*value);
      continue;
    }
    returned = true;
    for (const ast::ExprPtr &value :
         llvm::cast<ast::ReturnStmt>(*stmt).getValues()) {
      FailureOr<EvalValue> v = eval(*value, frame);
      if (failed(v)) {
        ok = false;
        results.push_back(EvalValue::unknown());
        continue;
      }
      results.push_back(std::move(*v));
    }
  }
  if (!returned) {
    ctx.error(forward.endLoc,
              "the forward of " +
                  (frame.instance ? frame.instance->decl->getName().str()
                                  : std::string("this model")) +
                  " ends without 'return'");
    return failure();
  }
  if (!ok)
    return failure();
  return results;
}

LogicalResult Evaluator::checkReturns(const ast::ForwardDecl &forward,
                                      llvm::ArrayRef<EvalValue> actual,
                                      llvm::ArrayRef<EvalValue> declared,
                                      const Instance &inst) {
  const ast::ReturnStmt *ret = nullptr;
  for (const auto &stmt : forward.body)
    if (const auto *r = llvm::dyn_cast<ast::ReturnStmt>(stmt.get()))
      ret = r;
  if (!ret)
    return failure();
  if (actual.size() != declared.size()) {
    ctx.error(ret->getLoc(), "the forward of " + inst.decl->getName() +
                                 " returns " + std::to_string(actual.size()) +
                                 " value" + (actual.size() == 1 ? "" : "s") +
                                 " but declares " +
                                 std::to_string(declared.size()));
    return failure();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const EvalValue &a = actual[i], &d = declared[i];
    llvm::SMLoc at = ret->getValues()[i]->getLoc();
    if (a.isUnknown())
      continue;
    if (!a.isTensor()) {
      ctx.error(at, "the forward of " + inst.decl->getName() +
                        " must return tensors, not " + describe(a, ctx.syms));
      return failure();
    }
    bool same = a.dtype == d.dtype;
    if (same && !a.shape.unknownRank && !d.shape.unknownRank) {
      if (a.shape.ellipsis == d.shape.ellipsis) {
        same = a.shape.dims.size() == d.shape.dims.size();
      } else if (a.shape.hasRank() && d.shape.hasRank()) {
        same = a.shape.dims.size() == d.shape.dims.size();
      }
      if (same && a.shape.dims.size() == d.shape.dims.size())
        for (size_t j = 0; same && j < a.shape.dims.size(); ++j)
          same = ctx.syms.compare(a.shape.dims[j], d.shape.dims[j]) !=
                 SymCmp::Unequal;
    }
    if (!same) {
      ctx.error(at, "the forward of " + inst.decl->getName() + " returns " +
                        str(a.dtype, a.shape, ctx.syms) + " but declares " +
                        str(d.dtype, d.shape, ctx.syms));
      ctx.note(forward.results[i].loc, "the declared result");
      return failure();
    }
  }
  return success();
}

FailureOr<EvalValue> Evaluator::freshInput(const ast::ForwardParam &param,
                                           Frame &frame, Binding &binding) {
  FailureOr<DType> dtype = tensorDType(ctx, param.type);
  if (failed(dtype))
    return failure();
  Shape shape;
  for (const ast::ExprPtr &dim : param.type.dims) {
    if (llvm::isa<ast::EllipsisExpr>(*dim)) {
      if (!binding.ellipsis) {
        Shape prefix;
        prefix.ellipsis = ctx.newEllipsis();
        binding.ellipsis = prefix;
      }
      shape.ellipsis = binding.ellipsis->ellipsis;
      continue;
    }
    if (const auto *name = llvm::dyn_cast<ast::NameExpr>(dim.get())) {
      if (!isBound(name->getName(), frame)) {
        SymExpr symbol = ctx.syms.symbol(name->getName());
        frame.locals[name->getName()] = EvalValue::getInt(symbol);
        shape.dims.push_back(symbol);
        continue;
      }
    }
    FailureOr<SymExpr> value = evalInt(*dim, frame, "a dimension");
    if (failed(value))
      return failure();
    shape.dims.push_back(*value);
  }
  return EvalValue::getTensor(*dtype, shape);
}

LogicalResult Evaluator::checkForward(const Instance &inst) {
  const ast::ForwardDecl *forward = inst.decl->getForward();
  if (!forward)
    return success();
  Frame frame;
  frame.module = inst.module;
  frame.instance = &inst;
  frame.args = &inst.args;
  frame.scope = inst.path;
  frame.tensorContext = true;
  Binding binding;
  bool ok = true;
  std::vector<std::pair<std::string, EvalValue>> inputs;
  for (const ast::ForwardParam &param : forward->params) {
    if (llvm::any_of(inputs,
                     [&](const auto &in) { return in.first == param.name; })) {
      ctx.error(param.loc, "the input '" + param.name + "' is declared twice");
      ok = false;
      continue;
    }
    if (isBound(param.name, frame) && !frame.locals.count(param.name)) {
      ctx.error(param.loc, "the input '" + param.name +
                               "' has the name of an argument or member of " +
                               inst.decl->getName());
      ok = false;
    }
    FailureOr<EvalValue> value = freshInput(param, frame, binding);
    if (failed(value)) {
      ok = false;
      inputs.push_back({param.name, EvalValue::unknown()});
      continue;
    }
    inputs.push_back({param.name, std::move(*value)});
  }
  FailureOr<std::vector<EvalValue>> declared =
      declaredResults(*forward, frame, binding);
  ok &= succeeded(declared);
  for (auto &input : inputs)
    frame.locals[input.first] = std::move(input.second);
  FailureOr<std::vector<EvalValue>> results = runBody(*forward, frame);
  if (failed(results) || failed(declared))
    return failure();
  if (failed(checkReturns(*forward, *results, *declared, inst)))
    return failure();
  return ok ? success() : failure();
}

FailureOr<EvalValue> Evaluator::callInstance(const Instance &inst,
                                             llvm::ArrayRef<EvalValue> inputs,
                                             const ast::CallExpr &call,
                                             const std::string &desc) {
  const ast::ForwardDecl *forward = inst.decl->getForward();
  if (!forward) {
    ctx.error(call.getLoc(), desc + " has no forward to call");
    return failure();
  }
  if (ctx.depth >= SemaContext::kMaxDepth) {
    ctx.error(call.getLoc(), "calls are nested more than " +
                                 std::to_string(SemaContext::kMaxDepth) +
                                 " deep");
    return failure();
  }
  Frame callee;
  callee.module = inst.module;
  callee.instance = &inst;
  callee.args = &inst.args;
  callee.scope = inst.path;
  callee.tensorContext = true;
  Binding binding;
  for (size_t i = 0; i < forward->params.size(); ++i) {
    llvm::SMRange range = i < call.getArgs().size()
                              ? call.getArgs()[i].value->getRange()
                              : call.getRange();
    if (failed(bindInput(forward->params[i], inputs[i], callee, binding,
                         call.getLoc(), range, desc)))
      return failure();
  }
  FailureOr<std::vector<EvalValue>> declared =
      declaredResults(*forward, callee, binding);
  if (failed(declared))
    return failure();
  if (!isConcrete())
    return pack(std::move(*declared));

  ++ctx.depth;
  SemaContext::SiteGuard site(ctx, call.getLoc(), "the forward of " + desc);
  for (size_t i = 0; i < forward->params.size(); ++i)
    callee.locals[forward->params[i].name] = inputs[i];
  FailureOr<std::vector<EvalValue>> results = runBody(*forward, callee);
  --ctx.depth;
  if (failed(results) ||
      failed(checkReturns(*forward, *results, *declared, inst)))
    return failure();
  return pack(std::move(*results));
}

FailureOr<EvalValue> Evaluator::callLayers(const EvalValue &callee,
                                           const ast::CallExpr &call,
                                           Frame &frame) {
  const Instance *first =
      callee.kind == EvalValue::Kind::Instance
          ? callee.instance
          : (callee.hi > callee.lo ? callee.layers->items[callee.lo].get()
                                   : nullptr);
  if (!first) {
    // An empty slice of a list is the identity on its first argument (the
    // others are what each layer would have been given beside it).
    if (call.getArgs().empty()) {
      ctx.error(call.getLoc(), "a list of layers takes an input");
      return failure();
    }
    return eval(*call.getArgs()[0].value, frame);
  }
  const ast::ForwardDecl *forward = first->decl->getForward();
  if (!forward) {
    ctx.error(call.getLoc(), first->describe() + " has no forward to call");
    return failure();
  }
  std::vector<ParamSpec> specs;
  for (const ast::ForwardParam &param : forward->params)
    specs.push_back({param.name, true});
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call.getArgs(), specs, first->displayName + " forward",
                   call.getLoc());
  if (failed(bound))
    return failure();
  std::vector<EvalValue> inputs;
  for (const ast::Field *field : *bound) {
    FailureOr<EvalValue> v = eval(*field->value, frame);
    if (failed(v))
      return failure();
    inputs.push_back(std::move(*v));
  }

  if (callee.kind == EvalValue::Kind::Instance)
    return callInstance(*callee.instance, inputs, call,
                        callee.instance->describe());

  // A list applies its layers in order: each takes the previous one's result
  // (and the call's further arguments, the same for every layer: an
  // encoder's attention mask) and returns one value of the same type.
  const InstanceChild &list = *callee.layers;
  EvalValue x = inputs[0];
  for (int64_t k = callee.lo; k < callee.hi; ++k) {
    const Instance &layer = *list.items[k];
    std::vector<EvalValue> args = inputs;
    args[0] = x;
    FailureOr<EvalValue> y = callInstance(layer, args, call, layer.describe());
    if (failed(y))
      return failure();
    if (y->kind == EvalValue::Kind::Tuple) {
      ctx.error(call.getLoc(), "the layers of the list '" +
                                   list.member->getName() +
                                   "' run in sequence, so each must return "
                                   "one value");
      return failure();
    }
    if (list.symbolicCount && x.isTensor() && y->isTensor()) {
      // Generic: the representative stands for every layer, so it must keep
      // the type it receives.
      bool same = x.dtype == y->dtype;
      if (same && x.shape.hasRank() && y->shape.hasRank()) {
        same = x.shape.dims.size() == y->shape.dims.size();
        for (size_t d = 0; same && d < x.shape.dims.size(); ++d)
          same = ctx.syms.compare(x.shape.dims[d], y->shape.dims[d]) !=
                 SymCmp::Unequal;
      }
      if (!same) {
        ctx.error(call.getLoc(),
                  "the layers of the list '" + list.member->getName() +
                      "' run in sequence, so each must return what it "
                      "receives, but one turns " +
                      str(x.dtype, x.shape, ctx.syms) + " into " +
                      str(y->dtype, y->shape, ctx.syms));
        return failure();
      }
    }
    x = std::move(*y);
  }
  return x;
}
