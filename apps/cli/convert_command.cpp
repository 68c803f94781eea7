// flashdeberta convert: a checkpoint directory into the other format, HF <-> ZeroModels
// (runtime/src/convert.cpp). Prints one JSON line: from, to, the model class, the tensors and tokenizer files
// written.
#include <iostream>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "flashdeberta/runtime/convert.hpp"

namespace flashdeberta::cli {

namespace {

char const* format_name(runtime::CheckpointFormat format) {
  return format == runtime::CheckpointFormat::kHuggingFace ? "huggingface" : "zeromodels";
}

}  // namespace

int convert_command(std::span<char const* const> args) {
  std::filesystem::path from, to;
  CommandLine cli("convert",
                  "Writes the checkpoint directory FROM in the other format into TO: a Hugging Face directory\n"
                  "(config.json + weights) becomes ZeroModels' (zm_config.json + model.weights.h5, Keras 3 layout,\n"
                  "float32), a ZeroModels one (zm_config.json or kf_config.json + Keras weights) becomes Hugging\n"
                  "Face's (config.json + model.safetensors). Tokenizer files are copied. TO must not exist or be an\n"
                  "empty directory; it appears only once complete.");
  cli.option("--from", from, "DIR", "the checkpoint directory to convert")->required();
  cli.option("--to", to, "DIR", "the directory to write")->required();
  cli.footer("Prints one JSON line: {\"from\", \"to\", \"model_class\", \"tensors\", \"tokenizer_files\"}.");
  if (!cli.parse(args)) return 0;
  runtime::ConversionSummary const s = runtime::convert_checkpoint(from, to);
  nlohmann::ordered_json line;
  line["from"] = format_name(s.from);
  line["to"] = format_name(s.to);
  line["model_class"] = s.model_class;
  line["tensors"] = s.tensors;
  line["tokenizer_files"] = s.tokenizer_files;
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace flashdeberta::cli
