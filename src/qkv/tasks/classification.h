#pragma once
// The point-cloud classification task (ModelNet40, or the built-in synthetic
// shapes): its data settings as config.json records them, loading, the
// train/val/test splits under a rotation protocol, and one file as the
// model sees it. `qkv vnt` is its CLI.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/core/output_policy.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/modelnet.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/pointcloud/render.h"
#include "qkv/pointcloud/synth_shapes.h"
#include "qkv/tasks/point_task.h"
#include "qkv/tasks/train_task.h"

namespace qkv::tasks {

inline constexpr const char* kClassificationCommand = "vnt train";

// ModelNet40's layouts, or a folder of one's own shapes, and the built-in
// shapes, as PointSourceData reads them.
struct ModelNetSource {
  using Synth = pointcloud::SynthShapesOptions;
  using Load = pointcloud::ModelNetLoadOptions;
  using Data = pointcloud::ModelNetData;
  static constexpr const char* kStoredPoints = " points stored per shape";
  // Points each built-in shape holds once loaded with `load`.
  static int64_t synthetic_points(const Load& load) {
    return load.points_per_shape > 0 ? load.points_per_shape : pointcloud::kMeshSamplesByDefault;
  }
  static void check(const Synth& options) { pointcloud::check_synth_shapes_options(options); }
  static OutputMarker marker(const Synth& options);
  static std::string write(const std::string& dir, const Synth& options);
  static Data read(const std::string& dir, const Load& load);
};

struct ClassificationData : PointSourceData<ModelNetSource> {
  double val_fraction = 0.1;
  // Test-time votes: class probabilities averaged over this many views of
  // each test shape (PointViewOptions::vote); 1 = one view.
  int64_t votes = 1;
  std::vector<std::string> class_names;  // filled once loaded

  ClassificationData();
  nlohmann::json to_json() const { return fields_to_json(*this); }
  static ClassificationData from_json(const nlohmann::json& j);

  // ConfigError naming the key of the first unusable setting.
  void validate() const;
};

// `data synth-shapes`: the shapes written into `out` (claimed as
// core/output_policy.h allows, marked complete at the end); returns the line
// it prints. synth_shapes_list_text: the classes and what varies in each.
std::string write_synth_shapes_to(const std::string& out, pointcloud::SynthShapesOptions options, bool overwrite);
std::string synth_shapes_list_text();

template <typename V>
void visit_fields(ClassificationData& d, V&& visit) {
  visit(Field{"source",
              "'synthetic' (built-in shapes), a ModelNet40 folder (OFF tree, modelnet40_normal_resampled, "
              "modelnet40_ply_hdf5_2048) or a folder of your own shapes by class (see --layout)",
              "data"},
        d.source);
  visit(Field{"synth_dir", "where --data synthetic writes its OFF tree; default OUT/synthetic"}, d.synth_dir);
  visit(Field{"synth_train_per_class", "synthetic shapes per class for training"}.range(1, 100000),
        d.synth.train_per_class);
  visit(Field{"synth_test_per_class", "synthetic shapes per class for testing"}.range(1, 100000),
        d.synth.test_per_class);
  visit(Field{"synth_classes", "synthetic classes to use (comma-separated); default all"}, d.synth.classes);
  visit(Field{"points_per_shape",
              "points stored per shape: mesh surface samples, or the first of pre-sampled files; 0 = every point the "
              "files hold (10,000 in modelnet40_normal_resampled), 2,048 of a mesh or cloud file of your own"}
            .range(0, 1 << 20),
        d.load.points_per_shape);
  visit(Field{"max_per_class", "keep at most this many shapes per class; 0 = all"}.at_least(0), d.load.max_per_class);
  visit(Field{"layout",
              "how the folder holds its shapes: auto (detected, printed), modelnet (<class>/{train,test}/*), split "
              "({train,test}/<class>/*), flat (<class>/*, cut by --test-fraction), resampled "
              "(modelnet40_normal_resampled), hdf5 (modelnet40_ply_hdf5_2048), scanobjectnn (its h5_files folder)"},
        d.load.layout);
  visit(Field{"scanobjectnn_variant",
              "the ScanObjectNN layout: which variant's files (OBJ_ONLY without background, OBJ_BG with it, the "
              "perturbed PB_T25, PB_T25_R, PB_T50_R, PB_T50_RS; our default: PB_T50_RS, the hardest)"}
            .one_of(pointcloud::kScanObjectNNVariants),
        d.load.scanobjectnn_variant);
  visit(Field{"strict",
              "a file in a class folder that is not a shape file is an error (by default it is skipped and counted)"},
        d.load.strict);
  visit(Field{"test_fraction",
              "a flat <class>/* folder: the share of each class's shapes (seeded shuffle) that is the test set"}
            .range(0.01, 0.99),
        d.load.test_fraction);
  visit_view_fields(d.view, visit, "how they are picked: fps (random start in training), random, first",
                    /*with_point_features=*/true);
  visit(Field{"protocol", "train/test rotations: z/z, z/so3, so3/so3 (also none/...)"}, d.protocol);
  visit(Field{"val_fraction",
              "share of the training shapes held out for model selection (ModelNet40 has no validation split; 0.1 is "
              "our choice)"}
            .range(0, 0.9),
        d.val_fraction);
  visit(Field{"votes",
              "test-time votes: average the class probabilities of this many samplings of each test shape (new FPS "
              "start or subset, same pose); the default of eval and predict"}
            .range(1, 64),
        d.votes);
  visit(Field{"class_names", "", ""}, d.class_names);
}

struct ClassificationSplits {
  data::Splits splits;
  std::vector<std::pair<std::string, data::DatasetPtr>> extra_tests;  // the other test rotations
  std::vector<std::string> class_names;
};

// Train and val from ModelNet's train set (a seeded shuffle cuts val off),
// test from its test set rotated as the protocol says, and the test set again
// under the training rotation and under SO(3) where those differ. With
// d.votes > 1 the test sets hold that many views per shape (VotedViews), to be
// scored through a VoteAveraged model (voted_test_model).
ClassificationSplits make_splits(const ClassificationData& d, const pointcloud::ModelNetData& data);

// The eval-mode view of `set` under `rotation` with `votes` views per shape
// (a VotedViews for votes > 1).
data::DatasetPtr voted_view_of(const std::shared_ptr<const pointcloud::PointCloudSet>& set,
                               const pointcloud::PointViewOptions& view, pointcloud::Rotation rotation, int64_t votes);

// One split ("train", "val", "test") in eval mode under `rotation`, train and
// val cut as the run cut them, with `votes` views per shape.
data::DatasetPtr eval_split(const ClassificationData& d, const pointcloud::ModelNetData& data, const std::string& split,
                            pointcloud::Rotation rotation, int64_t votes = 1);

// One file as the run's model sees it: sampled, normalised and rotated by
// `rotation` (seeded), as a one-cloud batch; with votes > 1, that many views
// of it in one batch (as VotedViews gives them).
data::Batch single_cloud_batch(const ClassificationData& d, const std::string& path, pointcloud::Rotation rotation,
                               uint64_t seed, int64_t votes = 1);

// TrainHooks::test_model for d.votes (none for one vote).
std::function<models::ModelPtr(models::Model&)> voted_test_model(int64_t votes);

// One attention row of a VNT-Net run drawn on a shape and on a copy turned
// by a random rotation (`qkv vnt attention`; the paper's Figure 1): the row
// of point `query` in basic block `block`, averaged over its heads. With
// local attention (vnt-local) the row weighs the query's neighbours only:
// every other point has weight 0.
struct AttentionPictures {
  // [0] the shape as the run's model sees it, [1] the rotated copy: coloured
  // by weight (heat_colour, both on [0]'s scale), per-point property
  // 'attention'; and their pictures (query ringed, colour bar, notes).
  pointcloud::Mesh clouds[2];
  pointcloud::PointPicture pictures[2];
  // query, block, scale, max_attention, min_attention, uniform_attention
  // (1/N, or 1/k over k neighbours), max_attention_difference between the
  // two rows.
  nlohmann::json report;
};

// `scale`: "absolute" (0 to the row's largest weight, so a near-uniform row
// looks uniform) or "row" (its smallest to largest). UsageError for a model
// without attention over the points (Model::attention_maps), a block or query out of range, or
// another scale; DataError naming the file for an unreadable one.
AttentionPictures attention_pictures(models::Model& model, const ClassificationData& data, const std::string& input,
                                     int64_t query, int64_t block, const std::string& scale, uint64_t seed,
                                     const c10::Device& device);

// `vnt attention`: the shape, the query point and block, the colour scale.
struct AttentionSettings {
  std::string input;
  int64_t query = 0, block = 0;
  std::string scale = "absolute";
};

template <typename V>
void visit_fields(AttentionSettings& s, V&& visit) {
  static const std::string input_help = "shape file: " + pointcloud::shape_file_kinds_text();
  visit(Field{"input", input_help.c_str()}.needed(), s.input);
  visit(Field{"query", "index of the query point whose attention row colours the cloud"}.range(0, 1 << 20), s.query);
  visit(Field{"block", "which basic block's attention (0-based), averaged over its heads"}.range(0, 1024), s.block);
  visit(Field{"scale",
              "colour scale: absolute (0 to the row's largest weight, so a near-uniform row looks uniform) or row (the "
              "row's smallest to largest weight: contrast stretched)"}
            .one_of("absolute|row"),
        s.scale);
}

// attention_pictures for the run of `checkpoint`, written to
// <out>/{shape,rotated}.{ply,png} (out claimed as core/output_policy.h
// allows); returns the report with the four file names.
nlohmann::json write_attention_pictures(const train::CheckpointFile& checkpoint, const AttentionSettings& s,
                                        uint64_t seed, const std::string& out, bool overwrite,
                                        const c10::Device& device);

// `vnt train`: the data and the model (vnt unless set).
struct ClassificationTrainSettings {
  ClassificationData data;
  PointModelSettings model{"vnt"};
};
// The task on `settings`, which the front end fills before a run; the
// paper's view defaults are set into settings->data here.
TrainTask classification_train_task(std::shared_ptr<ClassificationTrainSettings> settings);

// `vnt eval`: accuracy, mean class accuracy, per-class scores and confusion
// matrix (train::AccuracyMetric) of s.checkpoint on s.split, with the split,
// rotation, votes and size, and with s.invariance_shapes > 0 the invariance
// measurement. DataError when the data's classes are not the run's.
nlohmann::json evaluate_classifier_run(const PointEvalSettings& s, const c10::Device& device);

// `vnt predict`'s options beyond the checkpoint and the run options.
struct ShapePredictSettings {
  std::string input, rotate = "none";
  int64_t top = 5, votes = 0;
};
template <typename V>
void visit_fields(ShapePredictSettings& s, V&& visit) {
  static const std::string input_help =
      "shape file: " + pointcloud::shape_file_kinds_text() + "; .txt .xyz .csv hold x y z [nx ny nz] lines";
  visit(Field{"input", input_help.c_str()}.needed(), s.input);
  visit(
      Field{"rotate", "rotate the shape first: none, z or so3 (seeded by --seed); none by default: the file as it is"},
      s.rotate);
  visit(Field{"top", "classes to print (text output)"}.range(1, 100000), s.top);
  visit(Field{"votes", kVotesHelp}.range(0, 64), s.votes);
}

// `vnt predict`: one shape file's class probabilities under a run's model,
// most likely first; `votes` 0 = the run's.
struct ShapeClassification {
  std::vector<std::pair<std::string, double>> ranked;  // class, probability
  int64_t votes = 0;
  // {input, rotate, votes, prediction, probabilities: {class: p}}
  nlohmann::json to_json(const std::string& input, const std::string& rotate) const;
  // "INPUT: best" and the `top` most likely classes with their probabilities.
  std::string text(const std::string& input, int64_t top) const;
};
ShapeClassification classify_shape_file(const train::CheckpointFile& checkpoint, const std::string& input,
                                        const std::string& rotate, uint64_t seed, int64_t votes,
                                        const c10::Device& device);

// `vnt embed`'s options beyond the checkpoint, --out and the run options.
struct ShapeEmbedSettings {
  std::string input, split, data, rotate = "none";
  int64_t votes = 0;
};
template <typename V>
void visit_fields(ShapeEmbedSettings& s, V&& visit) {
  static const std::string input_help = "a shape file, or a folder whose shape files (" +
                                        pointcloud::shape_file_kinds_text(/*without_txt=*/true) +
                                        ", in subfolders too; .txt only as a file) are embedded in name order; or "
                                        "--split";
  visit(Field{"input", input_help.c_str()}, s.input);
  visit(Field{"split", "embed a split of the run's data instead of --input: train, val or test (with its labels)"},
        s.split);
  visit(Field{"data", "with --split: a data folder or 'synthetic'; default: the run's own data"}, s.data);
  visit(Field{"rotate", "rotate each shape first: none, z or so3 (seeded by --seed); none by default"}, s.rotate);
  visit(
      Field{"votes", "views averaged per shape (each sampled as the run's eval views are); 0 = the run's votes"}.range(
          0, 64),
      s.votes);
}

// `vnt embed`: the run's model's rotation-invariant embedding
// (models::Model::features, the pooled features its head classifies) of
// every shape, averaged over the views of `votes`.
struct ShapeEmbeddings {
  at::Tensor features;              // [S, D] float32 on the CPU
  std::vector<std::string> shapes;  // the file, or "<split>/<index>"
  std::vector<std::string> labels;  // the class of a split's shape; "" for a file
  int64_t votes = 0;
};
// UsageError (naming the settings' keys) for neither or both of input and
// split, another split or rotation, a folder without shape files, or a
// model without features; DataError naming a file that cannot be read.
ShapeEmbeddings embed_shapes(const train::CheckpointFile& checkpoint, const ShapeEmbedSettings& s, uint64_t seed,
                             const c10::Device& device);
// The same into the folder `out`: embeddings.npy ([S, D] float32, rows in
// the order of embeddings.csv) and embeddings.csv (shape, class, then the D
// values); the folder is claimed as every output is (core/output_policy.h).
// The settings and the folder are checked before the checkpoint is read.
// Returns {shapes, dims, votes, rotate, npy, csv}.
nlohmann::json write_shape_embeddings(const train::CheckpointFile& checkpoint, const ShapeEmbedSettings& s,
                                      uint64_t seed, const std::string& out, bool overwrite, const c10::Device& device);

// `vnt compare`: one row per finished run (compare_point_runs) with each test
// rotation's accuracy under "test_accuracy"; and the table of those rows.
nlohmann::json compare_classifier_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                       const models::ModelLimits& limits, const c10::Device& device);
std::string classifier_compare_text(const nlohmann::json& rows, int64_t shapes);
inline const PointCompare kClassificationCompare{
    kClassificationCommand,
    "table of finished vnt runs: accuracy under each test rotation and the measured invariance error", 32,
    compare_classifier_runs, classifier_compare_text};

}  // namespace qkv::tasks
