//===- VerifyCollectives.cpp - Every rank issues matching collectives -----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// MPI and NCCL match collectives by order within a group: if one member issues
// an all-reduce of 10 floats where another issues an all-gather, or nothing,
// both wait forever. The algorithm:
//
//   1. For every entry point, the function each rank runs: the one whose
//      `dt.ranks` lists the rank, else the entry point itself (an SPMD
//      program has one function for all ranks; pipeline stages will have
//      several).
//   2. Each rank's collectives, in program order; each must be in the
//      function's own body (a collective inside a region could be skipped or
//      repeated by some ranks).
//   3. For each group (the ranks a collective's axes join), every member's
//      subsequence of collectives over that group must be the same: kind,
//      axes, element type and shapes, position by position.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

#include <map>
#include <set>

namespace dt {
#define GEN_PASS_DEF_VERIFYCOLLECTIVES
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

bool isCollective(Operation *op) { return collectiveKind(op) != nullptr; }

/// What members of a group must agree on about one collective.
std::string signature(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName().stripDialect() << " over [";
  llvm::interleaveComma(
      *collectiveAxes(op), os);
  os << "] of " << op->getOperand(0).getType() << " to "
     << op->getResult(0).getType();
  return s;
}

struct VerifyCollectivesPass
    : public dt::impl::VerifyCollectivesBase<VerifyCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshInfo> mesh = MeshInfo::get(module);
    if (failed(mesh))
      return signalPassFailure();
    int64_t world = mesh->worldSize();

    // 1. Entry points and their variants.
    std::map<std::string, SmallVector<func::FuncOp>> entries;
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      auto entry = fn->getAttrOfType<StringAttr>("dt.entry");
      entries[entry ? entry.str() : fn.getSymName().str()].push_back(fn);
    }
    bool ok = true;
    for (auto &[name, variants] : entries) {
      std::vector<func::FuncOp> runs(static_cast<size_t>(world));
      func::FuncOp fallback;
      for (func::FuncOp fn : variants) {
        auto ranks = fn->getAttrOfType<DenseI64ArrayAttr>("dt.ranks");
        if (!ranks) {
          fallback = fn;
          continue;
        }
        for (int64_t r : ranks.asArrayRef()) {
          if (r < 0 || r >= world || runs[size_t(r)]) {
            fn.emitError("dt.ranks names rank ")
                << r << ", which is outside the mesh or in another variant";
            return signalPassFailure();
          }
          runs[size_t(r)] = fn;
        }
      }

      // 2. Each rank's collectives.
      std::vector<SmallVector<Operation *>> issued(static_cast<size_t>(world));
      for (int64_t r = 0; r < world; ++r) {
        func::FuncOp fn = runs[size_t(r)] ? runs[size_t(r)] : fallback;
        if (!fn)
          continue;
        fn.walk([&](Operation *op) {
          if (!isCollective(op))
            return;
          if (op->getParentOp() != fn.getOperation()) {
            op->emitError("a collective inside a region: some ranks could "
                          "skip or repeat it, and the others would wait "
                          "forever");
            ok = false;
          }
          // An asynchronous collective ends at its dt.wait, later in the
          // same body, before anything reads its result.
          if (op->hasAttr(kAsyncAttr)) {
            Value result = op->getResult(0);
            auto wait = result.hasOneUse()
                            ? dyn_cast<WaitOp>(*result.getUsers().begin())
                            : WaitOp();
            if (!wait || wait->getBlock() != op->getBlock() ||
                !op->isBeforeInBlock(wait)) {
              op->emitError("an asynchronous collective whose result is not "
                            "waited for by one dt.wait after it, in its "
                            "block: the rank could read it unfinished");
              ok = false;
            }
          }
          issued[size_t(r)].push_back(op);
        });
      }
      if (!ok)
        continue;

      // 3. Per group, every member's sequence over it.
      std::map<std::vector<int64_t>,
               std::map<int64_t, SmallVector<Operation *>>>
          byGroup;
      for (int64_t r = 0; r < world; ++r)
        for (Operation *op : issued[size_t(r)]) {
          std::vector<int64_t> members = groupOf(
              *mesh, r,
              *collectiveAxes(op));
          byGroup[members][r].push_back(op);
        }
      for (auto &[members, sequences] : byGroup) {
        int64_t first = members.front();
        for (int64_t r : members) {
          const SmallVector<Operation *> &mine = sequences[first],
                                         &theirs = sequences[r];
          size_t n = std::max(mine.size(), theirs.size());
          for (size_t i = 0; i < n; ++i) {
            if (i < mine.size() && i < theirs.size() &&
                signature(mine[i]) == signature(theirs[i]))
              continue;
            Operation *at = i < theirs.size() ? theirs[i] : mine[i];
            InFlightDiagnostic d =
                at->emitError("ranks ")
                << first << " and " << r << " of group {" << groupText(members)
                << "} disagree on their collective #" << i << " over it in '"
                << name << "': rank " << first << " issues "
                << (i < mine.size() ? signature(mine[i]) : "nothing")
                << ", rank " << r << " issues "
                << (i < theirs.size() ? signature(theirs[i]) : "nothing")
                << "; the job would hang";
            ok = false;
            break;
          }
        }
      }
    }
    if (!ok)
      signalPassFailure();
  }

  /// The world ranks `rank`'s group over `axes` holds, in order.
  static std::vector<int64_t> groupOf(const MeshInfo &mesh, int64_t rank,
                                      ArrayRef<int16_t> axes) {
    size_t n = mesh.rank();
    std::vector<int64_t> coords(n);
    for (size_t a = n, rest = rank; a-- > 0;) {
      coords[a] = int64_t(rest) % mesh.size(a);
      rest /= mesh.size(a);
    }
    std::vector<int64_t> members;
    for (int64_t other = 0; other < mesh.worldSize(); ++other) {
      bool same = true;
      for (size_t a = n, rest = other; a-- > 0;) {
        int64_t c = int64_t(rest) % mesh.size(a);
        rest /= mesh.size(a);
        if (!llvm::is_contained(axes, int16_t(a)) && c != coords[a])
          same = false;
      }
      if (same)
        members.push_back(other);
    }
    return members;
  }

  static std::string groupText(const std::vector<int64_t> &members) {
    std::string s;
    for (int64_t m : members)
      s += (s.empty() ? "" : ", ") + std::to_string(m);
    return s;
  }
};

} // namespace
