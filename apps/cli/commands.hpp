// The CLI's commands. Each returns the process exit status on success and throws on failure; main()
// turns UsageError into status 2 and every other exception into status 1. Those taking `args` (the
// arguments after the command's name) parse them first, and print their help and return 0 for --help.
#pragma once

#include <span>

#include "args.hpp"

namespace flashdeberta::cli {

int run_command(RunOptions const& options);
int bench_command(BenchOptions const& options);
// tokenize_command.cpp; it needs no backend.
int tokenize_command(std::span<char const* const> args);
// The pipeline commands (fill_mask_command.cpp, classify_command.cpp, ner_command.cpp, qa_command.cpp,
// zero_shot_command.cpp, rerank_command.cpp).
int fill_mask_command(std::span<char const* const> args);
int classify_command(std::span<char const* const> args);
int ner_command(std::span<char const* const> args);
int qa_command(std::span<char const* const> args);
int zero_shot_command(std::span<char const* const> args);
int rerank_command(std::span<char const* const> args);
// GLiNER's zero-shot named entities (gliner_command.cpp), from a GLiNER model directory.
int gliner_command(std::span<char const* const> args);
// HF <-> ZeroModels checkpoint directories (convert_command.cpp, runtime/src/convert.cpp).
int convert_command(std::span<char const* const> args);
// Fine-tuning on JSON lines into an HF checkpoint (train_command.cpp, runtime/src/trainer.cpp).
int train_command(std::span<char const* const> args);
// flashdeberta serve (serve_command.cpp and server/): the HTTP server.
int serve_command(std::span<char const* const> args);

}  // namespace flashdeberta::cli
