#include "flashdeberta/runtime/loaded_model.hpp"

#include <memory>
#include <string>
#include <system_error>

#include "backend_state.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/variant/dispatch.hpp"

namespace flashdeberta::runtime {

ModelConfig read_model_config(std::filesystem::path const& directory) {
  std::error_code ec;
  FLASHDEBERTA_REQUIRE_FILE(std::filesystem::is_directory(directory, ec),
                            "--model " << directory.string()
                                       << ": no such directory (a Hugging Face checkpoint directory "
                                       << "with config.json and model.safetensors, or a ZeroModels directory, is expected)");
  return load_model_config(directory);
}

std::string_view variant_name(ModelConfig const& config) {
  return dispatch_variant(config, []<Variant V>() -> std::string_view { return V::kName; });
}

// The refusals that need no backend library come first, so that asking a CUDA build for int8 on a machine
// without CUDA's libraries says what is wrong with the request.
Backend::Backend(RuntimeOptions const& options) : state_(std::make_unique<State>()) {
  std::string const name(backend_name(options.backend));
  BackendEntry const* const entry = find_backend(options.backend);
  if (entry == nullptr) {
    throw UsageError("--backend " + name + ": this build has no " + std::string(backend_title(options.backend)) +
                     " backend");
  }
  std::string const dtype(dtype_option_name(options.dtype));
  if (options.dtype == DType::kI8 && !entry->quantizes_int8) {
    throw UsageError("--dtype int8: dynamic int8 quantization runs on the host backend only (--backend eigen); the " +
                     name + " backend computes in " + std::string(entry->computes_in));
  }
  state_->started = entry->start(options);
  DType const computes = state_->started->computes();
  if (computes != options.dtype) {
    throw UsageError("--dtype " + dtype + ": the " + name + " backend computes in " +
                     std::string(dtype_option_name(computes)) + " only");
  }
}

Backend::~Backend() = default;

std::unique_ptr<LoadedModel> Backend::load(std::filesystem::path const& directory, ModelConfig const& config,
                                           HeadKind head) const {
  return state_->started->load(directory, config, head);
}

int Backend::threads() const { return state_->started->threads(); }

}  // namespace flashdeberta::runtime
