#pragma once
// What the commands share: the common options (--seed, --threads, --device,
// --out, --overwrite), options derived from a settings struct's field list
// (core/fields.h), the command of a settings struct (add_settings_command)
// and the eval command. The train-command skeleton is in train_command.h.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/runtime/run_options.h"
#include "qkv/train/run.h"

namespace qkv::cli {

// What `cmd` does once its options are parsed: main() runs it.
void on_run(CLI::App* cmd, Action& action, Action run);

// A command group ("qkv vnt ..."): one of its commands is required; each of
// `commands` adds one. Returns the group.
using RegisterCommand = std::function<void(CLI::App* group, Action& action)>;
CLI::App* add_command_group(CLI::App& app, Action& action, const std::string& name, const std::string& description,
                            std::initializer_list<RegisterCommand> commands);

// The run options' fields (runtime/run_options.h): those of `keys` among
// --seed, --threads (with threads_help where it is not empty) and --device;
// --out (with out_help) and --overwrite when out_help is non-empty.
inline const std::set<std::string> kAllRunKeys = {"seed", "threads", "device"};
void add_common_options(CLI::App* cmd, RunOptions& o, const std::string& out_help,
                        const std::set<std::string>& keys = kAllRunKeys, const std::string& threads_help = "");

// --max-params: the most parameters a model may be built with, into
// `limits`, for commands that build one.
void add_max_params_option(CLI::App* cmd, models::ModelLimits& limits);

// --recipe NAME (tasks/recipes.h), its help listing the recipes of
// `command`; nothing when `command` has none. The library applies it.
void add_recipe_option(CLI::App* cmd, std::string& recipe, const std::string& command);

// --overwrite alone, for commands whose output is named otherwise.
void add_overwrite_flag(CLI::App* cmd, bool& overwrite);

// One option per field of `settings` that is one (Field::option is not ""),
// bound to the field, with the field's help and its current value as the
// default shown; fields named in `skip` are left out. The flag of each key is
// remembered, so a ConfigError about the key names the flag.
template <typename S>
void add_field_options(CLI::App* cmd, S& settings, const std::set<std::string>& skip = {});

// The flag that sets `key` ("lr" -> "--lr") in command `cmd` (or the
// commands above it): as add_field_options registered it, else the option
// spelled like the key ("max_new" -> "--max-new") if the command has one;
// "" otherwise. Per command, since two commands may spell one key differently.
std::string flag_of_key(const CLI::App* cmd, const std::string& key);

// A ConfigError's one line as `cmd` says it: the setting and every "{key}"
// in the problem named by its flag.
std::string config_error_text(const CLI::App* cmd, const ConfigError& e);
void remember_flag(const CLI::App* cmd, const std::string& key, const std::string& flag);
// The keys of the options given on `cmd`'s command line (flag_of_key's
// inverse), as a list and as a question.
std::vector<std::string> given_keys(const CLI::App& cmd);
std::function<bool(const std::string& key)> given_setting(const CLI::App& cmd);

// --help in sections: the options `add` adds are listed under `heading`
// (CLI11 orders sections by first use); hidden ones (group "") stay hidden.
void option_section(CLI::App* cmd, const std::string& heading, const std::function<void()>& add);

// The last step of building a command: the shared options (--seed,
// --threads, --device, --out, --output, --overwrite, --json) not yet in a
// section go under "Run"; the command's own, if it set no sections itself,
// above them under `heading`; --help joins the first section.
void section_options(CLI::App* cmd, const std::string& heading);

// An option's old spelling, kept for one release: hidden from --help, it
// sets the same value as new_flag (added before it), is checked by the same
// validators (ranges, allowed values), splits lists at the same delimiter,
// and says on stderr which name replaces it.
template <typename T>
CLI::Option* add_old_spelling(CLI::App* cmd, const std::string& old_flag, const std::string& new_flag, T& value) {
  CLI::Option* now = cmd->get_option(new_flag);
  CLI::Option* old = cmd->add_option(old_flag, value, "old spelling of " + new_flag)->group("");
  old->delimiter(now->get_delimiter());
  for (int i = 0;; ++i) {  // CLI11 tells the number of validators only by running out of them
    CLI::Validator* validator = nullptr;
    try {
      validator = now->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    // CLI11 gives a hidden option's errors no name: the old flag goes into the message.
    old->check(CLI::Validator(
        [check = *validator, old_flag](std::string& text) {
          const std::string problem = check(text);
          return problem.empty() ? problem : old_flag + ": " + problem;
        },
        validator->get_description()));
  }
  return old->each([old_flag, new_flag](const std::string&) {
    std::fprintf(stderr, "qkv: %s is now spelled %s (the old spelling goes in the next release)\n", old_flag.c_str(),
                 new_flag.c_str());
  });
}

// --checkpoint FILE, required: a checkpoint file, or a run folder, which
// stands for its checkpoints/best.ckpt (or, for an XGBoost run, its
// xgboost.json). A usage error names what is missing. --max-params and
// --allow-non-finite set how it is read.
CLI::Option* add_checkpoint_option(CLI::App* cmd, train::CheckpointFile& checkpoint, const std::string& help);

// --split train|val|test: the part of a run's data an eval reads.
void add_split_option(CLI::App* cmd, std::string& split);
inline const std::string kEvalCheckpointHelp = "checkpoint file (RUN/checkpoints/best.ckpt)";

// An `eval` (--checkpoint, --split, --eval-batch-size, the options `more` adds
// and the run options) that prints `evaluate(checkpoint, split, batch_size,
// device)`'s JSON; batch_size 0 = the run's.
using Evaluate = std::function<nlohmann::json(const train::CheckpointFile& checkpoint, const std::string& split,
                                              int64_t batch_size, const c10::Device& device)>;
CLI::App* add_eval_command(CLI::App* parent, Action& action, const std::string& description, Evaluate evaluate,
                           const std::function<void(CLI::App*)>& more = {});

// What a command shows besides its fields: its name and description, the
// heading of its own options in --help and, where it has them, the help of
// --checkpoint, of --json, and of --out (with --overwrite) and --out's
// default; which run options it takes.
// CommandText("eval", "...").heading("Evaluation").checkpoint("...").
struct CommandText {
  CommandText(std::string name, std::string description) : name(std::move(name)), description(std::move(description)) {}
  // The section of --help that lists the command's own options (the run
  // options are under "Run"): "Evaluation", "Cohort", ...
  CommandText heading(std::string text) const { return with(&CommandText::options_heading, std::move(text)); }
  CommandText checkpoint(std::string help) const { return with(&CommandText::checkpoint_help, std::move(help)); }
  CommandText json(std::string help) const { return with(&CommandText::json_help, std::move(help)); }
  CommandText out(std::string help, std::string default_out = "") const {
    return with(&CommandText::out_help, std::move(help)).with(&CommandText::default_out, std::move(default_out));
  }
  // --out without a default: the command refuses to run without it.
  CommandText required_out(std::string help) const {
    return out(std::move(help)).with(&CommandText::out_is_required, true);
  }
  // The run options besides --out and --overwrite (keys of RunOptions'
  // fields): all by default; fewer for a command whose settings seed
  // themselves or that runs on the CPU alone (a writer of synthetic data).
  CommandText run_options(std::set<std::string> keys) const { return with(&CommandText::run_keys, std::move(keys)); }
  // No run option offered, none applied: the process's threads, seed and
  // device stay as it started. For launch, whose ranks set their own (its
  // environment is theirs), and the tools that compute nothing or, as
  // doctor, set their threads themselves.
  CommandText keeps_process_settings() const { return run_options({}).with(&CommandText::applies_run_options, false); }
  // --threads' help where they are something else than LibTorch's intra-op
  // threads (volumes generated in parallel, XGBoost's threads).
  CommandText threads(std::string help) const { return with(&CommandText::threads_help, std::move(help)); }

  std::string name, description, checkpoint_help, json_help, out_help, default_out, threads_help;
  std::string options_heading = "Options";
  bool out_is_required = false, applies_run_options = true;
  std::set<std::string> run_keys = kAllRunKeys;

 private:
  // A copy with one member set: each setter above is one of these.
  template <typename T>
  CommandText with(T CommandText::*member, T value) const {
    CommandText t = *this;
    t.*member = std::move(value);
    return t;
  }
};

// The parsed options of a command of settings S (add_settings_command).
template <typename S>
struct CommandOptions {
  S settings;
  RunOptions run;
  train::CheckpointFile checkpoint;
  bool json = false;
  std::function<bool(const std::string& key)> given;  // was the option of `key` on the command line?
};
template <typename S>
using RunCommand = std::function<int(const CommandOptions<S>& options, const c10::Device& device)>;

// A command whose options are --checkpoint, S's fields (less `skip`), those
// `more` adds, --json and the run options, as `text` says; once they are
// parsed, the run options are applied and `run` is its action.
template <typename S>
CLI::App* add_settings_command(CLI::App* parent, Action& action, const CommandText& text, RunCommand<S> run,
                               const std::function<void(CLI::App*, CommandOptions<S>&)>& more = {},
                               const std::set<std::string>& skip = {}) {
  auto* cmd = parent->add_subcommand(text.name, text.description);
  auto o = std::make_shared<CommandOptions<S>>();
  if (!text.default_out.empty()) o->run.out = text.default_out;
  if (!text.checkpoint_help.empty()) add_checkpoint_option(cmd, o->checkpoint, text.checkpoint_help);
  add_field_options(cmd, o->settings, skip);
  if (more) more(cmd, *o);
  if (!text.json_help.empty()) cmd->add_flag("--json", o->json, text.json_help);
  add_common_options(cmd, o->run, text.out_help, text.run_keys, text.threads_help);
  if (text.out_is_required) cmd->get_option("--out")->required();
  section_options(cmd, text.options_heading);
  on_run(cmd, action, [o, cmd, run = std::move(run), apply = text.applies_run_options] {
    o->given = given_setting(*cmd);
    return run(*o, apply ? apply_run_options(o->run) : c10::Device(c10::kCPU));
  });
  return cmd;
}

// The check of a numeric option's text against a field's range: NaN,
// infinities and values outside [f.min, f.max] are refused with a message
// that gives the range. A field without a range still refuses NaN and
// infinities.
CLI::Validator range_check(const Field& f);
// " (>= 1)", " (in [0, 1])" for an option's help; "" without a range.
std::string range_help(const Field& f);
// The same check for an option that is not a field.
CLI::Validator range_check(double lo, double hi);
inline std::string range_help(double lo, double hi) { return range_help(Field{"", ""}.range(lo, hi)); }

// The check that an integer option's text fits its type: CLI11 2.1 turned
// 99999999999999999999 into the largest int64 without a word.
template <typename T>
CLI::Validator integer_fits() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        if (std::from_chars(text.data(), end, value).ec != std::errc::result_out_of_range) return "";
        return "value " + text + " is out of range: " + std::to_string(std::numeric_limits<T>::min()) + " to " +
               std::to_string(std::numeric_limits<T>::max());
      },
      "", "integer range");
}

// --json TEXT style output: the JSON with 2-space indent and a newline.
void print_json(const nlohmann::json& j);

// One field as an option spelled `flag`, with its help, range or words and
// current value shown, as add_field_options adds each (which spells it
// "--" + option_name(f), after "-" + f.letter + "," where it has one).
template <typename T>
void add_field_option(CLI::App* cmd, const Field& f, T& value, const std::string& flag);

// ---- implementation ----

template <typename T>
void add_field_option(CLI::App* cmd, const Field& f, T& value, const std::string& flag) {
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    // A JSON-valued field is recorded, never an option of its own.
  } else if constexpr (std::is_same_v<T, bool>) {
    // A flag turns a setting on; one that is on by default takes a value
    // (--drop-last false).
    if (value)
      cmd->add_option(flag, value, f.help)->capture_default_str();
    else
      cmd->add_flag(flag, value, f.help);
  } else if constexpr (std::is_arithmetic_v<T>) {
    auto* opt = cmd->add_option(flag, value, f.help + range_help(f))->capture_default_str()->check(range_check(f));
    if constexpr (std::is_integral_v<T>) opt->check(integer_fits<T>());
  } else {
    auto* opt = cmd->add_option(flag, value, f.help)->capture_default_str();
    if constexpr (std::is_same_v<T, std::vector<std::string>>) opt->delimiter(',');
    if (f.choices) opt->check(CLI::IsMember(field_choices(f)));
    if (f.existing) opt->check(CLI::ExistingFile);
    if (f.required) opt->required();
  }
}

// The visitor of add_field_options, for a field list of another name.
inline auto field_option_adder(CLI::App* cmd, const std::set<std::string>& skip = {}) {
  return [cmd, skip](const Field& f, auto& value) {
    if ((f.option && *f.option == '\0') || skip.count(f.key)) return;
    remember_flag(cmd, f.key, "--" + option_name(f));
    add_field_option(cmd, f, value, (f.letter ? std::string("-") + f.letter + "," : "") + "--" + option_name(f));
    if constexpr (!std::is_same_v<std::decay_t<decltype(value)>, nlohmann::json>)
      if (f.old_option) add_old_spelling(cmd, std::string("--") + f.old_option, "--" + option_name(f), value);
  };
}

template <typename S>
void add_field_options(CLI::App* cmd, S& settings, const std::set<std::string>& skip) {
  visit_fields(settings, field_option_adder(cmd, skip));
}

}  // namespace qkv::cli
