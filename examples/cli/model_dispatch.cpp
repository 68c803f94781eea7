#include "model_dispatch.hpp"

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/heads/deberta_with.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/variant/dispatch.hpp"

// CMake links flashdeberta::kokkos and defines FLASHDEBERTA_CLI_WITH_KOKKOS when the Kokkos backend is
// configured; the header test lets the CLI build while that backend is still being written.
#if defined(FLASHDEBERTA_CLI_WITH_KOKKOS) && __has_include(<flashdeberta/kokkos/kokkos_policy.hpp>)
#define FLASHDEBERTA_CLI_HAS_KOKKOS 1
#include <Kokkos_Core.hpp>

#include "flashdeberta/kokkos/kokkos_policy.hpp"
#else
#define FLASHDEBERTA_CLI_HAS_KOKKOS 0
#endif

// CMake adds model_dispatch_cuda.cu and defines FLASHDEBERTA_CLI_WITH_CUDA when the build has CUDA.
#if defined(FLASHDEBERTA_CLI_WITH_CUDA)
#define FLASHDEBERTA_CLI_HAS_CUDA 1
#include "model_dispatch_cuda.hpp"
#else
#define FLASHDEBERTA_CLI_HAS_CUDA 0
#endif

namespace flashdeberta::cli {

bool backend_compiled_in(BackendKind backend) {
  switch (backend) {
    case BackendKind::kEigen:
      return true;
    case BackendKind::kKokkos:
      return FLASHDEBERTA_CLI_HAS_KOKKOS != 0;
    case BackendKind::kCuda:
      return FLASHDEBERTA_CLI_HAS_CUDA != 0;
  }
  return false;
}

namespace {

// The closed set of policies this build can run; std::visit is the run-time -> compile-time switch.
using AnyPolicy = std::variant<EigenPolicy
#if FLASHDEBERTA_CLI_HAS_KOKKOS
                               ,
                               KokkosPolicy<>
#endif
                               >;

template <Variant V, ExecutionPolicy P>
class TypedModel final : public LoadedModel {
 public:
  TypedModel(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaModel<V, P>::load(policy, directory, options)) {}

  std::vector<float> forward_to_host(Batch const& batch) const override { return model_.forward_to_host(batch); }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t>) const override {
    HeadOutput out;
    out.tensors.push_back(last_hidden_state_tensor(model_.forward_to_host(batch), model_.config().hidden_size));
    return out;
  }

 private:
  DebertaModel<V, P> model_;
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

 private:
  DebertaWith<V, P, Head> model_;
};

#if FLASHDEBERTA_CLI_HAS_KOKKOS
// Kokkos may be initialized once per process; the guard finalizes it when the Backend goes away.
// Warnings are off because the CLI promises errors as one line on stderr and nothing else there.
std::shared_ptr<void> start_kokkos(int threads) {
#if KOKKOS_VERSION >= 30700
  auto settings = Kokkos::InitializationSettings().set_disable_warnings(true);
  if (threads > 0) settings.set_num_threads(threads);
  return std::make_shared<Kokkos::ScopeGuard>(settings);
#else
  return std::make_shared<Kokkos::ScopeGuard>(Kokkos::InitArguments(threads > 0 ? threads : -1, -1, -1, true));
#endif
}
#endif

}  // namespace

ModelConfig read_model_config(std::filesystem::path const& directory) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE(std::filesystem::is_directory(directory, ec),
                       "--model " << directory.string() << ": no such directory (a Hugging Face checkpoint directory "
                                  << "with config.json and model.safetensors is expected)");
  return load_model_config(directory);
}

std::string_view variant_name(ModelConfig const& config) {
  return dispatch_variant(config, []<Variant V>() -> std::string_view { return V::kName; });
}

struct Backend::State {
  std::shared_ptr<void> runtime;  // declared before the policy, so destroyed after it
  std::optional<AnyPolicy> policy;
#if FLASHDEBERTA_CLI_HAS_CUDA
  std::unique_ptr<CudaBackend> cuda;  // set instead of policy for --backend cuda
#endif
  AttentionImpl attention = AttentionImpl::kFlash;
};

Backend::Backend(CommonOptions const& options) : state_(std::make_unique<State>()) {
  state_->attention = options.attention;
  std::string const name(backend_name(options.backend));
  if (!backend_compiled_in(options.backend)) {
    throw UsageError("--backend " + name + ": this build has no " + (name == "cuda" ? "CUDA" : "Kokkos") + " backend");
  }
#if FLASHDEBERTA_CLI_HAS_CUDA
  if (options.backend == BackendKind::kCuda) {
    state_->cuda = start_cuda_backend(options.dtype);  // CudaPolicy computes in fp32, bf16 and fp16
    return;
  }
#endif
  switch (options.backend) {
    case BackendKind::kEigen:
      state_->policy.emplace(std::in_place_type<EigenPolicy>, options.threads);
      break;
#if FLASHDEBERTA_CLI_HAS_KOKKOS
    case BackendKind::kKokkos:
      state_->runtime = start_kokkos(options.threads);
      state_->policy.emplace(std::in_place_type<KokkosPolicy<>>);
      break;
#endif
    default:
      break;
  }
  // The policy, not a table here, says what it computes in, so a backend that gains bf16 needs no CLI change.
  DType const computes = std::visit([](auto const& p) { return p.compute_dtype(); }, *state_->policy);
  if (computes != options.dtype) {
    throw UsageError("--dtype " + std::string(dtype_option_name(options.dtype)) + ": the " + name +
                     " backend computes in " + std::string(dtype_option_name(computes)) + " only");
  }
}

Backend::~Backend() = default;

std::unique_ptr<LoadedModel> Backend::load(std::filesystem::path const& directory, ModelConfig const& config,
                                           HeadKind head) const {
#if FLASHDEBERTA_CLI_HAS_CUDA
  if (state_->cuda) return state_->cuda->load(directory, config, state_->attention, head);
#endif
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
#if FLASHDEBERTA_CLI_HAS_CUDA
  if (state_->cuda) return 1;  // one host thread drives the device
#endif
  return std::visit(
      [](auto const& policy) -> int {
        if constexpr (requires { policy.threads(); }) {
          return policy.threads();
        } else {
          return static_cast<int>(policy.space().concurrency());  // Kokkos: threads come from initialization
        }
      },
      *state_->policy);
}

}  // namespace flashdeberta::cli
