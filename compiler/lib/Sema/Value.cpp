//===- Value.cpp - What expressions evaluate to during checking -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Constructors and the descriptions used in messages.
//
//===----------------------------------------------------------------------===//

#include "Value.h"

#include "Context.h"
#include "Instance.h"

using namespace dt;
using namespace dt::sema;

EvalValue EvalValue::getInt(SymExpr value) {
  EvalValue v;
  v.kind = Kind::Int;
  v.intValue = std::move(value);
  return v;
}

EvalValue EvalValue::getFloat(std::optional<double> value) {
  EvalValue v;
  v.kind = Kind::Float;
  v.floatValue = value;
  return v;
}

EvalValue EvalValue::getBool(std::optional<bool> value) {
  EvalValue v;
  v.kind = Kind::Bool;
  v.boolValue = value;
  return v;
}

EvalValue EvalValue::getString(std::optional<std::string> value) {
  EvalValue v;
  v.kind = Kind::String;
  v.stringValue = std::move(value);
  return v;
}

EvalValue EvalValue::getTensor(DType dtype, Shape shape, TraceValue handle) {
  EvalValue v;
  v.kind = Kind::Tensor;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.handle = handle;
  return v;
}

std::string sema::describe(const EvalValue &value, const SymContext &syms) {
  switch (value.kind) {
  case EvalValue::Kind::Unknown:
    return "an unknown value";
  case EvalValue::Kind::Int:
    if (value.intValue.isConstant())
      return "the integer " + syms.str(value.intValue);
    return "an integer (" + syms.str(value.intValue) + ")";
  case EvalValue::Kind::Float:
    return "a number";
  case EvalValue::Kind::Bool:
    return "a boolean";
  case EvalValue::Kind::String:
    return value.stringValue ? "the string \"" + *value.stringValue + "\""
                             : "a string";
  case EvalValue::Kind::Tensor:
    return "a tensor " + str(value.dtype, value.shape, syms);
  case EvalValue::Kind::Tuple:
    return "a tuple";
  case EvalValue::Kind::List:
    return "a list";
  case EvalValue::Kind::Record:
    return "a record";
  case EvalValue::Kind::Absent:
    return "the absent member '" + value.name + "'";
  case EvalValue::Kind::Instance:
    return "the layer " + value.instance->describe();
  case EvalValue::Kind::Layers:
    return "a list of layers";
  case EvalValue::Kind::Builtin:
    return "the builtin '" + value.name + "'";
  case EvalValue::Kind::Module:
    return "the module '" + value.module->name + "'";
  case EvalValue::Kind::Model:
    return "the model '" + value.module->qualify(value.model->getName()) + "'";
  case EvalValue::Kind::Source:
    return "the data source '" +
           value.module->qualify(value.source->getName()) + "'";
  case EvalValue::Kind::Data:
    return "the data source";
  }
  return "a value";
}
