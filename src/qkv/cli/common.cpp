#include "qkv/cli/common.h"

#include <torch/torch.h>

#include <cstdio>
#include <map>

#include "qkv/core/errors.h"
#include "qkv/core/runtime.h"

namespace qkv::cli {

namespace {
std::map<std::string, std::string>& key_flags() {
  static std::map<std::string, std::string> flags;
  return flags;
}
}  // namespace

void remember_flag(const std::string& key, const std::string& flag) { key_flags()[key] = flag; }

std::string flag_of_key(const std::string& key) {
  const auto it = key_flags().find(key);
  return it == key_flags().end() ? "" : it->second;
}

void add_overwrite_flag(CLI::App* cmd, bool& overwrite) {
  cmd->add_flag("--overwrite", overwrite,
                "replace what qkv itself wrote at the output (never a file qkv did not write); without it an "
                "existing output is refused");
}

void add_common_options(CLI::App* cmd, CommonOptions& o, const std::string& out_help) {
  cmd->add_option("--seed", o.seed, "random seed (data, initialisation, order)")->capture_default_str();
  cmd->add_option("--threads", o.threads, "intra-op threads for LibTorch and OpenBLAS; 0 = OMP_NUM_THREADS if set, else one per core")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", o.device, "cpu, or cuda[:N] where LibTorch was built with CUDA")->capture_default_str();
  if (!out_help.empty()) {
    cmd->add_option("--out", o.out, out_help)->capture_default_str();
    add_overwrite_flag(cmd, o.overwrite);
  }
}

c10::Device apply_common_options(const CommonOptions& o) {
  set_threads(o.threads);
  seed_everything(o.seed);
  return parse_device(o.device);
}

void add_eval_options(CLI::App* cmd, EvalOptions& o) {
  cmd->add_option("--checkpoint", o.checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--split", o.split, "train, val or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "val", "test"}));
  add_common_options(cmd, o.common, "");
}

const data::DatasetPtr& pick_split(const data::Splits& splits, const std::string& name) {
  if (name == "train") return splits.train;
  if (name == "val") return splits.val;
  if (name == "test") return splits.test;
  throw UsageError("--split " + name + ": expected train, val or test");
}

nlohmann::json parse_model_options(const std::string& text) {
  nlohmann::json options;
  try {
    options = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UsageError("--model-options: not valid JSON: " + text);
  }
  if (!options.is_object()) throw UsageError("--model-options: expected a JSON object");
  return options;
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

}  // namespace qkv::cli
