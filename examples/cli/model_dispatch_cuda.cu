// The CLI's CUDA backend (model_dispatch_cuda.hpp): DebertaModel<V, CudaPolicy> for each variant, and
// forwards timed with CUDA events on the policy's stream.
#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/heads/deberta_with.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/variant/dispatch.hpp"
#include "model_dispatch_cuda.hpp"

namespace flashdeberta::cli {

namespace {

// Two events on one stream, created once per model: bench times every forward with them.
class EventPair {
 public:
  EventPair() {
    FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&start_));
    FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  EventPair(EventPair const&) = delete;
  EventPair& operator=(EventPair const&) = delete;
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

template <Variant V>
class CudaModel final : public LoadedModel {
 public:
  CudaModel(CudaPolicy const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaModel<V, CudaPolicy>::load(policy, directory, options)),
        weights_bytes_(policy.memory_stats().in_use_bytes) {}

  std::vector<float> forward_to_host(Batch const& batch) const override { return model_.forward_to_host(batch); }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t>) const override {
    HeadOutput out;
    out.tensors.push_back(last_hidden_state_tensor(model_.forward_to_host(batch), model_.config().hidden_size));
    return out;
  }

  // The interval covers the whole forward on the stream, input uploads included (forward ends fenced).
  std::optional<DeviceRun> device_forward(Batch const& batch) const override {
    CudaPolicy const& p = model_.policy();
    p.reset_peak_memory();
    FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(events_.start(), p.stream()));
    {
      auto const out = model_.forward(batch);
      FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(events_.stop(), p.stream()));
    }
    FLASHDEBERTA_CUDA_CHECK(cudaEventSynchronize(events_.stop()));
    float ms = 0.0f;
    FLASHDEBERTA_CUDA_CHECK(cudaEventElapsedTime(&ms, events_.start(), events_.stop()));
    std::size_t const peak = p.memory_stats().peak_in_use_bytes;
    return DeviceRun{static_cast<double>(ms),
                     static_cast<std::int64_t>(peak > weights_bytes_ ? peak - weights_bytes_ : 0)};
  }

 private:
  DebertaModel<V, CudaPolicy> model_;
  std::size_t weights_bytes_;
  EventPair events_;
};

// A head on the backbone (run only; bench times the backbone alone).
template <Variant V, template <class> class Head>
class CudaHeadModel final : public LoadedModel {
 public:
  CudaHeadModel(CudaPolicy const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaWith<V, CudaPolicy, Head>::load(policy, directory, options)) {}

  std::vector<float> forward_to_host(Batch const& batch) const override {
    return model_.backbone().forward_to_host(batch);
  }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t> mask_token_id) const override {
    return model_.forward_to_host(batch,
                                  mask_token_id ? HeadRequest::tokens_with_id(batch, *mask_token_id) : HeadRequest{});
  }

 private:
  DebertaWith<V, CudaPolicy, Head> model_;
};

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(DType dtype) : policy_(CudaOptions{.dtype = dtype}) {}

  std::unique_ptr<LoadedModel> load(std::filesystem::path const& directory, ModelConfig const& config,
                                    AttentionImpl attention, HeadKind head) const override {
    ModelOptions const options{.attention = attention};
    return dispatch_variant(config, [&]<Variant V>() -> std::unique_ptr<LoadedModel> {
      if (head == HeadKind::kBase) return std::make_unique<CudaModel<V>>(policy_, directory, options);
      return dispatch_head(head, [&]<template <class> class Head>() -> std::unique_ptr<LoadedModel> {
        return std::make_unique<CudaHeadModel<V, Head>>(policy_, directory, options);
      });
    });
  }

 private:
  CudaPolicy policy_;
};

}  // namespace

std::unique_ptr<CudaBackend> start_cuda_backend(DType dtype) {
  int devices = 0;
  cudaError_t const status = cudaGetDeviceCount(&devices);
  FLASHDEBERTA_REQUIRE(status == cudaSuccess && devices > 0,
                       "--backend cuda: no CUDA device available ("
                           << (status == cudaSuccess ? "none found" : cudaGetErrorString(status)) << ")");
  return std::make_unique<CudaBackendImpl>(dtype);
}

}  // namespace flashdeberta::cli
