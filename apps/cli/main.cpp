// flashdeberta: the command-line front end of the library (run, bench, tokenize, the pipelines
// fill-mask, classify, ner, qa, zero-shot, rerank, gliner, convert, train (fine-tuning), and serve, the
// HTTP server). Each command reads its options through command_line.hpp (args.cpp, pipeline_options.cpp
// and train_command.cpp declare them), which also prints its help.
//
// Contract with scripts: exit 0 on success, 2 for usage errors, 1 for any other error, and every error
// is exactly one line on stderr starting with "flashdeberta: error: ". The run command never leaves a
// partial output file (write_safetensors writes a temporary and renames it only when complete).
#include <iostream>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "args.hpp"
#include "commands.hpp"
#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "openmp_wait.hpp"

namespace {

namespace cli = flashdeberta::cli;
using cli::UsageError;
using Args = std::span<char const* const>;

struct Command {
  std::string_view name;
  std::string_view summary;  // its line in the program's help
  int (*run)(Args args);     // parses `args` (the arguments after the name), then runs
};

constexpr Command kCommands[] = {
    {"run", "run the model (backbone or a head) on token ids from a JSON file",
     [](Args args) {
       auto const options = cli::parse_run_options(args);
       return options ? cli::run_command(*options) : 0;
     }},
    {"bench", "time the forward pass on random token ids",
     [](Args args) {
       auto const options = cli::parse_bench_options(args);
       return options ? cli::bench_command(*options) : 0;
     }},
    {"tokenize", "text -> input_ids, token_type_ids, attention_mask, offsets, tokens (JSON lines)",
     cli::tokenize_command},
    {"fill-mask", "the top tokens for each [MASK] of a text (masked-LM checkpoints)", cli::fill_mask_command},
    {"classify", "labels with probabilities, of texts or text pairs (sequence-classification checkpoints)",
     cli::classify_command},
    {"ner", "entity spans with labels, scores and offsets (token-classification checkpoints)", cli::ner_command},
    {"qa", "the answer span of a question in a context (question-answering checkpoints)", cli::qa_command},
    {"zero-shot", "texts into labels given at run time (NLI sequence-classification checkpoints)",
     cli::zero_shot_command},
    {"rerank", "passages by relevance to a query (cross-encoders: one-label classification)", cli::rerank_command},
    {"gliner", "named entities of labels given at run time (GLiNER model directories)", cli::gliner_command},
    {"convert", "a checkpoint directory into the other format: Hugging Face <-> ZeroModels (Keras)",
     cli::convert_command},
    {"train", "fine-tune a checkpoint on JSON lines into an HF checkpoint directory (HF's Trainer)",
     cli::train_command},
    {"serve", "the checkpoint behind an HTTP endpoint with dynamic batching (TEI's routes)", cli::serve_command},
};

Command const* find_command(std::string_view name) {
  for (Command const& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// "run, bench, ..., serve"
std::string command_names() {
  std::string out;
  for (Command const& c : kCommands) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

std::string main_help() {
  std::string out =
      "usage: flashdeberta <command> [options]\n"
      "\n"
      "Runs Hugging Face DeBERTa v1/v2/v3 checkpoints (flashdeberta " FLASHDEBERTA_VERSION_STRING
      ").\n"
      "\n"
      "commands:\n";
  for (Command const& c : kCommands) {
    out += "  " + std::string(c.name) + std::string(11 - c.name.size(), ' ') + std::string(c.summary) + "\n";
  }
  return out +
         "\n"
         "options:\n"
         "  -h, --help   show this help; 'flashdeberta <command> --help' shows a command's options\n"
         "  --version    print the version\n"
         "\n"
         "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr).\n";
}

// Messages from deep in the library may quote file contents; flattening keeps the one-line promise.
int report(std::string_view message, int status) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cout.flush();
  std::cerr << "flashdeberta: error: " << line << '\n';
  return status;
}

int dispatch(Args args) {
  if (args.empty()) throw UsageError("no command given (see 'flashdeberta --help')");
  std::string_view const name = args[0];
  if (name == "-h" || name == "--help") {
    std::cout << main_help();
    return 0;
  }
  if (name == "--version") {
    std::cout << "flashdeberta " FLASHDEBERTA_VERSION_STRING "\n";
    return 0;
  }
  if (name == "help") {  // "flashdeberta help run" is "flashdeberta run --help", as in git and cargo
    if (args.size() < 2) {
      std::cout << main_help();
      return 0;
    }
    Command const* const command = find_command(args[1]);
    if (command == nullptr) {
      throw UsageError("no help for unknown command '" + std::string(args[1]) + "' (commands: " + command_names() +
                       ")");
    }
    char const* const help[] = {"--help"};
    return command->run(Args(help));
  }
  if (Command const* const command = find_command(name)) return command->run(args.subspan(1));
  if (name.starts_with("-")) {
    throw UsageError("unknown option '" + std::string(name) + "' (see 'flashdeberta --help')");
  }
  throw UsageError("unknown command '" + std::string(name) + "' (commands: " + command_names() +
                   "; see 'flashdeberta --help')");
}

}  // namespace

int main(int argc, char** argv) {
  cli::bound_openmp_spinning(argv);
  Args const args(argv + 1, argc > 0 ? static_cast<std::size_t>(argc - 1) : 0);
  try {
    return dispatch(args);
  } catch (UsageError const& e) {
    return report(e.what(), 2);
  } catch (flashdeberta::Error const& e) {
    return report(e.what(), 1);
  } catch (std::bad_alloc const&) {
    return report("out of memory", 1);
  } catch (std::exception const& e) {
    return report(e.what(), 1);
  } catch (...) {
    return report("unknown exception", 1);
  }
}
