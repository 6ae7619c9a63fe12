#include "qkv/tasks/point_task.h"

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

namespace qkv::tasks {

namespace pc = qkv::pointcloud;

std::pair<pc::Rotation, pc::Rotation> parse_protocol(const std::string& protocol) {
  const auto slash = protocol.find('/');
  if (slash == std::string::npos)
    throw ConfigError("protocol", protocol + ": expected TRAIN/TEST rotations such as z/z, i/so3 or so3/so3");
  try {
    return {pc::parse_rotation(protocol.substr(0, slash)), pc::parse_rotation(protocol.substr(slash + 1))};
  } catch (const UsageError& e) {
    throw ConfigError("protocol", protocol + ": " + e.what());
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

void validate_view(const pc::PointViewOptions& view) {
  if (view.num_points < 1) throw ConfigError("points", "must be at least 1 (got " + std::to_string(view.num_points) + ")");
  if (view.sampling != "fps" && view.sampling != "random" && view.sampling != "first")
    throw ConfigError("sampling", view.sampling + ": expected fps, random or first");
  if (view.up_axis < -1 || view.up_axis > 2)
    throw ConfigError("up_axis", "must be 0 (x), 1 (y), 2 (z) or -1 (the data's own)");
  if (!(view.point_dropout >= 0 && view.point_dropout < 1)) throw ConfigError("point_dropout", "must be in [0, 1)");
}

int64_t default_up_axis(const std::string& layout) {
  // ModelNet40's meshes stand on z; PointNet's and PointNet++'s resampled
  // copies (HDF5 and text) and ShapeNet-part's point clouds stand on y, as
  // qkv's synthetic shapes do.
  if (layout == "ModelNet40") return 2;
  // A folder of one's own shapes (flat or split): y, as OBJ and glTF exporters
  // write by default (our choice; --up-axis sets it).
  if (layout == "flat" || layout == "split") return 1;
  if (layout == "modelnet40_normal_resampled" || layout == "modelnet40_ply_hdf5_2048" || layout == "synthetic" ||
      layout == "shapenetcore_partanno_segmentation_benchmark_v0_normal" || layout == "hdf5_data")
    return 1;
  throw std::invalid_argument("default_up_axis: unknown layout " + layout);
}

std::string resolve_up_axis(pc::PointViewOptions& view, const std::string& layout) {
  static const char* const names[] = {"x", "y", "z"};
  if (view.up_axis >= 0)
    return std::string("up axis: ") + names[view.up_axis] + " (--up-axis " + std::to_string(view.up_axis) + ")";
  view.up_axis = default_up_axis(layout);
  return std::string("up axis: ") + names[view.up_axis] + " (the " + layout + " layout's; --up-axis to choose)";
}

nlohmann::json read_summary(const std::string& run) { return read_json_file(train::RunPaths{run}.summary()); }

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

}  // namespace qkv::tasks
