#include "flashdeberta/runtime/loaded_model.hpp"

#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/heads/deberta_with.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/variant/dispatch.hpp"

#include "backend_state.hpp"

#if FLASHDEBERTA_RUNTIME_HAS_CUDA
#include <cuda_runtime_api.h>

#include "cuda_device_outputs.hpp"
#include "flashdeberta/cuda/event_timer.hpp"
#endif

namespace flashdeberta::runtime {

namespace {

using detail::AnyPolicy;

#if FLASHDEBERTA_RUNTIME_HAS_CUDA
// One forward timed on the model's stream (input uploads included: forward ends fenced) and the device memory
// it used beyond `weights_bytes`.
template <class Model>
DeviceRun time_on_device(CudaEventTimer const& timer, Model const& model, Batch const& batch,
                         std::size_t weights_bytes) {
  CudaPolicy const& p = model.policy();
  p.reset_peak_memory();
  double const ms = timer.milliseconds(p.stream(), [&] { return model.forward(batch); });
  std::size_t const peak = p.memory_stats().peak_in_use_bytes;
  return DeviceRun{ms, static_cast<std::int64_t>(peak > weights_bytes ? peak - weights_bytes : 0)};
}

// A CudaPolicy on device 0, refused with the reason when the machine has no CUDA device.
CudaPolicy start_cuda(DType dtype) {
  int devices = 0;
  cudaError_t const status = cudaGetDeviceCount(&devices);
  FLASHDEBERTA_REQUIRE(status == cudaSuccess && devices > 0,
                       "--backend cuda: no CUDA device available ("
                           << (status == cudaSuccess ? "none found" : cudaGetErrorString(status)) << ")");
  return CudaPolicy(CudaOptions{.dtype = dtype});  // computes in fp32, bf16 or fp16
}

template <class P>
inline constexpr bool kIsCuda = std::is_same_v<P, CudaPolicy>;
#else
template <class P>
inline constexpr bool kIsCuda = false;
#endif

template <Variant V, ExecutionPolicy P>
class TypedModel final : public LoadedModel {
 public:
  TypedModel(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaModel<V, P>::load(policy, directory, options)) {
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
    if constexpr (kIsCuda<P>) weights_bytes_ = policy.memory_stats().in_use_bytes;
#endif
  }

  std::vector<float> forward_to_host(Batch const& batch) const override { return model_.forward_to_host(batch); }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t>) const override {
    HeadOutput out;
    out.tensors.push_back(last_hidden_state_tensor(model_.forward_to_host(batch), model_.config().hidden_size));
    return out;
  }
  std::optional<DeviceRun> device_forward(Batch const& batch) const override {
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
    if constexpr (kIsCuda<P>) return time_on_device(events_, model_, batch, weights_bytes_);
#endif
    (void)batch;
    return std::nullopt;
  }
  std::optional<std::vector<DeviceTensor>> forward_head_on_device(
      Batch const& batch, std::vector<std::int64_t> const& input_shape) const override {
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
    if constexpr (kIsCuda<P>) {
      HiddenStates<P> hidden = model_.forward(batch);
      DeviceHeadTensor<P> t{"last_hidden_state",     HeadRows::kTokens, {}, hidden.tokens, hidden.hidden_size, false,
                            std::move(hidden.values)};
      t.tokens.resize(static_cast<std::size_t>(t.row_count));
      std::iota(t.tokens.begin(), t.tokens.end(), std::int64_t{0});
      return std::vector<DeviceTensor>{detail::padded_on_device(model_.policy(), std::move(t), batch, input_shape)};
    }
#endif
    return LoadedModel::forward_head_on_device(batch, input_shape);
  }

 private:
  DebertaModel<V, P> model_;
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
  std::size_t weights_bytes_ = 0;
  std::conditional_t<kIsCuda<P>, CudaEventTimer, std::monostate> events_;
#endif
};

template <Variant V, ExecutionPolicy P, template <class> class Head>
class TypedHeadModel final : public LoadedModel {
 public:
  TypedHeadModel(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaWith<V, P, Head>::load(policy, directory, options)) {}

  std::vector<float> forward_to_host(Batch const& batch) const override {
    return model_.backbone().forward_to_host(batch);
  }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t> mask_token_id) const override {
    return model_.forward_to_host(batch,
                                  mask_token_id ? HeadRequest::tokens_with_id(batch, *mask_token_id) : HeadRequest{});
  }
  std::optional<std::vector<DeviceTensor>> forward_head_on_device(
      Batch const& batch, std::vector<std::int64_t> const& input_shape) const override {
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
    if constexpr (kIsCuda<P>) {
      std::vector<DeviceTensor> out;
      DeviceHeadOutput<P> outputs = model_.forward(batch);
      for (auto& t : outputs.tensors)
        out.push_back(detail::padded_on_device(model_.backbone().policy(), std::move(t), batch, input_shape));
      return out;
    }
#endif
    return LoadedModel::forward_head_on_device(batch, input_shape);
  }

 private:
  DebertaWith<V, P, Head> model_;
};

#if FLASHDEBERTA_RUNTIME_HAS_KOKKOS
// Kokkos may be initialized once per process: every Backend of the process shares one guard, which
// finalizes Kokkos when the last of them goes away (a Python session may load several models). Warnings
// are off because the CLI promises errors as one line on stderr and nothing else there.
std::shared_ptr<void> start_kokkos(int threads) {
  static std::mutex mutex;
  static std::weak_ptr<void> running;
  std::lock_guard const lock(mutex);
  if (auto guard = running.lock()) return guard;
  if (Kokkos::is_initialized()) return nullptr;  // the application started it and will finalize it
#if KOKKOS_VERSION >= 30700
  auto settings = Kokkos::InitializationSettings().set_disable_warnings(true);
  if (threads > 0) settings.set_num_threads(threads);
  auto guard = std::make_shared<Kokkos::ScopeGuard>(settings);
#else
  auto guard = std::make_shared<Kokkos::ScopeGuard>(Kokkos::InitArguments(threads > 0 ? threads : -1, -1, -1, true));
#endif
  running = guard;
  return guard;
}
#endif

}  // namespace

ModelConfig read_model_config(std::filesystem::path const& directory) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE_FILE(std::filesystem::is_directory(directory, ec),
                            "--model " << directory.string()
                                       << ": no such directory (a Hugging Face checkpoint directory "
                                       << "with config.json and model.safetensors is expected)");
  return load_model_config(directory);
}

std::string_view variant_name(ModelConfig const& config) {
  return dispatch_variant(config, []<Variant V>() -> std::string_view { return V::kName; });
}

Backend::Backend(RuntimeOptions const& options) : state_(std::make_unique<State>()) {
  state_->attention = options.attention;
  std::string const name(backend_name(options.backend));
  if (!backend_compiled_in(options.backend)) {
    throw UsageError("--backend " + name + ": this build has no " + (name == "cuda" ? "CUDA" : "Kokkos") + " backend");
  }
  std::string const dtype(dtype_option_name(options.dtype));
  if (options.dtype == DType::kI8 && options.backend != BackendKind::kEigen) {
    throw UsageError("--dtype int8: dynamic int8 quantization runs on the host backend only (--backend eigen); the " +
                     name + " backend computes in fp32" + (name == "cuda" ? ", bf16 or fp16" : " only"));
  }
  switch (options.backend) {
    case BackendKind::kEigen:
      // bf16 and int8 are the linear layers' dtype (oneDNN); everything else stays float32.
      if (options.dtype == DType::kF16) {
        throw UsageError(
            "--dtype fp16: the eigen backend computes in fp32, its linear layers optionally in bf16 or "
            "int8 (fp16 is the cuda backend's)");
      }
      if (options.dtype == DType::kBF16 || options.dtype == DType::kI8) {
        if (!eigen_detail::kHasOnednn) {
          throw UsageError("--dtype " + dtype + ": the eigen backend runs bf16 and int8 through oneDNN, and this " +
                           "build has none (install libdnnl-dev and configure with FLASHDEBERTA_WITH_ONEDNN=ON)");
        }
        state_->policy.emplace(EigenPolicy(EigenOptions{.threads = options.threads, .linear_dtype = options.dtype}));
      } else {
        state_->policy.emplace(std::in_place_type<EigenPolicy>, options.threads);
      }
      break;
#if FLASHDEBERTA_RUNTIME_HAS_KOKKOS
    case BackendKind::kKokkos:
      state_->runtime = start_kokkos(options.threads);
      state_->policy.emplace(std::in_place_type<KokkosPolicy<>>);
      break;
#endif
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
    case BackendKind::kCuda:
      state_->policy.emplace(start_cuda(options.dtype));
      break;
#endif
    default:
      break;
  }
  // The policy, not a table here, says what it computes in, so a backend that gains bf16 needs no CLI change.
  // A policy with a linear-layer dtype (EigenPolicy) is asked for that one.
  DType const computes = std::visit(
      []<class P>(P const& p) {
        if constexpr (requires { p.linear_dtype(); }) {
          return p.linear_dtype();
        } else {
          return p.compute_dtype();
        }
      },
      *state_->policy);
  if (computes != options.dtype) {
    throw UsageError("--dtype " + dtype + ": the " + name + " backend computes in " +
                     std::string(dtype_option_name(computes)) + " only");
  }
}

Backend::~Backend() = default;

std::unique_ptr<LoadedModel> Backend::load(std::filesystem::path const& directory, ModelConfig const& config,
                                           HeadKind head) const {
  ModelOptions const options{.attention = state_->attention};
  return std::visit(
      [&]<ExecutionPolicy P>(P const& policy) {
        return dispatch_variant(config, [&]<Variant V>() -> std::unique_ptr<LoadedModel> {
          if (head == HeadKind::kBase) return std::make_unique<TypedModel<V, P>>(policy, directory, options);
          return dispatch_head(head, [&]<template <class> class Head>() -> std::unique_ptr<LoadedModel> {
            return std::make_unique<TypedHeadModel<V, P, Head>>(policy, directory, options);
          });
        });
      },
      *state_->policy);
}

int Backend::threads() const {
  return std::visit(
      []<class P>(P const& policy) -> int {
        if constexpr (kIsCuda<P>) {
          return 1;  // one host thread drives the device
        } else if constexpr (requires { policy.threads(); }) {
          return policy.threads();
        } else {
          return static_cast<int>(policy.space().concurrency());  // Kokkos: threads come from initialization
        }
      },
      *state_->policy);
}

}  // namespace flashdeberta::runtime
