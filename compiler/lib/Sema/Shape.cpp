//===- Shape.cpp - Symbolic tensor shapes and their rules -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Broadcasting aligns dims from the right. Two dims broadcast when provably
// equal or one is the constant 1; when equality is unknown (generic checks)
// the left dim is kept, which never reports an error that might not exist.
// Where an ellipsis makes the result's rank unknowable, the result has unknown
// rank.
//
//===----------------------------------------------------------------------===//

#include "Shape.h"

#include "llvm/Support/raw_ostream.h"

using namespace dt;
using namespace dt::sema;

std::optional<llvm::SmallVector<int64_t, 4>> Shape::getConcrete() const {
  if (!hasRank())
    return std::nullopt;
  llvm::SmallVector<int64_t, 4> result;
  for (const SymExpr &dim : dims) {
    std::optional<int64_t> c = dim.getConstant();
    if (!c)
      return std::nullopt;
    result.push_back(*c);
  }
  return result;
}

std::string sema::dimsStr(const Shape &shape, const SymContext &syms) {
  if (shape.unknownRank)
    return "?";
  std::string result;
  if (shape.ellipsis >= 0)
    result = shape.dims.empty() ? "..." : "..., ";
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    if (i)
      result += ", ";
    result += syms.str(shape.dims[i]);
  }
  return result;
}

std::string sema::str(const Shape &shape, const SymContext &syms) {
  return "[" + dimsStr(shape, syms) + "]";
}

std::string sema::str(DType dtype, const Shape &shape, const SymContext &syms) {
  return toString(dtype).str() + str(shape, syms);
}

std::optional<Shape>
sema::broadcastShapes(const Shape &a, const Shape &b, SymContext &syms,
                      std::pair<SymExpr, SymExpr> *mismatch) {
  if (a.unknownRank || b.unknownRank)
    return Shape::unknown();
  size_t na = a.dims.size(), nb = b.dims.size();
  Shape result;
  // Leading dims beyond the shorter side are only known when that side has
  // no ellipsis (missing dims then act as 1).
  if (a.ellipsis >= 0 && b.ellipsis >= 0) {
    if (a.ellipsis != b.ellipsis)
      return Shape::unknown();
    result.ellipsis = a.ellipsis;
  } else if (a.ellipsis >= 0) {
    if (nb > na)
      return Shape::unknown();
    result.ellipsis = a.ellipsis;
  } else if (b.ellipsis >= 0) {
    if (na > nb)
      return Shape::unknown();
    result.ellipsis = b.ellipsis;
  }
  size_t n = std::max(na, nb);
  result.dims.resize(n);
  for (size_t i = 1; i <= n; ++i) {
    const SymExpr *da = i <= na ? &a.dims[na - i] : nullptr;
    const SymExpr *db = i <= nb ? &b.dims[nb - i] : nullptr;
    SymExpr &out = result.dims[n - i];
    if (!da || !db) {
      out = da ? *da : *db;
      continue;
    }
    if (da->getConstant() == 1) {
      out = *db;
      continue;
    }
    if (db->getConstant() == 1) {
      out = *da;
      continue;
    }
    if (syms.compare(*da, *db) == SymCmp::Unequal) {
      if (mismatch)
        *mismatch = {*da, *db};
      return std::nullopt;
    }
    out = *da;
  }
  return result;
}

std::optional<Shape> sema::matmulShape(const Shape &a, const Shape &b,
                                       SymContext &syms, std::string &error) {
  if (a.unknownRank || b.unknownRank)
    return Shape::unknown();
  if ((a.ellipsis < 0 && a.dims.empty()) ||
      (b.ellipsis < 0 && b.dims.empty())) {
    error = "'@' needs operands of rank 1 or more; use '*' to scale";
    return std::nullopt;
  }
  // With an ellipsis and fewer than two known dims the operand could be a
  // vector or a matrix: nothing can be said.
  if ((a.ellipsis >= 0 && a.dims.size() < 2) ||
      (b.ellipsis >= 0 && b.dims.size() < 2))
    return Shape::unknown();

  bool aVector = a.hasRank() && a.dims.size() == 1;
  bool bVector = b.hasRank() && b.dims.size() == 1;
  const SymExpr &k1 = a.dims.back();
  const SymExpr &k2 = bVector ? b.dims.back() : b.dims[b.dims.size() - 2];
  if (syms.compare(k1, k2) == SymCmp::Unequal) {
    error =
        "the inner dimensions differ: " + syms.str(k1) + " and " + syms.str(k2);
    return std::nullopt;
  }

  Shape batchA, batchB;
  batchA.ellipsis = a.ellipsis;
  batchB.ellipsis = b.ellipsis;
  if (!aVector)
    batchA.dims.assign(a.dims.begin(), a.dims.end() - 2);
  if (!bVector)
    batchB.dims.assign(b.dims.begin(), b.dims.end() - 2);
  std::pair<SymExpr, SymExpr> mismatch;
  std::optional<Shape> batch = broadcastShapes(batchA, batchB, syms, &mismatch);
  if (!batch) {
    error = "the batch dimensions " + syms.str(mismatch.first) + " and " +
            syms.str(mismatch.second) + " do not broadcast";
    return std::nullopt;
  }
  if (batch->unknownRank)
    return batch;
  if (!aVector)
    batch->dims.push_back(a.dims[a.dims.size() - 2]);
  if (!bVector)
    batch->dims.push_back(b.dims.back());
  return batch;
}
