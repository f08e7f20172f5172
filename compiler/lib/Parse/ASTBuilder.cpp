//===- ASTBuilder.cpp - ANTLR parse tree to dt AST ------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Labeled alternatives of a rule are distinguished with dynamic_cast (this
// library is built with RTTI, like the generated code). The parse tree is
// complete when this runs (the first syntax error cancels the parse), so every
// mandatory child exists.
//
//===----------------------------------------------------------------------===//

#include "ASTBuilder.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace dt;
using namespace dt::ast;
using namespace dt::parse;
using P = dt_antlr::DTParser;

namespace {
class Builder {
public:
  Builder(const TokenLocator &locator, DiagnosticEngine &diag)
      : locator(locator), diag(diag) {}

  std::unique_ptr<Module>
  buildFile(P::File_Context *ctx, llvm::StringRef filename, unsigned bufferId);

private:
  llvm::SMLoc loc(antlr4::Token *token) const { return locator.start(token); }
  llvm::SMLoc loc(antlr4::ParserRuleContext *ctx) const {
    return locator.start(ctx->getStart());
  }
  llvm::SMRange range(antlr4::ParserRuleContext *ctx) const {
    return {locator.start(ctx->getStart()), locator.end(ctx->getStop())};
  }
  std::string text(antlr4::Token *token) const {
    return locator.text(token).str();
  }
  std::string name(P::NameContext *ctx) const { return text(ctx->getStart()); }

  void error(llvm::SMLoc at, const llvm::Twine &message) {
    failed = true;
    diag.error(at, message);
  }

  ImportDecl buildImport(P::ImportDeclContext *ctx);
  std::unique_ptr<Decl> buildDecl(P::DeclContext *ctx);
  std::unique_ptr<ModelDecl> buildModel(P::ModelDeclContext *ctx);
  std::vector<ArgDecl> buildArgs(P::ArgDeclListContext *ctx);
  std::unique_ptr<Member> buildParam(P::NameContext *name,
                                     P::ParamBodyContext *ctx);
  std::unique_ptr<Member> buildSubmodule(P::NameContext *name,
                                         P::SubmoduleBodyContext *ctx);
  std::unique_ptr<ForwardDecl> buildForward(P::ModelItemContext *ctx);
  std::vector<Annotation>
  buildAnnotations(const std::vector<P::AnnotationContext *> &ctxs);
  TypeExpr buildType(P::TensorTypeContext *ctx);
  std::vector<ExprPtr> buildDims(P::DimListContext *ctx);
  std::unique_ptr<Stmt> buildStmt(P::StmtContext *ctx);
  std::unique_ptr<SourceDecl> buildSource(P::SourceDeclContext *ctx);
  std::unique_ptr<TrainDecl> buildTrain(P::TrainDeclContext *ctx);
  std::unique_ptr<ParallelDecl> buildParallel(P::ParallelDeclContext *ctx);
  std::unique_ptr<DeployDecl> buildDeploy(P::DeployDeclContext *ctx);
  KeyValue buildKeyValue(P::KeyValueContext *ctx);

  ExprPtr buildExpr(P::ExprContext *ctx);
  ExprPtr buildPostfix(P::PostfixExprContext *ctx);
  ExprPtr buildPrimary(P::PrimaryContext *ctx);
  ExprPtr buildInt(antlr4::Token *token, llvm::SMRange range);
  ExprPtr buildFloat(antlr4::Token *token, llvm::SMRange range);
  std::string decodeString(antlr4::Token *token);

  const TokenLocator &locator;
  DiagnosticEngine &diag;
  bool failed = false;
};
} // namespace

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

std::unique_ptr<Module> Builder::buildFile(P::File_Context *ctx,
                                           llvm::StringRef filename,
                                           unsigned bufferId) {
  auto module = std::make_unique<Module>(filename.str(), bufferId);
  for (P::ImportDeclContext *import : ctx->importDecl())
    module->addImport(buildImport(import));
  for (P::DeclContext *decl : ctx->decl())
    module->addDecl(buildDecl(decl));
  if (failed)
    return nullptr;
  return module;
}

ImportDecl Builder::buildImport(P::ImportDeclContext *ctx) {
  ImportDecl import;
  import.loc = loc(ctx);
  if (ctx->module) {
    import.isStdlib = true;
    import.path = name(ctx->module);
    import.pathLoc = loc(ctx->module);
    import.alias = import.path;
    import.aliasLoc = import.pathLoc;
    return import;
  }
  import.path = decodeString(ctx->path);
  import.pathLoc = loc(ctx->path);
  import.alias = name(ctx->alias);
  import.aliasLoc = loc(ctx->alias);
  return import;
}

std::unique_ptr<Decl> Builder::buildDecl(P::DeclContext *ctx) {
  if (ctx->modelDecl())
    return buildModel(ctx->modelDecl());
  if (ctx->sourceDecl())
    return buildSource(ctx->sourceDecl());
  if (ctx->trainDecl())
    return buildTrain(ctx->trainDecl());
  if (ctx->parallelDecl())
    return buildParallel(ctx->parallelDecl());
  return buildDeploy(ctx->deployDecl());
}

std::vector<ArgDecl> Builder::buildArgs(P::ArgDeclListContext *ctx) {
  std::vector<ArgDecl> args;
  if (!ctx)
    return args;
  for (P::ArgDeclContext *arg : ctx->argDecl()) {
    ArgDecl decl;
    decl.name = name(arg->name(0));
    decl.loc = loc(arg->name(0));
    decl.type = name(arg->name(1));
    decl.typeLoc = loc(arg->name(1));
    if (arg->expr())
      decl.defaultValue = buildExpr(arg->expr());
    args.push_back(std::move(decl));
  }
  return args;
}

std::vector<Annotation>
Builder::buildAnnotations(const std::vector<P::AnnotationContext *> &ctxs) {
  std::vector<Annotation> annotations;
  for (P::AnnotationContext *a : ctxs)
    annotations.push_back({name(a->name()), loc(a)});
  return annotations;
}

std::unique_ptr<ModelDecl> Builder::buildModel(P::ModelDeclContext *ctx) {
  std::vector<std::unique_ptr<Member>> members;
  std::unique_ptr<ForwardDecl> forward;
  for (P::ModelItemContext *item : ctx->modelItem()) {
    if (P::MemberBodyContext *body = item->memberBody()) {
      if (auto *param = dynamic_cast<P::ParamBodyContext *>(body))
        members.push_back(buildParam(item->name(), param));
      else
        members.push_back(buildSubmodule(
            item->name(), static_cast<P::SubmoduleBodyContext *>(body)));
      continue;
    }
    if (forward) {
      error(loc(item),
            "model '" + name(ctx->name()) + "' declares a second forward");
      diag.note(forward->loc, "the first forward is here");
      continue;
    }
    forward = buildForward(item);
  }
  return std::make_unique<ModelDecl>(
      loc(ctx), name(ctx->name()), loc(ctx->name()),
      buildArgs(ctx->argDeclList()), std::move(members), std::move(forward));
}

std::unique_ptr<Member> Builder::buildParam(P::NameContext *memberName,
                                            P::ParamBodyContext *ctx) {
  std::vector<ExprPtr> dims = buildDims(ctx->dimList());
  for (const ExprPtr &dim : dims)
    if (llvm::isa<EllipsisExpr>(*dim))
      error(dim->getLoc(),
            "'...' is only allowed in the types of a forward's inputs and "
            "results; a parameter needs every dimension");
  return std::make_unique<ParamMember>(
      name(memberName), loc(memberName), buildAnnotations(ctx->annotation()),
      std::move(dims), ctx->init ? buildPostfix(ctx->init) : nullptr,
      ctx->cond ? buildPostfix(ctx->cond) : nullptr);
}

std::unique_ptr<Member> Builder::buildSubmodule(P::NameContext *memberName,
                                                P::SubmoduleBodyContext *ctx) {
  return std::make_unique<SubmoduleMember>(
      name(memberName), loc(memberName), buildAnnotations(ctx->annotation()),
      buildPostfix(ctx->call), ctx->count ? buildPostfix(ctx->count) : nullptr);
}

std::vector<ExprPtr> Builder::buildDims(P::DimListContext *ctx) {
  std::vector<ExprPtr> dims;
  if (!ctx)
    return dims;
  for (P::DimContext *dim : ctx->dim()) {
    if (dim->expr())
      dims.push_back(buildExpr(dim->expr()));
    else
      dims.push_back(std::make_unique<EllipsisExpr>(loc(dim), range(dim)));
  }
  for (size_t i = 1; i < dims.size(); ++i)
    if (llvm::isa<EllipsisExpr>(*dims[i]))
      error(dims[i]->getLoc(), "'...' must be the first dimension");
  return dims;
}

TypeExpr Builder::buildType(P::TensorTypeContext *ctx) {
  TypeExpr type;
  type.name = name(ctx->name());
  type.loc = loc(ctx);
  // `f32[]` is a rank-0 tensor; `f32` alone means the same for results, and
  // `int` and friends have no brackets at all.
  type.hasDims = ctx->children.size() > 1;
  type.dims = buildDims(ctx->dimList());
  return type;
}

std::unique_ptr<ForwardDecl> Builder::buildForward(P::ModelItemContext *ctx) {
  auto forward = std::make_unique<ForwardDecl>();
  forward->loc = loc(ctx);
  forward->endLoc = loc(ctx->close);
  if (P::ForwardParamListContext *params = ctx->forwardParamList())
    for (P::ForwardParamContext *param : params->forwardParam())
      forward->params.push_back({name(param->name()), loc(param->name()),
                                 buildType(param->tensorType())});
  for (P::TensorTypeContext *result : ctx->tensorType())
    forward->results.push_back(buildType(result));
  for (P::StmtContext *stmt : ctx->stmt())
    forward->body.push_back(buildStmt(stmt));
  return forward;
}

std::unique_ptr<Stmt> Builder::buildStmt(P::StmtContext *ctx) {
  if (auto *assign = dynamic_cast<P::AssignStmtContext *>(ctx))
    return std::make_unique<AssignStmt>(
        loc(assign->name()), name(assign->name()), buildExpr(assign->expr()));
  auto *ret = static_cast<P::ReturnStmtContext *>(ctx);
  std::vector<ExprPtr> values;
  for (P::ExprContext *value : ret->expr())
    values.push_back(buildExpr(value));
  return std::make_unique<ReturnStmt>(loc(ret), std::move(values));
}

std::unique_ptr<SourceDecl> Builder::buildSource(P::SourceDeclContext *ctx) {
  std::vector<SourceField> fields;
  for (P::SourceFieldContext *field : ctx->sourceField())
    fields.push_back({name(field->name()), loc(field->name()),
                      buildType(field->tensorType())});
  return std::make_unique<SourceDecl>(
      loc(ctx), name(ctx->name()), loc(ctx->name()),
      buildArgs(ctx->argDeclList()), std::move(fields));
}

KeyValue Builder::buildKeyValue(P::KeyValueContext *ctx) {
  return {name(ctx->name()), loc(ctx->name()), buildExpr(ctx->expr())};
}

std::unique_ptr<TrainDecl> Builder::buildTrain(P::TrainDeclContext *ctx) {
  std::vector<KeyValue> entries;
  for (P::KeyValueContext *kv : ctx->keyValue())
    entries.push_back(buildKeyValue(kv));
  std::string jobName = ctx->name() ? name(ctx->name()) : "";
  llvm::SMLoc nameLoc = ctx->name() ? loc(ctx->name()) : loc(ctx);
  return std::make_unique<TrainDecl>(loc(ctx), jobName, nameLoc,
                                     std::move(entries));
}

std::unique_ptr<ParallelDecl>
Builder::buildParallel(P::ParallelDeclContext *ctx) {
  std::vector<KeyValue> entries;
  std::vector<ShardEntry> shards;
  for (P::ParallelItemContext *item : ctx->parallelItem()) {
    if (auto *key = dynamic_cast<P::ParallelKeyContext *>(item)) {
      entries.push_back(buildKeyValue(key->keyValue()));
      continue;
    }
    auto *shard = static_cast<P::ShardItemContext *>(item);
    shards.push_back(
        {loc(shard), buildPostfix(shard->path), buildExpr(shard->expr())});
  }
  return std::make_unique<ParallelDecl>(loc(ctx), std::move(entries),
                                        std::move(shards));
}

std::unique_ptr<DeployDecl> Builder::buildDeploy(P::DeployDeclContext *ctx) {
  std::vector<KeyValue> entries;
  for (P::KeyValueContext *kv : ctx->keyValue())
    entries.push_back(buildKeyValue(kv));
  return std::make_unique<DeployDecl>(loc(ctx), name(ctx->name()),
                                      loc(ctx->name()), std::move(entries));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Builder::buildExpr(P::ExprContext *ctx) {
  if (auto *postfix = dynamic_cast<P::PostfixContext *>(ctx))
    return buildPostfix(postfix->postfixExpr());
  if (auto *neg = dynamic_cast<P::NegExprContext *>(ctx))
    return std::make_unique<NegExpr>(loc(neg), range(neg),
                                     buildExpr(neg->expr()));
  antlr4::Token *op;
  std::vector<P::ExprContext *> operands;
  if (auto *mul = dynamic_cast<P::MulExprContext *>(ctx)) {
    op = mul->op;
    operands = mul->expr();
  } else {
    auto *add = static_cast<P::AddExprContext *>(ctx);
    op = add->op;
    operands = add->expr();
  }
  llvm::StringRef spelling = locator.text(op);
  BinaryOp kind = spelling == "+"   ? BinaryOp::Add
                  : spelling == "-" ? BinaryOp::Sub
                  : spelling == "*" ? BinaryOp::Mul
                  : spelling == "/" ? BinaryOp::Div
                                    : BinaryOp::MatMul;
  return std::make_unique<BinaryExpr>(loc(op), range(ctx), kind,
                                      buildExpr(operands[0]),
                                      buildExpr(operands[1]));
}

ExprPtr Builder::buildPostfix(P::PostfixExprContext *ctx) {
  if (auto *primary = dynamic_cast<P::PrimaryExprContext *>(ctx))
    return buildPrimary(primary->primary());
  if (auto *member = dynamic_cast<P::MemberExprContext *>(ctx))
    return std::make_unique<MemberExpr>(loc(member->name()), range(member),
                                        buildPostfix(member->postfixExpr()),
                                        name(member->name()));
  if (auto *member = dynamic_cast<P::MemberIndexExprContext *>(ctx)) {
    // `blocks.0` is `blocks[0]`.
    antlr4::Token *index = member->INT()->getSymbol();
    llvm::SMRange indexRange(loc(index), locator.end(index));
    return std::make_unique<IndexExpr>(loc(index), range(member),
                                       buildPostfix(member->postfixExpr()),
                                       buildInt(index, indexRange));
  }
  if (auto *call = dynamic_cast<P::CallExprContext *>(ctx)) {
    std::vector<Field> args;
    if (P::CallArgListContext *list = call->callArgList())
      for (P::CallArgContext *arg : list->callArg()) {
        Field field;
        if (arg->name()) {
          field.name = name(arg->name());
          field.nameLoc = loc(arg->name());
        }
        field.value = buildExpr(arg->expr());
        args.push_back(std::move(field));
      }
    return std::make_unique<CallExpr>(loc(call), range(call),
                                      buildPostfix(call->postfixExpr()),
                                      std::move(args));
  }
  auto *index = static_cast<P::IndexExprContext *>(ctx);
  if (index->colon)
    return std::make_unique<SliceExpr>(
        loc(index->postfixExpr()), range(index),
        buildPostfix(index->postfixExpr()),
        index->lo ? buildExpr(index->lo) : nullptr,
        index->hi ? buildExpr(index->hi) : nullptr);
  if (!index->lo) {
    error(loc(index->getStop()), "expected an index or a slice between '[' "
                                 "and ']'");
    return std::make_unique<NameExpr>(loc(index), range(index), "<error>");
  }
  return std::make_unique<IndexExpr>(loc(index->lo), range(index),
                                     buildPostfix(index->postfixExpr()),
                                     buildExpr(index->lo));
}

ExprPtr Builder::buildInt(antlr4::Token *token, llvm::SMRange range) {
  std::string digits = text(token);
  llvm::erase(digits, '_');
  int64_t value = 0;
  if (llvm::StringRef(digits).getAsInteger(10, value)) {
    error(loc(token),
          "integer literal '" + text(token) + "' does not fit in 64 bits");
    value = 0;
  }
  return std::make_unique<IntExpr>(loc(token), range, value);
}

ExprPtr Builder::buildFloat(antlr4::Token *token, llvm::SMRange range) {
  std::string digits = text(token);
  llvm::erase(digits, '_');
  double value = 0;
  if (llvm::StringRef(digits).getAsDouble(value, /*AllowInexact=*/true) ||
      !std::isfinite(value)) {
    error(loc(token), "number '" + text(token) + "' is out of range");
    value = 0;
  }
  return std::make_unique<FloatExpr>(loc(token), range, value);
}

std::string Builder::decodeString(antlr4::Token *token) {
  llvm::StringRef quoted = locator.text(token);
  llvm::StringRef body = quoted.drop_front().drop_back();
  std::string value;
  value.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      value.push_back(body[i]);
      continue;
    }
    char escaped = i + 1 < body.size() ? body[i + 1] : '\0';
    switch (escaped) {
    case '"':
    case '\\':
      value.push_back(escaped);
      break;
    case 'n':
      value.push_back('\n');
      break;
    case 't':
      value.push_back('\t');
      break;
    default: {
      llvm::SMLoc at = locator.at(token->getStartIndex() + 1 + i);
      error(at, "unknown escape sequence '\\" +
                    llvm::Twine(llvm::isPrint(escaped) ? escaped : '?') +
                    "' (known: \\\" \\\\ \\n \\t)");
      break;
    }
    }
    ++i;
  }
  return value;
}

ExprPtr Builder::buildPrimary(P::PrimaryContext *ctx) {
  llvm::SMRange r = range(ctx);
  if (auto *lit = dynamic_cast<P::IntLitContext *>(ctx))
    return buildInt(lit->INT()->getSymbol(), r);
  if (auto *lit = dynamic_cast<P::FloatLitContext *>(ctx))
    return buildFloat(lit->FLOAT()->getSymbol(), r);
  if (auto *lit = dynamic_cast<P::StringLitContext *>(ctx))
    return std::make_unique<StringExpr>(
        loc(ctx), r, decodeString(lit->STRING()->getSymbol()));
  if (dynamic_cast<P::BoolLitContext *>(ctx))
    return std::make_unique<BoolExpr>(loc(ctx), r,
                                      locator.text(ctx->getStart()) == "true");
  if (auto *ref = dynamic_cast<P::NameRefContext *>(ctx))
    return std::make_unique<NameExpr>(loc(ctx), r, name(ref->name()));
  if (auto *paren = dynamic_cast<P::ParenExprContext *>(ctx)) {
    std::vector<Field> items;
    for (P::ParenItemContext *item : paren->parenItem()) {
      Field field;
      if (item->name()) {
        field.name = name(item->name());
        field.nameLoc = loc(item->name());
      }
      field.value = buildExpr(item->expr());
      items.push_back(std::move(field));
    }
    // `(x)` groups; `(x,)`, `(a, b)`, `(dp = 4)` and `()` are tuples.
    if (items.size() == 1 && !items[0].isNamed() && !paren->trail)
      return std::move(items[0].value);
    return std::make_unique<TupleExpr>(loc(ctx), r, std::move(items));
  }
  if (auto *list = dynamic_cast<P::ListExprContext *>(ctx)) {
    std::vector<ExprPtr> items;
    for (P::ExprContext *item : list->expr())
      items.push_back(buildExpr(item));
    return std::make_unique<ListExpr>(loc(ctx), r, std::move(items));
  }
  auto *record = static_cast<P::RecordExprContext *>(ctx);
  std::vector<Field> fields;
  for (P::RecordItemContext *item : record->recordItem()) {
    Field field;
    if (item->name()) {
      field.name = name(item->name());
    } else {
      field.name = decodeString(item->STRING()->getSymbol());
      if (field.name.empty())
        error(loc(item), "a record key must not be empty");
    }
    field.nameLoc = loc(item);
    field.value = buildExpr(item->expr());
    fields.push_back(std::move(field));
  }
  return std::make_unique<RecordExpr>(loc(ctx), r, std::move(fields));
}

std::unique_ptr<Module> parse::buildModule(P::File_Context *file,
                                           llvm::StringRef filename,
                                           unsigned bufferId,
                                           const TokenLocator &locator,
                                           DiagnosticEngine &diag) {
  return Builder(locator, diag).buildFile(file, filename, bufferId);
}
