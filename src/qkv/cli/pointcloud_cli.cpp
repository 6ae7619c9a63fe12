#include "qkv/cli/pointcloud_cli.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/train/trainer.h"

namespace qkv::cli {

namespace pc = qkv::pointcloud;

std::pair<pc::Rotation, pc::Rotation> parse_protocol(const std::string& protocol) {
  const auto slash = protocol.find('/');
  if (slash == std::string::npos)
    throw UsageError("--protocol " + protocol + ": expected TRAIN/TEST rotations such as z/z, i/so3 or so3/so3");
  try {
    return {pc::parse_rotation(protocol.substr(0, slash)), pc::parse_rotation(protocol.substr(slash + 1))};
  } catch (const UsageError& e) {
    throw UsageError("--protocol " + protocol + ": " + e.what());
  }
}

data::Batch rotated(const data::Batch& batch, const at::Tensor& rotation) {
  data::Batch out = batch;
  for (auto& [name, t] : out.inputs)
    if (name == "points" || name == "normals") t = torch::matmul(rotation, t);
  return out;
}

data::DatasetPtr view_of(const std::shared_ptr<const pc::PointCloudSet>& set, pc::PointViewOptions view, bool train,
                         pc::Rotation rotation) {
  view.train = train;
  view.rotation = rotation;
  if (!train) view.random_scale = view.random_shift = false;
  return std::make_shared<pc::PointCloudDataset>(set, view);
}

nlohmann::json measure_invariance(models::Model& model, const data::Dataset& dataset, int64_t shapes,
                                  int64_t rotations, uint64_t seed, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> idx(static_cast<size_t>(std::min<int64_t>(shapes, dataset.size())));
  std::iota(idx.begin(), idx.end(), 0);
  const auto batch = dataset.get(idx);
  nlohmann::json out = {{"shapes", idx.size()}, {"rotations", rotations}};
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    model.to(device, dtype);
    auto to = [&](const data::Batch& b) {
      data::Batch c = b.to(device);
      for (auto& [name, t] : c.inputs)
        if (t.is_floating_point()) t = t.to(dtype);
      return c;
    };
    const auto base = model.forward(to(batch));
    double worst = 0, scale = base.abs().max().item<double>();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (int64_t r = 0; r < rotations; ++r) {
      // Rotate in the measured precision: a float32 rotation of float64 input
      // would itself move the points by ~1e-7.
      const auto rot = pc::random_so3(gen).to(device, dtype);
      worst = std::max(worst, (model.forward(rotated(to(batch), rot)) - base).abs().max().item<double>());
    }
    const std::string key = dtype == torch::kFloat ? "float32" : "float64";
    out[key] = {{"max_abs_logit_change", worst}, {"max_abs_logit", scale}};
  }
  model.to(device, torch::kFloat);
  return out;
}

void set_paper_training_defaults(train::TrainConfig& config, pc::PointViewOptions& view) {
  config.epochs = 200;
  config.batch_size = 16;
  config.optim.optimizer = "adam";
  config.optim.lr = 5e-4;
  config.optim.schedule = "step";
  config.optim.step_size = 20;
  config.optim.gamma = 0.9;
  view.random_scale = true;
  view.random_shift = true;
}

void add_view_options(CLI::App* cmd, pc::PointViewOptions& view, const std::string& sampling_help,
                      const std::string& up_axis_help) {
  cmd->add_option("--points", view.num_points, "points the model sees per shape")->capture_default_str();
  cmd->add_option("--sampling", view.sampling, sampling_help)
      ->capture_default_str()
      ->check(CLI::IsMember({"fps", "random", "first"}));
  cmd->add_option("--up-axis", view.up_axis, up_axis_help)->capture_default_str()->check(CLI::Range(0, 2));
  cmd->add_option("--random-scale", view.random_scale, "training augmentation: scale by U[0.8, 1.25)")
      ->capture_default_str();
  cmd->add_option("--random-shift", view.random_shift, "training augmentation: shift by U[-0.1, 0.1)^3")
      ->capture_default_str();
}

void add_point_model_options(CLI::App* cmd, PointModelOptions& o, const std::vector<std::string>& models,
                             const std::string& model_help, int64_t paper_linear_dim, int64_t paper_heads) {
  cmd->add_option("--model", o.model, model_help)->capture_default_str()->check(CLI::IsMember(models));
  cmd->add_option("--linear-dim", o.linear_dim,
                  "VNT-Net: linear dimension C (paper: " + std::to_string(paper_linear_dim) + "); 0 = model default");
  cmd->add_option("--heads", o.heads,
                  "VNT-Net / xyz-transformer: attention heads (VNT paper: " + std::to_string(paper_heads) +
                      "); 0 = default");
  cmd->add_option("--head-dim", o.head_dim, "VNT-Net: head size (paper: 16); 0 = model default");
  cmd->add_option("--model-options", o.model_options,
                  "any other model option as JSON, e.g. '{\"k\":16,\"pooling\":\"max\"}' (qkv params --model M "
                  "lists them)")
      ->capture_default_str();
  cmd->add_option("--init-weights", o.init_weights, "start from a name->tensor .pt dict (export-weights, torch.save)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--resume", o.resume, "continue the run in this folder from its last checkpoint")
      ->check(CLI::ExistingDirectory);
}

nlohmann::json model_options_from_cli(const std::string& text, const std::string& model, bool vnt, bool attention,
                                      int64_t linear_dim, int64_t heads, int64_t head_dim) {
  nlohmann::json options;
  try {
    options = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UsageError("--model-options: not valid JSON: " + text);
  }
  if (!options.is_object()) throw UsageError("--model-options: expected a JSON object");
  if (linear_dim > 0) {
    if (!vnt) throw UsageError("--linear-dim does not apply to " + model);
    options["linear_dim"] = linear_dim;
  }
  if (head_dim > 0) {
    if (!vnt) throw UsageError("--head-dim does not apply to " + model);
    options["head_dim"] = head_dim;
  }
  if (heads > 0) {
    if (!attention) throw UsageError("--heads does not apply to " + model);
    options["heads"] = heads;
  }
  return options;
}

nlohmann::json read_summary(const std::string& run) { return read_json_file(train::RunPaths{run}.summary()); }

void clear_synthetic_dir(const std::string& dir, const std::string& marker, const std::string& option) {
  namespace fs = std::filesystem;
  if (!fs::exists(dir) || fs::is_empty(dir)) return;
  const std::string readme = dir + "/README.txt";
  const auto text = fs::exists(readme) ? read_file_bytes(readme) : std::vector<char>{};
  if (std::string(text.begin(), text.end()).find(marker) == std::string::npos)
    throw UsageError(option + " " + dir + ": not empty and not a tree written by `" + marker +
                     "`; choose another folder");
  fs::remove_all(dir);
}

SyntheticDataDir::SyntheticDataDir(const std::string& recorded, int64_t rank) : path_(recorded) {
  if (rank == 0 || recorded.empty()) return;
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / ("qkv-rank" + std::to_string(rank) + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data()))
    throw DataError("rank " + std::to_string(rank) + ": cannot make a scratch folder in " +
                    fs::temp_directory_path().string() + " for the synthetic shapes");
  path_ = pattern + "/synthetic";
  scratch_ = true;
}

SyntheticDataDir::~SyntheticDataDir() {
  if (!scratch_) return;
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(path_).parent_path(), ignored);
}

}  // namespace qkv::cli
