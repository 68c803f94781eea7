// Checkpoint conversion between Hugging Face's and ZeroModels' formats (flashdeberta convert): the same model,
// the same float values, in the other ecosystem's files.
#pragma once

#include <filesystem>
#include <string>

namespace flashdeberta::runtime {

enum class CheckpointFormat { kHuggingFace, kZeroModels };

struct ConversionSummary {
  CheckpointFormat from = CheckpointFormat::kHuggingFace;
  CheckpointFormat to = CheckpointFormat::kZeroModels;
  std::string model_class;  // ZeroModels' class, or HF's architecture
  std::size_t tensors = 0;
  std::size_t tokenizer_files = 0;
};

// Converts the checkpoint directory `from` (HF: config.json + weights; ZeroModels: zm_config.json / kf_config.json
// + Keras weights) into the other format in `to`, which must not exist or be an empty directory. The result is
// written beside `to` and renamed into place once complete, so an error leaves nothing there. HF -> ZeroModels
// writes model.weights.h5 in the layout Keras' save_weights gives ZeroModels' class for the model and head, with
// float32 values; ZeroModels -> HF writes config.json and model.safetensors with the stored dtype. Tokenizer
// files are copied. A model ZeroModels cannot hold (absolute positions, token types, an embedding size other than
// the hidden size, separate position projections, a head activation other than gelu) is refused, naming why.
ConversionSummary convert_checkpoint(std::filesystem::path const& from, std::filesystem::path const& to);

}  // namespace flashdeberta::runtime
