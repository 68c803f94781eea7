#include "command_line.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

namespace flashdeberta::cli {

namespace {

// The help as this program has always laid it out: the usage line, the command's paragraph, the options
// under their headings (the name and its value, then the description from `name_width` on), the footer.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter(std::string command, std::string texts_name, std::size_t name_width)
      : command_(std::move(command)), texts_name_(std::move(texts_name)) {
    column_width(name_width);
  }

  std::string make_help(CLI::App const* app, std::string, CLI::AppFormatMode mode) const override {
    std::string out = make_usage(app, command_);
    if (!app->get_description().empty()) out += "\n" + app->get_description() + "\n";
    out += "\n" + make_groups(app, mode);
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    return out;
  }

  // "usage: flashdeberta run --model DIR --input IN.json --output OUT [options]": the options a command
  // cannot run without (--model, what it runs, first), then the rest.
  std::string make_usage(CLI::App const* app, std::string) const override {
    std::vector<CLI::Option const*> required = app->get_options([](CLI::Option const* o) { return o->get_required(); });
    std::stable_partition(required.begin(), required.end(),
                          [](CLI::Option const* o) { return o->get_name() == "--model"; });
    std::string out = "usage: flashdeberta " + command_;
    for (CLI::Option const* o : required) out += " " + o->get_name() + " " + o->get_option_text();
    out += " [options]";
    if (!texts_name_.empty()) out += " [" + texts_name_ + "...]";
    return out + "\n";
  }

  std::string make_group(std::string heading, bool, std::vector<CLI::Option const*> options) const override {
    std::string out = heading + ":\n";
    for (CLI::Option const* o : options) out += make_option(o, false);
    return out;
  }

  std::string make_option_name(CLI::Option const* option, bool) const override {
    std::string name = option->get_name(false, true);  // "-h,--help"
    if (std::size_t const comma = name.find(','); comma != std::string::npos) name.insert(comma + 1, " ");
    return name;
  }

  // The value's name alone: the description says what is required and what the default is.
  std::string make_option_opts(CLI::Option const* option) const override {
    return option->get_option_text().empty() ? std::string() : " " + option->get_option_text();
  }

 private:
  std::string command_;
  std::string texts_name_;
};

// CLI11's own reading of an argument: an option ("--name", "--name=value", "-x") or not ("-", "-5", "x").
bool looks_like_option(std::string const& arg) {
  std::string name, value;
  if (CLI::detail::split_long(arg, name, value)) return true;
  return CLI::detail::split_short(arg, name, value) && !(name[0] >= '0' && name[0] <= '9');
}

// "--name" of "--name=value".
std::string option_name(std::string const& arg) { return arg.substr(0, arg.find('=')); }

// "a, b or c"
std::string one_of_text(std::vector<std::string> const& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return out;
}

}  // namespace

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::int64_t value = 0;
        auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
          return "'" + text + "' is not an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
        }
        text = std::to_string(value);  // CLI11 converts with base 0, which would read "010" as 8
        return {};
      },
      "");
}

CLI::Validator number_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        double const value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !(value >= min && value <= max)) {
          std::ostringstream os;
          os << "'" << text << "' is not a number in [" << min << ", " << max << "]";
          return os.str();
        }
        char exact[32];  // what CLI11 converts: the same double, in a form every reader agrees on
        std::snprintf(exact, sizeof(exact), "%.17g", value);
        text = exact;
        return {};
      },
      "");
}

CLI::Validator CommandLine::one_of(std::vector<std::string> names) {
  return CLI::Validator(
      [names](std::string& text) -> std::string {
        if (std::find(names.begin(), names.end(), text) != names.end()) return {};
        return "'" + text + "' is not " + one_of_text(names);
      },
      "");
}

CommandLine::CommandLine(std::string command, std::string about, std::size_t name_width)
    : command_(std::move(command)), app_(std::move(about), command_) {
  app_.set_help_flag();  // replaced by one that wins over everything else on the line (parse())
  app_.allow_extras();   // unknown options and TEXTs are told apart by take_remaining()
  app_.formatter(std::make_shared<HelpFormatter>(command_, "", name_width));
}

CLI::Option* CommandLine::declare(CLI::Option* option, std::string const& value_name, bool empty_allowed) {
  option->option_text(value_name)->group(group_);
  if (!empty_allowed) {
    option->check(CLI::Validator(
        [](std::string& text) { return text.empty() ? std::string("has an empty value") : std::string(); }, ""));
  }
  return option;
}

CLI::Option* CommandLine::flag(std::string const& name, bool& target, std::string const& help) {
  // CLI11 would take the last of a flag given twice, and "--flag=no" as the flag off.
  return app_.add_flag(name, target, help)
      ->group(group_)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw)
      ->disable_flag_override();
}

void CommandLine::texts(std::vector<std::string>& target, std::string value_name) {
  texts_ = &target;
  texts_name_ = std::move(value_name);
}

bool CommandLine::parse(std::span<char const* const> args) {
  if (!help_declared_) {
    // Called as the option is read, before any value is checked: "--threads two --help" helps.
    app_.add_flag_callback(
            "-h,--help", [] { throw CLI::CallForHelp(); }, "show this help")
        ->group("options")
        ->trigger_on_parse();
    app_.formatter(std::make_shared<HelpFormatter>(command_, texts_name_, app_.get_formatter()->get_column_width()));
    help_declared_ = true;
  }
  std::vector<std::string> reversed = arguments(args);
  std::reverse(reversed.begin(), reversed.end());  // CLI11 reads the vector from its end
  try {
    app_.parse(reversed);
  } catch (CLI::CallForHelp const&) {
    std::cout << app_.help();
    return false;
  } catch (CLI::ParseError const& e) {
    fail(describe(e));
  }
  take_remaining();
  return true;
}

std::vector<std::string> CommandLine::arguments(std::span<char const* const> args) {
  // CLI11 2.1 reads "--labels=" as "--labels" without a value and takes the next argument as its value, so
  // that a script's --labels="$EMPTY" would make its first TEXT the labels. As two arguments the value is
  // the empty one given (and refused or taken as the option says).
  std::vector<std::string> out;
  bool value_next = false;  // this argument is the value of the option before it
  bool texts_only = false;  // after "--"
  dangling_.clear();
  flag_with_value_.clear();
  for (std::string const arg : args) {
    bool const option_position = !value_next && !texts_only;
    value_next = false;
    if (option_position && arg == "--") {
      texts_only = true;
    } else if (option_position && arg.starts_with("--")) {
      std::size_t const eq = arg.find('=');
      CLI::Option const* const option = app_.get_option_no_throw(option_name(arg));
      bool const takes_value = option != nullptr && option->get_items_expected_min() > 0;
      if (takes_value && eq + 1 == arg.size()) {
        out.push_back(option_name(arg));
        out.emplace_back();
        continue;
      }
      value_next = takes_value && eq == std::string::npos;
      if (option != nullptr && !takes_value && eq != std::string::npos && flag_with_value_.empty()) {
        flag_with_value_ = option_name(arg);
      }
    }
    out.push_back(arg);
  }
  if (value_next) dangling_ = out.back();
  return out;
}

std::string CommandLine::describe(CLI::ParseError const& error) const {
  // CLI11 words these as counts ("At Most 1 required but received 2", "--model is required") or in its
  // own terms ("a disallowed flag override"); which option it was is in the options' state, or in the
  // arguments (see arguments()).
  if (dynamic_cast<CLI::ArgumentMismatch const*>(&error) != nullptr) {
    if (!dangling_.empty()) return "option " + dangling_ + " needs a value";
    for (CLI::Option const* o : app_.get_options()) {
      if (o->count() > 1) return "option " + o->get_name() + " is given twice";
    }
    if (!flag_with_value_.empty()) return "option " + flag_with_value_ + " takes no value";
  }
  if (dynamic_cast<CLI::ValidationError const*>(&error) != nullptr) {
    // CLI11 writes "NAME: message"; this program's read "--top-k '0' is not an integer in [1, 1000000]".
    std::string const message = error.what();
    for (CLI::Option const* o : app_.get_options()) {
      std::string const prefix = o->get_name() + ": ";
      if (message.starts_with(prefix)) return o->get_name() + " " + message.substr(prefix.size());
    }
  }
  if (dynamic_cast<CLI::RequiredError const*>(&error) != nullptr) {
    for (CLI::Option const* o : app_.get_options()) {
      if (o->get_required() && o->count() == 0) return "missing " + o->get_name();
    }
  }
  return error.what();
}

void CommandLine::take_remaining() {
  bool texts_only = false;
  for (std::string const& arg : app_.remaining()) {
    if (!texts_only && arg == "--") {
      texts_only = true;
    } else if (!texts_only && looks_like_option(arg)) {
      fail("unknown option '" + option_name(arg) + "' for '" + command_ + "'");
    } else if (texts_ == nullptr) {
      fail("unexpected argument '" + arg + "'");
    } else {
      texts_->push_back(arg);
    }
  }
}

void CommandLine::fail(std::string const& message) const {
  throw UsageError(message + " (see 'flashdeberta " + command_ + " --help')");
}

}  // namespace flashdeberta::cli
