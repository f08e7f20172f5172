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
// not define.
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
