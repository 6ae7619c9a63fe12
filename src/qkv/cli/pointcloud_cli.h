#pragma once
// What `qkv vnt` (classification) and `qkv seg` (part segmentation) share:
// the rotation protocols, rotating a batch, the model's view of a stored set,
// the invariance measurement and the synthetic-data folder.
#include <ATen/core/Tensor.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/train/trainer.h"

namespace qkv::cli {

// "z/so3" -> {Up, SO3}; "i/so3" -> {None, SO3}. UsageError naming --protocol.
std::pair<pointcloud::Rotation, pointcloud::Rotation> parse_protocol(const std::string& protocol);

// R [3, 3] applied to the batch's "points" and "normals" ([B, 3, N]); other
// inputs (a category) are left alone.
data::Batch rotated(const data::Batch& batch, const at::Tensor& rotation);

// The model's view of a stored set: train mode (augmentation) or eval mode
// (no scale or shift), under `rotation`.
data::DatasetPtr view_of(const std::shared_ptr<const pointcloud::PointCloudSet>& set, pointcloud::PointViewOptions view,
                         bool train, pointcloud::Rotation rotation);

// The largest change of any output when the first `shapes` clouds of a data
// set are rotated by `rotations` random SO(3) rotations, in float32 and in
// float64 (the model is copied to double for the latter, then back).
nlohmann::json measure_invariance(models::Model& model, const data::Dataset& dataset, int64_t shapes,
                                  int64_t rotations, uint64_t seed, const c10::Device& device);

// The paper's training setup, for both tasks: 200 epochs, batch 16, Adam
// 5e-4, step decay x0.9 every 20 epochs, scale and shift augmentation.
void set_paper_training_defaults(train::TrainConfig& config, pointcloud::PointViewOptions& view);

// --points, --sampling, --up-axis, --random-scale, --random-shift.
void add_view_options(CLI::App* cmd, pointcloud::PointViewOptions& view, const std::string& sampling_help,
                      const std::string& up_axis_help);

// What a point-cloud `train` command takes about its model.
struct PointModelOptions {
  std::string model;
  std::string model_options = "{}";
  int64_t linear_dim = 0, heads = 0, head_dim = 0;
  std::string init_weights, resume;
};
// --model (one of `models`), --linear-dim, --heads, --head-dim (the paper's
// values in the help), --model-options, --init-weights, --resume.
void add_point_model_options(CLI::App* cmd, PointModelOptions& o, const std::vector<std::string>& models,
                             const std::string& model_help, int64_t paper_linear_dim, int64_t paper_heads);

// --model-options TEXT as a JSON object, plus the size flags that are set
// (> 0): --linear-dim and --head-dim for VNT models (`vnt`), --heads for
// models with attention (`attention`). UsageError naming the option.
nlohmann::json model_options_from_cli(const std::string& text, const std::string& model, bool vnt, bool attention,
                                      int64_t linear_dim, int64_t heads, int64_t head_dim);

// A finished run's summary.json; DataError naming the file.
nlohmann::json read_summary(const std::string& run);

// Before a synthetic data set is (re)written into `dir`: a tree that `marker`
// (e.g. "qkv data synth-parts") wrote is removed, so no stale file is loaded;
// a non-empty folder without that README is refused (UsageError naming
// `option`) rather than deleted.
void clear_synthetic_dir(const std::string& dir, const std::string& marker, const std::string& option);

// Where a train command writes built-in synthetic shapes: `recorded` (the
// folder config.json names) at rank 0; at the other ranks of a distributed run
// a private scratch folder, removed with this object, since rank 0 alone
// writes into the run folder and a rank on another machine has none. The
// shapes are the same: they depend only on the options and the seed.
class SyntheticDataDir {
 public:
  SyntheticDataDir(const std::string& recorded, int64_t rank);
  ~SyntheticDataDir();
  SyntheticDataDir(const SyntheticDataDir&) = delete;
  SyntheticDataDir& operator=(const SyntheticDataDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool scratch_ = false;
};

}  // namespace qkv::cli
