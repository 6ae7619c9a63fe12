#include "qkv/cli/common.h"

#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"
#include "qkv/models/presets.h"
#include "qkv/runtime/runtime.h"
#include "qkv/tasks/recipes.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/run.h"

namespace qkv::cli {

namespace {
std::map<std::pair<const CLI::App*, std::string>, std::string>& key_flags() {
  static std::map<std::pair<const CLI::App*, std::string>, std::string> flags;
  return flags;
}
}  // namespace

void remember_flag(const CLI::App* cmd, const std::string& key, const std::string& flag) {
  key_flags()[{cmd, key}] = flag;
}

std::string flag_of_key(const CLI::App* cmd, const std::string& key) {
  if (key.rfind("--", 0) == 0) return key;  // a message about an option the CLI itself named
  std::string dashed = "--" + key;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (const CLI::App* c = cmd; c; c = c->get_parent()) {
    const auto it = key_flags().find({c, key});
    if (it != key_flags().end()) return it->second;
  }
  for (const CLI::App* c = cmd; c; c = c->get_parent())
    if (c->get_option_no_throw(dashed)) return dashed;
  return "";
}

std::vector<std::string> given_keys(const CLI::App& cmd) {
  std::vector<std::string> keys;
  for (const auto* opt : cmd.get_options()) {
    if (opt->count() == 0) continue;
    std::string key = opt->get_name();
    if (key.rfind("--", 0) == 0) key.erase(0, 2);
    std::replace(key.begin(), key.end(), '-', '_');
    for (const auto& [at, flag] : key_flags())
      if (at.first == &cmd && opt->check_name(flag)) key = at.second;
    keys.push_back(key);
  }
  return keys;
}

std::function<bool(const std::string& key)> given_setting(const CLI::App& cmd) {
  return [keys = given_keys(cmd)](const std::string& key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
}

std::string config_error_text(const CLI::App* cmd, const ConfigError& e) {
  return setting_message(e.key, e.problem, [cmd](const std::string& key) {
    const std::string flag = flag_of_key(cmd, key);
    return flag.empty() ? key : flag;
  });
}

CLI::Validator range_check(const Field& f) {
  return CLI::Validator(
      [f](std::string& text) -> std::string {
        const std::string body(trim(text));
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(body.c_str(), &end);
        // Not a number at all: the option's own conversion says so.
        if (body.empty() || end != body.c_str() + body.size()) return "";
        const std::string problem = field_range_problem(f, value);
        return problem.empty() ? "" : "value " + body + " " + problem;
      },
      "", "range");
}

CLI::Validator range_check(double lo, double hi) { return range_check(Field{"", ""}.range(lo, hi)); }

std::string range_help(const Field& f) {
  const std::string range = field_range_text(f);
  if (range.empty()) return "";
  return range.front() == '[' || range.front() == '(' ? " (in " + range + ")" : " (" + range + ")";
}

void option_section(CLI::App* cmd, const std::string& heading, const std::function<void()>& add) {
  const size_t before = cmd->get_options().size();
  add();
  const auto options = cmd->get_options();
  for (size_t i = before; i < options.size(); ++i)
    if (!options[i]->get_group().empty()) options[i]->group(heading);
}

void section_options(CLI::App* cmd, const std::string& heading) {
  static const char* const kRun[] = {"--seed", "--threads", "--device", "--out", "--output", "--overwrite", "--json"};
  const auto is_run = [](const CLI::Option* opt) {
    return std::any_of(std::begin(kRun), std::end(kRun), [&](const char* n) { return opt->check_name(n); });
  };
  const auto options = cmd->get_options();
  const auto first = std::find_if(options.begin(), options.end(), [](const CLI::Option* opt) {
    return opt->get_group() != "Options" && !opt->get_group().empty();
  });
  const bool sectioned = first != options.end();
  for (CLI::Option* opt : options) {
    if (opt->get_group() != "Options" || opt->get_positional()) continue;
    if (is_run(opt))
      opt->group("Run");
    else if (!sectioned)
      opt->group(heading);
  }
  if (sectioned)
    if (CLI::Option* help = cmd->get_help_ptr()) help->group((*first)->get_group());
}

void add_recipe_option(CLI::App* cmd, std::string& recipe, const std::string& command) {
  if (tasks::recipes_for(command).empty()) return;
  std::string help =
      "train with the settings of a paper or a reference code; options given here win (docs/reproduction.md):";
  for (const auto* r : tasks::recipes_for(command)) help += "\n" + r->name + ": " + r->summary;
  cmd->add_option("--recipe", recipe, help);
}

namespace {

// An option given an empty value ("--synth-dir ''", often a shell variable
// that was never set) is refused: an empty value would mean the option's
// default, which leaving it out says. --prompt is left to lm generate, which
// refuses an empty one in words of its own (it has no default to point to).
void refuse_empty_values(const CLI::App& cmd) {
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() == 0 || opt->get_expected_min() == 0 || opt->get_lnames().empty()) continue;
    const std::string flag = "--" + opt->get_lnames().front();
    if (flag == "--prompt") continue;
    for (const auto& value : opt->results())
      if (value.empty()) throw UsageError(flag + ": empty; give a value, or leave the option out for its default");
  }
}

}  // namespace

void on_run(CLI::App* cmd, Action& action, Action run) {
  cmd->callback([cmd, &action, run = std::move(run)] {
    action = [cmd, run] {
      refuse_empty_values(*cmd);
      return run();
    };
  });
}

CLI::App* add_command_group(CLI::App& app, Action& action, const std::string& name, const std::string& description,
                            std::initializer_list<RegisterCommand> commands) {
  auto* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  for (const auto& add : commands) add(group, action);
  return group;
}

void add_overwrite_flag(CLI::App* cmd, bool& overwrite) { cmd->add_flag("--overwrite", overwrite, kOverwriteHelp); }

void add_common_options(CLI::App* cmd, RunOptions& o, const std::string& out_help, const std::set<std::string>& keys,
                        const std::string& threads_help) {
  std::set<std::string> skip;
  for (const auto& key : kAllRunKeys)
    if (!keys.count(key)) skip.insert(key);
  if (out_help.empty()) skip.insert({"out", "overwrite"});
  add_field_options(cmd, o, skip);
  if (!out_help.empty()) cmd->get_option("--out")->description(out_help);
  if (!threads_help.empty())
    cmd->get_option("--threads")->description(threads_help + range_help(0, max_useful_threads()));
}

void add_max_params_option(CLI::App* cmd, models::ModelLimits& limits) {
  cmd->add_option("--max-params", limits.max_parameters,
                  "the most parameters a model may be built with (default " +
                      std::to_string(models::kDefaultMaxParameters) +
                      ", 1 GiB of float32); larger options are refused before anything is allocated")
      ->check(range_check(1, 9e18))
      ->check(integer_fits<int64_t>());
}

CLI::Option* add_checkpoint_option(CLI::App* cmd, train::CheckpointFile& checkpoint, const std::string& help) {
  CLI::Validator file_or_run(
      [](std::string& path) -> std::string {
        try {
          path = train::resolve_checkpoint(path);
          return "";
        } catch (const UsageError& e) {
          return e.what();
        }
      },
      "FILE or RUN folder");
  add_max_params_option(cmd, checkpoint.limits);
  cmd->add_flag("--allow-non-finite", checkpoint.allow_non_finite,
                "read a checkpoint whose weights hold NaN or infinite values (a run that diverged); "
                "refused otherwise");
  return cmd->add_option("--checkpoint", checkpoint.path, help + "; a run folder means its checkpoints/best.ckpt")
      ->required()
      ->transform(file_or_run);
}

namespace {
// An eval's settings: --eval-batch-size, and --split, which add_split_option
// adds (vnt and seg eval add both to settings of their own).
struct EvalSettings {
  std::string split = "test";
  int64_t batch_size = 0;
};
template <typename V>
void visit_fields(EvalSettings& s, V&& visit) {
  visit(train::eval_batch_size_field(), s.batch_size);
}
}  // namespace

CLI::App* add_eval_command(CLI::App* parent, Action& action, const std::string& description, Evaluate evaluate,
                           const std::function<void(CLI::App*)>& more) {
  return add_settings_command<EvalSettings>(
      parent, action, CommandText("eval", description).heading("Evaluation").checkpoint(kEvalCheckpointHelp),
      [evaluate = std::move(evaluate)](const auto& o, const c10::Device& device) {
        print_json(evaluate(o.checkpoint, o.settings.split, o.settings.batch_size, device));
        return 0;
      },
      [more](CLI::App* cmd, auto& o) {
        add_split_option(cmd, o.settings.split);
        if (more) more(cmd);
      });
}

void add_split_option(CLI::App* cmd, std::string& split) {
  cmd->add_option("--split", split, "train, val or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "val", "test"}));
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", json_text(j).c_str()); }

}  // namespace qkv::cli
