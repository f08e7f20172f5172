//===- CheckArena.cpp - run-time checks of arena accesses (dtc --checked) -===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dt-verify-arena proves at compile time what it can see; a checked program
// (dtc --checked) also checks, when it runs, what the machine code really
// computes: every arena address the entry points hand out, against the plan,
// after LLVM has optimised everything. On the output of convert-dt-to-kernels:
//
//   Pattern: %v = memref.view %arena[%shift] {dt.buffer = [o, n]}
//         => call @__dt_check_view_N(site, base, %v, bytes(v), o, n)
//            (a helper that calls dtrt_check_view on the view's address; once
//            per entry call: views are made at the top of the function)
//   Pattern: call @dtk_k(%p0, ..., sizes...)   (pointer %pi tagged [oi, ni])
//         => call @dtrt_check_span(site, base, %pi, footprint_i, oi, ni) ...
//            call @dtrt_guard_begin()
//            call @dtk_k(%p0, ..., sizes...)
//            call @dtrt_guard_end()
//
// The runtime (runtime/lib/checked.cpp) stops the program with the site's
// name when a span leaves its buffer or the arena; under AddressSanitizer the
// guards poison the bytes around the kernel's spans for the call, so a kernel
// that strays past its operands faults at the stray access.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/ArenaPlan.h"
#include "dt/Conversion/KernelFootprint.h"
#include "dt/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace dt {
#define GEN_PASS_DEF_CHECKARENA
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

constexpr StringLiteral kCheckSpan = "dtrt_check_span";
constexpr StringLiteral kCheckView = "dtrt_check_view";
constexpr StringLiteral kGuardBegin = "dtrt_guard_begin";
constexpr StringLiteral kGuardEnd = "dtrt_guard_end";

std::string describe(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = llvm::dyn_cast<FileLineColLoc>(loc))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else if (auto fused = llvm::dyn_cast<FusedLoc>(loc);
           fused && !fused.getLocations().empty())
    return describe(fused.getLocations().front());
  else if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return describe(name.getChildLoc());
  else
    os << "an unknown location";
  return text;
}

class Instrumenter {
public:
  explicit Instrumenter(ModuleOp module)
      : module(module), b(module.getContext()) {}

  LogicalResult run(func::FuncOp fn) {
    for (StringRef check : {kCheckSpan, kCheckView})
      declare(check, {ptr(), ptr(), ptr(), b.getI64Type(), b.getI64Type(),
                      b.getI64Type()});
    declare(kGuardBegin, {});
    declare(kGuardEnd, {});
    Value base = baseOf(fn);
    if (!base)
      return fn.emitError("dt-check-arena needs convert-dt-to-kernels "
                          "output (no arena base in this entry point)");
    SmallVector<memref::ViewOp> views;
    SmallVector<func::CallOp> calls;
    fn.walk([&](Operation *op) {
      if (auto v = llvm::dyn_cast<memref::ViewOp>(op))
        views.push_back(v);
      if (auto c = llvm::dyn_cast<func::CallOp>(op);
          c && isKernel(c.getCallee()))
        calls.push_back(c);
    });
    for (memref::ViewOp v : views)
      if (failed(checkView(base, v)))
        return failure();
    for (func::CallOp c : calls)
      if (failed(checkCall(base, c)))
        return failure();
    return success();
  }

private:
  ModuleOp module;
  OpBuilder b;
  llvm::StringMap<std::string> siteNames; // text -> global
  llvm::DenseMap<Type, func::FuncOp> viewCheckers;

  Type ptr() { return LLVM::LLVMPointerType::get(b.getContext()); }

  void declare(StringRef name, ArrayRef<Type> args) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    b.create<func::FuncOp>(module.getLoc(), name,
                           b.getFunctionType(args, {}))
        .setPrivate();
  }

  /// The arena's base pointer: the inttoptr convert-dt-to-kernels makes at the
  /// top of each entry point.
  static Value baseOf(func::FuncOp fn) {
    for (Operation &op : fn.getBody().front())
      if (auto p = llvm::dyn_cast<LLVM::IntToPtrOp>(op))
        return p;
    return {};
  }

  /// A constant C string naming the site, e.g. "dtk_matmul_f32 at f.dt:3:7".
  Value site(Location loc, StringRef what) {
    std::string text = (what + " at " + describe(loc)).str();
    text.push_back('\0');
    std::string &name = siteNames[text];
    if (name.empty()) {
      name = "__dt_site_" + std::to_string(siteNames.size() - 1);
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), text.size());
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<LLVM::GlobalOp>(loc, type, /*isConstant=*/true,
                               LLVM::Linkage::Private, name,
                               b.getStringAttr(text));
    }
    return b.create<LLVM::AddressOfOp>(loc, ptr(), name);
  }

  void checkSpan(Location loc, Value siteName, Value base, Value p,
                 int64_t bytes, ArenaSpan buffer) {
    auto i64 = [&](int64_t v) {
      return b.create<arith::ConstantIntOp>(loc, v, 64).getResult();
    };
    b.create<func::CallOp>(loc, kCheckSpan, TypeRange{},
                           ValueRange{siteName, base, p, i64(bytes),
                                      i64(buffer.offset), i64(buffer.bytes)});
  }

  LogicalResult checkView(Value base, memref::ViewOp v) {
    std::optional<ArenaSpan> buffer = getBufferTag(v);
    if (!buffer)
      return v.emitError("dt-check-arena: a view of the arena without its "
                         "planned buffer (dt.buffer)");
    MemRefType type = v.getType();
    std::optional<int64_t> bytes = staticBytes(type);
    if (!bytes)
      return v.emitError("dt-check-arena: a view of the arena without a "
                         "static shape");
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(v);
    Location loc = v.getLoc();
    auto i64 = [&](int64_t x) {
      return b.create<arith::ConstantIntOp>(loc, x, 64).getResult();
    };
    b.create<func::CallOp>(loc, viewChecker(type).getSymName(), TypeRange{},
                           ValueRange{site(loc, "a loop's view"), base, v,
                                      i64(*bytes), i64(buffer->offset),
                                      i64(buffer->bytes)});
    return success();
  }

  /// `__dt_check_view_N(site, base, view, bytes, offset, buffer bytes)` for
  /// views of `type`: dtrt_check_view on the view's address. The address is
  /// taken inside a function of which the view is an argument (passed as its
  /// aligned pointer, bare-pointer convention) because MLIR 19's
  /// expand-strided-metadata rewrites extract_aligned_pointer_as_index of a
  /// memref.view into the arena's own address (fixed upstream in
  /// llvm-project#167615).
  func::FuncOp viewChecker(MemRefType type) {
    func::FuncOp &fn = viewCheckers[type];
    if (fn)
      return fn;
    Location loc = module.getLoc();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    Type i64 = b.getI64Type();
    fn = b.create<func::FuncOp>(
        loc, "__dt_check_view_" + std::to_string(viewCheckers.size() - 1),
        b.getFunctionType({ptr(), ptr(), type, i64, i64, i64}, {}));
    fn.setPrivate();
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    Value address = b.create<memref::ExtractAlignedPointerAsIndexOp>(
        loc, body->getArgument(2));
    Value asInt = b.create<arith::IndexCastOp>(loc, i64, address);
    Value p = b.create<LLVM::IntToPtrOp>(loc, ptr(), asInt);
    b.create<func::CallOp>(loc, kCheckView, TypeRange{},
                           ValueRange{body->getArgument(0),
                                      body->getArgument(1), p,
                                      body->getArgument(3),
                                      body->getArgument(4),
                                      body->getArgument(5)});
    b.create<func::ReturnOp>(loc);
    return fn;
  }

  LogicalResult checkCall(Value base, func::CallOp call) {
    std::string why;
    FailureOr<SmallVector<int64_t>> bytes =
        kernelFootprint(call.getCallee(), call.getOperands(), why);
    if (failed(bytes))
      return call.emitError("dt-check-arena: cannot bound this kernel call: ")
             << why;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(call);
    Location loc = call.getLoc();
    Value siteName = site(loc, call.getCallee());
    unsigned p = 0;
    for (Value a : call.getOperands()) {
      if (!llvm::isa<LLVM::LLVMPointerType>(a.getType()))
        continue;
      Operation *def = a.getDefiningOp();
      std::optional<ArenaSpan> buffer =
          def ? getBufferTag(def) : std::nullopt;
      if (!buffer)
        return call.emitError("dt-check-arena: a kernel pointer without its "
                              "planned buffer (dt.buffer)");
      checkSpan(loc, siteName, base, a, (*bytes)[p++], *buffer);
    }
    b.create<func::CallOp>(loc, kGuardBegin, TypeRange{}, ValueRange{});
    b.setInsertionPointAfter(call);
    b.create<func::CallOp>(loc, kGuardEnd, TypeRange{}, ValueRange{});
    return success();
  }
};

struct CheckArenaPass : public dt::impl::CheckArenaBase<CheckArenaPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (getPlan(fn))
        entries.push_back(fn);
    Instrumenter instrumenter(module);
    for (func::FuncOp fn : entries)
      if (failed(instrumenter.run(fn)))
        return signalPassFailure();
  }
};

} // namespace
