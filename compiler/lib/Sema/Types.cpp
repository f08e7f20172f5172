//===- Types.cpp - Values Sema hands to later stages ----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Spellings, printing and lookups of the Job's plain types.
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/Job.h"
#include "dt/Sema/Trace.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace dt;

llvm::StringRef dt::toString(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::optional<DType> dt::parseDType(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<DType>>(name)
      .Case("f32", DType::F32)
      .Case("bf16", DType::BF16)
      .Case("f16", DType::F16)
      .Case("i32", DType::I32)
      .Case("i64", DType::I64)
      .Default(std::nullopt);
}

bool dt::isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

int64_t TensorType::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

llvm::raw_ostream &dt::operator<<(llvm::raw_ostream &os,
                                  const TensorType &type) {
  os << toString(type.dtype) << '[';
  llvm::interleaveComma(type.shape, os);
  return os << ']';
}

Constant Constant::getInt(int64_t value) {
  Constant c;
  c.kind = Kind::Int;
  c.intValue = value;
  return c;
}

Constant Constant::getFloat(double value) {
  Constant c;
  c.kind = Kind::Float;
  c.floatValue = value;
  return c;
}

Constant Constant::getBool(bool value) {
  Constant c;
  c.kind = Kind::Bool;
  c.boolValue = value;
  return c;
}

Constant Constant::getString(llvm::StringRef value) {
  Constant c;
  c.kind = Kind::String;
  c.text = value.str();
  return c;
}

Constant Constant::getSymbol(llvm::StringRef name) {
  Constant c;
  c.kind = Kind::Symbol;
  c.text = name.str();
  return c;
}

Constant Constant::getTuple(std::vector<Constant> items,
                            std::vector<std::string> keys) {
  Constant c;
  c.kind = Kind::Tuple;
  c.items = std::move(items);
  c.keys = std::move(keys);
  return c;
}

Constant Constant::getList(std::vector<Constant> items) {
  Constant c;
  c.kind = Kind::List;
  c.items = std::move(items);
  return c;
}

Constant Constant::getRecord(std::vector<std::string> keys,
                             std::vector<Constant> items) {
  Constant c;
  c.kind = Kind::Record;
  c.keys = std::move(keys);
  c.items = std::move(items);
  return c;
}

double Constant::getNumber() const {
  return kind == Kind::Int ? static_cast<double>(intValue) : floatValue;
}

const Constant *Constant::lookup(llvm::StringRef key) const {
  for (size_t i = 0; i < keys.size() && i < items.size(); ++i)
    if (keys[i] == key)
      return &items[i];
  return nullptr;
}

void Constant::print(llvm::raw_ostream &os) const {
  switch (kind) {
  case Kind::Int:
    os << intValue;
    return;
  case Kind::Float:
    os << floatValue;
    return;
  case Kind::Bool:
    os << (boolValue ? "true" : "false");
    return;
  case Kind::String:
    os << '"';
    os.write_escaped(text);
    os << '"';
    return;
  case Kind::Symbol:
    os << text;
    return;
  case Kind::Tuple:
  case Kind::List:
  case Kind::Record: {
    os << (kind == Kind::Tuple ? '(' : kind == Kind::List ? '[' : '{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        os << ", ";
      if (i < keys.size() && !keys[i].empty())
        os << keys[i] << (kind == Kind::Record ? ": " : " = ");
      items[i].print(os);
    }
    os << (kind == Kind::Tuple ? ')' : kind == Kind::List ? ']' : '}');
    return;
  }
  }
}

std::string Constant::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os);
  return text;
}

const Constant *dt::lookup(llvm::ArrayRef<NamedConstant> args,
                           llvm::StringRef name) {
  for (const NamedConstant &arg : args)
    if (arg.name == name)
      return &arg.value;
  return nullptr;
}

llvm::StringRef dt::toString(Annotation annotation) {
  switch (annotation) {
  case Annotation::Column:
    return "column";
  case Annotation::Row:
    return "row";
  case Annotation::Vocab:
    return "vocab";
  }
  return "?";
}

const ModelInstance::Child *
ModelInstance::findChild(llvm::StringRef name) const {
  for (const Child &child : children)
    if (child.name == name)
      return &child;
  return nullptr;
}

const SampleField *DataSource::findField(llvm::StringRef name) const {
  for (const SampleField &field : fields)
    if (field.name == name)
      return &field;
  return nullptr;
}

int64_t ParallelConfig::getWorldSize() const {
  int64_t size = 1;
  for (const MeshAxis &axis : mesh)
    size *= axis.size;
  return size;
}

int64_t ParallelConfig::getAxisSize(llvm::StringRef name) const {
  for (const MeshAxis &axis : mesh)
    if (axis.name == name)
      return axis.size;
  return 1;
}

int64_t ParallelConfig::getDataParallelSize() const {
  int64_t size = 1;
  for (const std::string &axis : dataAxes)
    size *= getAxisSize(axis);
  return size;
}

Job::Job() = default;
Job::Job(Job &&) = default;
Job &Job::operator=(Job &&) = default;
Job::~Job() = default;

static const ModelInstance *findIn(const ModelInstance &inst,
                                   llvm::StringRef path) {
  if (inst.path == path)
    return &inst;
  for (const ModelInstance::Child &child : inst.children)
    for (const auto &item : child.items)
      if (path == item->path || path.starts_with(item->path + "."))
        return findIn(*item, path);
  return nullptr;
}

const ModelInstance *Job::findInstance(llvm::StringRef path) const {
  return model ? findIn(*model, path) : nullptr;
}

const ParamInfo *Job::findParam(llvm::StringRef name) const {
  for (const ParamInfo &param : params)
    if (param.name == name)
      return &param;
  return nullptr;
}

llvm::StringRef dt::toString(DataRole role) {
  return role == DataRole::Train ? "train" : "eval";
}

llvm::StringRef dt::toString(PrimOp op) {
  switch (op) {
  case PrimOp::Add:
    return "add";
  case PrimOp::Sub:
    return "sub";
  case PrimOp::Mul:
    return "mul";
  case PrimOp::Div:
    return "div";
  case PrimOp::Neg:
    return "neg";
  case PrimOp::BroadcastTo:
    return "broadcast_to";
  case PrimOp::MatMul:
    return "matmul";
  case PrimOp::Transpose:
    return "transpose";
  case PrimOp::Reshape:
    return "reshape";
  case PrimOp::Relu:
    return "relu";
  case PrimOp::Gelu:
    return "gelu";
  case PrimOp::GeluErf:
    return "gelu(approximate = \"none\")";
  case PrimOp::Tanh:
    return "tanh";
  case PrimOp::Sigmoid:
    return "sigmoid";
  case PrimOp::Exp:
    return "exp";
  case PrimOp::Log:
    return "log";
  case PrimOp::Sqrt:
    return "sqrt";
  case PrimOp::Softmax:
    return "softmax";
  case PrimOp::LayerNorm:
    return "layer_norm";
  case PrimOp::RmsNorm:
    return "rms_norm";
  case PrimOp::Rope:
    return "rope";
  case PrimOp::BatchNorm:
    return "batch_norm";
  case PrimOp::Dropout:
    return "dropout";
  case PrimOp::Conv2d:
    return "conv2d";
  case PrimOp::MaxPool2d:
    return "max_pool2d";
  case PrimOp::AvgPool2d:
    return "avg_pool2d";
  case PrimOp::Embedding:
    return "embedding";
  case PrimOp::Split:
    return "split";
  case PrimOp::Slice:
    return "slice";
  case PrimOp::Concat:
    return "concat";
  case PrimOp::Iota:
    return "iota";
  case PrimOp::Attention:
    return "attention";
  case PrimOp::Sum:
    return "sum";
  case PrimOp::Mean:
    return "mean";
  case PrimOp::CrossEntropy:
    return "cross_entropy";
  case PrimOp::Mse:
    return "mse";
  }
  return "?";
}

GraphBuilder::~GraphBuilder() = default;
