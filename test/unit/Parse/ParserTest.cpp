//===- ParserTest.cpp - Tests of the .dt parser ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Parses small buffers and inspects the AST: precedence, keywords as names,
// member forms, literal decoding; and the pre-scan's limits and messages.
//
//===----------------------------------------------------------------------===//

#include "dt/Parse/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include "gtest/gtest.h"

using namespace dt;
using namespace dt::ast;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

namespace {
/// Parses `text`; the messages land in `messages`.
struct Parsed {
  llvm::SourceMgr sourceMgr;
  std::string messages;
  llvm::raw_string_ostream os{messages};
  DiagnosticEngine diag{sourceMgr, os};
  std::unique_ptr<Module> module;

  explicit Parsed(llvm::StringRef text, ParseLimits limits = {}) {
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "test.dt"), llvm::SMLoc());
    module = parseModule(id, diag, limits);
  }

  /// The value of `KEY = ...` in the first train block.
  const Expr &trainValue(llvm::StringRef key) const {
    for (const auto &decl : module->getDecls())
      if (const auto *train = dyn_cast<TrainDecl>(decl.get()))
        for (const KeyValue &kv : train->getEntries())
          if (kv.key == key)
            return *kv.value;
    ADD_FAILURE() << "no key " << key.str();
    static IntExpr none({}, {}, 0);
    return none;
  }
};

TEST(Parser, BinaryPrecedenceAndAssociativity) {
  Parsed p("train { v = 1 - 2 - 3 * 4 @ 5 / -6 }");
  ASSERT_TRUE(p.module) << p.messages;
  // (1 - 2) - ((3 * 4) @ 5) / (-6)
  const auto &top = cast<BinaryExpr>(p.trainValue("v"));
  EXPECT_EQ(top.getOp(), BinaryOp::Sub);
  const auto &left = cast<BinaryExpr>(top.getLhs());
  EXPECT_EQ(left.getOp(), BinaryOp::Sub);
  EXPECT_EQ(cast<IntExpr>(left.getLhs()).getValue(), 1);
  const auto &div = cast<BinaryExpr>(top.getRhs());
  EXPECT_EQ(div.getOp(), BinaryOp::Div);
  EXPECT_TRUE(isa<NegExpr>(div.getRhs()));
  const auto &matmul = cast<BinaryExpr>(div.getLhs());
  EXPECT_EQ(matmul.getOp(), BinaryOp::MatMul);
  EXPECT_EQ(cast<BinaryExpr>(matmul.getLhs()).getOp(), BinaryOp::Mul);
  EXPECT_EQ(toSource(top), "1 - 2 - 3 * 4 @ 5 / -6");
}

TEST(Parser, KeywordsAreNamesWhereNamesAreExpected) {
  Parsed p(R"(
    model model(param: int) {
      train = model(param)
      forward(x: f32[4]) -> f32[4] { return x }
    }
    train { model = model(param = 1)  loss = model(data.x) }
  )");
  ASSERT_TRUE(p.module) << p.messages;
  const auto &model = cast<ModelDecl>(*p.module->getDecls()[0]);
  EXPECT_EQ(model.getName(), "model");
  EXPECT_EQ(model.getArgs()[0].name, "param");
  EXPECT_EQ(model.getMembers()[0]->getName(), "train");
  const auto &loss = cast<CallExpr>(p.trainValue("loss"));
  EXPECT_EQ(cast<NameExpr>(loss.getCallee()).getName(), "model");
}

TEST(Parser, MemberForms) {
  Parsed p(R"(
    import nn
    model M(n: int, bias: bool = true) {
      w: param[n, 2 * n] = normal(std = 0.02) if bias @row
      v: param[n]
      blocks = nn.Block(n, 2) * n @column
      forward(x: f32[..., n]) -> f32[..., n], f32[] { return x, x }
    }
  )");
  ASSERT_TRUE(p.module) << p.messages;
  const auto &model = cast<ModelDecl>(*p.module->getDecls()[0]);
  ASSERT_EQ(model.getMembers().size(), 3u);
  const auto &w = cast<ParamMember>(*model.getMembers()[0]);
  EXPECT_EQ(w.getDims().size(), 2u);
  ASSERT_TRUE(w.getInit());
  ASSERT_TRUE(w.getCond());
  EXPECT_EQ(w.getAnnotations()[0].name, "row");
  const auto &v = cast<ParamMember>(*model.getMembers()[1]);
  EXPECT_FALSE(v.getInit());
  const auto &blocks = cast<SubmoduleMember>(*model.getMembers()[2]);
  ASSERT_TRUE(blocks.getCount());
  EXPECT_EQ(blocks.getAnnotations()[0].name, "column");
  const ForwardDecl *forward = model.getForward();
  ASSERT_TRUE(forward);
  EXPECT_TRUE(isa<EllipsisExpr>(*forward->params[0].type.dims[0]));
  EXPECT_EQ(forward->results.size(), 2u);
  EXPECT_TRUE(forward->results[1].hasDims);
  EXPECT_TRUE(forward->results[1].dims.empty());
}

TEST(Parser, Literals) {
  Parsed p(
      R"(train { a = 1_000_000  b = 6e-4  c = 3.25  d = "q\"\\\n\t"  e = true })");
  ASSERT_TRUE(p.module) << p.messages;
  EXPECT_EQ(cast<IntExpr>(p.trainValue("a")).getValue(), 1000000);
  EXPECT_DOUBLE_EQ(cast<FloatExpr>(p.trainValue("b")).getValue(), 6e-4);
  EXPECT_DOUBLE_EQ(cast<FloatExpr>(p.trainValue("c")).getValue(), 3.25);
  EXPECT_EQ(cast<StringExpr>(p.trainValue("d")).getValue(), "q\"\\\n\t");
  EXPECT_TRUE(cast<BoolExpr>(p.trainValue("e")).getValue());
}

TEST(Parser, TuplesGroupsRecordsAndPaths) {
  Parsed p(R"(train {
    group = (1)  single = (1,)  mesh = (dp = 2, tp = 2)  empty = ()
    rec = {every: 1, "dir": "x"}  path = model.blocks.0.attn  range = model.b[1:]
  })");
  ASSERT_TRUE(p.module) << p.messages;
  EXPECT_TRUE(isa<IntExpr>(p.trainValue("group")));
  EXPECT_EQ(cast<TupleExpr>(p.trainValue("single")).getItems().size(), 1u);
  const auto &mesh = cast<TupleExpr>(p.trainValue("mesh"));
  EXPECT_EQ(mesh.getItems()[1].name, "tp");
  EXPECT_TRUE(cast<TupleExpr>(p.trainValue("empty")).getItems().empty());
  EXPECT_EQ(cast<RecordExpr>(p.trainValue("rec")).getFields()[1].name, "dir");
  // `blocks.0` is `blocks[0]`.
  const auto &path = cast<MemberExpr>(p.trainValue("path"));
  EXPECT_TRUE(isa<IndexExpr>(path.getBase()));
  const auto &range = cast<SliceExpr>(p.trainValue("range"));
  EXPECT_TRUE(range.getLo());
  EXPECT_FALSE(range.getHi());
}

TEST(Parser, LocationsPointAtTokens) {
  Parsed p("train {\n  batch = a + b\n}\n");
  ASSERT_TRUE(p.module) << p.messages;
  const Expr &sum = p.trainValue("batch");
  auto [line, col] = p.sourceMgr.getLineAndColumn(sum.getLoc());
  EXPECT_EQ(line, 2u);
  EXPECT_EQ(col, 13u); // The operator.
}

TEST(Parser, FirstSyntaxErrorOnly) {
  // Two problems; only the first the scan can prove is reported.
  Parsed p("model M() {\n  forward(x: f32[4]) -> f32[4] { return x + "
           "}\n}\nmodel N(\n");
  EXPECT_FALSE(p.module);
  EXPECT_EQ(p.diag.getNumErrors(), 1u) << p.messages;
  EXPECT_NE(p.messages.find("test.dt:4:9: error: expected ')'"),
            std::string::npos)
      << p.messages;
  Parsed q("model M() {\n  forward(x: f32[4]) -> f32[4] { return x + "
           "}\n}\nmodel N() {}\n");
  EXPECT_EQ(q.diag.getNumErrors(), 1u) << q.messages;
  EXPECT_NE(q.messages.find("test.dt:2:45: error: expected an expression"),
            std::string::npos)
      << q.messages;
}

TEST(Parser, ExpectedTokenMessages) {
  Parsed member("model M() {\n  fc nn.Linear(4, 2)\n}\n");
  EXPECT_NE(member.messages.find("2:6: error: expected ':' or '='"),
            std::string::npos)
      << member.messages;
  Parsed keyword("modle M() { }\n");
  EXPECT_NE(keyword.messages.find("did you mean 'model'?"), std::string::npos)
      << keyword.messages;
  Parsed eof("train { batch = }\n");
  EXPECT_NE(eof.messages.find("1:17: error: expected an expression"),
            std::string::npos)
      << eof.messages;
}

TEST(Parser, NestingLimits) {
  ParseLimits limits;
  limits.maxNesting = 8;
  limits.maxChain = 16;
  // The train block's brace is a level too.
  std::string ok =
      "train { v = " + std::string(7, '(') + "1" + std::string(7, ')') + " }";
  EXPECT_TRUE(Parsed(ok, limits).module);
  std::string deep =
      "train { v = " + std::string(8, '(') + "1" + std::string(8, ')') + " }";
  Parsed tooDeep(deep, limits);
  EXPECT_FALSE(tooDeep.module);
  EXPECT_NE(tooDeep.messages.find("brackets nested too deeply (more than 8"),
            std::string::npos)
      << tooDeep.messages;
  std::string chain = "train { v = 1";
  for (int i = 0; i < 17; ++i)
    chain += " + 1";
  Parsed tooLong(chain + " }", limits);
  EXPECT_FALSE(tooLong.module);
  EXPECT_NE(tooLong.messages.find("expression is too long"), std::string::npos);
  // Separators end a chain: many short keys are fine.
  std::string keys = "train {";
  for (int i = 0; i < 40; ++i)
    keys += " k" + std::to_string(i) + " = 1 + 1";
  EXPECT_TRUE(Parsed(keys + " }", limits).module);
}

TEST(Parser, DefaultLimitsBoundTheTree) {
  // A chain far beyond the default limit is rejected, not recursed over.
  std::string chain = "train { v = x";
  for (int i = 0; i < 100000; ++i)
    chain += ".a";
  Parsed p(chain + " }");
  EXPECT_FALSE(p.module);
  EXPECT_EQ(p.diag.getNumErrors(), 1u);
}

TEST(Parser, MalformedBytes) {
  const char bytes[] = {'m', 'o', 'd', 'e', 'l', ' ', '\xff', '\0', 'x'};
  Parsed p(llvm::StringRef(bytes, sizeof bytes));
  EXPECT_FALSE(p.module);
  EXPECT_NE(p.messages.find("unexpected character '\\xff'"), std::string::npos)
      << p.messages;
}

TEST(Parser, EmptyFile) {
  Parsed p("  // nothing but a comment\n");
  ASSERT_TRUE(p.module) << p.messages;
  EXPECT_TRUE(p.module->getDecls().empty());
}
} // namespace
