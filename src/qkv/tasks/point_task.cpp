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
#include "qkv/core/text.h"
#include "qkv/models/presets.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/pointcloud/up_axis.h"
#include "qkv/train/run.h"

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

nlohmann::json measure_invariance(models::Model& model, const data::Dataset& dataset, int64_t shapes, int64_t rotations,
                                  uint64_t seed, const c10::Device& device) {
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

std::optional<int64_t> up_axis_of_name(const std::string& name) {
  const std::string n = lower(name);
  if (n == "x" || n == "y" || n == "z") return n[0] - 'x';
  if (n == "layout") return kUpAxisFromLayout;
  if (n == "auto") return kUpAxisAuto;
  return std::nullopt;
}

int64_t default_up_axis(const std::string& layout) {
  // ModelNet40's meshes stand on z; PointNet's and PointNet++'s resampled
  // copies (HDF5 and text) and ShapeNet-part's point clouds stand on y, as
  // qkv's synthetic shapes do.
  if (layout == pc::kModelNetOffLayout) return 2;
  // A folder of one's own shapes (flat or split): y, as OBJ and glTF exporters
  // write by default (our choice; --up-axis sets it).
  if (layout == pc::kFlatLayout || layout == pc::kSplitLayout) return 1;
  // ScanObjectNN's clouds are read with PointNet's code, which turns them
  // about y (our choice of convention; its files cannot be checked here:
  // --up-axis auto estimates it).
  if (layout == pc::kModelNetResampledLayout || layout == pc::kModelNetH5Layout || layout == "synthetic" ||
      layout == pc::kScanObjectNNLayout || layout == pc::kShapeNetPartTextLayout || layout == pc::kShapeNetPartH5Layout)
    return 1;
  throw std::invalid_argument("default_up_axis: unknown layout " + layout);
}

bool is_qkv_synthetic_source(const std::string& source) {
  if (source == "synthetic") return true;
  const auto made_by = folder_made_by(source);
  return made_by == kSynthShapesCommand || made_by == kSynthPartsCommand;
}

std::string resolve_up_axis(pc::PointViewOptions& view, const std::string& layout, const at::Tensor& train_points) {
  static const char* const names[] = {"x", "y", "z"};
  if (view.up_axis >= 0)
    return std::string("up axis: ") + names[view.up_axis] + " ({up_axis} " + names[view.up_axis] + ")";
  const int64_t convention = default_up_axis(layout);
  if (view.up_axis != kUpAxisAuto) {
    view.up_axis = convention;
    return std::string("up axis: ") + names[view.up_axis] + " (the " + layout + " layout's; {up_axis} to choose)";
  }
  const auto e = pc::estimate_up_axis(train_points);
  view.up_axis = e.axis;
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "mirror asymmetry x %.3f, y %.3f, z %.3f over %lld training shapes",
                e.asymmetry[0], e.asymmetry[1], e.asymmetry[2], static_cast<long long>(e.shapes));
  std::string line = std::string("up axis: ") + names[e.axis] +
                     " ({up_axis} auto: the shapes are least mirror-symmetric across " + names[e.axis] + "; " +
                     numbers + ")";
  if (e.margin < kUpAxisWeakMargin) {
    char margin[32];
    std::snprintf(margin, sizeof margin, "%.2f", e.margin);
    line += std::string("\nwarning: up axis: a weak estimate (") + names[e.axis] + " only " + margin +
            "x the next axis's asymmetry); check the shapes and give {up_axis} x, y or z";
  }
  if (e.axis != convention)
    line += std::string("\nwarning: up axis: estimated ") + names[e.axis] + ", but the " + layout +
            " layout's convention is " + names[convention] + "; rotations and the z/z protocol turn about " +
            names[e.axis];
  return line;
}

nlohmann::json read_summary(const std::string& run) { return read_json_file(train::RunPaths{run}.summary()); }

std::string run_folder_of_checkpoint(const std::string& checkpoint) {
  const auto folder = std::filesystem::path(checkpoint).parent_path();
  if (folder.filename() != "checkpoints") return "";
  const auto run = folder.parent_path();
  return run.empty() ? "." : run.string();
}

bool is_absolute_path(const std::string& path) { return std::filesystem::path(path).is_absolute(); }

void check_synth_dir_apart_from_run(const std::string& synth_dir, const std::string& run_dir) {
  const bool holds_run = path_at_or_below(run_dir, synth_dir);
  bool in_run_files = false;
  for (const auto& name : train::RunPaths::names())
    in_run_files |=
        path_at_or_below(synth_dir, (std::filesystem::path(run_dir) / *std::filesystem::path(name).begin()).string());
  if (holds_run || in_run_files)
    throw ConfigError("synth_dir", synth_dir + ": " + (holds_run ? "is or holds" : "lies in the files of") +
                                       " the run folder {out} " + run_dir +
                                       "; a run and its synthetic shapes are kept apart (leave {synth_dir} out for "
                                       "the run's own RUN/synthetic, or give a folder beside the run)");
}

void refuse_empty_split(int64_t size, const std::string& split) {
  if (size == 0) throw ConfigError("split", split + ": the run's " + split + " split holds no shapes");
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

nlohmann::json point_model_options(const PointModelSettings& s) {
  check_field_ranges(s);
  nlohmann::json options = models::parse_model_options(s.model_options, s.model);
  const nlohmann::json defaults = models::find_model(s.model).resolve({});
  // The numeric fields are the paper's size options, each the model option of
  // its key; 0 leaves it to the model.
  PointModelSettings sizes = s;
  visit_fields(sizes, [&](const Field& f, auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, int64_t>) {
      if (value == 0) return;
      const std::string key = f.key;
      if (!defaults.contains(key)) throw ConfigError(key, "does not apply to " + s.model);
      if (options.contains(key) && options.at(key) != nlohmann::json(value))
        throw ConfigError(key, std::to_string(value) + " and {model_options}' \"" + key +
                                   "\": " + shortened(options.at(key).dump()) + " set the same option; give it once");
      options[key] = value;
    }
  });
  return options;
}

}  // namespace qkv::tasks
