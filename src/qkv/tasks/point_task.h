#pragma once
// What the point-cloud tasks (classification, part segmentation) share: the
// rotation protocols, rotating a batch, the model's view of a stored set, the
// invariance measurement, the paper's training setup and the synthetic-data
// folder.
#include <ATen/core/Tensor.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/pointcloud/point_features.h"
#include "qkv/train/run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// The commands that write qkv's synthetic point sets, as their folders'
// ledgers name them: such a folder given as --data is still qkv's shapes
// (they stand on y; their parts have names).
inline constexpr const char* kSynthShapesCommand = "qkv data synth-shapes";
inline constexpr const char* kSynthPartsCommand = "qkv data synth-parts";

// Whether `source` (a run's --data: "synthetic" or a folder) holds qkv's
// synthetic shapes or parts.
bool is_qkv_synthetic_source(const std::string& source);

// "z/so3" -> {Up, SO3}; "i/so3" -> {None, SO3}. ConfigError naming "protocol".
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
nlohmann::json measure_invariance(models::Model& model, const data::Dataset& dataset, int64_t shapes, int64_t rotations,
                                  uint64_t seed, const c10::Device& device);

// The defaults of both tasks: the paper's batch 16, Adam 5e-4, step decay
// x0.9 every 20 epochs, scale and shift augmentation (App. C, Sec. 4); 200
// epochs (and TrainConfig's weight decay 1e-4) are our choices, the paper
// being silent (docs/reproduction.md; --recipe vnt-paper).
void set_paper_training_defaults(train::TrainConfig& config, pointcloud::PointViewOptions& view);

// The help of --up-axis, for both tasks.
inline constexpr const char* kUpAxisHelp =
    "axis of the z rotations: x, y, z (or 0, 1, 2); layout (-1) = the layout's convention (ModelNet40 OFF meshes: z; "
    "resampled, HDF5, ShapeNet-part, synthetic, flat and split folders of your own: y); auto (-2) = estimated from "
    "the training shapes (the axis across which they are least mirror-symmetric), with a warning where it disagrees "
    "with the layout's";
// up_axis values that ask for a choice when the data are loaded.
inline constexpr int64_t kUpAxisFromLayout = -1;
inline constexpr int64_t kUpAxisAuto = -2;
// The up_axis value of a name: x, y, z, layout or auto, in any case;
// nullopt for any other text.
std::optional<int64_t> up_axis_of_name(const std::string& name);
// Below this margin (pointcloud::UpAxisEstimate) an estimated axis is
// reported as weak: our choice.
inline constexpr double kUpAxisWeakMargin = 1.2;

// The view settings config.json records (the data settings of both tasks
// list them): points, sampling, normalize, up_axis, random_scale,
// random_shift, point_dropout, point_features (where the task's layouts hold
// them), normals, seed.
template <typename V>
void visit_view_fields(pointcloud::PointViewOptions& view, V&& visit, const char* sampling_help,
                       bool with_point_features) {
  visit(Field{"points", "points the model sees per shape"}.range(1, 1 << 20), view.num_points);
  visit(Field{"sampling", sampling_help}.one_of("fps|random|first"), view.sampling);
  visit(Field{"normalize", "", ""}, view.normalize);
  visit(Field{"up_axis", kUpAxisHelp}.range(-2, 2), view.up_axis);
  visit(Field{"random_scale", "training augmentation: scale by U[0.8, 1.25)"}, view.random_scale);
  visit(Field{"random_shift", "training augmentation: shift by U[-0.1, 0.1)^3"}, view.random_shift);
  visit(Field{"point_dropout",
              "training augmentation: per shape, replace a share U[0, this) of the points by the first point "
              "(Vector Neurons' 0.875); 0 = off"}
            .at_least(0)
            .below(1),
        view.point_dropout);
  if (with_point_features)
    visit(Field{"point_features",
                "per-point features the model reads besides xyz, comma-separated: rgb (the colour, 3 channels in "
                "[0, 1]) and scalar properties of the point-cloud files by name (PLY properties, PCD fields: "
                "intensity, ...); a class tree of .ply/.pcd clouds only"},
          view.point_features);
  visit(Field{"normals", "", ""}, view.use_normals);  // decided by the model
  visit(Field{"seed", "", ""}, view.seed);            // --seed
}

// The axis a data layout's shapes stand on: 2 (z) for ModelNet40's OFF meshes
// ("ModelNet40"), 1 (y) for the resampled and HDF5 layouts, ShapeNet-part and
// the synthetic shapes, and a folder of one's own shapes (flat or split).
// std::invalid_argument for a layout it does not know.
int64_t default_up_axis(const std::string& layout);
// Sets view.up_axis from the layout when it is kUpAxisFromLayout (the
// option's default), or from pointcloud::estimate_up_axis of `train_points`
// when it is kUpAxisAuto, and returns what to tell the user: which axis and
// why, then (on lines of their own) warnings for a weak estimate and for one
// that is not the layout's convention.
std::string resolve_up_axis(pointcloud::PointViewOptions& view, const std::string& layout,
                            const at::Tensor& train_points = {});

// The help of eval's and predict's votes.
inline constexpr const char* kVotesHelp =
    "test-time votes: average the class probabilities of this many samplings of each shape (same pose); 0 = the "
    "run's (its --votes, default 1)";

// A point task's `compare`: the train command whose runs it reads, what it
// does, the shapes of the invariance measurement by default, the rows of the
// runs (seeded, on a device) and the table of those rows.
struct PointCompare {
  const char* train_command;
  const char* description;
  int64_t default_shapes;  // in invariance_shapes_field's range
  nlohmann::json (*rows)(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                         const models::ModelLimits& limits, const c10::Device& device);
  std::string (*text)(const nlohmann::json& rows, int64_t shapes);
};

// `vnt eval` / `seg eval`: a run's checkpoint scored on one split of its
// data, or of another folder with the same classes, under a rotation.
struct PointEvalSettings {
  train::CheckpointFile checkpoint;
  std::string split = "test";  // train and val as the run cut them
  std::string data;            // a data folder or "synthetic"; "" = the run's own
  std::string rotate = "so3";
  int64_t invariance_shapes = 0;  // > 0: the largest logit change under 4 rotations on that many shapes
  int64_t votes = 0;              // classification's test-time votes; 0 = the run's
  int64_t batch_size = 0;         // 0 = the run's (train::stored_run_eval_batch_size)
  uint64_t seed = 0;
};

// How many test shapes the invariance measurement of eval and compare takes
// (key "invariance_shapes", option --invariance); `help` says it as each does.
inline Field invariance_shapes_field(const char* help) {
  return Field{"invariance_shapes", help, "invariance"}.range(0, 100000);
}

// The settings eval adds to the checkpoint, split and seed every eval
// command takes (segmentation has no votes).
template <typename V>
void visit_fields(PointEvalSettings& s, V&& visit) {
  visit(Field{"votes", kVotesHelp}.range(0, 64), s.votes);
  visit(train::eval_batch_size_field(), s.batch_size);
  visit(Field{"data", "data folder or 'synthetic'; default: the run's own data"}, s.data);
  visit(Field{"rotate",
              "rotations of the evaluated clouds: none, z or so3 (so3 by default: eval tests invariance; predict "
              "takes the file as it is)"},
        s.rotate);
  visit(invariance_shapes_field("also measure the largest change of the logits (per point for segmentation) under 4 "
                                "random rotations on this many shapes"),
        s.invariance_shapes);
}

// The model of a point-cloud train command: a registry name, its options as
// JSON or a preset's name, and the paper's size settings (0 = the model's
// default).
struct PointModelSettings {
  std::string model;
  std::string model_options = "{}";
  int64_t linear_dim = 0, heads = 0, head_dim = 0;
};

// The model's name is an option of its own: its choices are the task's models.
template <typename V>
void visit_fields(PointModelSettings& s, V&& visit) {
  visit(Field{"model", "registry name (qkv params --list)", ""}, s.model);
  visit(Field{"linear_dim",
              "VNT-Net: linear dimension C (the paper: 16 for classification, 128 for segmentation); 0 = model "
              "default"}
            .range(0, 4096),
        s.linear_dim);
  visit(Field{"heads",
              "models with attention: heads (the VNT paper: 24 for classification, 14 for segmentation); 0 = model "
              "default"}
            .range(0, 1024),
        s.heads);
  visit(Field{"head_dim", "VNT-Net: head size (the paper: 16); 0 = model default"}.range(0, 4096), s.head_dim);
  visit(Field{"model_options",
              "any other model option as JSON, e.g. '{\"k\":16,\"pooling\":\"max\"}', or a preset such as "
              "vnt-1.37m (qkv params --model M lists both)"},
        s.model_options);
}

// The registry options of `s`: model_options plus each size setting that is
// set (> 0). ConfigError naming the size's key where the model has no such
// option or model_options sets it to another value.
nlohmann::json point_model_options(const PointModelSettings& s);

// `data synth-shapes` / `data synth-parts`: a built-in set checked by
// check(options), then written into `out` by write(out, options) (claimed
// as core/output_policy.h allows, with `marker`; marked complete at the end).
// Returns write's summary.
template <typename Options, typename Check, typename Write>
auto write_synthetic_set(const std::string& out, const Options& options, bool overwrite, const OutputMarker& marker,
                         Check check, Write write) {
  if (out.empty()) throw ConfigError("out", "is required (or {list})");
  check(options);
  const auto claim = claim_output_dir(out, "{out}", overwrite, marker);
  clear_for_generation(out);
  auto summary = write(out, options);
  mark_output_complete(out);
  return summary;
}

// The half of a point task's data settings both tasks share: where the
// shapes come from ("synthetic" or a folder), where synthetic shapes are
// written, the generator's, loader's and view's settings, the rotation
// protocol, and how they are loaded. `Source` says what differs:
//   Synth, Load, Data        the generator's and loader's settings, what is loaded
//   check(synth)             refuses bad generator settings (ConfigError), before anything is written
//   marker(synth)            what a synthetic folder's ledger records, so that `qkv data synth-*`
//                            and a train command reuse each other's folder made the same way
//   write(dir, synth)        writes the synthetic shapes; returns the line said on stderr
//   read(dir, load)          loads a folder, saying on stderr what it found
//   kStoredPoints            how messages name the points stored per shape
//   synthetic_points(load)   the points each built-in shape holds once loaded
// Whether a loader's settings take per-point features (the classification layouts' do).
template <typename Load, typename = void>
struct takes_point_features : std::false_type {};
template <typename Load>
struct takes_point_features<Load, std::void_t<decltype(std::declval<Load>().point_features)>> : std::true_type {};

// The run folder holding `checkpoint` (RUN/checkpoints/NAME), or "" for a
// checkpoint file elsewhere.
std::string run_folder_of_checkpoint(const std::string& checkpoint);
bool is_absolute_path(const std::string& path);

// ConfigError naming synth_dir when a run in `run_dir` could not keep its
// synthetic shapes in `synth_dir` apart from its own files: the run folder
// itself or a folder above it (a run written into a synth-shapes folder is
// neither resumed nor overwritten: it is another command's), or a folder the
// run writes in (checkpoints/). RUN/synthetic, the default, is the run's own.
void check_synth_dir_apart_from_run(const std::string& synth_dir, const std::string& run_dir);

template <typename Source>
struct PointSourceData {
  std::string source = "synthetic";
  // synthetic: where the shapes are written. A run records it empty for its
  // own OUT/synthetic, and a folder given with --synth-dir as an absolute
  // path, so that a stored run finds its shapes from any folder and after a
  // move (synthetic_dir_of_run, locate_stored_synthetic_dir).
  std::string synth_dir;
  // False for a stored run that recorded synth_dir relative to where it was
  // trained (before runs recorded it as above): its shapes are read there if
  // present, never written (the current folder may be anyone's).
  bool synthetic_dir_may_be_written = true;
  typename Source::Synth synth;
  typename Source::Load load;
  pointcloud::PointViewOptions view;  // seed, points, augmentation; view_of sets mode and rotation per split
  std::string protocol;

  // The seed and the normals flag are stored once, in `view`; the generator
  // and the loader take copies.
  void copy_view_settings() {
    synth.seed = load.seed = view.seed;
    load.with_normals = view.use_normals;
    if constexpr (takes_point_features<typename Source::Load>::value)
      load.point_features = pointcloud::parse_point_features(view.point_features, "point_features");
  }
  // The generator's settings and the synthetic folder's policy
  // (core/output_policy.h) without writing anything: UsageError if either
  // would be refused, so that a refused run leaves no folder behind.
  void check_synthetic_dir(const std::string& dir, bool overwrite) const {
    if (source != "synthetic") return;
    Source::check(synth);
    qkv::check_synthetic_dir(dir, "synth_dir", overwrite, Source::marker(synth));
  }
  // Loads the data; for "synthetic", writes the shapes into `synth_dir_now`
  // (synth_dir, or a rank's scratch copy) unless qkv already wrote them there
  // with the same settings.
  typename Source::Data load_data(const std::string& synth_dir_now, bool overwrite) const {
    std::string dir = source;
    if (source == "synthetic") {
      dir = synth_dir_now;
      if (const auto claim = claim_synthetic_dir(dir, "synth_dir", overwrite, Source::marker(synth)); claim.generate) {
        const std::string line = Source::write(dir, synth);
        mark_output_complete(dir);
        say_as_is(line);
      }
    }
    return Source::read(dir, load);
  }
  // --data given to a command on a stored run (eval, embed, ...): its data
  // read from there instead. "synthetic" only for a run trained on qkv's
  // synthetic shapes, whose settings it records; a run trained on a folder
  // has none to make.
  void take_data_option(const std::string& data) {
    if (data.empty()) return;
    if (data == "synthetic" && source != "synthetic")
      throw ConfigError("data", "synthetic: the run was trained on " + source +
                                    ", not on qkv's synthetic shapes; give {data} a folder of shapes, or leave it out "
                                    "for the run's own");
    source = data;
  }
  // The data of a stored run (locate_stored_synthetic_dir first): the
  // synthetic shapes are written again only where the run wrote them.
  typename Source::Data load_data() const {
    if (source == "synthetic") {
      if (synth_dir.empty())
        throw DataError(
            "the run's synthetic shapes lie in its run folder, and its checkpoint is not in one "
            "(RUN/checkpoints/); give the run folder as the checkpoint, or the shapes with --data");
      if (!synthetic_dir_may_be_written &&
          qkv::check_synthetic_dir(synth_dir, "synth_dir", false, Source::marker(synth)))
        throw DataError(synth_dir +
                        ": the run's synthetic shapes are not there (the run names this folder relative "
                        "to the folder it was trained in); run this command from there, or give the shapes with "
                        "--data");
    }
    return load_data(synth_dir, false);
  }
  // The folder a stored run's load_data() reads: its synthetic shapes' or
  // the data folder.
  const std::string& folder_read() const { return source == "synthetic" ? synth_dir : source; }
  // Where the synthetic shapes of a run in `run_dir` are.
  std::string synthetic_dir_of_run(const std::string& run_dir) const {
    if (!synth_dir.empty()) return synth_dir;
    if (run_dir.empty()) throw ConfigError("synth_dir", "must name the folder of the synthetic shapes");
    return run_dir + "/synthetic";
  }
  // For a run read back from `checkpoint` (checked_stored_point_data):
  // synth_dir becomes a path from here, empty when the checkpoint lies
  // outside its run folder.
  void locate_stored_synthetic_dir(const std::string& checkpoint) {
    if (source != "synthetic") return;
    if (synth_dir.empty()) {
      const std::string run = run_folder_of_checkpoint(checkpoint);
      if (!run.empty()) synth_dir = synthetic_dir_of_run(run);
    } else if (!is_absolute_path(synth_dir)) {
      synthetic_dir_may_be_written = false;
    }
  }

 protected:
  // What the task's validate() checks of this half besides the fields'
  // ranges: a source is named, a view takes no more points than a shape
  // holds, the protocol is known. ConfigError naming the key.
  void check_source_settings() const {
    if (source.empty()) throw ConfigError("source", "must be 'synthetic' or a folder");
    if (!view.point_features.empty()) {
      if constexpr (!takes_point_features<typename Source::Load>::value)
        throw ConfigError("point_features", "'" + view.point_features +
                                                "': this task's layouts hold no per-point "
                                                "features (classification's do)");
      if (source == "synthetic")
        throw ConfigError("point_features", "'" + view.point_features +
                                                "': the synthetic shapes are meshes without "
                                                "per-point features; give a folder of .ply or .pcd point clouds");
      try {
        pointcloud::parse_point_features(view.point_features, "");
      } catch (const UsageError& e) {
        throw ConfigError("point_features", first_line(e.what()));
      }
    }
    if (load.points_per_shape > 0 && view.num_points > load.points_per_shape)
      throw ConfigError("points", std::to_string(view.num_points) + " is more than the " +
                                      std::to_string(load.points_per_shape) + Source::kStoredPoints);
    // The built-in shapes' count is known before they are written (a folder's, once it is read).
    if (const int64_t built_in = Source::synthetic_points(load); source == "synthetic" && view.num_points > built_in)
      throw ConfigError("points", std::to_string(view.num_points) + " is more than the " + std::to_string(built_in) +
                                      Source::kStoredPoints + " (--points-per-shape " +
                                      std::to_string(view.num_points) + " gives them)");
    parse_protocol(protocol);
  }
};

// ConfigError naming split when a stored run's `split` holds no shapes
// (`size` 0): nothing to score or embed.
void refuse_empty_split(int64_t size, const std::string& split);

// A finished run's summary.json; DataError naming the file.
nlohmann::json read_summary(const std::string& run);

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

// A point-cloud task's data (Data: ClassificationData or PartSegData) for a
// run in `run_dir`, loaded where this rank reads them (a rank > 0 makes its synthetic copy in a
// scratch folder); an up axis left at -1 is set from the layout (-2: from
// the training shapes), and
// *up_axis_line (when given) says so; a points-per-shape of 0 (the layout's)
// is set to what it came to, so that a run records the numbers it used.
template <typename Data>
auto load_point_data(Data& d, const std::string& run_dir, int64_t rank, bool overwrite,
                     std::string* up_axis_line = nullptr) {
  SyntheticDataDir synth_dir(d.source == "synthetic" ? d.synthetic_dir_of_run(run_dir) : "", rank);
  auto loaded = d.load_data(synth_dir.path(), overwrite);
  if (loaded.train.points.defined()) d.load.points_per_shape = loaded.train.points.size(1);
  if (d.view.up_axis < 0) {
    // qkv's own synthetic shapes stand on y in whichever way they are given
    // (--data synthetic, or the folder `data synth-shapes` wrote, whose
    // layout reads as ModelNet40's, which stands on z).
    const auto line =
        resolve_up_axis(d.view, is_qkv_synthetic_source(d.source) ? "synthetic" : loaded.layout, loaded.train.points);
    if (up_axis_line) *up_axis_line = line;
  }
  return loaded;
}

}  // namespace qkv::tasks
