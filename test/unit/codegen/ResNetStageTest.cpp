//===- ResNetStageTest.cpp - ResNet stages against the interpreter --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// nn.ResNet's pieces (a stem, an identity BasicBlock stage, a widening stage
// with a downsample shortcut, batch norms in train mode, average pooling), as
// nn.ResNet declares them: one step's gradients and running statistics of the
// compiled program against the reference interpreter's. (Written while
// chasing a gradient that differed from PyTorch's in one channel on
// Fashion-MNIST: it was a ReLU whose input summed to 1e-6 out of terms of
// 0.4, where f32 rounding picks the side; the test data of
// e2e/pretrained/resnet.test avoid such exact ties.)
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace dt::test;
using dt::interp::Tensor;

namespace {

const char *const kResNetStages = R"(
import nn
model M() {
  conv1 = nn.ResNetConv(1, 64, 7, stride = 2, padding = 3)
  bn1 = nn.BatchNorm2d(64)
  maxpool = nn.MaxPool2d(3, stride = 2, padding = 1)
  layer1 = nn.BasicStage(64, 64, 1, 1, 0)
  layer2 = nn.BasicStage(64, 256, 1, 2, 1)
  avgpool = nn.AdaptiveAvgPool2d(1)
  fc = nn.Linear(256, 10)
  forward(x: f32[B, 1, 28, 28]) -> f32[B, 10] {
    h = maxpool(relu(bn1(conv1(x))))
    return fc(reshape(avgpool(layer2(layer1(h))), [B, 256]))
  }
}
train t {
  model = M()
  data = nn.idx(images = "images.idx", labels = "labels.idx", image = true)
  loss = cross_entropy(model(data.x), data.y)
  batch = 8
  steps = 1
  optimizer = SGD(lr = 0.01)
}
)";

TEST(ResNetStages, GradientsMatchTheInterpreter) {
  MLIRContext ctx;
  loadPipelineDialects(ctx);
  std::string messages;
  OwningOpRef<ModuleOp> planned = planProgram(ctx, kResNetStages, messages);
  ASSERT_TRUE(planned) << messages;
  std::string error;
  std::unique_ptr<CompiledProgram> compiled =
      CompiledProgram::compile(*planned, error);
  ASSERT_TRUE(compiled) << error;
  char *arena = compiled->arena();
  dt::interp::Interpreter interp(*planned);

  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 0.1);
  std::vector<dt::GlobalOp> globals;
  for (dt::GlobalOp g : planned->getOps<dt::GlobalOp>()) {
    globals.push_back(g);
    RankedTensorType t = g.getTensorType();
    Tensor value(t.getShape());
    for (double &v : value.data) {
      if (t.getElementType().isInteger(32))
        v = double(rng() % 10);
      else if (g.getRole() == dt::Role::input)
        v = double(rng() % 256) / 255;
      else if (g.getRole() == dt::Role::param)
        v = double(float(normal(rng)));
    }
    writeGlobal(arena, g, value.data);
    interp.globals[g.getSymName().str()] = value;
  }
  compiled->call("grad_step");
  ASSERT_TRUE(succeeded(
      interp.call(planned->lookupSymbol<func::FuncOp>("grad_step"), {})));
  for (dt::GlobalOp g : globals) {
    if (g.getRole() == dt::Role::input)
      continue;
    std::vector<double> got = readGlobal(arena, g);
    const std::vector<double> &want = interp.globals[g.getSymName().str()].data;
    Difference d = compare(got, want, 1e-3);
    EXPECT_LE(d.maxRelative, 1e-3) << g.getSymName().str();
  }
}

} // namespace
