//===- OffloadInfo.cpp - how offload splits a rank's globals --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/OffloadInfo.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace dt {

namespace {

/// What the entry points do to one global.
struct Uses {
  bool applyReads = false, applyWrites = false;
  /// Whether every value @apply_step stores is zeros.
  bool applyWritesZeros = true;
  bool deviceTouches = false, deviceWrites = false;
};

/// Whether `v` is a splat constant of zeros (through reshapes).
bool isZeros(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  auto constant = v.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue())
                        : nullptr;
  if (!dense || !dense.isSplat())
    return false;
  if (dense.getElementType().isIntOrIndex())
    return dense.getSplatValue<APInt>().isZero();
  return dense.getSplatValue<APFloat>().isPosZero();
}

int64_t bytesOf(GlobalOp g) {
  auto t = llvm::cast<RankedTensorType>(g.getType());
  return std::max<int64_t>(1, t.getNumElements() *
                                  ((t.getElementTypeBitWidth() + 7) / 8));
}

} // namespace

std::optional<OffloadInfo> OffloadInfo::get(ModuleOp module) {
  if (!module->hasAttr(names::kOffloadAttr) ||
      !module.lookupSymbol<func::FuncOp>(names::kApplyStep))
    return std::nullopt;
  llvm::StringMap<Uses> uses;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    bool apply = fn.getSymName() == names::kApplyStep;
    fn.walk([&](Operation *op) {
      StringRef name;
      bool writes = false;
      if (auto load = llvm::dyn_cast<LoadOp>(op)) {
        name = load.getGlobal();
      } else if (auto store = llvm::dyn_cast<StoreOp>(op)) {
        name = store.getGlobal();
        writes = true;
      } else {
        return;
      }
      Uses &u = uses[name];
      if (apply) {
        (writes ? u.applyWrites : u.applyReads) = true;
        if (writes && !isZeros(llvm::cast<StoreOp>(op).getValue()))
          u.applyWritesZeros = false;
      } else {
        u.deviceTouches = true;
        u.deviceWrites |= writes;
      }
    });
  }
  OffloadInfo info;
  for (GlobalOp g : module.getOps<GlobalOp>()) {
    auto it = uses.find(g.getSymName());
    if (it == uses.end())
      continue; // no entry point touches it: where it was
    const Uses &u = it->second;
    if (!u.applyReads && !u.applyWrites)
      continue;
    if (!u.deviceTouches) {
      info.hostOnly.push_back(g);
      continue;
    }
    info.mirrored.push_back(g);
    if (u.applyReads && u.deviceWrites)
      info.down.push_back(g);
    if (u.applyWrites)
      (u.applyWritesZeros ? info.zeroed : info.up).push_back(g);
  }
  return info;
}

std::vector<std::pair<int64_t, int64_t>>
OffloadInfo::ranges(const std::vector<GlobalOp> &globals) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (GlobalOp g : globals)
    if (std::optional<uint64_t> offset = g.getOffset())
      spans.push_back({int64_t(*offset), bytesOf(g)});
  llvm::sort(spans);
  // Globals are 64-byte aligned: a gap below that is padding.
  constexpr int64_t kAlign = 64;
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (auto [offset, bytes] : spans) {
    if (!merged.empty()) {
      auto &[lastOffset, lastBytes] = merged.back();
      int64_t end = lastOffset + lastBytes;
      if (offset >= end && offset - end < kAlign) {
        lastBytes = offset + bytes - lastOffset;
        continue;
      }
    }
    merged.push_back({offset, bytes});
  }
  return merged;
}

} // namespace dt
