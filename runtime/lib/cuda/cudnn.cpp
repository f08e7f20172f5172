//===- cudnn.cpp - cuDNN's fused attention, loaded when a GPU is used -----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// cuDNN's backend API describes a computation as a graph of operations on
// tensor descriptors; an engine that recognises the graph's pattern runs it
// as one fused kernel. Its scaled-dot-product attention is such a pattern:
// the graphs below are the ones cuDNN's own frontend (cudnn-frontend's
// SDPA nodes) emits for a causal attention with the softmax statistics
// kept for training, and its gradient from them (Cudnn::build). The
// header's comment says what they compute. Sdpa::of, which reads a plan's
// launch, needs no cuDNN and is built everywhere.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/cudnn.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace dtrt::cuda {

bool Sdpa::operator<(const Sdpa &o) const {
  return std::tie(backward, batch, heads, t, d, causal, type, deterministic,
                  strides) < std::tie(o.backward, o.batch, o.heads, o.t, o.d,
                                      o.causal, o.type, o.deterministic,
                                      o.strides);
}

Expected<Sdpa> Sdpa::of(const Thunk &t) {
  if (t.in != Operands::BF16 || t.result != Operands::BF16)
    return Error("its operands or results are f32 in the arena");
  for (int64_t offset : t.p)
    if (offset % 16 != 0)
      return Error("an operand does not start 16-byte aligned");
  Sdpa a;
  a.backward = t.kind == Thunk::AttentionGrad;
  int64_t slices = t.i[0];
  a.t = t.i[1];
  a.d = t.i[2];
  a.causal = t.i[3] != 0;
  a.type = Operands::BF16;
  // The plan's layouts, but the log-sum-exp's (always [slices, t]); none:
  // every operand [slices, t, d].
  std::vector<std::array<int64_t, 4>> layouts;
  size_t operands = a.backward ? 8 : 4;
  for (size_t i = 0; i < t.layouts.size(); ++i)
    if (i != 4)
      layouts.push_back(t.layouts[i]);
  if (layouts.empty())
    layouts.assign(operands, {1, a.t * a.d, 0, a.d});
  if (layouts.size() != operands)
    return Error("its layouts do not match its operands");
  int64_t heads = 1;
  for (const auto &l : layouts)
    heads = std::max(heads, l[0]);
  if (slices % heads != 0)
    return Error(fmt::format("its {} slices are not whole batches of {} heads",
                             slices, heads));
  a.batch = slices / heads;
  a.heads = heads;
  for (const auto &[lh, batch, head, row] : layouts) {
    if (lh == heads)
      a.strides.push_back({batch, head, row});
    else if (lh == 1) // slice s at s * batch: batch b, head h at (bH + h) batch
      a.strides.push_back({batch * heads, batch, row});
    else
      return Error("its operands split their slices into different heads");
  }
  // One head a batch: its stride is the batch's (a layout's 0 for it is
  // not one cuDNN takes).
  if (heads == 1)
    for (auto &stride : a.strides)
      stride[1] = stride[0];
  return a;
}

} // namespace dtrt::cuda

#if DT_HAVE_CUDNN

#include "cudnn_api.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace dtrt::cuda {

namespace {

template <typename F> bool bind(void *library, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

} // namespace

std::string cudnnFailure(const CudnnApi &api, cudnnStatus_t s) {
  std::string message = api.errorString ? api.errorString(s) : "";
  if (api.lastErrorString) {
    char last[512] = {};
    api.lastErrorString(last, sizeof(last));
    if (last[0])
      message += fmt::format(" ({})", last);
  }
  return message.empty() ? fmt::format("status {}", int(s)) : message;
}

CudnnDescriptor::CudnnDescriptor(const CudnnApi &api,
                                 cudnnBackendDescriptorType_t type,
                                 const char *what)
    : api_(api), what_(what) {
  status_ = api.createDescriptor(type, &d_);
  if (status_ != CUDNN_STATUS_SUCCESS)
    failure_ = fmt::format("creating the {} descriptor failed: {}", what,
                           cudnnFailure(api, status_));
}

CudnnDescriptor::~CudnnDescriptor() {
  if (d_)
    api_.destroyDescriptor(d_);
}

CudnnDescriptor &CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                                      cudnnBackendAttributeType_t type,
                                      int64_t count, const void *values) {
  if (!ok())
    return *this;
  status_ = api_.setAttribute(d_, name, type, count, values);
  if (status_ != CUDNN_STATUS_SUCCESS)
    failure_ = fmt::format("setting attribute {} of the {} descriptor "
                           "failed: {}",
                           int(name), what_, cudnnFailure(api_, status_));
  return *this;
}

CudnnDescriptor &CudnnDescriptor::finalize() {
  if (!ok())
    return *this;
  status_ = api_.finalize(d_);
  if (status_ != CUDNN_STATUS_SUCCESS)
    failure_ = fmt::format("finalizing the {} descriptor failed: {}", what_,
                           cudnnFailure(api_, status_));
  return *this;
}

struct Cudnn::Api : CudnnApi {};

Expected<std::unique_ptr<Cudnn>> Cudnn::load() {
  std::vector<std::string> candidates;
  // A library named is the one meant: no other stands in for it.
  if (const char *path = std::getenv("DT_CUDNN_LIBRARY"); path && *path)
    candidates.push_back(path);
  else {
    candidates.push_back("libcudnn.so.9");
    if (const char *home = std::getenv("CUDA_HOME"))
      candidates.push_back(std::string(home) + "/lib64/libcudnn.so.9");
    candidates.push_back("/usr/local/cuda/lib64/libcudnn.so.9");
  }
  std::unique_ptr<Cudnn> c(new Cudnn);
  std::string tried;
  for (const std::string &path : candidates) {
    if ((c->library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)))
      break;
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (!c->library_)
    return Error(fmt::format(
        "cannot load cuDNN 9 (libcudnn.so.9): install it (NVIDIA's cudnn9, "
        "or the nvidia-cudnn-cu{} wheel) and put it on LD_LIBRARY_PATH or "
        "name it in DT_CUDNN_LIBRARY; tried:{}",
        CUDART_VERSION / 1000, tried));
  c->api_ = std::make_unique<Api>();
  Api &api = *c->api_;
  void *l = c->library_;
  if (!bind(l, "cudnnGetVersion", api.getVersion) ||
      !bind(l, "cudnnGetErrorString", api.errorString) ||
      !bind(l, "cudnnCreate", api.create) ||
      !bind(l, "cudnnDestroy", api.destroy) ||
      !bind(l, "cudnnSetStream", api.setStream) ||
      !bind(l, "cudnnBackendCreateDescriptor", api.createDescriptor) ||
      !bind(l, "cudnnBackendDestroyDescriptor", api.destroyDescriptor) ||
      !bind(l, "cudnnBackendSetAttribute", api.setAttribute) ||
      !bind(l, "cudnnBackendGetAttribute", api.getAttribute) ||
      !bind(l, "cudnnBackendFinalize", api.finalize) ||
      !bind(l, "cudnnBackendExecute", api.execute))
    return Error(fmt::format("libcudnn.so.9 lacks an entry point dt uses: {}",
                             dlerror()));
  // Optional: the last error's words, where this version has them.
  bind(l, "cudnnGetLastErrorString", api.lastErrorString);
  size_t version = api.getVersion();
  if (version < 90000 || version >= 100000)
    return Error(
        fmt::format("the cuDNN loaded is version {}, not 9.x", version));
  return c;
}

Expected<std::unique_ptr<Cudnn>> Cudnn::open(cudaStream_t stream) {
  Expected<std::unique_ptr<Cudnn>> loaded = load();
  if (!loaded)
    return loaded.error();
  std::unique_ptr<Cudnn> c = std::move(*loaded);
  const Api &api = *c->api_;
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t s = api.create(&handle);
  c->handle_ = handle; // destroyed with `c`, whatever follows
  if (s == CUDNN_STATUS_SUCCESS)
    s = api.setStream(handle, stream);
  if (s != CUDNN_STATUS_SUCCESS)
    return Error(fmt::format("cuDNN cannot start: {}", cudnnFailure(api, s)));
  return c;
}

Cudnn::~Cudnn() {
  packs_.clear();
  graphs_.clear();
  if (workspace_)
    cudaFree(workspace_);
  if (handle_ && api_)
    api_->destroy(static_cast<cudnnHandle_t>(handle_));
  // The library stays loaded: its engines' kernels may outlive a handle.
}

namespace {

// The tensors' unique ids: the callers' operands as cudnn-frontend's samples
// number them, the scalars and the gradient's buffers after, the virtual
// tensors from 200.
enum Uid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kScale = 6,
  kNegInf = 7,
  kOne = 8,
  kSoftmaxSum = 9,
  kDqAccum = 10,
  kDo = 101,
  kDq = 102,
  kDk = 103,
  kDv = 104,
  kVirtual = 200,
};

using Dims = std::vector<int64_t>;

/// Builds one operation graph: every descriptor it makes lives in `keep`
/// (cuDNN's plans refer to them), and the first failure is reported once
/// the graph is described.
class GraphBuilder {
public:
  GraphBuilder(const CudnnApi &api, size_t version,
               std::vector<std::unique_ptr<CudnnDescriptor>> &keep)
      : api_(api), version_(version), keep_(keep) {}

  CudnnDescriptor &make(cudnnBackendDescriptorType_t type, const char *what) {
    keep_.push_back(std::make_unique<CudnnDescriptor>(api_, type, what));
    return *keep_.back();
  }

  /// A tensor: the caller's (its uid in the variant pack), a by-value
  /// scalar (a host float in the pack) or a virtual one (never stored).
  enum Kind { Stored, ByValue, Virtual };
  CudnnDescriptor &tensor(int64_t uid, cudnnDataType_t type, const Dims &dims,
                          const Dims &strides, Kind kind = Stored) {
    CudnnDescriptor &t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .set(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, int64_t(16));
    if (kind == Virtual)
      t.setBool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, true);
    if (kind == ByValue)
      t.setBool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    return t.finalize();
  }
  /// A virtual tensor with the next free uid.
  CudnnDescriptor &temp(cudnnDataType_t type, const Dims &dims,
                        const Dims &strides) {
    return tensor(nextVirtual_++, type, dims, strides, Virtual);
  }
  CudnnDescriptor &scalar(int64_t uid) {
    return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, ByValue);
  }

  /// y = mode(x[, b][, t]); `prec` is the operation's math precision.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                 const CudnnDescriptor &x, const CudnnDescriptor *b,
                 const CudnnDescriptor &y, const CudnnDescriptor *t = nullptr,
                 int64_t axis = -1) {
    CudnnDescriptor &pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
    if (axis >= 0)
      pw.set(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize();
    CudnnDescriptor &op =
        make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.setFloat(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0f)
        .setFloat(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0f);
    ops_.push_back(&op.finalize());
  }
  /// c = a b (batched over the first two dimensions), summed in f32.
  void matmul(const CudnnDescriptor &a, const CudnnDescriptor &b,
              const CudnnDescriptor &c) {
    CudnnDescriptor &mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize();
    CudnnDescriptor &op =
        make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    ops_.push_back(&op.finalize());
  }
  /// y = the rows' max or sum of x (y's dimensions say which are reduced).
  void reduction(cudnnReduceTensorOp_t reduce, const CudnnDescriptor &x,
                 const CudnnDescriptor &y) {
    CudnnDescriptor &r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
        .set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
             1, &reduce);
    // The attribute exists from 9.11 on.
    if (version_ >= 91100)
      r.setBool(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, false);
    r.finalize();
    CudnnDescriptor &op =
        make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    ops_.push_back(&op.finalize());
  }
  /// y = x seen with other dimensions and strides (a transpose's view).
  void reshape(const CudnnDescriptor &x, const CudnnDescriptor &y) {
    CudnnDescriptor &op =
        make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape op");
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    ops_.push_back(&op.finalize());
  }

  /// The graph of the operations so far, finalized.
  CudnnDescriptor &graph(cudnnHandle_t handle) {
    std::vector<cudnnBackendDescriptor_t> ops;
    for (CudnnDescriptor *op : ops_)
      ops.push_back(op->get());
    CudnnDescriptor &g =
        make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    g.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
          int64_t(ops.size()), ops.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    return g.finalize();
  }

  /// The first failure of any descriptor made, or "".
  std::string failure() const {
    for (const auto &d : keep_)
      if (!d->ok())
        return d->failure();
    return "";
  }

private:
  const CudnnApi &api_;
  size_t version_;
  std::vector<std::unique_ptr<CudnnDescriptor>> &keep_;
  std::vector<CudnnDescriptor *> ops_;
  int64_t nextVirtual_ = kVirtual;
};

int64_t roundUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

} // namespace

/// A prepared attention: its descriptors (alive as long as its plan), the
/// plan, and what its calls' variant packs need.
struct Cudnn::Graph {
  Sdpa a;
  std::vector<std::unique_ptr<CudnnDescriptor>> keep;
  CudnnDescriptor *plan = nullptr;
  /// cuDNN's workspace, and before it (the gradient's) dQ's f32 sums and
  /// the rows' dO . O, which the graph names as tensors of its own.
  int64_t planWorkspace = 0, dqAccumBytes = 0, softmaxSumBytes = 0;
  /// The by-value scalars: the variant pack points at these.
  float scale = 0, negInf = 0, one = 1;
};

Status Cudnn::build(const Sdpa &a, Graph &g) {
  const CudnnApi &api = *api_;
  size_t version = api.getVersion();
  GraphBuilder gb(api, version, g.keep);
  cudnnDataType_t io =
      a.type == Operands::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const int64_t b = a.batch, h = a.heads, s = a.t, d = a.d;
  const Dims ss{b, h, s, s}, ssStrides{h * s * s, s * s, s, 1};
  const Dims row{b, h, s, 1}, rowStrides{h * s, s, 1, 1};
  // Operand i as [b, h, s, d], or transposed to [b, h, d, s].
  auto operand = [&](int64_t uid, size_t i,
                     bool transposed = false) -> CudnnDescriptor & {
    const auto &[sb, sh, sr] = a.strides[i];
    return transposed ? gb.tensor(uid, io, {b, h, d, s}, {sb, sh, 1, sr})
                      : gb.tensor(uid, io, {b, h, s, d}, {sb, sh, sr, 1});
  };
  g.scale = 1.0f / std::sqrt(float(d));
  g.negInf = -std::numeric_limits<float>::infinity();
  CudnnDescriptor &scale = gb.scalar(kScale);
  CudnnDescriptor &stats = gb.tensor(kStats, CUDNN_DATA_FLOAT, row, rowStrides);
  auto f32 = [&](const Dims &dims, const Dims &strides) -> CudnnDescriptor & {
    return gb.temp(CUDNN_DATA_FLOAT, dims, strides);
  };
  // The causal mask: x where the row's index is at least the column's,
  // else -inf.
  auto causal = [&](CudnnDescriptor &x) -> CudnnDescriptor & {
    if (!a.causal)
      return x;
    CudnnDescriptor &negInf = gb.scalar(kNegInf);
    CudnnDescriptor &rows = gb.temp(CUDNN_DATA_INT32, ss, ssStrides);
    CudnnDescriptor &cols = gb.temp(CUDNN_DATA_INT32, ss, ssStrides);
    CudnnDescriptor &keep = gb.temp(CUDNN_DATA_BOOLEAN, ss, ssStrides);
    CudnnDescriptor &y = f32(ss, ssStrides);
    gb.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, rows,
                 nullptr, 2);
    gb.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, cols,
                 nullptr, 3);
    gb.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, rows, &cols, keep);
    gb.pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, &negInf, y,
                 &keep);
    return y;
  };

  if (!a.backward) {
    CudnnDescriptor &q = operand(kQ, 0), &kt = operand(kK, 1, true),
                    &v = operand(kV, 2), &o = operand(kO, 3);
    CudnnDescriptor &s0 = f32(ss, ssStrides), &s1 = f32(ss, ssStrides);
    gb.matmul(q, kt, s0);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s0, &scale, s1);
    CudnnDescriptor &s2 = causal(s1);
    // Softmax, keeping each row's max + log(sum) as the statistics.
    CudnnDescriptor &m = f32(row, rowStrides), &shifted = f32(ss, ssStrides),
                    &e = f32(ss, ssStrides), &l = f32(row, rowStrides),
                    &logL = f32(row, rowStrides);
    CudnnDescriptor &p = gb.temp(io, ss, ssStrides);
    gb.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, m);
    gb.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s2, &m, shifted);
    gb.pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, nullptr, e);
    gb.reduction(CUDNN_REDUCE_TENSOR_ADD, e, l);
    gb.pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, l, nullptr, logL);
    gb.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, &logL, stats);
    gb.pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, &l, p);
    gb.matmul(p, v, o);
  } else {
    CudnnDescriptor &q = operand(kQ, 0), &kt = operand(kK, 1, true),
                    &vt = operand(kV, 2, true), &o = operand(kO, 3),
                    &dO = operand(kDo, 4), &dQ = operand(kDq, 5),
                    &dK = operand(kDk, 6), &dV = operand(kDv, 7);
    CudnnDescriptor &one = gb.scalar(kOne);
    CudnnDescriptor &softmaxSum =
        gb.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, row, rowStrides);
    g.softmaxSumBytes = roundUp(b * h * s * 4);
    // D = rowsum(dO o O).
    CudnnDescriptor &t0 = f32({b, h, s, d}, {h * s * d, s * d, h * d, 1}),
                    &t1 = f32(row, rowStrides);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dO, &o, t0);
    gb.reduction(CUDNN_REDUCE_TENSOR_ADD, t0, t1);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t1, &one, softmaxSum);
    // P = exp(mask(Q K^T scale - lse)).
    CudnnDescriptor &s0 = f32(ss, ssStrides), &s1 = f32(ss, ssStrides),
                    &s2 = f32(ss, ssStrides);
    gb.matmul(q, kt, s0);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s0, &scale, s1);
    gb.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s1, &stats, s2);
    CudnnDescriptor &s3 = causal(s2);
    CudnnDescriptor &p = f32(ss, ssStrides);
    gb.pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s3, nullptr, p);
    // dV = P^T dO, through a view of P as [b, h, s_kv, s_q].
    const Dims tss{b, h, s, s}, tssStrides{h * s * s, s * s, 1, s};
    CudnnDescriptor &pt = gb.temp(io, tss, tssStrides);
    gb.reshape(p, pt);
    gb.matmul(pt, dO, dV);
    // dS = (dO V^T - D) o P scale.
    CudnnDescriptor &dP = f32(ss, ssStrides), &t3 = f32(ss, ssStrides),
                    &t4 = f32(ss, ssStrides), &dS = f32(ss, ssStrides);
    gb.matmul(dO, vt, dP);
    gb.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dP, &softmaxSum, t3);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t3, &p, t4);
    gb.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, t4, &scale, dS);
    // dK = dS^T Q.
    CudnnDescriptor &dSt = gb.temp(io, tss, tssStrides);
    gb.reshape(dS, dSt);
    gb.matmul(dSt, q, dK);
    // dQ = dS K, summed in f32 and then converted: K seen again as
    // [b, h, s, d] (cuDNN's frontend gives the view f32's type).
    const auto &[kb, kh, kr] = a.strides[1];
    CudnnDescriptor &kView = f32({b, h, s, d}, {kb, kh, kr, 1});
    gb.reshape(kt, kView);
    if (a.deterministic) {
      gb.matmul(dS, kView, dQ);
    } else {
      CudnnDescriptor &dqAccum = gb.tensor(
          kDqAccum, CUDNN_DATA_FLOAT, {b, h, s, d}, {h * s * d, s * d, d, 1});
      g.dqAccumBytes = roundUp(b * h * s * d * 4);
      gb.matmul(dS, kView, dqAccum);
      gb.pointwise(CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dqAccum, nullptr,
                   dQ);
    }
  }
  if (std::string why = gb.failure(); !why.empty())
    return Error(why);
  // Without a handle (describe()), the operations are all there is to
  // check: the graph and its plans need a GPU.
  if (!handle_)
    return Status::ok();
  CudnnDescriptor &opGraph = gb.graph(static_cast<cudnnHandle_t>(handle_));
  if (!opGraph.ok())
    return Error(opGraph.failure());

  // The heuristic's engine configurations, best first, then the fallback
  // heuristic's; the first whose plan finalizes is kept (a configuration
  // may still refuse the graph).
  std::string refusals;
  int64_t tried = 0;
  for (cudnnBackendHeurMode_t mode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    CudnnDescriptor &heur =
        gb.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, opGraph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
        .finalize();
    int64_t count = 0;
    cudnnStatus_t st =
        heur.ok() ? api.getAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                     nullptr)
                  : heur.status();
    if (st != CUDNN_STATUS_SUCCESS) {
      if (refusals.empty())
        refusals = heur.ok() ? fmt::format("its heuristics failed: {}",
                                           cudnnFailure(api, st))
                             : heur.failure();
      continue;
    }
    std::vector<CudnnDescriptor *> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.push_back(
          &gb.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
      raw.push_back(configs.back()->get());
    }
    int64_t returned = 0;
    if (count > 0)
      st = api.getAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                            raw.data());
    for (int64_t i = 0; st == CUDNN_STATUS_SUCCESS && i < returned; ++i) {
      ++tried;
      CudnnDescriptor &plan =
          gb.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[size_t(i)])
          .finalize();
      if (!plan.ok()) {
        if (refusals.empty())
          refusals = plan.failure();
        continue;
      }
      int64_t bytes = 0, n = 0;
      cudnnStatus_t ws =
          api.getAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                           CUDNN_TYPE_INT64, 1, &n, &bytes);
      if (ws != CUDNN_STATUS_SUCCESS)
        return Error(fmt::format("cuDNN cannot say its plan's workspace: {}",
                                 cudnnFailure(api, ws)));
      g.plan = &plan;
      g.planWorkspace = roundUp(bytes);
      return Status::ok();
    }
  }
  return Error(fmt::format(
      "none of cuDNN's {} engine configurations takes "
      "this attention{}",
      tried,
      refusals.empty() ? "" : fmt::format(" (the first: {})", refusals)));
}

Expected<int> Cudnn::prepare(const Sdpa &a) {
  auto found = planOf_.find(a);
  if (found != planOf_.end())
    return found->second;
  size_t version = api_->getVersion();
  // What cuDNN's frontend validates for this graph, said here in dt's
  // words rather than as a refused engine.
  if (version < 91002)
    return Error(fmt::format("{} is older than 9.10.2, the first whose "
                             "attention graphs dt builds",
                             this->version()));
  if (a.d % 8 != 0 || a.d > 128)
    return Error(fmt::format("heads {} wide (cuDNN's attention takes "
                             "multiples of 8 up to 128 on every GPU)",
                             a.d));
  // Versions up to 9.15.0 need a padding mask in the gradient's graph when
  // the keys are not a multiple of 128, which dt does not build.
  if (a.backward && version <= 91500 && a.t % 128 != 0)
    return Error(fmt::format("{} needs sequences of a multiple of 128 for "
                             "the gradient, not {}",
                             this->version(), a.t));
  for (const auto &stride : a.strides)
    for (int64_t x : stride)
      if (x % 8 != 0)
        return Error("an operand's rows are not 16-byte aligned");
  auto g = std::make_unique<Graph>();
  g->a = a;
  if (Status s = build(a, *g); !s)
    return s.error();
  graphs_.push_back(std::move(g));
  int plan = int(graphs_.size() - 1);
  planOf_[a] = plan;
  return plan;
}

Status Cudnn::describe(const Sdpa &a) {
  Expected<std::unique_ptr<Cudnn>> loaded = load();
  if (!loaded)
    return loaded.error();
  Graph g;
  g.a = a;
  return (*loaded)->build(a, g);
}

Status Cudnn::allocateWorkspace() {
  int64_t bytes = 0;
  for (const auto &g : graphs_)
    bytes = std::max(bytes,
                     g->dqAccumBytes + g->softmaxSumBytes + g->planWorkspace);
  if (bytes <= workspaceBytes_)
    return Status::ok();
  if (workspace_)
    cudaFree(workspace_);
  workspace_ = nullptr;
  cudaError_t e = cudaMalloc(&workspace_, size_t(bytes));
  if (e != cudaSuccess)
    return Error(fmt::format("cannot allocate cuDNN attention's workspace "
                             "of {} bytes: {}",
                             bytes, cudaGetErrorString(e)));
  workspaceBytes_ = bytes;
  packs_.clear(); // they point at the old workspace
  return Status::ok();
}

Status Cudnn::run(int plan, const std::vector<void *> &pointers) {
  const Graph &g = *graphs_[size_t(plan)];
  auto key = std::make_pair(plan, pointers);
  auto found = packs_.find(key);
  if (found == packs_.end()) {
    // The callers' operands, the scalars (host floats), and for the
    // gradient its two buffers at the workspace's start.
    std::vector<int64_t> uids =
        g.a.backward
            ? std::vector<int64_t>{kQ, kK, kV, kO, kStats, kDo, kDq, kDk, kDv}
            : std::vector<int64_t>{kQ, kK, kV, kO, kStats};
    if (pointers.size() != uids.size())
      return Error(fmt::format("cuDNN's attention takes {} pointers, not {}",
                               uids.size(), pointers.size()));
    std::vector<void *> data = pointers;
    char *ws = static_cast<char *>(workspace_);
    uids.push_back(kScale);
    data.push_back(const_cast<float *>(&g.scale));
    if (g.a.causal) {
      uids.push_back(kNegInf);
      data.push_back(const_cast<float *>(&g.negInf));
    }
    if (g.a.backward) {
      uids.insert(uids.end(), {kOne, kSoftmaxSum});
      data.insert(data.end(), {static_cast<void *>(const_cast<float *>(&g.one)),
                               static_cast<void *>(ws + g.dqAccumBytes)});
      if (!g.a.deterministic) {
        uids.push_back(kDqAccum);
        data.push_back(ws);
      }
      ws += g.dqAccumBytes + g.softmaxSumBytes;
    }
    auto pack = std::make_unique<CudnnDescriptor>(
        *api_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    void *workspace = g.planWorkspace > 0 ? ws : nullptr;
    pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
              &workspace)
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             int64_t(data.size()), data.data())
        .set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
        .finalize();
    if (!pack->ok())
      return Error(pack->failure());
    found = packs_.emplace(key, std::move(pack)).first;
  }
  cudnnStatus_t s = api_->execute(static_cast<cudnnHandle_t>(handle_),
                                  g.plan->get(), found->second->get());
  if (s != CUDNN_STATUS_SUCCESS)
    return Error(
        fmt::format("cuDNN's attention failed: {}", cudnnFailure(*api_, s)));
  return Status::ok();
}

std::string Cudnn::version() const {
  size_t v = api_->getVersion();
  return fmt::format("cuDNN {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

size_t Cudnn::plans() const { return graphs_.size(); }

} // namespace dtrt::cuda

#else // !DT_HAVE_CUDNN

namespace dtrt::cuda {

// Built where the CUDA toolkit has no cuDNN headers: dt's kernels only.
struct Cudnn::Api {};
class CudnnDescriptor {};
struct Cudnn::Graph {};

Expected<std::unique_ptr<Cudnn>> Cudnn::open(cudaStream_t) {
  return Error("this runtime was built without cuDNN's headers");
}
Status Cudnn::describe(const Sdpa &) {
  return Error("this runtime was built without cuDNN's headers");
}
Cudnn::~Cudnn() = default;
std::string Cudnn::version() const { return ""; }
Expected<int> Cudnn::prepare(const Sdpa &) {
  return Error("this runtime was built without cuDNN's headers");
}
Status Cudnn::allocateWorkspace() { return Status::ok(); }
Status Cudnn::run(int, const std::vector<void *> &) {
  return Error("this runtime was built without cuDNN's headers");
}
size_t Cudnn::plans() const { return 0; }

} // namespace dtrt::cuda

#endif // DT_HAVE_CUDNN
