//===- cudnn_api.h - cuDNN's backend API, bound with dlsym ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The entry points of libcudnn.so.9 that dt calls, and a descriptor that
// sets its attributes in one expression and is destroyed with its owner.
// Only cuDNN's headers are used at build time: the program starts where
// the library is absent.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_CUDNN_API_H
#define DTRT_CUDA_CUDNN_API_H

#include <cudnn_graph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtrt::cuda {

struct CudnnApi {
  size_t (*getVersion)() = nullptr;
  const char *(*errorString)(cudnnStatus_t) = nullptr;
  void (*lastErrorString)(char *, size_t) = nullptr;
  cudnnStatus_t (*create)(cudnnHandle_t *) = nullptr;
  cudnnStatus_t (*destroy)(cudnnHandle_t) = nullptr;
  cudnnStatus_t (*setStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  cudnnStatus_t (*createDescriptor)(cudnnBackendDescriptorType_t,
                                    cudnnBackendDescriptor_t *) = nullptr;
  cudnnStatus_t (*destroyDescriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*setAttribute)(cudnnBackendDescriptor_t,
                                cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t,
                                const void *) = nullptr;
  cudnnStatus_t (*getAttribute)(cudnnBackendDescriptor_t,
                                cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t *,
                                void *) = nullptr;
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                           cudnnBackendDescriptor_t) = nullptr;
};

/// cuDNN's words for a failure, with the last error's detail where the
/// library keeps one.
std::string cudnnFailure(const CudnnApi &api, cudnnStatus_t s);

/// A backend descriptor. Attribute setters record the first failure, with
/// the attribute's name, so that a graph is described in straight-line code
/// and checked once (status()).
class CudnnDescriptor {
public:
  CudnnDescriptor(const CudnnApi &api, cudnnBackendDescriptorType_t type,
                  const char *what);
  ~CudnnDescriptor();
  CudnnDescriptor(const CudnnDescriptor &) = delete;
  CudnnDescriptor &operator=(const CudnnDescriptor &) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  CudnnDescriptor &set(cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type, int64_t count,
                       const void *values);
  CudnnDescriptor &set(cudnnBackendAttributeName_t name, int64_t value) {
    return set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  CudnnDescriptor &set(cudnnBackendAttributeName_t name,
                       const std::vector<int64_t> &values) {
    return set(name, CUDNN_TYPE_INT64, int64_t(values.size()), values.data());
  }
  CudnnDescriptor &set(cudnnBackendAttributeName_t name,
                       cudnnDataType_t value) {
    return set(name, CUDNN_TYPE_DATA_TYPE, 1, &value);
  }
  CudnnDescriptor &setBool(cudnnBackendAttributeName_t name, bool value) {
    return set(name, CUDNN_TYPE_BOOLEAN, 1, &value);
  }
  CudnnDescriptor &setFloat(cudnnBackendAttributeName_t name, float value) {
    return set(name, CUDNN_TYPE_FLOAT, 1, &value);
  }
  CudnnDescriptor &set(cudnnBackendAttributeName_t name,
                       const CudnnDescriptor &value) {
    cudnnBackendDescriptor_t d = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  CudnnDescriptor &finalize();

  /// The first failure ("" when none), naming the descriptor and attribute.
  const std::string &failure() const { return failure_; }
  bool ok() const { return failure_.empty(); }
  /// The status of that failure (CUDNN_STATUS_SUCCESS when none).
  cudnnStatus_t status() const { return status_; }

private:
  const CudnnApi &api_;
  cudnnBackendDescriptor_t d_ = nullptr;
  const char *what_;
  std::string failure_;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_CUDNN_API_H
