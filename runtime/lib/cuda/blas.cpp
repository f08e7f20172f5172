//===- blas.cpp - cuBLASLt and cuBLAS, loaded when a GPU is used ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/blas.h"

#include "dtk/cuda_kernels.h" // dtk_cuda_fill_rows_f32

#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace dtrt::cuda {

ColumnMajor columnMajor(const Product &p) {
  ColumnMajor cm;
  cm.m = p.n;
  cm.n = p.m;
  cm.k = p.k;
  // Our B, row-major K x N (N x K when transposed), is column-major N x K
  // (K x N) with the same leading dimension.
  // A row-major matrix's row pitch is its column-major leading dimension.
  int64_t ldb = p.ldb      ? p.ldb
                : p.transB ? p.k
                           : p.n,
          lda = p.lda      ? p.lda
                : p.transA ? p.m
                           : p.k,
          ldc = p.ldc ? p.ldc : p.n;
  cm.first = {p.transB ? p.k : p.n, p.transB ? p.n : p.k, ldb, p.k * p.n,
              p.transB};
  cm.second = {p.transA ? p.m : p.k, p.transA ? p.k : p.m, lda, p.m * p.k,
               p.transA};
  cm.result = {p.n, p.m, ldc, p.m * p.n, false};
  return cm;
}

nlohmann::json algoToJson(const cublasLtMatmulAlgo_t &algo) {
  nlohmann::json words = nlohmann::json::array();
  for (uint64_t w : algo.data)
    words.push_back(w);
  return words;
}

std::optional<cublasLtMatmulAlgo_t> algoFromJson(const nlohmann::json &j) {
  cublasLtMatmulAlgo_t algo{};
  constexpr size_t words = sizeof(algo.data) / sizeof(algo.data[0]);
  if (!j.is_array() || j.size() != words)
    return std::nullopt;
  for (size_t i = 0; i < words; ++i) {
    if (!j[i].is_number_unsigned())
      return std::nullopt;
    algo.data[i] = j[i].get<uint64_t>();
  }
  return algo;
}

Expected<ProductEngine> productEngineFromEnvironment() {
  const char *value = std::getenv("DTRT_CUDA_PRODUCTS");
  std::string v = value ? value : "";
  if (v.empty() || v == "tuned")
    return ProductEngine::Tuned;
  if (v == "lt")
    return ProductEngine::Lt;
  if (v == "cublas")
    return ProductEngine::Classic;
  return Error(fmt::format("DTRT_CUDA_PRODUCTS={} is not one of tuned (the "
                           "default), lt or cublas",
                           v));
}

/// The classic API's entry points, by their exported names.
struct Blas::Api {
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*setStream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*setMathMode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*setWorkspace)(cublasHandle_t, void *, size_t);
  const char *(*statusString)(cublasStatus_t);
  cublasStatus_t (*sgemmStridedBatched)(cublasHandle_t, cublasOperation_t,
                                        cublasOperation_t, int, int, int,
                                        const float *, const float *, int,
                                        long long, const float *, int,
                                        long long, const float *, float *, int,
                                        long long, int);
  cublasStatus_t (*gemmStridedBatchedEx)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
      const void *, const void *, cudaDataType, int, long long, const void *,
      cudaDataType, int, long long, const void *, void *, cudaDataType, int,
      long long, int, cublasComputeType_t, cublasGemmAlgo_t);
};

/// cuBLASLt's.
struct Blas::LtApi {
  void *library = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasStatus_t (*create)(cublasLtHandle_t *);
  cublasStatus_t (*destroy)(cublasLtHandle_t);
  cublasStatus_t (*descCreate)(cublasLtMatmulDesc_t *, cublasComputeType_t,
                               cudaDataType_t);
  cublasStatus_t (*descDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*descSet)(cublasLtMatmulDesc_t,
                            cublasLtMatmulDescAttributes_t, const void *,
                            size_t);
  cublasStatus_t (*layoutCreate)(cublasLtMatrixLayout_t *, cudaDataType,
                                 uint64_t, uint64_t, int64_t);
  cublasStatus_t (*layoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*layoutSet)(cublasLtMatrixLayout_t,
                              cublasLtMatrixLayoutAttribute_t, const void *,
                              size_t);
  cublasStatus_t (*prefCreate)(cublasLtMatmulPreference_t *);
  cublasStatus_t (*prefDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*prefSet)(cublasLtMatmulPreference_t,
                            cublasLtMatmulPreferenceAttributes_t, const void *,
                            size_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t[], int *);
  // Optional: without them nothing is cached.
  cublasStatus_t (*algoCheck)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              const cublasLtMatmulAlgo_t *,
                              cublasLtMatmulHeuristicResult_t *) = nullptr;
  size_t (*version)() = nullptr;
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,
                           const void *, cublasLtMatrixLayout_t, const void *,
                           cublasLtMatrixLayout_t, const void *, const void *,
                           cublasLtMatrixLayout_t, void *,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                           void *, size_t, cudaStream_t);
};

/// How one shape is computed: cuBLASLt's descriptors and algorithm, or the
/// classic API where cuBLASLt has none.
struct Blas::Choice {
  LtApi *lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, result = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool useLt = false;
  const char *engine = "cuBLAS";

  Choice() = default;
  Choice(const Choice &) = delete;
  ~Choice() {
    if (!lt)
      return;
    for (cublasLtMatrixLayout_t l : {first, second, result})
      if (l)
        lt->layoutDestroy(l);
    if (desc)
      lt->descDestroy(desc);
  }
};

namespace {

template <typename F> bool bind(void *library, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

/// dlopen's first success among the toolkit's usual places, or why none.
void *openLibrary(const std::string &soname, std::string &tried) {
  std::vector<std::string> candidates{soname};
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/lib64/" + soname);
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
  for (const std::string &path : candidates) {
    if (void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
      return library;
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  return nullptr;
}

cudaDataType dataType(Operands o) {
  return o == Operands::BF16  ? CUDA_R_16BF
         : o == Operands::F16 ? CUDA_R_16F
                              : CUDA_R_32F;
}

/// TF32 keeps 10 of f32's 23 mantissa bits: exact for 16-bit values only,
/// which is what the plan's flag promises; 16-bit operands multiply exactly
/// into the f32 sums.
cublasComputeType_t computeType(Operands o) {
  return o == Operands::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                             : CUBLAS_COMPUTE_32F;
}

/// The largest power of two (up to 256, cudaMalloc's) dividing `p`.
int alignment(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  return v == 0 ? 256 : int(std::min<uintptr_t>(v & (~v + 1), 256));
}

} // namespace

Expected<std::unique_ptr<Blas>> Blas::open(cudaStream_t stream,
                                           ProductEngine engine) {
  // The major version of the toolkit dt was built with: its cuBLAS's ABI.
  int major = CUDA_VERSION / 1000;
  std::string soname = fmt::format("libcublas.so.{}", major), tried;
  std::unique_ptr<Blas> blas(new Blas);
  blas->stream_ = stream;
  blas->engine_ = engine;
  blas->library_ = openLibrary(soname, tried);
  if (!blas->library_)
    return Error(fmt::format(
        "cannot load cuBLAS ({}), which the GPU backend's matrix products "
        "need: install the CUDA {} toolkit's libraries or put them on "
        "LD_LIBRARY_PATH; tried:{}",
        soname, major, tried));
  blas->api_ = std::make_unique<Api>();
  Api &api = *blas->api_;
  if (!bind(blas->library_, "cublasCreate_v2", api.create) ||
      !bind(blas->library_, "cublasDestroy_v2", api.destroy) ||
      !bind(blas->library_, "cublasSetStream_v2", api.setStream) ||
      !bind(blas->library_, "cublasSetMathMode", api.setMathMode) ||
      !bind(blas->library_, "cublasSetWorkspace_v2", api.setWorkspace) ||
      !bind(blas->library_, "cublasGetStatusString", api.statusString) ||
      !bind(blas->library_, "cublasSgemmStridedBatched",
            api.sgemmStridedBatched) ||
      !bind(blas->library_, "cublasGemmStridedBatchedEx",
            api.gemmStridedBatchedEx))
    return Error(
        fmt::format("{} lacks an entry point dt uses: {}", soname, dlerror()));
  cublasStatus_t s = api.create(&blas->handle_);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.setStream(blas->handle_, stream);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.setMathMode(blas->handle_, CUBLAS_DEFAULT_MATH);
  // A workspace of its own (32 MiB, what cuBLAS advises for Hopper), which
  // both libraries share on the one stream: a product captured in a CUDA
  // graph must not allocate one.
  if (s == CUBLAS_STATUS_SUCCESS) {
    blas->workspaceBytes_ = size_t(32) << 20;
    cudaError_t e = cudaMalloc(&blas->workspace_, blas->workspaceBytes_);
    if (e != cudaSuccess)
      return Error(fmt::format("cannot allocate cuBLAS's workspace: {}",
                               cudaGetErrorString(e)));
    s = api.setWorkspace(blas->handle_, blas->workspace_,
                         blas->workspaceBytes_);
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    return Error(fmt::format("cuBLAS cannot start: {}", api.statusString(s)));
  if (engine == ProductEngine::Classic)
    return blas;

  std::string ltName = fmt::format("libcublasLt.so.{}", major);
  auto lt = std::make_unique<LtApi>();
  lt->library = openLibrary(ltName, tried);
  if (!lt->library)
    return Error(fmt::format(
        "cannot load cuBLASLt ({}), which the GPU backend's matrix products "
        "use (DTRT_CUDA_PRODUCTS=cublas does without it); tried:{}",
        ltName, tried));
  if (!bind(lt->library, "cublasLtCreate", lt->create) ||
      !bind(lt->library, "cublasLtDestroy", lt->destroy) ||
      !bind(lt->library, "cublasLtMatmulDescCreate", lt->descCreate) ||
      !bind(lt->library, "cublasLtMatmulDescDestroy", lt->descDestroy) ||
      !bind(lt->library, "cublasLtMatmulDescSetAttribute", lt->descSet) ||
      !bind(lt->library, "cublasLtMatrixLayoutCreate", lt->layoutCreate) ||
      !bind(lt->library, "cublasLtMatrixLayoutDestroy", lt->layoutDestroy) ||
      !bind(lt->library, "cublasLtMatrixLayoutSetAttribute", lt->layoutSet) ||
      !bind(lt->library, "cublasLtMatmulPreferenceCreate", lt->prefCreate) ||
      !bind(lt->library, "cublasLtMatmulPreferenceDestroy", lt->prefDestroy) ||
      !bind(lt->library, "cublasLtMatmulPreferenceSetAttribute", lt->prefSet) ||
      !bind(lt->library, "cublasLtMatmulAlgoGetHeuristic", lt->heuristic) ||
      !bind(lt->library, "cublasLtMatmul", lt->matmul))
    return Error(
        fmt::format("{} lacks an entry point dt uses: {}", ltName, dlerror()));
  if ((s = lt->create(&lt->handle)) != CUBLAS_STATUS_SUCCESS)
    return Error(fmt::format("cuBLASLt cannot start: {}", api.statusString(s)));
  if (!bind(lt->library, "cublasLtMatmulAlgoCheck", lt->algoCheck) ||
      !bind(lt->library, "cublasLtGetVersion", lt->version))
    lt->algoCheck = nullptr;
  cudaDeviceProp prop{};
  int device = 0;
  if (lt->algoCheck && cudaGetDevice(&device) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    blas->identity_ = fmt::format("{} | cuBLASLt {}", prop.name, lt->version());
  blas->lt_ = std::move(lt);
  return blas;
}

Blas::~Blas() {
  choices_.clear();
  if (lt_ && lt_->handle)
    lt_->destroy(lt_->handle);
  if (handle_)
    api_->destroy(handle_);
  if (workspace_)
    cudaFree(workspace_);
  // The libraries stay loaded: their own teardown runs at exit.
}

Blas::Key Blas::keyOf(const Product &p, const void *a, const void *b,
                      const void *c, const void *bias, const void *aux) const {
  return Key{p.batch, p.m, p.n, p.k,
             int(p.transA) | int(p.transB) << 1 | int(p.accumulate) << 2,
             int(p.operands), int(p.result),
             // 0: none; 1: f32 (as before 16-bit biases were); 2 on: 16-bit.
             bias ? 1 + int(p.bias) : 0, alignment(a), alignment(b),
             alignment(c), bias ? alignment(bias) : 0, p.lda, p.ldb, p.ldc,
             int(p.epilogue), aux ? alignment(aux) : 0};
}

Expected<Blas::Choice *> Blas::choose(const Product &p, const void *a,
                                      const void *b, void *c, const void *bias,
                                      void *aux, bool timed) {
  Key key = keyOf(p, a, b, c, bias, aux);
  auto found = choices_.find(key);
  if (found != choices_.end())
    return found->second.get();
  auto choice = std::make_unique<Choice>();
  LtApi &lt = *lt_;
  choice->lt = &lt;
  ColumnMajor cm = columnMajor(p);
  cudaDataType in = dataType(p.operands), out = dataType(p.result);
  cublasStatus_t s =
      lt.descCreate(&choice->desc, computeType(p.operands), CUDA_R_32F);
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto &value) {
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.descSet(choice->desc, attr, &value, sizeof(value));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA,
      int32_t(cm.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N));
  set(CUBLASLT_MATMUL_DESC_TRANSB,
      int32_t(cm.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N));
  cublasLtEpilogue_t epilogue =
      p.epilogue == Epilogue::Gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                           : CUBLASLT_EPILOGUE_GELU_AUX)
      : p.epilogue == Epilogue::GeluGrad ? CUBLASLT_EPILOGUE_DGELU
      : p.epilogue == Epilogue::BiasGrad ? CUBLASLT_EPILOGUE_BGRADB
      : bias                             ? CUBLASLT_EPILOGUE_BIAS
                                         : CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(epilogue));
  if (bias) {
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(dataType(p.bias)));
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void *>(bias));
  }
  // A bias's gradient goes where a bias would come from, in f32 (the sums
  // unrounded: the program rounds them as it rounds the region's).
  if (p.epilogue == Epilogue::BiasGrad) {
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_32F));
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void *>(aux));
  }
  // The pre-activation: C's type and rows (column-major: its leading
  // dimension is our row's length).
  if (p.epilogue == Epilogue::Gelu || p.epilogue == Epilogue::GeluGrad) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void *>(aux));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(p.n));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, int32_t(out));
  }
  auto layout = [&](cublasLtMatrixLayout_t &l, cudaDataType type,
                    const ColumnMajor::Matrix &x) {
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.layoutCreate(&l, type, uint64_t(x.rows), uint64_t(x.cols), x.ld);
    if (p.batch > 1) {
      int32_t count = int32_t(p.batch);
      int64_t stride = x.stride;
      if (s == CUBLAS_STATUS_SUCCESS)
        s = lt.layoutSet(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                         sizeof(count));
      if (s == CUBLAS_STATUS_SUCCESS)
        s = lt.layoutSet(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                         &stride, sizeof(stride));
    }
  };
  layout(choice->first, in, cm.first);
  layout(choice->second, in, cm.second);
  layout(choice->result, out, cm.result);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Error(fmt::format("describing a product of {} x {} x {} to "
                             "cuBLASLt failed: {}",
                             p.m, p.n, p.k, api_->statusString(s)));

  // The heuristic's candidates for these alignments, best guess first.
  cublasLtMatmulPreference_t pref = nullptr;
  s = lt.prefCreate(&pref);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.prefSet(pref, attr, &value, sizeof(value));
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(workspaceBytes_));
  // Our A and B are cuBLAS's B and A.
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(alignment(b)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(alignment(a)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(alignment(c)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(alignment(c)));
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t found8[kCandidates] = {};
  int count = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.heuristic(lt.handle, choice->desc, choice->first, choice->second,
                     choice->result, choice->result, pref,
                     timed ? kCandidates : 1, found8, &count);
  if (pref)
    lt.prefDestroy(pref);
  std::vector<const cublasLtMatmulAlgo_t *> candidates;
  if (s == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < count; ++i)
      if (found8[i].state == CUBLAS_STATUS_SUCCESS &&
          found8[i].workspaceSize <= workspaceBytes_)
        candidates.push_back(&found8[i].algo);
  // No candidate (an unusual alignment or epilogue): the classic API
  // computes this shape.
  if (!candidates.empty()) {
    choice->useLt = true;
    choice->engine = "cuBLASLt";
    choice->algo = *candidates.front();
  }
  // The choice an earlier run timed for this product, where cuBLASLt still
  // takes it.
  std::string cacheKey;
  if (timed && candidates.size() > 1 && !identity_.empty()) {
    const auto &[b0, m0, n0, k0, flags, in0, out0, bias0, al, bl, cl, biasl,
                 lda0, ldb0, ldc0, epilogue0, auxl] = key;
    cacheKey = fmt::format("{} | product {} x {} x {} x {} flags {} types {} "
                           "{} bias {} aligned {} {} {} {} pitches {} {} {}",
                           identity_, b0, m0, n0, k0, flags, in0, out0, bias0,
                           al, bl, cl, biasl, lda0, ldb0, ldc0);
    // (Keys of products without an epilogue read as before.)
    if (epilogue0)
      cacheKey += fmt::format(" epilogue {} aligned {}", epilogue0, auxl);
    auto entry = saved_.find(cacheKey);
    cublasLtMatmulHeuristicResult_t check{};
    std::optional<cublasLtMatmulAlgo_t> algo;
    if (entry != saved_.end() && entry->is_object() && entry->contains("algo"))
      algo = algoFromJson((*entry)["algo"]);
    if (algo &&
        lt.algoCheck(lt.handle, choice->desc, choice->first, choice->second,
                     choice->result, choice->result, &*algo,
                     &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspaceBytes_) {
      choice->algo = *algo;
      choice->engine = "cuBLASLt, tuned";
      ++reused_;
      return choices_.emplace(key, std::move(choice)).first->second.get();
    }
  }
  if (timed && candidates.size() > 1) {
    cudaEvent_t begin = nullptr, end = nullptr;
    cudaError_t e = cudaEventCreate(&begin);
    if (e == cudaSuccess)
      e = cudaEventCreate(&end);
    float best = -1;
    cublasLtMatmulAlgo_t fastest{};
    for (const cublasLtMatmulAlgo_t *algo : candidates) {
      // One untimed run (the first may load the kernel), then three timed.
      choice->algo = *algo;
      constexpr int kRuns = 3;
      bool ran = e == cudaSuccess && runLt(*choice, p, a, b, c, bias, aux);
      ran = ran && cudaEventRecord(begin, stream_) == cudaSuccess;
      for (int r = 0; ran && r < kRuns; ++r)
        ran = bool(runLt(*choice, p, a, b, c, bias, aux));
      float ms = 0;
      ran = ran && cudaEventRecord(end, stream_) == cudaSuccess &&
            cudaEventSynchronize(end) == cudaSuccess &&
            cudaEventElapsedTime(&ms, begin, end) == cudaSuccess;
      if (ran && (best < 0 || ms < best)) {
        best = ms;
        fastest = *algo;
      }
      cudaGetLastError(); // a candidate that failed is not the step's error
    }
    if (begin)
      cudaEventDestroy(begin);
    if (end)
      cudaEventDestroy(end);
    if (best < 0) {
      // cuBLASLt offered algorithms it cannot run (an epilogue it takes
      // only in some layouts): the classic API computes this shape.
      fallBack(*choice, p, "none of its candidates ran");
      return choices_.emplace(key, std::move(choice)).first->second.get();
    }
    choice->algo = fastest;
    choice->engine = "cuBLASLt, tuned";
    if (!cacheKey.empty())
      timed_[cacheKey] = {{"gpu", identity_}, {"algo", algoToJson(fastest)}};
  }
  return choices_.emplace(key, std::move(choice)).first->second.get();
}

void Blas::fallBack(Choice &choice, const Product &p, const char *why) {
  choice.useLt = false;
  choice.engine = "cuBLAS";
  static const char *const epilogues[] = {
      "", " with GELU", " with GELU's gradient", " with a bias's gradient"};
  fmt::print(stderr,
             "note: cuBLASLt could not compute a product of {} x {} x {}{} "
             "({}); cuBLAS's classic API does{}\n",
             p.m, p.n, p.k, epilogues[int(p.epilogue)], why,
             p.epilogue == Epilogue::None
                 ? ""
                 : ", and a kernel finishes the epilogue");
}

Status Blas::runLt(const Choice &choice, const Product &p, const void *a,
                   const void *b, void *c, const void *bias, void *aux) {
  const float one = 1.0f, zero = 0.0f;
  const float *beta = p.accumulate ? &one : &zero;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  // The shape's descriptor serves every bias (and auxiliary matrix) of its
  // alignment.
  if (bias) {
    const void *pointer = bias;
    s = lt_->descSet(choice.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                     sizeof(pointer));
  }
  if (aux && s == CUBLAS_STATUS_SUCCESS)
    s = lt_->descSet(choice.desc,
                     p.epilogue == Epilogue::BiasGrad
                         ? CUBLASLT_MATMUL_DESC_BIAS_POINTER
                         : CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                     &aux, sizeof(aux));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt_->matmul(lt_->handle, choice.desc, &one, b, choice.first, a,
                    choice.second, beta, c, choice.result, c, choice.result,
                    &choice.algo, workspace_, workspaceBytes_, stream_);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Error(fmt::format("cuBLASLt ({} x {} x {}, batch {}): {}", p.m, p.n,
                             p.k, p.batch, api_->statusString(s)));
  return Status::ok();
}

Status Blas::runClassic(const Product &p, const void *a, const void *b, void *c,
                        const void *bias, void *aux) {
  if (p.epilogue == Epilogue::BiasGrad) {
    // The product, then A's column sums (A is [K, M], its rows a pitch
    // apart) by a kernel (column_sums.cu).
    Product plain = p;
    plain.epilogue = Epilogue::None;
    if (Status s = runClassic(plain, a, b, c, nullptr, nullptr); !s)
      return s;
    int type = p.operands == Operands::BF16  ? DTK_CUDA_BF16
               : p.operands == Operands::F16 ? DTK_CUDA_F16
                                             : DTK_CUDA_F32;
    dtk_cuda_column_sums_typed(a, type, p.k, p.m, p.lda ? p.lda : p.m,
                               static_cast<float *>(aux),
                               reinterpret_cast<dtk_stream>(stream_));
    return Status::ok();
  }
  if (p.epilogue != Epilogue::None) {
    // The rounded product, then the epilogue from it (gelu.cu): GELU's
    // pre-activation goes to `aux`, its gradient's product to C.
    Product plain = p;
    plain.epilogue = Epilogue::None;
    bool grad = p.epilogue == Epilogue::GeluGrad;
    if (Status s = runClassic(plain, a, b, grad ? c : aux, bias, nullptr); !s)
      return s;
    int type = p.result == Operands::BF16  ? DTK_CUDA_BF16
               : p.result == Operands::F16 ? DTK_CUDA_F16
                                           : DTK_CUDA_F32;
    dtk_cuda_gelu_typed(aux, c, type, p.m * p.n, int(grad),
                        reinterpret_cast<dtk_stream>(stream_));
    return Status::ok();
  }
  bool accumulate = p.accumulate;
  if (bias) {
    // The bias broadcast into C (added to it when the product accumulates),
    // then C += the product.
    auto type = [](Operands o) {
      return o == Operands::BF16  ? DTK_CUDA_BF16
             : o == Operands::F16 ? DTK_CUDA_F16
                                  : DTK_CUDA_F32;
    };
    dtk_cuda_fill_rows_typed(bias, type(p.bias), c, type(p.result),
                             p.batch * p.m, p.n, int(p.accumulate),
                             reinterpret_cast<dtk_stream>(stream_));
    accumulate = true;
  }
  ColumnMajor cm = columnMajor(p);
  const float one = 1.0f, zero = 0.0f;
  const float *beta = accumulate ? &one : &zero;
  cublasOperation_t opFirst = cm.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opSecond = cm.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t s;
  if (p.operands == Operands::F32) {
    s = api_->sgemmStridedBatched(
        handle_, opFirst, opSecond, int(cm.m), int(cm.n), int(cm.k), &one,
        static_cast<const float *>(b), int(cm.first.ld), cm.first.stride,
        static_cast<const float *>(a), int(cm.second.ld), cm.second.stride,
        beta, static_cast<float *>(c), int(cm.result.ld), cm.result.stride,
        int(p.batch));
  } else {
    cudaDataType type = dataType(p.operands);
    s = api_->gemmStridedBatchedEx(
        handle_, opFirst, opSecond, int(cm.m), int(cm.n), int(cm.k), &one, b,
        type, int(cm.first.ld), cm.first.stride, a, type, int(cm.second.ld),
        cm.second.stride, beta, c, dataType(p.result), int(cm.result.ld),
        cm.result.stride, int(p.batch), computeType(p.operands),
        CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    static const char *const kinds[] = {"sgemm", "TF32 gemm", "bf16 gemm",
                                        "f16 gemm"};
    return Error(fmt::format("cuBLAS {} ({} x {} x {}, batch {}): {}",
                             kinds[int(p.operands)], p.m, p.n, p.k, p.batch,
                             api_->statusString(s)));
  }
  return Status::ok();
}

namespace {

Status check(const Product &p, const void *bias, const void *aux) {
  if (p.result != Operands::F32 && p.result != p.operands)
    return Error("a product's 16-bit result must have its operands' type");
  if (bias && p.bias != Operands::F32 && p.bias != p.operands)
    return Error("a product's bias must be f32 or its operands' 16-bit type");
  if (bias && p.result != Operands::F32 && p.accumulate)
    return Error("a product with a bias and a 16-bit result cannot "
                 "accumulate");
  if ((p.lda || p.ldb || p.ldc) && (p.batch != 1 || bias))
    return Error("a product with row pitches must be of one batch, without "
                 "a bias");
  if (p.epilogue == Epilogue::BiasGrad &&
      (!aux || p.batch != 1 || p.accumulate || !p.transA || bias))
    return Error("a product with a bias's gradient in its epilogue needs "
                 "where to write it and must be of one batch, its A "
                 "transposed, not accumulating and without a bias");
  if ((p.epilogue == Epilogue::Gelu || p.epilogue == Epilogue::GeluGrad) &&
      (!aux || p.batch != 1 || p.accumulate || p.lda || p.ldb || p.ldc ||
       (p.epilogue == Epilogue::GeluGrad && bias)))
    return Error("a product with a GELU epilogue needs its auxiliary matrix "
                 "and must be of one packed batch, not accumulating (and "
                 "GELU's gradient without a bias)");
  // The classic API's sizes are 32-bit; cuBLASLt takes the same products.
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.batch > INT_MAX)
    return Error(fmt::format("a product of {} x {} x {} (batch {}) exceeds "
                             "cuBLAS's 32-bit sizes",
                             p.m, p.n, p.k, p.batch));
  return Status::ok();
}

} // namespace

Status Blas::matmul(const Product &p, const void *a, const void *b, void *c,
                    const void *bias, void *aux) {
  if (Status s = check(p, bias, aux); !s)
    return s;
  if (lt_) {
    // The heuristic alone here: timing is for tune(), before the program
    // runs (a product may be captured into a CUDA graph).
    Expected<Choice *> choice = choose(p, a, b, c, bias, aux, false);
    if (!choice)
      return choice.error();
    lastEngine_ = (*choice)->engine;
    if ((*choice)->useLt) {
      Status s = runLt(**choice, p, a, b, c, bias, aux);
      if (s)
        return s;
      // Refused before anything was queued (cuBLASLt checks its arguments
      // first): this shape goes the classic way from now on.
      fallBack(**choice, p, s.error().message().c_str());
    }
  }
  lastEngine_ = "cuBLAS";
  return runClassic(p, a, b, c, bias, aux);
}

Status Blas::tune(const Product &p, const void *a, const void *b, void *c,
                  const void *bias, void *aux) {
  if (Status s = check(p, bias, aux); !s)
    return s;
  if (!lt_)
    return Status::ok();
  Expected<Choice *> choice =
      choose(p, a, b, c, bias, aux, engine_ == ProductEngine::Tuned);
  return choice ? Status::ok() : Status(choice.error());
}

} // namespace dtrt::cuda
