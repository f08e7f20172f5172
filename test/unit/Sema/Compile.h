//===- Compile.h - Running the front end on a string in tests ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A fixture helper: parse and check a program given as text, with the real
// standard library, keeping every message.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TEST_UNIT_SEMA_COMPILE_H
#define DT_TEST_UNIT_SEMA_COMPILE_H

#include "dt/Sema/Sema.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace dt::test {

/// A program checked from text; `program` is null when Sema failed.
struct Compiled {
  llvm::SourceMgr sourceMgr;
  std::string messages;
  llvm::raw_string_ostream os{messages};
  DiagnosticEngine diag{sourceMgr, os};
  ModuleLoader loader{diag, SearchPaths{DT_STDLIB_DIR, {}}};
  std::unique_ptr<Program> program;

  explicit Compiled(llvm::StringRef text) {
    if (const LoadedModule *main = loader.loadBuffer("test.dt", text)) {
      llvm::FailureOr<std::unique_ptr<Program>> checked =
          analyze(loader, *main);
      if (succeeded(checked))
        program = std::move(*checked);
    }
  }

  const Job &job() const { return *program->getJob(); }
};

/// The contract's Fashion-MNIST perceptron.
inline constexpr const char *kMlpFashion = R"(
import nn
model MLP(inputs: int, hidden: int, classes: int) {
  fc1 = nn.Linear(inputs, hidden)
  fc2 = nn.Linear(hidden, classes)
  forward(x: f32[B, inputs]) -> f32[B, classes] {
    return fc2(relu(fc1(x)))
  }
}
train fashion_mlp {
  model     = MLP(inputs = 784, hidden = 256, classes = 10)
  data      = nn.idx(images = "data/fashion/train-images-idx3-ubyte.gz",
                     labels = "data/fashion/train-labels-idx1-ubyte.gz", scale = 1.0 / 255)
  eval      = nn.idx(images = "data/fashion/t10k-images-idx3-ubyte.gz",
                     labels = "data/fashion/t10k-labels-idx1-ubyte.gz", scale = 1.0 / 255)
  loss      = cross_entropy(model(data.x), data.y)
  batch     = 128
  epochs    = 3
  optimizer = AdamW(lr = 1e-3, weight_decay = 0.01)
  schedule  = cosine(warmup = 100)
  seed      = 42
  log       = {every: 50, dir: "runs/fashion_mlp"}
}
)";

/// A GPT with the layouts of the contract's hybrid and pipeline programs.
inline std::string gptProgram(llvm::StringRef train, llvm::StringRef parallel) {
  return R"(
import nn
model GPT(vocab: int, ctx: int, width: int, depth: int, heads: int) {
  wte    = nn.Embedding(vocab, width) @vocab
  wpe    = nn.Embedding(ctx, width)
  blocks = nn.Block(width, heads) * depth
  ln_f   = nn.LayerNorm(width)
  forward(tokens: i32[B, T]) -> f32[B, T, vocab] {
    h = wte(tokens) + wpe(iota(T))
    h = blocks(h)
    return ln_f(h) @ transpose(wte.weight)
  }
}
train {
  model = GPT(vocab = 256, ctx = 128, width = 128, depth = 4, heads = 4)
  data  = nn.tokens(path = "data/text/train.bin", seq = 128)
  eval  = nn.tokens(path = "data/text/val.bin", seq = 128)
  loss  = cross_entropy(model(data.x), data.y)
)" + train.str() +
         "}\nparallel {\n" + parallel.str() + "}\n";
}

} // namespace dt::test

#endif // DT_TEST_UNIT_SEMA_COMPILE_H
