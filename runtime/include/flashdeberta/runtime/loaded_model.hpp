// The front ends' one crossing from run time to compile time: the backend option picks the policy,
// config.json picks the variant, the head asked for (or config.json's architectures) the head, and the
// CLI, the Python package and the server see the resulting DebertaModel<V, P> or DebertaWith<V, P, Head>
// through a small interface. Each backend instantiates the model templates once for its policy, from its own
// folder (policy_backend.hpp); the registry finds it (backend_entry.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::runtime {

// config.json of a checkpoint directory; a missing directory is named as such, not as a missing file in it.
ModelConfig read_model_config(std::filesystem::path const& directory);

// "DeBERTa v1", "DeBERTa v2" or "DeBERTa v3": the variant that will run `config`.
std::string_view variant_name(ModelConfig const& config);

// One forward timed on the device (CUDA events) and the device memory it used beyond the weights.
struct DeviceRun {
  double ms = 0.0;
  std::int64_t peak_extra_bytes = 0;
};

// A head output left in device memory, in HF's layout ([B, L, ...] with zeros at positions the batch does
// not hold, [B, ...] per sequence), in the dtype the policy computes in; what Python hands to torch through
// DLPack. `owner` keeps the memory allocated; when the last copy of it goes, the device is synchronized
// first, so a consumer's pending work on another stream never sees the memory reused.
struct DeviceTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  DType dtype = DType::kF32;
  void* data = nullptr;
  int device = 0;  // CUDA device ordinal
  std::shared_ptr<void> owner;
};

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  // Packed (T, H) last hidden state in host memory.
  virtual std::vector<float> forward_to_host(Batch const& batch) const = 0;
  // The loaded head's outputs in host memory (HF's field names); last_hidden_state for the backbone alone.
  // `mask_token_id`: a masked LM computes the logits of the tokens with that id only.
  virtual HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t> mask_token_id) const = 0;
  // The same, with HF's output_hidden_states: "hidden_states.0" (the embedding output) .. "hidden_states.N"
  // beside the head's outputs, from one forward.
  virtual HeadOutput forward_head_with_hidden_states(Batch const& batch,
                                                     std::optional<std::int64_t> mask_token_id) const = 0;
  // The forward pass to completion (the policy is fenced), its output discarded: what bench times.
  virtual void forward(Batch const& batch) const = 0;
  // The same, timed by the device, for backends whose work runs asynchronously on one (CUDA); nullopt
  // for host backends, which bench times with the host clock.
  virtual std::optional<DeviceRun> device_forward(Batch const& batch) const {
    (void)batch;
    return std::nullopt;
  }
  // The head's outputs left on the device for an input of `input_shape` ([B, L] or [B, C, L]), the work
  // finished; nullopt for backends that compute in host memory.
  virtual std::optional<std::vector<DeviceTensor>> forward_head_on_device(
      Batch const& batch, std::vector<std::int64_t> const& input_shape) const {
    (void)batch;
    (void)input_shape;
    return std::nullopt;
  }
};

// A started backend: the runtime it needs (Kokkos is initialized here and finalized in the destructor; the
// CUDA backend's module and libraries are loaded here, the first time) and its policy. Every LoadedModel must
// be destroyed before the Backend that loaded it.
class Backend {
 public:
  // Throws UsageError for a backend this build lacks and for a dtype the backend does not compute in.
  explicit Backend(RuntimeOptions const& options);
  ~Backend();
  Backend(Backend const&) = delete;
  Backend& operator=(Backend const&) = delete;

  // `head`: the backbone alone (kBase) or one head on it, already resolved against `config`.
  std::unique_ptr<LoadedModel> load(std::filesystem::path const& directory, ModelConfig const& config,
                                    HeadKind head = HeadKind::kBase) const;
  int threads() const;  // the threads the policy really uses (0 on the command line resolved)

 private:
  friend class GlinerModel;  // loads GLiNER over the same policy (gliner.cpp)
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flashdeberta::runtime
