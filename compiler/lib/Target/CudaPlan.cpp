//===- CudaPlan.cpp - a planned program's GPU launch sequence -------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Walks each entry point of a planned module in order and writes one record
// per launch (docs/abi.md, "The GPU plan"):
//
//   {"op": "kernel", "name": "grad_step_k3", "n": 4096}   a generated kernel
//   {"op": "copy", "p": [from, to], "i": [bytes]}          device to device
//   {"op": "<kernel>", "p": [offsets...], "i": [...], "f": [...]}
//
// where <kernel> names a kernels/cuda kernel or the cuBLAS product, and its
// pointers, integers and floats are the CPU kernel's arguments in its order
// (the lowering in DTToKernels.cpp makes the same lists); `"tf32": true` on
// a product or attention says its inputs are 16-bit values widened to f32,
// so the GPU may take tensor cores for it, and `"half": "bf16"` on a
// product that its operands' widenings left them 16-bit (narrowedWidenings).
// Collectives are records too, with the arguments of the runtime's C entry
// points (dtrt/collectives.h): {"op": "all_reduce", "p": [src, dst],
// "i": [count, dtype, axis mask, id]}; reduce_scatter, all_gather and
// all_to_all add the group's size after the count, take_shard has (total,
// count, ...), and "shard_start" (a rank's first row of a block) names its
// axes and block size for the runtime to work out. An asynchronous
// collective (dtc --overlap) is marked "async": true, and its dt.wait is
// {"op": "wait", "i": [id]}. Each record of an op that is a span of the
// trace carries its number, "span": N (the manifest's `spans` name it). What
// a GPU cannot run yet (pipeline stages, kernels without a GPU twin, 16-bit
// products) makes the whole program CPU-only, with the first such op's
// location as the reason.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/CudaPlan.h"

#include "CudaPadding.h"
#include "CudaZeroCopy.h"

#include "dt/Conversion/GPUKernels.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Target/PTXEmitter.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <variant>

using namespace mlir;
using namespace dt;
namespace json = llvm::json;

namespace {

int64_t product(ArrayRef<int64_t> s) { return ShapedType::getNumElements(s); }

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

int64_t bytesOf(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  return std::max<int64_t>(1, t.getNumElements() *
                                  ((t.getElementTypeBitWidth() + 7) / 8));
}

std::string where(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn() << ": ";
  return text;
}

/// Whether every element of `values` is a 16-bit float widened to f32
/// (widenedFrom). TF32 holds bf16's and f16's mantissas and f32's exponent
/// range, so tensor cores multiply such operands exactly and add in f32, as
/// cuBLAS's f32 path does.
bool allHalfValued(ArrayRef<Value> values) {
  return llvm::all_of(values, [](Value v) { return bool(widenedFrom(v)); });
}

/// The 16-bit type every element of `values` widens from, or null when one
/// is no widening or they widen from different types.
Type widenedAlike(ArrayRef<Value> values) {
  Type type = widenedFrom(values.front());
  for (Value v : values.drop_front())
    if (widenedFrom(v) != type)
      return {};
  return type;
}

/// The op a GPU cannot run yet, and why.
struct Unsupported {
  Operation *op;
  std::string why;
};

class PlanBuilder {
public:
  PlanBuilder(ModuleOp module, int64_t unroll, bool merge)
      : module(module), unroll(unroll), merge(merge) {
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (g.getOffset())
        globals[g.getSymName()] = int64_t(*g.getOffset());
    forEachGeneratedKernel(
        module, [&](Operation *op, const std::string &n) { kernelOf[op] = n; });
    narrowed = narrowedWidenings(module);
    if (auto mesh = module.lookupSymbol<mesh::MeshOp>("mesh"))
      meshShape.assign(mesh.getShape().begin(), mesh.getShape().end());
  }

  /// The plan as JSON, or the first op it cannot launch.
  std::variant<std::string, Unsupported> build() {
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (g->hasAttr(names::kSlotsAttr))
        return Unsupported{g, "a pipelined program's stages do not run on "
                              "the GPU yet"};
    // With the optimizer offloaded the update runs on the host (the
    // program's own CPU @apply_step over a host copy of the arena), and the
    // device holds the arena from hostBytes on.
    auto hostBytes = module->getAttrOfType<IntegerAttr>(names::kHostBytesAttr);
    json::Object entries;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() ||
          (hostBytes && fn.getSymName() == names::kApplyStep))
        continue;
      json::Array thunks;
      SmallVector<Operation *> owners; // each thunk's op
      zero = ZeroCopies::find(fn, narrowed);
      pairLosses(fn);
      for (Operation &op : fn.getBody().front()) {
        size_t before = thunks.size();
        std::optional<Unsupported> failed = lower(&op, thunks);
        if (failed)
          return *failed;
        owners.resize(thunks.size(), &op);
        // The op's span (dt-number-spans): the runtime names the launches'
        // NVTX ranges as the trace names the span.
        if (auto span = op.getAttrOfType<IntegerAttr>(names::kSpanAttr))
          for (size_t i = before; i < thunks.size(); ++i)
            thunks[i].getAsObject()->try_emplace("span", span.getInt());
      }
      entries[fn.getSymName()] =
          merge ? mergeSmallKernels(fn.getSymName(), thunks, owners)
                : std::move(thunks);
    }
    json::Object plan{{"version", 1},
                      {"scratch_bytes", scratchBytes},
                      {"arena_bytes", gpuArenaBytes(module)},
                      {"entries", std::move(entries)}};
    if (hostBytes)
      plan["device_from"] = hostBytes.getInt();
    std::string text;
    llvm::raw_string_ostream os(text);
    os << json::Value(std::move(plan));
    return text;
  }

private:
  static int64_t offsetOf(Value v) { return plannedOffset(v); }

  static json::Object thunk(StringRef op, ArrayRef<int64_t> pointers,
                            ArrayRef<int64_t> ints,
                            ArrayRef<double> floats = {}) {
    json::Object t{{"op", op}};
    t["p"] = json::Array(pointers);
    t["i"] = json::Array(ints);
    if (!floats.empty())
      t["f"] = json::Array(floats);
    return t;
  }

  /// `thunks` with each run of generated kernels between other launches
  /// reordered by dependence and its small kernels merged (MergeKernels.cpp).
  /// Two launches of a run depend on each other when one writes arena bytes
  /// the other reads or writes; a kernel's level is one more than the
  /// highest level it depends on. The run is emitted level by level (no
  /// launch depends on one of its own level or a later one), each level's
  /// kernels of more than kGpuMergeBlocks blocks alone, in program order,
  /// then its smaller ones as one launch. In GPT-2's step that puts the
  /// optimizer's updates of all biases and norms' parameters in a few
  /// launches, and each weight's rounding to bf16 in one with its bias's.
  json::Array mergeSmallKernels(StringRef entry, json::Array &thunks,
                                ArrayRef<Operation *> owners) {
    json::Array out;
    auto isKernel = [&](size_t t) {
      return thunks[t].getAsObject()->getString("op") == "kernel";
    };
    for (size_t i = 0; i < thunks.size();) {
      if (!isKernel(i)) {
        out.push_back(std::move(thunks[i++]));
        continue;
      }
      size_t end = i;
      while (end < thunks.size() && isKernel(end))
        ++end;
      scheduleRun(entry, thunks, owners, i, end, out);
      i = end;
    }
    return out;
  }

  void scheduleRun(StringRef entry, json::Array &thunks,
                   ArrayRef<Operation *> owners, size_t begin, size_t end,
                   json::Array &out) {
    auto overlaps = [](ArrayRef<ArenaRange> a, ArrayRef<ArenaRange> b) {
      return llvm::any_of(a, [&](ArenaRange x) {
        return llvm::any_of(b, [&](ArenaRange y) { return overlap(x, y); });
      });
    };
    size_t n = end - begin;
    SmallVector<SmallVector<ArenaRange>> reads(n), writes(n);
    SmallVector<int64_t> level(n, 0), blocks(n);
    int64_t levels = 0;
    for (size_t x = 0; x < n; ++x) {
      Operation *op = owners[begin + x];
      for (Value v : op->getOperands())
        reads[x].push_back(arenaRangeOf(v));
      for (Value v : op->getResults())
        writes[x].push_back(arenaRangeOf(v));
      int64_t elements =
          thunks[begin + x].getAsObject()->getInteger("n").value_or(1);
      blocks[x] = std::max<int64_t>(1, (elements + kGpuThreadsPerBlock - 1) /
                                           kGpuThreadsPerBlock);
      for (size_t y = 0; y < x; ++y)
        if (overlaps(writes[y], reads[x]) || overlaps(writes[y], writes[x]) ||
            overlaps(reads[y], writes[x]))
          level[x] = std::max(level[x], level[y] + 1);
      levels = std::max(levels, level[x] + 1);
    }
    for (int64_t l = 0; l < levels; ++l) {
      SmallVector<size_t> small;
      for (size_t x = 0; x < n; ++x) {
        if (level[x] != l)
          continue;
        if (blocks[x] <= kGpuMergeBlocks)
          small.push_back(x);
        else
          out.push_back(std::move(thunks[begin + x]));
      }
      if (small.size() == 1)
        out.push_back(std::move(thunks[begin + small.front()]));
      if (small.size() < 2)
        continue;
      MergedKernel m;
      m.name = (entry + "_m" + Twine(merged.size())).str();
      json::Array spans;
      int64_t grid = 0;
      for (size_t x : small) {
        json::Object &t = *thunks[begin + x].getAsObject();
        m.members.push_back(t.getString("name")->str());
        m.blocks.push_back(blocks[x]);
        grid += blocks[x];
        if (std::optional<int64_t> span = t.getInteger("span"))
          spans.push_back(*span);
      }
      json::Object t{{"op", "kernel"},
                     {"name", m.name},
                     {"n", grid * kGpuThreadsPerBlock},
                     {"grid", grid},
                     {"members", int64_t(small.size())},
                     {"kernels", json::Array(m.members)}};
      // NVTX names the launch after its first member, the trace after
      // them all (its "spans"); the profile counts the cost of all.
      if (!spans.empty()) {
        t["span"] = spans.front();
        t["spans"] = std::move(spans);
      }
      out.push_back(std::move(t));
      merged.push_back(std::move(m));
    }
  }

  /// Records that a thunk needs `bytes` of the executor's scratch.
  void scratch(int64_t bytes) { scratchBytes = std::max(scratchBytes, bytes); }

  std::optional<Unsupported> requireF32(Operation *op, ArrayRef<Value> values) {
    for (Value v : values)
      if (!llvm::cast<RankedTensorType>(v.getType()).getElementType().isF32())
        return Unsupported{op, op->getName().getStringRef().str() +
                                   " has 16-bit data; the GPU backend's "
                                   "kernels and products take f32 only so far"};
    return std::nullopt;
  }

  std::optional<Unsupported> lower(Operation *op, json::Array &out) {
    if (zero.skips(op))
      return std::nullopt;
    if (auto it = kernelOf.find(op); it != kernelOf.end()) {
      out.push_back(json::Object{{"op", "kernel"},
                                 {"name", it->second},
                                 {"n", launchElements(op, unroll)}});
      return std::nullopt;
    }
    auto copy = [&](int64_t from, int64_t to, int64_t bytes) {
      if (from != to)
        out.push_back(thunk("copy", {from, to}, {bytes}));
    };
    auto emit = [&](json::Object t) {
      out.push_back(std::move(t));
      return std::optional<Unsupported>();
    };
    return llvm::TypeSwitch<Operation *, std::optional<Unsupported>>(op)
        .Case([&](LoadOp l) {
          copy(globals.lookup(l.getGlobal()), offsetOf(l.getResult()),
               bytesOf(l.getType()));
          return std::nullopt;
        })
        .Case([&](StoreOp s) {
          copy(offsetOf(s.getValue()), globals.lookup(s.getGlobal()),
               bytesOf(s.getValue().getType()));
          return std::nullopt;
        })
        .Case([&](ReshapeOp) { return std::nullopt; })
        .Case([&](mesh::AllReduceOp c) {
          return collective(c, "all_reduce", c.getInput(), c.getResult(),
                            c.getMeshAxes(), out);
        })
        .Case([&](mesh::ReduceScatterOp c) {
          return collective(c, "reduce_scatter", c.getInput(), c.getResult(),
                            c.getMeshAxes(), out);
        })
        .Case([&](mesh::AllGatherOp c) {
          return collective(c, "all_gather", c.getInput(), c.getResult(),
                            c.getMeshAxes(), out);
        })
        .Case([&](mesh::AllToAllOp c) {
          return collective(c, "all_to_all", c.getInput(), c.getResult(),
                            c.getMeshAxes(), out);
        })
        .Case([&](mesh::AllSliceOp c) {
          return collective(c, "take_shard", c.getInput(), c.getResult(),
                            c.getMeshAxes(), out);
        })
        .Case([&](WaitOp w) -> std::optional<Unsupported> {
          auto id = w.getPending().getDefiningOp()->getAttrOfType<IntegerAttr>(
              "dt.id");
          if (!id)
            return Unsupported{w, "waits for a collective without a dt.id"};
          return emit(thunk("wait", {}, {id.getInt()}));
        })
        .Case([&](ShardStartOp s) -> std::optional<Unsupported> {
          // The runtime knows the rank's coordinates: the axes and the
          // block size, and where the i64 goes.
          SmallVector<int64_t> axes(s.getAxes().begin(), s.getAxes().end());
          json::Object t = thunk("shard_start", {offsetOf(s.getResult())},
                                 {int64_t(s.getSize())});
          t["axes"] = json::Array(axes);
          return emit(std::move(t));
        })
        .Case([&](func::ReturnOp) { return std::nullopt; })
        .Case<MatmulOp, MatmulBiasOp>([&](auto m)
                                          -> std::optional<Unsupported> {
          if (auto bad = requireF32(m, {m.getLhs(), m.getRhs()}))
            return bad;
          ArrayRef<int64_t> a = shapeOf(m.getLhs()), c = shapeOf(m.getResult());
          size_t r = a.size();
          int64_t k = m.getTransposeLhs() ? a[r - 2] : a[r - 1];
          SmallVector<int64_t> p{offsetOf(m.getLhs()), offsetOf(m.getRhs())};
          StringRef name = "matmul";
          if constexpr (std::is_same_v<decltype(m), MatmulBiasOp>) {
            p.push_back(offsetOf(m.getBias()));
            name = "matmul_bias";
          }
          p.push_back(offsetOf(m.getResult()));
          // Where the GPU reads and writes instead, when conversions around
          // the product are left out (CudaZeroCopy.h); the CPU's pointers
          // stay beside them, for the tests that hold the two to each other.
          SmallVector<int64_t> gpu = p;
          gpu[0] = offsetOf(zero.readFrom(m.getLhs()));
          gpu[1] = offsetOf(zero.readFrom(m.getRhs()));
          // A 16-bit bias, read where its widening's source lies.
          bool halfBias = false;
          if constexpr (std::is_same_v<decltype(m), MatmulBiasOp>) {
            gpu[2] = offsetOf(zero.readFrom(m.getBias()));
            halfBias = zero.readFrom(m.getBias()) != m.getBias();
          }
          Operation *narrowing = zero.narrowingOf(m.getResult());
          if (narrowing)
            gpu.back() = offsetOf(narrowing->getResult(0));
          // GELU in cuBLASLt's epilogue (CudaZeroCopy.h): it writes the
          // region's activation (or gradient) as C and reads or writes the
          // pre-activation as its auxiliary matrix, the last pointer.
          Operation *epilogue = zero.epilogueOf(m);
          bool geluGrad = epilogue && epilogue->getNumResults() == 1;
          if (epilogue) {
            gpu.back() = offsetOf(epilogue->getResult(geluGrad ? 0 : 1));
            gpu.push_back(offsetOf(geluGrad ? epilogue->getOperand(1)
                                            : epilogue->getResult(0)));
          }
          // A bias's gradient, the sums over k of A, written beside C by
          // BGRADB (CudaZeroCopy.h): the last pointer too.
          Operation *biasGrad = zero.biasGradOf(m);
          if (biasGrad)
            gpu.push_back(offsetOf(biasGrad->getResult(0)));
          json::Object t = thunk(name, gpu,
                                 {product(a.drop_back(2)), c[r - 2], c[r - 1],
                                  k, int64_t(m.getTransposeLhs()),
                                  int64_t(m.getTransposeRhs())});
          if (gpu != p)
            t["cpu_p"] = json::Array(p);
          // Row pitches of operands and result laid out so (CudaZeroCopy.h).
          int64_t lda = zero.pitchOf(zero.readFrom(m.getLhs())),
                  ldb = zero.pitchOf(zero.readFrom(m.getRhs())),
                  ldc = narrowing ? zero.pitchOf(narrowing->getResult(0)) : 0;
          if (lda || ldb || ldc)
            t["ld"] = json::Array{lda, ldb, ldc};
          // Extents rounded up to 16 bytes where the buffers allow
          // (CudaPadding.h): cuBLAS's fast kernels need them.
          if constexpr (std::is_same_v<decltype(m), MatmulOp>)
            if (auto pad = epilogue || biasGrad
                               ? std::nullopt
                               : padProduct(m, zero, narrowed)) {
              t["pad"] = json::Array{pad->n, pad->k};
              t["ld"] = json::Array(pad->ld);
              if (!pad->zeros.empty()) {
                json::Array zeros;
                for (const auto &z : pad->zeros)
                  zeros.push_back(json::Array(z));
                t["zero"] = std::move(zeros);
              }
            }
          if (epilogue)
            t["epilogue"] = geluGrad ? "gelu_grad" : "gelu";
          if (biasGrad)
            t["epilogue"] = "bias_grad";
          if (Type half = narrowedOperands(m, narrowed)) {
            t["half"] = half.isBF16() ? "bf16" : "f16";
            if (narrowing || epilogue)
              t["out"] = t["half"];
            if (halfBias)
              t["bias"] = t["half"];
          } else if (allHalfValued({m.getLhs(), m.getRhs()})) {
            t["tf32"] = true;
          }
          return emit(std::move(t));
        })
        .Case([&](SoftmaxOp s) -> std::optional<Unsupported> {
          if (auto bad = requireF32(s, {s.getInput()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(s.getInput());
          int64_t axis = s.getAxis();
          return emit(thunk("softmax",
                            {offsetOf(s.getInput()), offsetOf(s.getResult())},
                            {product(shape.take_front(axis)), shape[axis],
                             product(shape.drop_front(axis + 1))}));
        })
        .Case([&](LayerNormOp l) -> std::optional<Unsupported> {
          if (auto bad = requireF32(l, {l.getInput()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(l.getInput());
          return emit(
              typed(thunk("layer_norm",
                          {offsetOf(l.getInput()), offsetOf(l.getWeight()),
                           offsetOf(l.getBias()), offsetOf(l.getResult())},
                          {product(shape.drop_back()), shape.back()},
                          {l.getEps().convertToDouble()}),
                    {{0, l.getInput(), "in"}}, {3, l.getResult()}));
        })
        .Case([&](LayerNormGradOp l) -> std::optional<Unsupported> {
          if (auto bad = requireF32(l, {l.getInput()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(l.getInput());
          int64_t rows = product(shape.drop_back());
          // Each row's statistics, then partial sums of 64 rows
          // (dtk/cuda_kernels.h).
          scratch((2 * rows + 2 * ((rows + 63) / 64) * shape.back()) * 4);
          return emit(typed(
              thunk("layer_norm_grad",
                    {offsetOf(l.getInput()), offsetOf(l.getWeight()),
                     offsetOf(l.getResultGrad()), offsetOf(l.getInputGrad()),
                     offsetOf(l.getWeightGrad()), offsetOf(l.getBiasGrad())},
                    {rows, shape.back()}, {l.getEps().convertToDouble()}),
              {{0, l.getInput(), "in"}, {2, l.getResultGrad(), "grad_in"}},
              {3, l.getInputGrad()}));
        })
        .Case([&](RMSNormOp l) -> std::optional<Unsupported> {
          if (auto bad = requireF32(l, {l.getInput(), l.getWeight()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(l.getInput());
          return emit(
              typed(thunk("rms_norm",
                          {offsetOf(l.getInput()), offsetOf(l.getWeight()),
                           offsetOf(l.getResult())},
                          {product(shape.drop_back()), shape.back()},
                          {l.getEps().convertToDouble()}),
                    {{0, l.getInput(), "in"}}, {2, l.getResult()}));
        })
        .Case([&](RMSNormGradOp l) -> std::optional<Unsupported> {
          if (auto bad = requireF32(
                  l, {l.getInput(), l.getWeight(), l.getResultGrad()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(l.getInput());
          int64_t rows = product(shape.drop_back());
          // Each row's statistics, then the weight's partial sums of 64
          // rows (dtk/cuda_kernels.h).
          scratch((2 * rows + ((rows + 63) / 64) * shape.back()) * 4);
          return emit(typed(
              thunk("rms_norm_grad",
                    {offsetOf(l.getInput()), offsetOf(l.getWeight()),
                     offsetOf(l.getResultGrad()), offsetOf(l.getInputGrad()),
                     offsetOf(l.getWeightGrad())},
                    {rows, shape.back()}, {l.getEps().convertToDouble()}),
              {{0, l.getInput(), "in"}, {2, l.getResultGrad(), "grad_in"}},
              {3, l.getInputGrad()}));
        })
        .Case([&](RopeOp r) -> std::optional<Unsupported> {
          if (auto bad = requireF32(r, {r.getInput()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(r.getInput());
          int64_t t = shape[shape.size() - 2], d = shape.back();
          // No scaling: factor 1 (the others then do not matter).
          SmallVector<double, 4> scaling{1.0, 1.0, 4.0, 0.0};
          if (std::optional<ArrayRef<double>> s = r.getScaling())
            scaling.assign(s->begin(), s->end());
          scratch(2 * t * (d / 2) * 4); // the angles' cosines and sines
          return emit(thunk(
              "rope", {offsetOf(r.getInput()), offsetOf(r.getResult())},
              {product(shape.drop_back(2)), t, d, int64_t(r.getInverse())},
              {r.getTheta().convertToDouble(), scaling[0], scaling[1],
               scaling[2], scaling[3]}));
        })
        .Case([&](DropoutOp d) -> std::optional<Unsupported> {
          if (auto bad = requireF32(d, {d.getInput()}))
            return bad;
          DropoutIndexing indexing = d.getIndexing();
          if (indexing.runs.size() > 4 || d.getFirsts().size() > 4)
            return Unsupported{d, "a dropout of a tensor of rank above 4 "
                                  "does not run on the GPU yet"};
          auto runs = indexing.runs;
          runs.insert(runs.begin(), 4 - runs.size(), {1, 0});
          // The scalars the kernel reads in the arena: the step, the
          // micro-batch and the block's offsets (none: the micro-batch's
          // offset again, with stride 0).
          SmallVector<int64_t> p{offsetOf(d.getInput()),
                                 offsetOf(d.getResult()), offsetOf(d.getStep()),
                                 offsetOf(d.getMicro())};
          SmallVector<int64_t> ints;
          for (auto [n, s] : runs)
            ints.push_back(n);
          for (auto [n, s] : runs)
            ints.push_back(s);
          ints.push_back(indexing.elements);
          for (size_t i = 0; i < 4; ++i) {
            bool given = i < d.getFirsts().size();
            p.push_back(given ? offsetOf(d.getFirsts()[i])
                              : offsetOf(d.getMicro()));
            ints.push_back(given ? indexing.strides[i] : 0);
          }
          ints.append({int64_t(d.getSeed()), int64_t(d.getSite())});
          return emit(thunk("dropout", p, ints, {d.getP().convertToDouble()}));
        })
        .Case([&](Conv2dOp c) {
          return conv(c, "conv2d", c.getInput(), c.getWeight(), c.getResult(),
                      out);
        })
        .Case([&](Conv2dInputGradOp c) {
          return conv(c, "conv2d_input_grad", c.getResultGrad(), c.getWeight(),
                      c.getInputGrad(), out);
        })
        .Case([&](Conv2dWeightGradOp c) {
          return conv(c, "conv2d_weight_grad", c.getInput(), c.getResultGrad(),
                      c.getWeightGrad(), out);
        })
        .Case([&](MaxPool2dOp p) {
          return pool(p, "max_pool2d", {p.getInput(), p.getResult()}, out);
        })
        .Case([&](MaxPool2dGradOp p) {
          return pool(p, "max_pool2d_grad",
                      {p.getInput(), p.getResultGrad(), p.getInputGrad()}, out);
        })
        .Case([&](AvgPool2dOp p) {
          return pool(p, "avg_pool2d", {p.getInput(), p.getResult()}, out);
        })
        .Case([&](AvgPool2dGradOp p) {
          return pool(p, "avg_pool2d_grad",
                      {p.getResultGrad(), p.getInputGrad()}, out);
        })
        .Case([&](EmbeddingOp e) -> std::optional<Unsupported> {
          if (auto bad = requireF32(e, {e.getTable()}))
            return bad;
          ArrayRef<int64_t> table = shapeOf(e.getTable());
          return emit(
              thunk("embedding",
                    {offsetOf(e.getTable()), offsetOf(e.getIds()),
                     offsetOf(e.getResult())},
                    {product(shapeOf(e.getIds())), table[0], table[1]}));
        })
        .Case([&](EmbeddingGradOp e) -> std::optional<Unsupported> {
          if (auto bad = requireF32(e, {e.getResultGrad()}))
            return bad;
          ArrayRef<int64_t> table = shapeOf(e.getTableGrad());
          return emit(
              thunk("embedding_grad",
                    {offsetOf(e.getIds()), offsetOf(e.getResultGrad()),
                     offsetOf(e.getTableGrad())},
                    {product(shapeOf(e.getIds())), table[0], table[1]}));
        })
        .Case([&](EmbeddingShardOp e) -> std::optional<Unsupported> {
          if (auto bad = requireF32(e, {e.getTable()}))
            return bad;
          ArrayRef<int64_t> table = shapeOf(e.getTable());
          return emit(thunk("embedding_shard",
                            {offsetOf(e.getTable()), offsetOf(e.getIds()),
                             offsetOf(e.getResult()), offsetOf(e.getFirst())},
                            {product(shapeOf(e.getIds())), table[0],
                             int64_t(e.getRows()), table[1]}));
        })
        .Case([&](EmbeddingGradShardOp e) -> std::optional<Unsupported> {
          if (auto bad = requireF32(e, {e.getResultGrad()}))
            return bad;
          ArrayRef<int64_t> table = shapeOf(e.getTableGrad());
          return emit(
              thunk("embedding_grad_shard",
                    {offsetOf(e.getIds()), offsetOf(e.getResultGrad()),
                     offsetOf(e.getTableGrad()), offsetOf(e.getFirst())},
                    {product(shapeOf(e.getIds())), table[0],
                     int64_t(e.getRows()), table[1]}));
        })
        .Case([&](ClassStatsOp c) -> std::optional<Unsupported> {
          if (auto bad = requireF32(c, {c.getLogits(), c.getResult()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(c.getLogits());
          return emit(thunk("class_stats",
                            {offsetOf(c.getLogits()), offsetOf(c.getLabels()),
                             offsetOf(c.getResult()), offsetOf(c.getFirst())},
                            {product(shape.drop_back()), shape.back(),
                             int64_t(c.getClasses())}));
        })
        .Case([&](CrossEntropyStatsOp c) {
          return fromStats(c, "cross_entropy_stats", c.getStats(),
                           c.getLabels(), c.getResult(), out);
        })
        .Case([&](CountCorrectStatsOp c) {
          return fromStats(c, "count_correct_stats", c.getStats(),
                           c.getLabels(), c.getResult(), out);
        })
        .Case([&](CrossEntropyGradShardOp c) -> std::optional<Unsupported> {
          if (auto bad = requireF32(
                  c, {c.getLogits(), c.getStats(), c.getResultGrad()}))
            return bad;
          ArrayRef<int64_t> shape = shapeOf(c.getLogits());
          scratch(4); // the count of labelled rows
          return emit(
              thunk("cross_entropy_grad_shard",
                    {offsetOf(c.getLogits()), offsetOf(c.getLabels()),
                     offsetOf(c.getStats()), offsetOf(c.getResultGrad()),
                     offsetOf(c.getLogitsGrad()), offsetOf(c.getFirst())},
                    {shapeOf(c.getStats())[0], product(shape.drop_back()),
                     shape.back(), int64_t(c.getClasses())}));
        })
        .Case([&](CrossEntropyOp c) -> std::optional<Unsupported> {
          if (absorbedLosses.contains(c))
            return std::nullopt; // its gradient's launch computes it
          return logits(c, "cross_entropy", c.getLogits(), c.getLabels(), {},
                        c.getResult(), out);
        })
        .Case([&](CrossEntropyGradOp c) {
          if (auto loss = withLoss.lookup(c))
            return logits(c, "cross_entropy_with_grad", c.getLogits(),
                          c.getLabels(), c.getResultGrad(), c.getLogitsGrad(),
                          out, loss);
          return logits(c, "cross_entropy_grad", c.getLogits(), c.getLabels(),
                        c.getResultGrad(), c.getLogitsGrad(), out);
        })
        .Case([&](CountCorrectOp c) {
          return logits(c, "count_correct", c.getLogits(), c.getLabels(), {},
                        c.getResult(), out);
        })
        .Case<AttentionOp, AttentionGradOp>(
            [&](auto a) -> std::optional<Unsupported> {
              if (auto bad = requireF32(a, {a.getQuery()}))
                return bad;
              ArrayRef<int64_t> s = shapeOf(a.getQuery());
              int64_t t = s[s.size() - 2], d = s.back(),
                      slices = product(s) / (t * d);
              size_t rank = s.size();
              if (d > 256)
                return Unsupported{a, "attention heads wider than 256 do not "
                                      "fit the GPU attention kernel"};
              SmallVector<int64_t> ints{slices, t, d, int64_t(a.getCausal())};
              SmallVector<Value> inputs(a->getOperands());
              SmallVector<int64_t> p, gpu;
              // Each operand's layout: [slices, t, d] unless it is read or
              // written with strides (CudaZeroCopy.h).
              json::Array layouts;
              bool strided = false;
              // (The log-sum-exp, one float a row, is [slices, t].)
              auto place = [&](const Strided *s, int64_t offset, Value v) {
                std::array<int64_t, 4> layout{1, t * d, 0, d};
                if (shapeOf(v).size() < rank)
                  layout = {1, t, 0, 1};
                if (s) {
                  offset = offsetOf(s->at) + s->offset * 2; // bf16
                  layout = s->layout;
                  strided = true;
                }
                gpu.push_back(offset);
                layouts.push_back(json::Array(layout));
              };
              auto find = [](const llvm::DenseMap<Value, Strided> &map,
                             Value v) -> const Strided * {
                auto it = map.find(v);
                return it == map.end() ? nullptr : &it->second;
              };
              for (Value in : inputs) {
                p.push_back(offsetOf(in));
                Value from = zero.readFrom(in);
                place(find(zero.readStrided, viewRoot(from)), offsetOf(from),
                      in);
              }
              // Its results, or the narrowings it writes them into
              // (CudaZeroCopy.h: all or none), or their head merges. The
              // forward's log-sum-exp ([slices, t] f32) is never narrowed.
              Operation *narrowing = zero.narrowingOf(a->getResult(0));
              for (Value result : a->getResults()) {
                p.push_back(offsetOf(result));
                Operation *into = zero.narrowingOf(result);
                place(find(zero.writtenStrided, result),
                      into ? offsetOf(into->getResult(0)) : offsetOf(result),
                      result);
              }
              if constexpr (std::is_same_v<decltype(a), AttentionGradOp>)
                scratch(2 * slices * t * 4);
              json::Object launch = thunk(
                  std::is_same_v<decltype(a), AttentionOp> ? "attention"
                                                           : "attention_grad",
                  gpu, ints);
              if (zero.typedIn.contains(a))
                launch["in"] = "bf16";
              if (narrowing)
                launch["out"] = "bf16";
              if (strided)
                launch["layouts"] = std::move(layouts);
              if (gpu != p)
                launch["cpu_p"] = json::Array(p);
              // With bf16 inputs the probabilities and their gradients may
              // round to bf16, the program's own activations' precision
              // (FlashAttention's bf16 kernels do); with other 16-bit
              // inputs, to TF32 (f16's dS may leave f16's range under loss
              // scaling).
              SmallVector<Value> activations = activationOperands(a);
              if (Type type = widenedAlike(activations); type && type.isBF16())
                launch["bf16"] = true;
              else if (allHalfValued(activations))
                launch["tf32"] = true;
              return emit(std::move(launch));
            })
        .Default([&](Operation *o) -> std::optional<Unsupported> {
          return Unsupported{o, "'" + o->getName().getStringRef().str() +
                                    "' has no GPU implementation yet"};
        });
  }

  /// A collective, with the arguments DTToKernels gives the runtime's
  /// entry point of the same name (the partitioner leaves every collective
  /// along axis 0, summing).
  std::optional<Unsupported> collective(Operation *op, StringRef name, Value in,
                                        Value result, ArrayRef<int16_t> axes,
                                        json::Array &out) {
    auto id = op->getAttrOfType<IntegerAttr>("dt.id");
    if (!id)
      return Unsupported{op, "a collective without a dt.id"};
    std::optional<int32_t> dtype = collectiveDTypeCode(
        llvm::cast<RankedTensorType>(in.getType()).getElementType());
    if (!dtype)
      return Unsupported{op, "a collective of elements the runtime cannot "
                             "move"};
    int64_t mask = 0, group = 1;
    for (int16_t a : axes) {
      mask |= int64_t(1) << a;
      group *= a < int16_t(meshShape.size()) ? meshShape[a] : 1;
    }
    int64_t inCount = product(shapeOf(in)), outCount = product(shapeOf(result));
    SmallVector<int64_t> ints;
    if (name == "all_reduce")
      ints = {inCount};
    else if (name == "reduce_scatter" || name == "all_gather")
      ints = {std::min(inCount, outCount), group};
    else if (name == "all_to_all")
      ints = {inCount / group, group};
    else // take_shard
      ints = {inCount, outCount};
    ints.append({int64_t(*dtype), mask, id.getInt()});
    json::Object t = thunk(name, {offsetOf(in), offsetOf(result)}, ints);
    if (op->hasAttr(kAsyncAttr))
      t["async"] = true;
    out.push_back(std::move(t));
    return std::nullopt;
  }

  /// A convolution kernel: (a, b, out, then the sizes and attributes), as
  /// the CPU kernel takes them. Its scratch holds every sample's unrolled
  /// windows and an output-sized buffer (dtk_cuda_conv2d_scratch_floats).
  template <typename Op>
  std::optional<Unsupported> conv(Op op, StringRef name, Value a, Value b,
                                  Value result, json::Array &out) {
    if (auto bad = requireF32(op, {a, b}))
      return bad;
    Conv2dShape s = op.getConv2dShape();
    scratch((s.c * s.kh * s.kw + s.o) * s.n * s.oh * s.ow * 4);
    out.push_back(thunk(name, {offsetOf(a), offsetOf(b), offsetOf(result)},
                        {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow,
                         s.stride[0], s.stride[1], s.padding[0], s.padding[1],
                         s.dilation[0], s.dilation[1], s.groups}));
    return std::nullopt;
  }

  /// A pooling kernel: its tensors, then the planes and the window, as the
  /// CPU kernel takes them.
  template <typename Op>
  std::optional<Unsupported> pool(Op op, StringRef name,
                                  ArrayRef<Value> tensors, json::Array &out) {
    if (auto bad = requireF32(op, tensors))
      return bad;
    Conv2dShape s = op.getPool2dShape();
    SmallVector<int64_t> p;
    for (Value t : tensors)
      p.push_back(offsetOf(t));
    out.push_back(
        thunk(name, p,
              {s.n * s.c, s.h, s.w, s.oh, s.ow, s.kh, s.kw, s.stride[0],
               s.stride[1], s.padding[0], s.padding[1]}));
    return std::nullopt;
  }

  /// cross_entropy_stats and count_correct_stats: (stats, labels, out),
  /// the blocks and the rows; a float per row of scratch.
  std::optional<Unsupported> fromStats(Operation *op, StringRef name,
                                       Value stats, Value labels, Value result,
                                       json::Array &out) {
    if (auto bad = requireF32(op, {stats, result}))
      return bad;
    int64_t rows = product(shapeOf(labels));
    scratch(rows * 4);
    out.push_back(thunk(name,
                        {offsetOf(stats), offsetOf(labels), offsetOf(result)},
                        {shapeOf(stats)[0], rows}));
    return std::nullopt;
  }

  /// A launch `t` that reads 16-bit inputs where their widenings' sources
  /// lie and writes a result into its narrowing's buffer (CudaZeroCopy.h):
  /// for each input (its index in p, the op's operand and the plan's key
  /// for its type) and the result (index, value), its pointer moves and the
  /// key names the type; the CPU's pointers stay in cpu_p.
  struct TypedInput {
    size_t index;
    Value value;
    StringRef key;
  };
  json::Object typed(json::Object t, ArrayRef<TypedInput> inputs,
                     std::pair<size_t, Value> result) {
    json::Array *p = t.getArray("p");
    json::Array cpu = *p;
    for (const TypedInput &in : inputs)
      if (Value read = zero.readFrom(in.value); read != in.value) {
        (*p)[in.index] = offsetOf(read);
        t[in.key] = sixteenBitName(read);
      }
    if (Operation *narrowing = zero.narrowingOf(result.second)) {
      (*p)[result.first] = offsetOf(narrowing->getResult(0));
      t["out"] = sixteenBitName(narrowing->getResult(0));
    }
    if (*p != cpu)
      t["cpu_p"] = std::move(cpu);
    return t;
  }

  static StringRef sixteenBitName(Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getElementType().isBF16()
               ? "bf16"
               : "f16";
  }

  /// Pairs each cross_entropy with the gradient after it that can compute
  /// it in the same launch (cross_entropy_with_grad): the same logits,
  /// read from the same place, and labels; between the two only launches
  /// the GPU plan leaves out; and every reader of the loss after the
  /// gradient (the gradient's dloss cannot be one). GPT-2's loss and its
  /// gradient then read the 16384 x 50257 logits twice instead of three
  /// times.
  void pairLosses(func::FuncOp fn) {
    withLoss.clear();
    absorbedLosses.clear();
    llvm::DenseMap<Operation *, size_t> position;
    for (Operation &op : fn.getBody().front())
      position[&op] = position.size();
    CrossEntropyOp pending = nullptr;
    for (Operation &op : fn.getBody().front()) {
      if (auto loss = llvm::dyn_cast<CrossEntropyOp>(op)) {
        pending = loss;
        continue;
      }
      if (!pending)
        continue;
      auto grad = llvm::dyn_cast<CrossEntropyGradOp>(op);
      if (!grad) {
        if (!llvm::isa<ReshapeOp>(op) && !zero.skips(&op))
          pending = nullptr; // something launches between them
        continue;
      }
      bool later = llvm::all_of(pending->getUsers(), [&](Operation *user) {
        return position.lookup(user) > position[&op];
      });
      if (later && grad.getLabels() == pending.getLabels() &&
          viewRoot(zero.readFrom(grad.getLogits())) ==
              viewRoot(zero.readFrom(pending.getLogits()))) {
        withLoss[&op] = pending;
        absorbedLosses.insert(pending);
      }
      pending = nullptr;
    }
  }

  /// cross_entropy, its gradient (with its loss: `loss`) and count_correct:
  /// (logits, labels[, g], out[, loss]) and their scratch.
  std::optional<Unsupported> logits(Operation *op, StringRef name, Value logits,
                                    Value labels, Value grad, Value result,
                                    json::Array &out,
                                    CrossEntropyOp loss = nullptr) {
    if (auto bad = requireF32(op, {logits}))
      return bad;
    ArrayRef<int64_t> shape = shapeOf(logits);
    int64_t rows = product(shape.drop_back());
    SmallVector<int64_t> p{offsetOf(logits), offsetOf(labels)};
    if (grad)
      p.push_back(offsetOf(grad));
    p.push_back(offsetOf(result));
    size_t resultIndex = p.size() - 1;
    if (loss)
      p.push_back(offsetOf(loss.getResult()));
    // The count of labelled rows; each row's loss (after the count, with
    // its gradient).
    scratch(name == "cross_entropy_grad" ? 4
            : loss                       ? (rows + 1) * 4
                                         : rows * 4);
    // 16-bit logits read where they lie, a 16-bit gradient written into its
    // narrowing's buffer (CudaZeroCopy.h), their rows a pitch apart where
    // they are laid out so.
    json::Object t = typed(thunk(name, p, {rows, shape.back()}),
                           {{0, logits, "in"}}, {resultIndex, result});
    // The CPU's call of the loss, which this launch stands for too.
    if (loss)
      t["cpu_loss"] =
          json::Array{offsetOf(loss.getLogits()), offsetOf(loss.getLabels()),
                      offsetOf(loss.getResult())};
    int64_t in = zero.pitchOf(zero.readFrom(logits)), outPitch = 0;
    if (Operation *narrowing = zero.narrowingOf(result))
      outPitch = zero.pitchOf(narrowing->getResult(0));
    if (name == "cross_entropy" && in)
      t["ld"] = json::Array{in};
    if (name != "cross_entropy" && grad && (in || outPitch))
      t["ld"] = json::Array{in ? in : shape.back(),
                            outPitch ? outPitch : shape.back()};
    out.push_back(std::move(t));
    return std::nullopt;
  }

  ModuleOp module;
  int64_t unroll; // the generated kernels' (launchElements)
  bool merge;     // mergeSmallKernels
  llvm::StringMap<int64_t> globals;
  llvm::DenseMap<Operation *, std::string> kernelOf;
  llvm::DenseSet<Operation *> narrowed;
  /// The entry point's conversions that launch nothing.
  ZeroCopies zero;
  /// Cross-entropy gradients that compute their loss too, and the losses
  /// they absorb (pairLosses).
  llvm::DenseMap<Operation *, CrossEntropyOp> withLoss;
  llvm::DenseSet<Operation *> absorbedLosses;
  SmallVector<int64_t> meshShape;
  int64_t scratchBytes = 0;

public:
  /// The kernels of the launches that run several at once.
  std::vector<MergedKernel> merged;
};

} // namespace

CudaCode dt::buildCudaPlan(ModuleOp planned, int64_t unroll, bool merge) {
  CudaCode code;
  PlanBuilder builder(planned, unroll, merge);
  std::variant<std::string, Unsupported> plan = builder.build();
  code.merged = std::move(builder.merged);
  if (auto *bad = std::get_if<Unsupported>(&plan)) {
    code.unsupported = where(bad->op->getLoc()) + bad->why;
    return code;
  }
  code.plan = std::get<std::string>(plan);
  return code;
}

CudaCode dt::buildCudaCode(ModuleOp planned, int64_t unroll, bool merge) {
  CudaCode code = buildCudaPlan(planned, unroll, merge);
  if (!code.unsupported.empty())
    return code;
  // The PTX emitter reports through diagnostics: keep them as the reason.
  std::string messages;
  {
    llvm::raw_string_ostream os(messages);
    ScopedDiagnosticHandler capture(planned.getContext(), [&](Diagnostic &d) {
      os << where(d.getLocation()) << d.str();
      return success();
    });
    FailureOr<std::string> ptx =
        emitKernelsPTX(planned, "sm_90", unroll, code.merged);
    if (succeeded(ptx))
      code.ptx = std::move(*ptx);
  }
  if (code.ptx.empty()) {
    code.plan.clear();
    code.unsupported =
        messages.empty() ? "the GPU kernels did not compile" : messages;
  }
  return code;
}
