//===- StdlibModels.cpp - Standard-library models chosen by an argument ---===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The language has no branches, so a layer whose structure depends on an
// argument's value is two declarations. `nn.ResNet(depth = ...)` is
// torchvision's resnet18, resnet34 or resnet50: the declaration `nn.ResNet`
// builds BasicBlock stages whose block counts follow from depth 18 or 34, and
// depth 50 instantiates `nn.ResNetBottleneck` (same arguments) instead. Any
// other depth is an error at the argument, not a network torchvision does
// not define. `nn.SequenceClassifier(encoder, classes)` is chosen by its
// encoder's family (below).
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;

FailureOr<const ast::ModelDecl *>
sema::chooseStdlibModel(SemaContext &ctx, const ModuleScope &scope,
                        const ast::ModelDecl &decl, const ArgList &args,
                        llvm::ArrayRef<ast::Field> fields,
                        llvm::SMLoc callLoc) {
  if (!scope.isStdlib || decl.getName() != "ResNet")
    return &decl;
  std::optional<int64_t> depth;
  for (const auto &[name, value] : args)
    if (name == "depth" && value.kind == EvalValue::Kind::Int)
      depth = ctx.syms.resolve(value.intValue).getConstant();
  // A generic check: every depth is checked as nn.ResNet's own body.
  if (!depth)
    return &decl;
  if (*depth == 18 || *depth == 34)
    return &decl;
  if (*depth == 50)
    if (const ast::ModelDecl *bottleneck =
            scope.models.lookup("ResNetBottleneck"))
      return bottleneck;
  llvm::SMLoc at = callLoc;
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == "depth" || (!fields[i].isNamed() && i == 0))
      at = fields[i].value->getLoc();
  ctx.error(at, "nn.ResNet builds torchvision's resnet18, resnet34 and "
                "resnet50, so 'depth' is 18, 34 or 50, not " +
                    std::to_string(*depth));
  return failure();
}

FailureOr<Evaluator::BoundModel>
Evaluator::bindModelCall(const ast::CallExpr &call, Frame &frame,
                         llvm::StringRef what, bool checkDecl) {
  // nn.SequenceClassifier is no declaration of nn.dt: its encoder argument
  // is a model call, which the language's argument types cannot hold.
  if (const auto *member = llvm::dyn_cast<ast::MemberExpr>(&call.getCallee()))
    if (member->getName() == "SequenceClassifier") {
      FailureOr<EvalValue> base = eval(member->getBase(), frame);
      if (failed(base))
        return failure();
      if (base->kind == EvalValue::Kind::Module && base->module->isStdlib &&
          base->module->name == "nn" &&
          !base->module->models.lookup("SequenceClassifier"))
        return bindSequenceClassifier(*base->module, call, frame, checkDecl);
    }
  FailureOr<EvalValue> callee = eval(call.getCallee(), frame);
  if (failed(callee) || callee->isUnknown())
    return failure();
  if (callee->kind != EvalValue::Kind::Model) {
    ctx.error(call.getLoc(), what + " must be a call of a model, but " +
                                 ast::toSource(call.getCallee()) + " is " +
                                 describe(*callee, ctx.syms));
    return failure();
  }
  const ModuleScope &scope = *callee->module;
  const ast::ModelDecl &decl = *callee->model;
  if (checkDecl && failed(checkModelDecl(ctx, scope, decl)))
    return failure();
  FailureOr<ArgList> args =
      bindModelArgs(scope, decl, call.getArgs(), frame, call.getLoc());
  if (failed(args))
    return failure();
  FailureOr<const ast::ModelDecl *> chosen =
      chooseStdlibModel(ctx, scope, decl, *args, call.getArgs(), call.getLoc());
  if (failed(chosen))
    return failure();
  return BoundModel{&scope, *chosen, std::move(*args)};
}

// `nn.SequenceClassifier(encoder, classes)` is transformers'
// AutoModelForSequenceClassification: the encoder's family chooses the
// classifier, whose head and parameter names are that family's own
// (BertForSequenceClassification's dropout and linear head under `bert.` and
// `classifier.`; DistilBertForSequenceClassification's pre_classifier, ReLU,
// dropout and classifier under `distilbert.`). So it binds the encoder
// call's arguments, `config = ...` included, as nn.BertClassifier's or
// nn.DistilBertClassifier's, with `classes` beside them: the program then
// means exactly that classifier, and loads, exports and reports as it does.
// A generic head over any encoder's output would need model-typed arguments
// and would not match the checkpoints' names, so any other encoder is an
// error naming the two families. `config = "config.json"` instead of an
// encoder chooses by the file's model_type, as from_pretrained does.
FailureOr<Evaluator::BoundModel>
Evaluator::bindSequenceClassifier(const ModuleScope &nn,
                                  const ast::CallExpr &call, Frame &frame,
                                  bool checkDecl) {
  static constexpr llvm::StringLiteral kName = "nn.SequenceClassifier";
  FailureOr<std::vector<const ast::Field *>> own = bindCallArgs(
      ctx, call.getArgs(), {{"encoder", false}, {"classes"}, {"config", false}},
      kName, call.getLoc());
  if (failed(own))
    return failure();
  const ast::Field *encoderField = (*own)[0], *classes = (*own)[1],
                   *configField = (*own)[2];
  if (encoderField && configField) {
    ctx.error(configField->getLoc(),
              "nn.SequenceClassifier takes an encoder or a config, not both "
              "(an encoder's config goes in its call: nn.Bert(config = "
              "\"...\"))");
    return failure();
  }
  if (configField)
    return bindClassifierFromConfig(nn, call, *configField, *classes, frame,
                                    checkDecl);
  if (!encoderField) {
    ctx.error(call.getLoc(), "nn.SequenceClassifier needs an encoder "
                             "(nn.Bert(...) or nn.DistilBert(...)) or "
                             "config = \"config.json\"");
    return failure();
  }
  const ast::Expr &encoderExpr = *encoderField->value;
  auto notAnEncoder = [&](const llvm::Twine &what) {
    ctx.error(encoderExpr.getLoc(),
              "the encoder of nn.SequenceClassifier must be a call of "
              "nn.Bert or nn.DistilBert (it builds transformers' "
              "BertForSequenceClassification or "
              "DistilBertForSequenceClassification), not " +
                  what);
    return failure();
  };
  const auto *encoder = llvm::dyn_cast<ast::CallExpr>(&encoderExpr);
  if (!encoder)
    return notAnEncoder(ast::toSource(encoderExpr));
  FailureOr<EvalValue> callee = eval(encoder->getCallee(), frame);
  if (failed(callee))
    return failure();
  if (callee->kind != EvalValue::Kind::Model || !callee->module->isStdlib ||
      (callee->model->getName() != "Bert" &&
       callee->model->getName() != "DistilBert"))
    return notAnEncoder(ast::toSource(encoder->getCallee()));
  const ast::ModelDecl &encoderDecl = *callee->model;
  const ast::ModelDecl *classifier =
      nn.models.lookup((encoderDecl.getName() + "Classifier").str());
  assert(classifier && "nn.dt declares each encoder's classifier");
  if (checkDecl && failed(checkModelDecl(ctx, nn, *classifier)))
    return failure();

  // The encoder's own arguments, checked against its own declaration (an
  // argument only the classifier has is an error there).
  std::vector<ParamSpec> specs;
  const ast::Field *encoderConfig = nullptr;
  for (const ast::Field &f : encoder->getArgs())
    if (f.name == "config")
      encoderConfig = &f;
  for (const ast::ArgDecl &arg : encoderDecl.getArgs())
    specs.push_back({arg.name, !encoderConfig && !arg.defaultValue});
  if (encoderConfig)
    specs.push_back({"config", false});
  FailureOr<std::vector<const ast::Field *>> given =
      bindCallArgs(ctx, encoder->getArgs(), specs,
                   nn.qualify(encoderDecl.getName()), encoder->getLoc());
  if (failed(given))
    return failure();

  // The same fields, by name, as the classifier's arguments.
  std::vector<const ast::Field *> bound(classifier->getArgs().size(), nullptr);
  auto bind = [&](llvm::StringRef name, const ast::Field *field) {
    auto it = llvm::find_if(classifier->getArgs(), [&](const ast::ArgDecl &a) {
      return a.name == name;
    });
    assert(it != classifier->getArgs().end() &&
           "a classifier takes its encoder's arguments");
    bound[it - classifier->getArgs().begin()] = field;
  };
  for (size_t i = 0; i < encoderDecl.getArgs().size(); ++i)
    if ((*given)[i])
      bind(encoderDecl.getArgs()[i].name, (*given)[i]);
  bind("classes", classes);
  FailureOr<ArgList> args = bindModelFields(
      nn, *classifier, bound, encoderConfig, frame, call.getLoc());
  if (failed(args))
    return failure();
  return BoundModel{&nn, classifier, std::move(*args)};
}

FailureOr<Evaluator::BoundModel> Evaluator::bindClassifierFromConfig(
    const ModuleScope &nn, const ast::CallExpr &call,
    const ast::Field &configField, const ast::Field &classes, Frame &frame,
    bool checkDecl) {
  FailureOr<EvalValue> path = eval(*configField.value, frame);
  if (failed(path))
    return failure();
  if (path->kind != EvalValue::Kind::String || !path->stringValue) {
    ctx.error(configField.value->getLoc(),
              "'config' must be the path of a config.json, not " +
                  describe(*path, ctx.syms));
    return failure();
  }
  FailureOr<std::string> type =
      hfModelType(ctx, *path->stringValue, configField.value->getLoc());
  if (failed(type))
    return failure();
  const char *name = *type == "bert"         ? "BertClassifier"
                     : *type == "distilbert" ? "DistilBertClassifier"
                                             : nullptr;
  if (!name) {
    ctx.error(configField.value->getLoc(),
              "config '" + *path->stringValue + "': model_type is '" + *type +
                  "'; nn.SequenceClassifier builds BERT's and DistilBERT's "
                  "classifiers (model_type bert or distilbert)");
    return failure();
  }
  const ast::ModelDecl *classifier = nn.models.lookup(name);
  assert(classifier && "nn.dt declares each encoder's classifier");
  if (checkDecl && failed(checkModelDecl(ctx, nn, *classifier)))
    return failure();
  std::vector<const ast::Field *> bound(classifier->getArgs().size(), nullptr);
  for (size_t i = 0; i < bound.size(); ++i)
    if (classifier->getArgs()[i].name == "classes")
      bound[i] = &classes;
  FailureOr<ArgList> args = bindModelFields(nn, *classifier, bound,
                                            &configField, frame, call.getLoc());
  if (failed(args))
    return failure();
  return BoundModel{&nn, classifier, std::move(*args)};
}
