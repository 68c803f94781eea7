// What a backend folder gives the runtime (backends/<name>/runtime/): an entry in the registry
// (runtime/src/backend_registry.cpp, the one place that lists the backends of a build) and, once started, a
// StartedBackend that loads models and GLiNER over its policy (policy_backend.hpp instantiates them). The
// front ends never see this: they ask runtime::Backend (loaded_model.hpp) for a BackendKind.
//
// A backend whose libraries are costly to load (CUDA: cudart and cuBLASLt take 0.4 s and 200 MB at process
// start) keeps only its entry in the runtime and builds the rest as a shared module that the entry opens when
// a run asks for it (backend_module.hpp), so that a program which never asks for it never loads them.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::runtime {

class LoadedModel;
class LoadedGliner;
class TrainingSession;
struct TrainingSessionOptions;

// A backend started for one RuntimeOptions: its policy, with the runtime it needs (Kokkos' initialization),
// and the attention path the options chose. Every model it loads must be destroyed before it.
class StartedBackend {
 public:
  virtual ~StartedBackend() = default;
  // The dtype the policy computes in; for a policy with a linear-layer dtype (EigenPolicy), that one.
  virtual DType computes() const = 0;
  // The threads the policy really uses (RuntimeOptions::threads 0 resolved; 1 for a device backend).
  virtual int threads() const = 0;
  // `head`: the backbone alone (kBase) or one head on it, already resolved against `config`.
  virtual std::unique_ptr<LoadedModel> load(std::filesystem::path const& directory, ModelConfig const& config,
                                            HeadKind head) const = 0;
  virtual std::unique_ptr<LoadedGliner> load_gliner(std::filesystem::path const& directory) const = 0;
  // The checkpoint in `directory` (config.json as `config` says, with the labels the run decided) as trainable
  // parameters with one head; flashdeberta::Error when the backend cannot train.
  virtual std::unique_ptr<TrainingSession> train(std::filesystem::path const& directory, ModelConfig const& config,
                                                 TrainingSessionOptions const& options) const = 0;
};

using StartBackend = std::unique_ptr<StartedBackend> (*)(RuntimeOptions const& options);

// What the runtime knows of a backend before starting it, so that refusals need no backend library.
struct BackendEntry {
  BackendKind kind = BackendKind::kEigen;
  // "fp32, bf16 or fp16", "fp32 only": the dtypes it computes in, for the refusal of int8 elsewhere.
  std::string_view computes_in;
  bool quantizes_int8 = false;  // whether --dtype int8 (dynamic quantization of the linear layers) runs on it
  // Starts it: throws UsageError for options it refuses (a dtype this build cannot run on it) and
  // flashdeberta::Error when it cannot run on this machine (no CUDA device).
  StartBackend start = nullptr;
};

// The entry of `kind`, or nullptr when this build does not have that backend.
BackendEntry const* find_backend(BackendKind kind);

// What a backend module exports under the C name kBackendModuleSymbol (backend_module.cpp opens it).
struct BackendModule {
  char const* version;  // FLASHDEBERTA_VERSION_STRING of its build: a module of another build is refused
  StartBackend start;
};

inline constexpr char const* kBackendModuleSymbol = "flashdeberta_backend_module";

}  // namespace flashdeberta::runtime
