#pragma once
// The part-segmentation task (ShapeNet-part, or the built-in synthetic part
// shapes): its data settings as config.json records them, loading, the splits
// under a rotation protocol and the mIoU metric. `qkv seg` is its CLI.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/core/output_policy.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/pointcloud/render.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/tasks/point_task.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/metrics.h"

namespace qkv::tasks {

inline constexpr const char* kPartSegmentationCommand = "seg train";

// ShapeNet-part's layouts and the built-in part shapes, as PointSourceData
// reads them.
struct ShapeNetPartSource {
  using Synth = pointcloud::SynthPartsOptions;
  using Load = pointcloud::ShapeNetPartLoadOptions;
  using Data = pointcloud::ShapeNetPartData;
  static constexpr const char* kStoredPoints = " points each shape is resampled to";
  // Points each built-in shape holds once loaded with `load` (they are written in the text layout).
  static int64_t synthetic_points(const Load& load) {
    return load.points_per_shape > 0 ? load.points_per_shape : pointcloud::kPartTextPointsByDefault;
  }
  static void check(const Synth& options) { pointcloud::check_synth_parts_options(options); }
  static OutputMarker marker(const Synth& options);
  static std::string write(const std::string& dir, const Synth& options);
  static Data read(const std::string& dir, const Load& load);
};

struct PartSegData : PointSourceData<ShapeNetPartSource> {
  // Decided by the data: the categories of the training shapes (names), so
  // that `seg predict` refuses one the model never learnt. Empty in runs
  // made before it was recorded.
  std::vector<std::string> trained_categories;
  // Decided by the data: the shapes are qkv's synthetic parts (--data
  // synthetic, or a folder `data synth-parts` wrote), whose parts have names;
  // recorded when the run trains, so that a moved folder keeps them named.
  bool named_parts = false;

  PartSegData();
  nlohmann::json to_json() const { return fields_to_json(*this); }
  static PartSegData from_json(const nlohmann::json& j);

  void validate() const;  // ConfigError naming the key
};

// `data synth-parts`: the shapes written into `out` (claimed as
// core/output_policy.h allows, marked complete at the end); returns the line
// it prints. synth_parts_list_text: the classes, their synsets and part ids.
std::string write_synth_parts_to(const std::string& out, pointcloud::SynthPartsOptions options, bool overwrite);
std::string synth_parts_list_text();

template <typename V>
void visit_fields(PartSegData& d, V&& visit) {
  visit(Field{"source",
              "'synthetic' (built-in part shapes) or a ShapeNet-part folder: "
              "shapenetcore_partanno_segmentation_benchmark_v0_normal or hdf5_data",
              "data"},
        d.source);
  visit(Field{"synth_dir", "where --data synthetic writes its shapes; default OUT/synthetic"}, d.synth_dir);
  visit(Field{"synth_train_per_category", "synthetic training shapes per category (object class)",
              "synth-train-per-class"}
            .range(1, 100000)
            .was("synth-train-per-category"),
        d.synth.train_per_category);
  visit(Field{"synth_val_per_category", "synthetic validation shapes per category", "synth-val-per-class"}
            .range(1, 100000)
            .was("synth-val-per-category"),
        d.synth.val_per_category);
  visit(Field{"synth_test_per_category", "synthetic test shapes per category", "synth-test-per-class"}
            .range(1, 100000)
            .was("synth-test-per-category"),
        d.synth.test_per_category);
  visit(Field{"synth_points_per_shape", "surface points written per synthetic shape"}.range(1, 1 << 20),
        d.synth.points_per_shape);
  visit(Field{"synth_categories",
              "synthetic categories to write (comma-separated; qkv data synth-parts --list); default all",
              "synth-classes"}
            .was("synth-categories"),
        d.synth.categories);
  visit(Field{"points_per_shape",
              "points each shape is resampled to when loaded, among which views draw; 0 = 2,500 for the text layout "
              "(its files hold ~2,600), 2,048 for HDF5"}
            .range(0, 1 << 20),
        d.load.points_per_shape);
  visit(Field{"max_per_category", "keep at most this many shapes per category (object class) and split; 0 = all",
              "max-per-class"}
            .at_least(0)
            .was("max-per-category"),
        d.load.max_per_category);
  visit(
      Field{"categories", "load only these categories (names or synsets, comma-separated); default all", "classes"}.was(
          "categories"),
      d.load.categories);
  visit_view_fields(d.view, visit, "how they are picked: random (a fresh subset each epoch), fps, first",
                    /*with_point_features=*/false);
  visit(Field{"protocol",
              "train/test rotations: i/i, i/z, i/so3, z/z, z/so3, so3/so3 (i = none); every run also scores the test "
              "set under the other rotations"},
        d.protocol);
  visit(Field{"trained_categories", "", ""}, d.trained_categories);
  visit(Field{"named_parts", "", ""}, d.named_parts);
}

struct PartSegSplits {
  data::Splits splits;
  std::vector<std::pair<std::string, data::DatasetPtr>> extra_tests;  // the other test rotations
};

// Train and val under the training rotation, test under the protocol's test
// rotation, and the test set again under each other rotation (none, z, so3),
// so that one run gives I/I, I/z and I/SO(3) alike.
PartSegSplits make_splits(const PartSegData& d, const pointcloud::ShapeNetPartData& data);

// The scores of ShapeNet-part: mIoU with each shape's category's parts.
train::MetricFactory part_iou_metric();
// The part of each point of a batch [B, N] from its logits [B, N, 50]: the
// arg-max among the parts of the shape's class, as part_iou_metric scores.
at::Tensor predict_among_class_parts(const data::Batch& batch, const at::Tensor& logits);

// One shape's parts as a run's model labels them (`qkv seg predict`).
struct PartPrediction {
  pointcloud::Mesh cloud;            // the points in the input's coordinates, coloured by part; per-point
                                     // properties 'label' (and 'true_label' where the file had labels)
  pointcloud::PointPicture picture;  // its title and the parts' legend
  std::vector<int64_t> labels;       // per point, ShapeNet-part's global part id
  // Input, category, points, parts [{part, name, points}], points_per_part,
  // and accuracy and mIoU against the file's own labels when it had them.
  nlohmann::json report;
  std::vector<std::string> part_names;  // the category's parts, in order (names for the built-in shapes)
  std::vector<int64_t> per_part;        // points per part, in the same order
};

// Labels every point of `input` with the model of a run whose settings are
// `data` (config.json's, the up axis resolved): a ShapeNet-part text file, whose labels are
// then scored, or any shape file read_shape_file reads: a cloud as it is, a
// mesh sampled to the run's points) as object class `category` (an index
// into shapenet_part_categories), prepared as the run's views are (rotated by
// `rotation`, seeded by `seed`). A cloud of at most the run's points goes
// through the network whole. A larger one (a scan of 100,000 points) is
// labelled as the network was trained, on clouds of the run's size: `votes`
// random samplings of that many of its points (seeded by `seed`), each
// normalised as a view is; every point then takes the part probabilities,
// averaged over the votes, of its nearest sampled point
// (nearest_point_indices), so that the labels cover all input points and
// stay rotation invariant. UsageError when the run was trained on other
// classes; DataError naming the file for an unreadable one.
inline constexpr int64_t kDefaultPartVotes = 3;  // our choice: each point sampled with probability 1 - (1 - n/P)^3
PartPrediction predict_parts(models::Model& model, const PartSegData& data, const std::string& input, int64_t category,
                             pointcloud::Rotation rotation, uint64_t seed, const c10::Device& device,
                             int64_t votes = kDefaultPartVotes);

// predict_parts on a cloud in memory, for the Python package: points
// [N, 3] of any size (normals [N, 3] or undefined; a run that takes normals
// needs them), labelled by the run of `checkpoint` as object class
// `category` (a name or synset id), as predict_parts labels a file's points.
// labels [N] int64 (ShapeNet-part's global part ids), probabilities
// [N, parts] float64 (the category's parts, in order). ConfigError naming
// "points", "normals", "category" or "votes" for bad input.
struct CloudParts {
  at::Tensor labels, probabilities;
  int64_t sampled = 0;  // points some vote's sampling held (N for a cloud of at most the run's points)
};
CloudParts predict_cloud_parts(const train::CheckpointFile& checkpoint, const at::Tensor& points,
                               const at::Tensor& normals, const std::string& category, const std::string& rotate,
                               uint64_t seed, int64_t votes, const c10::Device& device);

// `seg train`: the data and the model (vnt-seg unless set).
struct PartSegTrainSettings {
  PartSegData data;
  PointModelSettings model{"vnt-seg"};
};
// The task on `settings`, which the front end fills before a run; the
// paper's view defaults are set into settings->data here.
TrainTask part_segmentation_train_task(std::shared_ptr<PartSegTrainSettings> settings);

// `seg eval`: instance and class mIoU, per-category mIoU and point accuracy
// of s.checkpoint on s.split (s.votes unused), with the invariance
// measurement for s.invariance_shapes > 0.
nlohmann::json evaluate_segmenter_run(const PointEvalSettings& s, const c10::Device& device);

// `seg predict`: the parts of `input` as object class `category` (a
// ShapeNet-part name or synset) written to <out>/<input stem>.parts.ply
// (per-point 'label') and .parts.png; both are checked before any work and
// replaced only when qkv wrote them and `overwrite` is set.
struct PartPredictSettings {
  train::CheckpointFile checkpoint;
  std::string input, category, rotate = "none";
  std::string out = "runs/seg-predict";
  int64_t votes = kDefaultPartVotes;
  uint64_t seed = 0;
  bool overwrite = false;
};
template <typename V>
void visit_fields(PartPredictSettings& s, V&& visit) {
  static const std::string input_help =
      "shape: " + pointcloud::shape_file_kinds_text() +
      ". A point cloud's every point is labelled (any size: see --votes); ShapeNet-part's 'x y z nx ny nz part' "
      "lines have their labels scored; a mesh is sampled to the run's --points";
  visit(Field{"input", input_help.c_str()}.needed(), s.input);
  visit(Field{"category",
              "the object's class: a ShapeNet-part category name or synset, e.g. Table or 04379243 (REQUIRED)", "class"}
            .was("category"),
        s.category);
  visit(
      Field{"rotate", "rotate the shape first: none, z or so3 (seeded by --seed); none by default: the file as it is"},
      s.rotate);
  visit(Field{"votes",
              "a cloud larger than the run's --points: label this many random samplings of that size, then give "
              "every point the averaged part probabilities of its nearest sampled point (our choice: 3)"}
            .range(1, 64),
        s.votes);
}

struct PartPredictResult {
  nlohmann::json report;        // PartPrediction::report with rotate, ply and png
  std::vector<int64_t> labels;  // per point
  std::string text;             // the class, the points per part, the score against the file's labels
};
PartPredictResult predict_parts_to_files(const PartPredictSettings& s, const c10::Device& device);

// `seg compare`: one row per finished run (compare_point_runs) with each test
// rotation's instance and class mIoU under "test"; and the table of those
// rows, protocols written as the papers write them (I/SO(3)).
nlohmann::json compare_segmenter_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                      const models::ModelLimits& limits, const c10::Device& device);
std::string segmenter_compare_text(const nlohmann::json& rows, int64_t shapes);
inline const PointCompare kPartSegmentationCompare{
    kPartSegmentationCommand,
    "table of finished seg runs: instance and class mIoU under each test rotation, invariance error", 16,
    compare_segmenter_runs, segmenter_compare_text};

}  // namespace qkv::tasks
