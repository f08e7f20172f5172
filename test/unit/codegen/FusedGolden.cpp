//===- FusedGolden.cpp - what each generated GPU kernel must compute ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dt-fused-golden OUTDIR: the CPU half of the check that every GPU kernel
// dtc generates computes what the CPU path computes. For a small GPT in f32,
// bf16 and f16, the same GPT with both dropouts (attention's causal mask and
// probabilities in generated kernels), a small LLaMA (SwiGLU, grouped-query
// heads) and a small CNN (batch norms: sums around the channels) it plans
// the program through the real pipeline, emits its
// kernels as PTX (dtc --emit=ptx's code), and runs two optimizer steps of the
// planned module in the reference interpreter (the oracle the compiled CPU
// code is tested against) on random parameters and tokens. Every time an op
// with a generated kernel (dt/Conversion/GPUKernels.h) is evaluated it
// records the operands' bytes at their arena offsets and the results it
// produced. dt-cuda-fused-tests then runs each kernel on a GPU over an arena
// holding only those operands and compares.
//
//   OUTDIR/<program>.ptx     the kernels
//   OUTDIR/<program>.golden  "DTFG2\n", then little-endian int64 fields:
//     arena_bytes (the GPU arena's: gpuArenaBytes), cases; per case: the
//     kernel's name (length, bytes), the elements its launch covers
//     (launchElements), inputs, outputs; per input: offset, element code,
//     count, raw bytes;
//     per output: the same, the bytes being the interpreter's results.
//   Element codes: 0 f32, 1 bf16, 2 f16, 3 i32, 4 i64, 5 i8/i1, 6 f64.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include "dt/Conversion/GPUKernels.h"
#include "dt/Target/PTXEmitter.h"
#include "dt/Transforms/Passes.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fstream>
#include <random>

using namespace mlir;
using namespace dt::test;
using dt::interp::Tensor;

namespace {

const std::string kGptProgram = std::string(kGptModel) + R"(
train fused_gpt {
  model     = GPT(vocab = 256, ctx = 16, width = 64, depth = 2, heads = 2)
  data      = nn.tokens(path = "data/text/train.bin", seq = 16)
  loss      = cross_entropy(model(data.x), data.y)
  batch     = 2
  steps     = 10
  optimizer = AdamW(lr = 1e-3, betas = (0.9, 0.95), weight_decay = 0.1)
  schedule  = cosine(warmup = 2, min = 1e-4)
  clip      = 1.0
  seed      = 1
  PRECISION
}
)";

const char *const kLlamaProgram = R"(
import nn
train fused_llama {
  model     = nn.Llama(vocab = 256, width = 32, depth = 2, heads = 4, kv_heads = 2,
                       hidden = 48, eps = 1e-5)
  data      = nn.tokens(path = "data/text/train.bin", seq = 16)
  loss      = cross_entropy(model(data.x), data.y)
  batch     = 2
  steps     = 10
  optimizer = AdamW(lr = 1e-3, weight_decay = 0.1)
  clip      = 1.0
  seed      = 1
}
)";

const char *const kCnnProgram = R"(
import nn
model Net() {
  stem = nn.Conv2d(1, 4, 3, padding = 1, bias = false)
  bn   = nn.BatchNorm2d(4)
  pool = nn.MaxPool2d(2)
  conv = nn.Conv2d(4, 4, 3, padding = 1, bias = false)
  bn2  = nn.BatchNorm2d(4)
  fc   = nn.Linear(4 * 14 * 14, 10)
  forward(x: f32[B, 784]) -> f32[B, 10] {
    h = pool(relu(bn(stem(reshape(x, [B, 1, 28, 28])))))
    h = relu(h + bn2(conv(h)))
    return fc(reshape(h, [B, 4 * 14 * 14]))
  }
}
train fused_cnn {
  model     = Net()
  data      = nn.idx(images = "data/fashion/train-images-idx3-ubyte.gz",
                     labels = "data/fashion/train-labels-idx1-ubyte.gz", scale = 1.0 / 255)
  loss      = cross_entropy(model(data.x), data.y)
  batch     = 3
  steps     = 10
  optimizer = AdamW(lr = 1e-3, weight_decay = 0.01)
  seed      = 1
}
)";

/// One program of the golden set: its name (the files' and the GPU test's),
/// its source, and the bound of its integer inputs (tokens, labels).
struct GoldenProgram {
  std::string name, source;
  int bound;
};

std::vector<GoldenProgram> goldenPrograms() {
  std::vector<GoldenProgram> programs;
  for (const char *precision : {"f32", "bf16", "f16"}) {
    std::string source = kGptProgram;
    source.replace(source.find("PRECISION"), 9,
                   std::string(precision) == "f32"
                       ? ""
                       : std::string("precision = ") + precision);
    programs.push_back({std::string("gpt_") + precision, source, 256});
  }
  std::string dropout = kGptProgram;
  dropout.replace(dropout.find("PRECISION"), 9, "");
  const std::string block = "nn.Block(width, heads)";
  dropout.replace(dropout.find(block), block.size(),
                  "nn.Block(width, heads, dropout_p = 0.1, "
                  "attention_dropout_p = 0.1)");
  programs.push_back({"gpt_dropout", dropout, 256});
  programs.push_back({"llama", kLlamaProgram, 256});
  programs.push_back({"cnn", kCnnProgram, 10});
  return programs;
}

// Recorded evaluations of one kernel (a kernel in the step's loop runs once
// per step; two are enough).
constexpr int kCasesPerKernel = 2;

int elementCode(Type t) {
  if (t.isF32())
    return 0;
  if (t.isBF16())
    return 1;
  if (t.isF16())
    return 2;
  if (t.isInteger(32))
    return 3;
  if (t.isInteger(64))
    return 4;
  if (t.isInteger(8) || t.isInteger(1))
    return 5;
  if (t.isF64())
    return 6;
  return -1;
}

class Writer {
public:
  explicit Writer(const std::string &path) : out(path, std::ios::binary) {}
  explicit operator bool() const { return bool(out); }
  void i64(int64_t v) { out.write(reinterpret_cast<const char *>(&v), 8); }
  void bytes(const std::string &s) { out.write(s.data(), s.size()); }

private:
  std::ofstream out;
};

/// `values` as the arena stores elements of type `t`.
std::string encode(Type t, const std::vector<double> &values) {
  std::string bytes;
  auto put = [&](const void *p, size_t n) {
    bytes.append(static_cast<const char *>(p), n);
  };
  for (double v : values) {
    if (t.isF32()) {
      float f = float(v);
      put(&f, 4);
    } else if (t.isF64()) {
      put(&v, 8);
    } else if (t.isBF16() || t.isF16()) {
      llvm::APFloat a(v);
      bool lost;
      a.convert(t.isBF16() ? llvm::APFloat::BFloat() : llvm::APFloat::IEEEhalf(),
                llvm::APFloat::rmNearestTiesToEven, &lost);
      uint16_t h = uint16_t(a.bitcastToAPInt().getZExtValue());
      put(&h, 2);
    } else if (t.isInteger(32)) {
      int32_t i = int32_t(v);
      put(&i, 4);
    } else if (t.isInteger(64)) {
      int64_t i = int64_t(v);
      put(&i, 8);
    } else {
      int8_t i = int8_t(v);
      put(&i, 1);
    }
  }
  return bytes;
}

/// The planned offset of `v`, or -1 for an unplanned value (reported).
int64_t offsetOf(Value v) {
  Operation *op = v.getDefiningOp();
  return op && op->hasAttr("dt.offsets") ? dt::plannedOffset(v) : -1;
}

bool writeProgram(const std::string &dir, const GoldenProgram &program) {
  const std::string &name = program.name;
  MLIRContext ctx;
  loadPipelineDialects(ctx);
  std::string messages;
  // Planned as dtc plans a program with GPU code (dt-plan-memory's
  // gpu-zero-copies), so the kernels are those such a program launches.
  OwningOpRef<ModuleOp> planned =
      planProgram(ctx, program.source, messages, /*gpu=*/true);
  if (!planned) {
    fprintf(stderr, "%s: the program does not plan:\n%s", name.c_str(),
            messages.c_str());
    return false;
  }

  FailureOr<std::string> ptx = dt::emitKernelsPTX(*planned, "sm_90");
  if (failed(ptx)) {
    fprintf(stderr, "%s: no PTX\n", name.c_str());
    return false;
  }
  std::ofstream(dir + "/" + name + ".ptx") << *ptx;

  // Kernel names as convert-dt-fused-to-gpu gives them.
  llvm::DenseMap<Operation *, std::string> kernelOf;
  dt::forEachGeneratedKernel(*planned,
                             [&](Operation *op, const std::string &name) {
                               kernelOf[op] = name;
                             });

  llvm::DenseSet<Operation *> narrowed = dt::narrowedWidenings(*planned);

  struct Span {
    int64_t offset;
    Type type;
    std::vector<double> values;
  };
  struct Case {
    std::string kernel;
    int64_t launch;
    std::vector<Span> inputs, outputs;
  };
  std::vector<Case> cases;
  llvm::StringMap<int> seen;
  bool ok = true;

  dt::interp::Interpreter interp(*planned);
  interp.observer = [&](Operation *op, llvm::ArrayRef<Tensor> operands,
                        llvm::ArrayRef<Tensor> results) {
    auto it = kernelOf.find(op);
    if (it == kernelOf.end() || seen[it->second]++ >= kCasesPerKernel)
      return;
    Case c{it->second, dt::launchElements(op), {}, {}};
    for (auto [v, t] : llvm::zip(op->getOperands(), operands))
      c.inputs.push_back({offsetOf(v),
                          llvm::cast<RankedTensorType>(v.getType())
                              .getElementType(),
                          t.data});
    for (auto [v, t] : llvm::zip(op->getResults(), results)) {
      Type type = llvm::cast<RankedTensorType>(v.getType()).getElementType();
      // A narrowed widening's kernel stores the 16-bit values it widens.
      if (narrowed.contains(op))
        type = dt::widenedFrom(v);
      c.outputs.push_back({offsetOf(v), type, t.data});
    }
    for (const std::vector<Span> *spans : {&c.inputs, &c.outputs})
      for (const Span &s : *spans)
        if (s.offset < 0 || elementCode(s.type) < 0) {
          fprintf(stderr, "%s: %s has an operand without an arena offset or "
                          "of an unknown element type\n",
                  name.c_str(), c.kernel.c_str());
          ok = false;
        }
    cases.push_back(std::move(c));
  };

  // Random parameters and real-valued inputs (N(0, 0.3)), tokens and labels
  // below their bound, the step at 0 of 10; gradients and optimizer state
  // start at zero as in a real run.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 0.3);
  for (dt::GlobalOp g : planned->getOps<dt::GlobalOp>()) {
    RankedTensorType t = g.getTensorType();
    Tensor value(t.getShape());
    bool input = g.getRole() == dt::Role::input &&
                 t.getElementType().isF32() &&
                 g.getSymName().starts_with("in/");
    for (double &v : value.data) {
      if (t.getElementType().isInteger(32))
        v = double(rng() % uint64_t(program.bound));
      else if (g.getSymName() == "in/total_steps")
        v = 10;
      else if (g.getRole() == dt::Role::param || input)
        v = double(float(normal(rng)));
    }
    interp.globals[g.getSymName().str()] = value;
  }
  for (int step = 0; step < 2; ++step)
    for (const char *entry : {"grad_step", "apply_step"}) {
      auto fn = planned->lookupSymbol<func::FuncOp>(entry);
      if (!fn || failed(interp.call(fn, {}))) {
        fprintf(stderr, "%s: the interpreter cannot run %s\n", name.c_str(),
                entry);
        return false;
      }
    }
  for (auto &[op, kernel] : kernelOf)
    if (!seen.count(kernel)) {
      fprintf(stderr, "%s: kernel %s never ran in the interpreter\n",
              name.c_str(), kernel.c_str());
      ok = false;
    }

  Writer out(dir + "/" + name + ".golden");
  out.bytes("DTFG2\n");
  out.i64(dt::gpuArenaBytes(*planned));
  out.i64(int64_t(cases.size()));
  for (const Case &c : cases) {
    out.i64(int64_t(c.kernel.size()));
    out.bytes(c.kernel);
    out.i64(c.launch);
    out.i64(int64_t(c.inputs.size()));
    out.i64(int64_t(c.outputs.size()));
    for (const Span &s : c.inputs) {
      out.i64(s.offset);
      out.i64(elementCode(s.type));
      out.i64(int64_t(s.values.size()));
      out.bytes(encode(s.type, s.values));
    }
    for (const Span &s : c.outputs) {
      out.i64(s.offset);
      out.i64(elementCode(s.type));
      out.i64(int64_t(s.values.size()));
      // Exact: the interpreter rounds every result to its element type.
      out.bytes(encode(s.type, s.values));
    }
  }
  if (!out) {
    fprintf(stderr, "%s: cannot write %s\n", name.c_str(), dir.c_str());
    return false;
  }
  printf("%s: %zu kernels, %zu cases\n", name.c_str(),
         size_t(kernelOf.size()), cases.size());
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dt-fused-golden OUTDIR\n");
    return 2;
  }
  bool ok = true;
  for (const GoldenProgram &program : goldenPrograms())
    ok &= writeProgram(argv[1], program);
  return ok ? 0 : 1;
}
