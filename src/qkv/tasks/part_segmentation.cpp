#include "qkv/tasks/part_segmentation.h"

#include <torch/torch.h>

#include <cstdio>
#include <numeric>

#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/train/part_iou.h"

namespace qkv::tasks {

namespace pc = qkv::pointcloud;

OutputMarker synth_parts_marker(const pc::SynthPartsOptions& o) {
  return {"qkv data synth-parts",
          {{"train_per_category", o.train_per_category},
           {"val_per_category", o.val_per_category},
           {"test_per_category", o.test_per_category},
           {"points_per_shape", o.points_per_shape},
           {"categories", o.categories},
           {"seed", o.seed}}};
}

PartSegData::PartSegData() {
  view.num_points = 2048;
  view.sampling = "random";  // the reader's points are already a random sample: take them all, shuffled
  view.up_axis = kUpAxisFromLayout;         // the layout's (resolve_up_axis)
  load.points_per_shape = 0; // the layout's: more than a view takes, so each epoch draws anew
}

PartSegData PartSegData::from_json(const nlohmann::json& j) {
  auto d = fields_from_json<PartSegData>(j, "the run's data settings");
  d.copy_view_settings();
  return d;
}

void PartSegData::validate() const {
  if (source.empty()) throw ConfigError("source", "must be 'synthetic' or a folder");
  if (synth.train_per_category < 1) throw ConfigError("synth_train_per_category", "must be at least 1");
  if (synth.val_per_category < 0) throw ConfigError("synth_val_per_category", "must be >= 0");
  if (synth.test_per_category < 1) throw ConfigError("synth_test_per_category", "must be at least 1");
  if (synth.points_per_shape < 1) throw ConfigError("synth_points_per_shape", "must be at least 1");
  if (load.points_per_shape < 0) throw ConfigError("points_per_shape", "must be >= 0 (0 = the layout's)");
  if (load.max_per_category < 0) throw ConfigError("max_per_category", "must be >= 0 (0 = all)");
  validate_view(view);
  if (load.points_per_shape > 0 && view.num_points > load.points_per_shape)
    throw ConfigError("points", std::to_string(view.num_points) + " is more than the " +
                                    std::to_string(load.points_per_shape) + " points each shape is resampled to");
  parse_protocol(protocol);
}

void PartSegData::copy_view_settings() {
  synth.seed = load.seed = view.seed;
  load.with_normals = view.use_normals;
}

void PartSegData::check_synthetic_dir(const std::string& dir, bool overwrite) const {
  if (source == "synthetic") claim_synthetic_dir(dir, "--synth-dir", overwrite, synth_parts_marker(synth), true);
}

pc::ShapeNetPartData PartSegData::load_data(const std::string& synth_dir_now, bool overwrite) const {
  std::string dir = source;
  if (source == "synthetic") {
    dir = synth_dir_now;
    if (claim_synthetic_dir(dir, "--synth-dir", overwrite, synth_parts_marker(synth))) {
      pc::SynthPartsOptions o = synth;
      o.overwrite = true;  // the claim above decided what may be replaced
      const auto summary = pc::write_synth_parts(dir, o);
      mark_output_complete(dir);
      std::fprintf(stderr, "synthetic parts: %zu categories, %lld shapes in %s\n", summary.categories.size(),
                   static_cast<long long>(summary.files()), dir.c_str());
    }
  }
  auto data = pc::load_shapenet_part(dir, load);
  std::fprintf(stderr, "%s (%s): %lld train / %lld val / %lld test shapes\n", dir.c_str(), data.layout.c_str(),
               static_cast<long long>(data.train.size()), static_cast<long long>(data.val.size()),
               static_cast<long long>(data.test.size()));
  return data;
}

PartSegSplits make_splits(const PartSegData& d, const pc::ShapeNetPartData& data) {
  const auto [train_rotation, test_rotation] = parse_protocol(d.protocol);
  auto train_set = std::make_shared<const pc::PointCloudSet>(data.train);
  auto val_set = std::make_shared<const pc::PointCloudSet>(data.val);
  auto test_set = std::make_shared<const pc::PointCloudSet>(data.test);
  PartSegSplits s;
  s.splits.train = view_of(train_set, d.view, true, train_rotation);
  s.splits.val = view_of(val_set, d.view, false, train_rotation);
  s.splits.test = view_of(test_set, d.view, false, test_rotation);
  for (const auto rotation : {pc::Rotation::None, pc::Rotation::Up, pc::Rotation::SO3})
    if (rotation != test_rotation)
      s.extra_tests.emplace_back(pc::rotation_name(rotation), view_of(test_set, d.view, false, rotation));
  return s;
}

train::MetricFactory part_iou_metric() {
  return [] {
    std::vector<std::vector<int64_t>> parts;
    for (const auto& c : pc::shapenet_part_categories()) {
      parts.emplace_back(static_cast<size_t>(c.parts));
      std::iota(parts.back().begin(), parts.back().end(), c.first_part);
    }
    return std::make_unique<train::PartIoUMetric>(parts, pc::shapenet_part_category_names());
  };
}

}  // namespace qkv::tasks
