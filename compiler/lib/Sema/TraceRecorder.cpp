//===- TraceRecorder.cpp - A GraphBuilder that records and verifies -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One verifier per op kind, mirroring the contracts in Trace.h. A violation
// is a bug in the tracer, never in the user's program.
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/TraceRecorder.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace dt;

namespace {
std::string str(const TensorType &type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

TensorType withShape(const TensorType &type, llvm::ArrayRef<int64_t> shape) {
  TensorType result = type;
  result.shape.assign(shape.begin(), shape.end());
  return result;
}
} // namespace

TraceValue TraceRecorder::add(const TensorType &type) {
  types.push_back(type);
  return TraceValue{types.size() - 1};
}

const TensorType &TraceRecorder::getType(TraceValue value) const {
  return types[value.id];
}

unsigned TraceRecorder::count(PrimOp kind) const {
  return llvm::count(kinds, kind);
}

TraceValue TraceRecorder::param(const ParamInfo &param) {
  ++numParams;
  if (llvm::is_contained(paramNames, param.name))
    violations.push_back("parameter " + param.name + " requested twice");
  paramNames.push_back(param.name);
  TraceValue v = add(param.type);
  lines.push_back("%" + std::to_string(v.id) + " = param " + param.name +
                  " : " + str(param.type));
  return v;
}

TraceValue TraceRecorder::input(DataRole role, llvm::StringRef field,
                                const TensorType &type) {
  TraceValue v = add(type);
  lines.push_back("%" + std::to_string(v.id) + " = input " +
                  toString(role).str() + "." + field.str() + " : " + str(type));
  return v;
}

TraceValue TraceRecorder::constant(double value, DType dtype) {
  TensorType type;
  type.dtype = dtype;
  TraceValue v = add(type);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "%" << v.id << " = constant " << llvm::format("%g", value) << " : "
     << type;
  lines.push_back(text);
  if (!isFloat(dtype))
    violations.push_back("float constant of integer type");
  return v;
}

TraceValue TraceRecorder::constant(int64_t value, DType dtype) {
  TensorType type;
  type.dtype = dtype;
  TraceValue v = add(type);
  lines.push_back("%" + std::to_string(v.id) + " = constant " +
                  std::to_string(value) + " : " + str(type));
  if (isFloat(dtype))
    violations.push_back("integer constant of float type");
  return v;
}

std::string TraceRecorder::verify(PrimOp kind, llvm::ArrayRef<TensorType> in,
                                  const PrimAttrs &attrs,
                                  llvm::ArrayRef<TensorType> out) const {
  auto expectCounts = [&](size_t operands, size_t results) -> std::string {
    if (in.size() != operands || out.size() != results)
      return "takes " + std::to_string(operands) + " operands and " +
             std::to_string(results) + " results";
    return "";
  };
  auto same = [&](const TensorType &a, const TensorType &b) -> std::string {
    return a == b ? "" : "expected " + str(b) + ", got " + str(a);
  };
  switch (kind) {
  case PrimOp::Add:
  case PrimOp::Sub:
  case PrimOp::Mul:
  case PrimOp::Div: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    if (std::string e = same(in[0], out[0]); !e.empty())
      return e;
    return same(in[1], out[0]);
  }
  case PrimOp::Neg:
  case PrimOp::Relu:
  case PrimOp::Gelu:
  case PrimOp::GeluErf:
  case PrimOp::Tanh:
  case PrimOp::Sigmoid:
  case PrimOp::Exp:
  case PrimOp::Log:
  case PrimOp::Sqrt:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    return same(in[0], out[0]);
  case PrimOp::Softmax:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (attrs.axis < 0 || attrs.axis >= static_cast<int64_t>(in[0].getRank()))
      return "axis out of range";
    return same(in[0], out[0]);
  case PrimOp::BroadcastTo: {
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (llvm::ArrayRef<int64_t>(attrs.shape) !=
        llvm::ArrayRef<int64_t>(out[0].shape))
      return "attrs.shape differs from the result";
    if (in[0].dtype != out[0].dtype || in[0].getRank() > out[0].getRank())
      return "cannot broadcast " + str(in[0]) + " to " + str(out[0]);
    size_t offset = out[0].getRank() - in[0].getRank();
    for (size_t i = 0; i < in[0].getRank(); ++i)
      if (in[0].shape[i] != 1 && in[0].shape[i] != out[0].shape[offset + i])
        return "cannot broadcast " + str(in[0]) + " to " + str(out[0]);
    return "";
  }
  case PrimOp::MatMul: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    const TensorType &a = in[0], &b = in[1];
    if (a.getRank() < 2 || b.getRank() < 2 || a.dtype != b.dtype)
      return "needs matrices of one dtype";
    size_t r = a.getRank();
    llvm::ArrayRef<int64_t> batch =
        llvm::ArrayRef<int64_t>(a.shape).drop_back(2);
    if (b.getRank() != 2 &&
        llvm::ArrayRef<int64_t>(b.shape).drop_back(2) != batch)
      return "rhs batch dims differ from lhs: " + str(a) + " @ " + str(b);
    if (a.shape[r - 1] != b.shape[b.getRank() - 2])
      return "inner dims differ: " + str(a) + " @ " + str(b);
    llvm::SmallVector<int64_t> expected(batch.begin(), batch.end());
    expected.push_back(a.shape[r - 2]);
    expected.push_back(b.shape.back());
    return same(out[0], withShape(a, expected));
  }
  case PrimOp::Transpose: {
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (attrs.perm.size() != in[0].getRank())
      return "perm has the wrong length";
    llvm::SmallVector<int64_t> expected;
    llvm::SmallVector<bool> seen(in[0].getRank(), false);
    for (int64_t p : attrs.perm) {
      if (p < 0 || p >= static_cast<int64_t>(in[0].getRank()) || seen[p])
        return "perm is not a permutation";
      seen[p] = true;
      expected.push_back(in[0].shape[p]);
    }
    return same(out[0], withShape(in[0], expected));
  }
  case PrimOp::Reshape:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (llvm::ArrayRef<int64_t>(attrs.shape) !=
        llvm::ArrayRef<int64_t>(out[0].shape))
      return "attrs.shape differs from the result";
    if (in[0].getNumElements() != out[0].getNumElements() ||
        in[0].dtype != out[0].dtype)
      return "element counts differ: " + str(in[0]) + " -> " + str(out[0]);
    return "";
  case PrimOp::Conv2d: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    if (in[0].getRank() != 4 || in[1].getRank() != 4 || out[0].getRank() != 4)
      return "needs x, weight and result of rank 4";
    if (attrs.stride.size() != 2 || attrs.padding.size() != 2 ||
        attrs.dilation.size() != 2 || attrs.groups < 1)
      return "needs a stride, padding and dilation pair and groups >= 1";
    if (in[1].shape[1] * attrs.groups != in[0].shape[1] ||
        out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[1].shape[0])
      return "channels disagree: " + str(in[0]) + ", " + str(in[1]) + " -> " +
             str(out[0]);
    return "";
  }
  case PrimOp::MaxPool2d:
  case PrimOp::AvgPool2d:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (in[0].getRank() != 4 || out[0].getRank() != 4)
      return "needs x and result of rank 4";
    if (attrs.kernel.size() != 2 || attrs.stride.size() != 2 ||
        attrs.padding.size() != 2)
      return "needs a kernel, stride and padding pair";
    if (out[0].shape[0] != in[0].shape[0] || out[0].shape[1] != in[0].shape[1])
      return "changes the samples or channels: " + str(in[0]) + " -> " +
             str(out[0]);
    return "";
  case PrimOp::BatchNorm:
    if (std::string e = expectCounts(5, 1); !e.empty())
      return e;
    if (in[0].getRank() < 2)
      return "needs x of rank 2 or more";
    for (size_t i = 1; i < 5; ++i)
      if (in[i].getRank() != 1 || in[i].shape[0] != in[0].shape[1])
        return "needs [C] weight, bias and statistics for " + str(in[0]);
    return same(out[0], in[0]);
  case PrimOp::Dropout:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (!(attrs.p >= 0 && attrs.p < 1))
      return "p must be in [0, 1)";
    return same(out[0], in[0]);
  case PrimOp::Rope:
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (in[0].getRank() < 2 || in[0].shape.back() % 2 != 0)
      return "needs [..., T, D] with D even";
    return same(out[0], in[0]);
  case PrimOp::LayerNorm:
  case PrimOp::RmsNorm: {
    if (kind == PrimOp::RmsNorm ? in.size() != 2
                              : in.size() != 2 && in.size() != 3)
      return kind == PrimOp::RmsNorm ? "takes 2 operands"
                                   : "takes 2 or 3 operands";
    if (in[0].getRank() == 0)
      return "needs rank >= 1";
    TensorType param = withShape(in[0], {in[0].shape.back()});
    for (size_t i = 1; i < in.size(); ++i)
      if (std::string e = same(in[i], param); !e.empty())
        return e;
    return out.size() == 1 ? same(out[0], in[0]) : "one result";
  }
  case PrimOp::Embedding: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    if (in[0].getRank() != 2 || !isFloat(in[0].dtype) || isFloat(in[1].dtype))
      return "needs a float table [V, C] and integer ids";
    llvm::SmallVector<int64_t> expected(in[1].shape.begin(), in[1].shape.end());
    expected.push_back(in[0].shape[1]);
    return same(out[0], withShape(in[0], expected));
  }
  case PrimOp::Split: {
    if (in.size() != 1 || static_cast<int64_t>(out.size()) != attrs.count ||
        attrs.count < 1)
      return "one operand and attrs.count results";
    if (attrs.axis < 0 || attrs.axis >= static_cast<int64_t>(in[0].getRank()) ||
        in[0].shape[attrs.axis] % attrs.count)
      return "bad axis or count";
    llvm::SmallVector<int64_t> expected(in[0].shape.begin(), in[0].shape.end());
    expected[attrs.axis] /= attrs.count;
    for (const TensorType &r : out)
      if (std::string e = same(r, withShape(in[0], expected)); !e.empty())
        return e;
    return "";
  }
  case PrimOp::Slice: {
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (attrs.axis < 0 || attrs.axis >= static_cast<int64_t>(in[0].getRank()) ||
        attrs.start < 0 || attrs.count < 1 ||
        attrs.start + attrs.count > in[0].shape[attrs.axis])
      return "bad axis or range";
    llvm::SmallVector<int64_t> expected(in[0].shape.begin(), in[0].shape.end());
    expected[attrs.axis] = attrs.count;
    return same(out[0], withShape(in[0], expected));
  }
  case PrimOp::Concat: {
    if (in.empty() || out.size() != 1)
      return "operands and one result";
    if (attrs.axis < 0 || attrs.axis >= static_cast<int64_t>(in[0].getRank()))
      return "bad axis";
    llvm::SmallVector<int64_t> expected(in[0].shape.begin(), in[0].shape.end());
    expected[attrs.axis] = 0;
    for (const TensorType &t : in) {
      if (t.getRank() != in[0].getRank() || t.dtype != in[0].dtype)
        return "operands differ in rank or dtype";
      expected[attrs.axis] += t.shape[attrs.axis];
    }
    return same(out[0], withShape(in[0], expected));
  }
  case PrimOp::Iota: {
    if (std::string e = expectCounts(0, 1); !e.empty())
      return e;
    TensorType expected;
    expected.dtype = DType::I32;
    expected.shape = {attrs.count};
    return same(out[0], expected);
  }
  case PrimOp::Attention:
    if (std::string e = expectCounts(3, 1); !e.empty())
      return e;
    if (in[0].getRank() < 3 || in[1] != in[0] || in[2] != in[0])
      return "q, k, v must share one type of rank >= 3";
    if (!(attrs.p >= 0 && attrs.p < 1))
      return "dropout must be in [0, 1)";
    return same(out[0], in[0]);
  case PrimOp::Sum:
  case PrimOp::Mean: {
    if (std::string e = expectCounts(1, 1); !e.empty())
      return e;
    if (attrs.axis < 0 || attrs.axis >= static_cast<int64_t>(in[0].getRank()))
      return "bad axis";
    llvm::SmallVector<int64_t> expected(in[0].shape.begin(), in[0].shape.end());
    expected.erase(expected.begin() + attrs.axis);
    return same(out[0], withShape(in[0], expected));
  }
  case PrimOp::CrossEntropy: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    if (in[0].getRank() < 1 || in[1].dtype != DType::I32 ||
        llvm::ArrayRef<int64_t>(in[0].shape).drop_back() !=
            llvm::ArrayRef<int64_t>(in[1].shape))
      return "labels must be i32 of the logits' shape without the last dim";
    TensorType scalar;
    return same(out[0], scalar);
  }
  case PrimOp::Mse: {
    if (std::string e = expectCounts(2, 1); !e.empty())
      return e;
    if (in[0] != in[1])
      return "pred and target differ";
    TensorType scalar;
    return same(out[0], scalar);
  }
  }
  return "unknown op";
}

llvm::SmallVector<TraceValue, 1>
TraceRecorder::op(PrimOp kind, llvm::ArrayRef<TraceValue> operands,
                  const PrimAttrs &attrs,
                  llvm::ArrayRef<TensorType> resultTypes, const Location &loc,
                  llvm::StringRef scope) {
  kinds.push_back(kind);
  llvm::SmallVector<TensorType, 4> in;
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::SmallVector<TraceValue, 1> results;
  for (const TensorType &type : resultTypes)
    results.push_back(add(type));
  for (size_t i = 0; i < results.size(); ++i)
    os << (i ? ", " : "") << "%" << results[i].id;
  os << " = " << toString(kind) << "(";
  bool valid = true;
  for (size_t i = 0; i < operands.size(); ++i) {
    os << (i ? ", " : "") << "%" << operands[i].id;
    if (!operands[i].isValid() || operands[i].id >= types.size()) {
      valid = false;
      continue;
    }
    in.push_back(types[operands[i].id]);
  }
  os << ")";
  switch (kind) {
  case PrimOp::BroadcastTo:
  case PrimOp::Reshape:
    os << " {shape = " << shapeStr(attrs.shape) << "}";
    break;
  case PrimOp::Transpose:
    os << " {perm = " << shapeStr(attrs.perm) << "}";
    break;
  case PrimOp::Softmax:
  case PrimOp::Sum:
  case PrimOp::Mean:
  case PrimOp::Concat:
    os << " {axis = " << attrs.axis << "}";
    break;
  case PrimOp::Split:
    os << " {count = " << attrs.count << ", axis = " << attrs.axis << "}";
    break;
  case PrimOp::Slice:
    os << " {start = " << attrs.start << ", count = " << attrs.count
       << ", axis = " << attrs.axis << "}";
    break;
  case PrimOp::Iota:
    os << " {count = " << attrs.count << "}";
    break;
  case PrimOp::LayerNorm:
  case PrimOp::RmsNorm:
    os << " {eps = " << llvm::format("%g", attrs.eps) << "}";
    break;
  case PrimOp::Rope:
    os << " {theta = " << llvm::format("%g", attrs.theta) << "}";
    break;
  case PrimOp::BatchNorm:
    os << " {eps = " << llvm::format("%g", attrs.eps)
       << ", momentum = " << llvm::format("%g", attrs.momentum) << "}";
    break;
  case PrimOp::Dropout:
    os << " {p = " << llvm::format("%g", attrs.p) << "}";
    break;
  case PrimOp::MaxPool2d:
  case PrimOp::AvgPool2d:
    os << " {kernel = " << attrs.kernel[0] << "x" << attrs.kernel[1]
       << ", stride = " << attrs.stride[0] << "x" << attrs.stride[1]
       << ", padding = " << attrs.padding[0] << "x" << attrs.padding[1] << "}";
    break;
  case PrimOp::Conv2d:
    os << " {stride = " << attrs.stride[0] << "x" << attrs.stride[1]
       << ", padding = " << attrs.padding[0] << "x" << attrs.padding[1]
       << ", dilation = " << attrs.dilation[0] << "x" << attrs.dilation[1]
       << ", groups = " << attrs.groups << "}";
    break;
  case PrimOp::Attention:
    os << " {causal = " << (attrs.causal ? "true" : "false");
    if (attrs.p != 0)
      os << ", dropout = " << llvm::format("%g", attrs.p);
    os << "}";
    break;
  default:
    break;
  }
  os << " : ";
  for (size_t i = 0; i < resultTypes.size(); ++i)
    os << (i ? ", " : "") << resultTypes[i];
  os << "  scope \"" << scope << "\" at " << loc.line << ":" << loc.col;
  lines.push_back(text);
  std::string problem =
      valid ? verify(kind, in, attrs, resultTypes) : "an operand is invalid";
  if (!problem.empty())
    violations.push_back(lines.back() + ": " + problem);
  return results;
}

void TraceRecorder::print(llvm::raw_ostream &os) const {
  for (const std::string &line : lines)
    os << line << '\n';
}
