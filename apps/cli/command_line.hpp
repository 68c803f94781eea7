// The command line of every flashdeberta command, read by one parser: CLI11, under one set of rules.
//
// - An option that takes a value takes the next argument as it, whatever it starts with (CLI11's rule and
//   getopt's: `--question --why` asks "--why"), or the text after '=' (`--pair=-x`); `--name=` is an empty value.
// - An empty value is refused, except by the options declared with text(), which take free text.
// - An option given twice is refused, a flag given a value too (`--jsonl=yes`).
// - `--` ends the options: every later argument is a TEXT, even one starting with '-'. Before it, an argument
//   starting with '-' (other than a negative number or '-' alone) is an option.
// - `-h`/`--help` prints the command's help on stdout, wherever it comes before `--`.
// - A mistake is a UsageError (exit status 2): "<what was wrong> (see 'flashdeberta <command> --help')".
//
// Values are checked by validators (integer_in, number_in, choice's names), and a refused one is named with
// its option: "--top-k '0' is not an integer in [1, 1000000]".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::cli {

using runtime::UsageError;

// Validators that also rewrite the text CLI11 converts, so they go in as transforms:
// `->transform(integer_in(1, 4096))`.
// A whole decimal integer in [min, max] ("12x", "1e3", " 5" are not; "010" is 10, where CLI11 reads 8).
CLI::Validator integer_in(std::int64_t min, std::int64_t max);
// A whole number (as strtod reads it) in [min, max].
CLI::Validator number_in(double min, double max);

// The name of a choice on the command line and the value it selects.
template <typename T>
struct Choice {
  std::string name;
  T value;
};

class CommandLine {
 public:
  // `command` as typed ("fill-mask"); `about` the paragraph the help prints under the usage line.
  // `name_width`: the column where the options' descriptions start in the help.
  CommandLine(std::string command, std::string about, std::size_t name_width = 23);

  // An option taking a value, named `value_name` in the help ("--top-k K"). Declared while `group(...)` is
  // in force, it is listed under that heading.
  template <typename T>
  CLI::Option* option(std::string const& name, T& target, std::string const& value_name, std::string const& help) {
    return declare(app_.add_option(name, target, help), value_name, false);
  }
  // The same for free text, which may be empty (a question, a text pair).
  template <typename T>
  CLI::Option* text(std::string const& name, T& target, std::string const& value_name, std::string const& help) {
    return declare(app_.add_option(name, target, help), value_name, true);
  }
  // An option whose value is one of `choices`' names; `target` takes the value of the one given.
  template <typename T>
  CLI::Option* choice(std::string const& name, T& target, std::string const& value_name, std::vector<Choice<T>> choices,
                      std::string const& help) {
    std::vector<std::string> names;
    for (Choice<T> const& c : choices) names.push_back(c.name);
    auto const select = [&target, choices](std::string const& given) {
      for (Choice<T> const& c : choices) {
        if (c.name == given) target = c.value;
      }
    };
    return declare(app_.add_option_function<std::string>(name, select, help), value_name, false)
        ->check(one_of(std::move(names)));
  }
  CLI::Option* flag(std::string const& name, bool& target, std::string const& help);

  // TEXT arguments: without this, any argument that is not an option is an error. `value_name` ("TEXT",
  // "PASSAGE") is what the usage line shows. They are what CLI11 leaves over rather than a CLI11
  // positional, which would read a text in brackets as a list ("[MASK]" as "MASK").
  void texts(std::vector<std::string>& target, std::string value_name = "TEXT");

  // The heading of the options declared from now on (the command's own come first, under "options").
  void group(std::string heading) { group_ = std::move(heading); }
  // Printed at the end of the help (what the output is, exit statuses).
  void footer(std::string text) { app_.footer(std::move(text)); }

  // Reads `args` (after the command's name). False when --help printed the help: nothing to run.
  [[nodiscard]] bool parse(std::span<char const* const> args);

  // Throws the usage error `message`, pointing at the command's help.
  [[noreturn]] void fail(std::string const& message) const;

 private:
  static CLI::Validator one_of(std::vector<std::string> names);
  CLI::Option* declare(CLI::Option* option, std::string const& value_name, bool empty_allowed);
  // `args` as CLI11 reads them, "--name=" split into "--name" and "" (see the .cpp); notes the options that
  // CLI11's errors leave unnamed: one left without its value at the end, a flag given a value.
  std::vector<std::string> arguments(std::span<char const* const> args);
  // A ParseError of CLI11 in the words of this program's messages.
  std::string describe(CLI::ParseError const& error) const;
  // The arguments CLI11 left: TEXTs, or unknown options and stray arguments, which are errors.
  void take_remaining();

  std::string command_;
  CLI::App app_;
  std::string group_ = "options";
  std::vector<std::string>* texts_ = nullptr;
  std::string texts_name_;
  std::string dangling_;         // an option ending the arguments without its value
  std::string flag_with_value_;  // the first flag given "=value"
  bool help_declared_ = false;
};

}  // namespace flashdeberta::cli
