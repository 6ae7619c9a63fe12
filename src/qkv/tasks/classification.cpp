#include "qkv/tasks/classification.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "qkv/core/atomic_file.h"
#include "qkv/core/csv.h"
#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/npy.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/picture/raster.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/tasks/point_runs.h"
#include "qkv/tasks/voting.h"
#include "qkv/train/metrics.h"

namespace qkv::tasks {

namespace pc = qkv::pointcloud;
using picture::compact_number;
using picture::heat_colour;

std::string write_synth_shapes_to(const std::string& out, pc::SynthShapesOptions options, bool overwrite) {
  const auto summary = write_synthetic_set(out, options, overwrite, ModelNetSource::marker(options),
                                           pc::check_synth_shapes_options, pc::write_synth_shapes);
  return "synth-shapes: " + std::to_string(summary.classes.size()) + " classes, " + std::to_string(summary.files()) +
         " files (" + std::to_string(summary.train_files) + " train, " + std::to_string(summary.test_files) +
         " test) in " + summary.out_dir + "\n";
}

std::string synth_shapes_list_text() {
  std::string text;
  for (const auto& cls : pc::synth_shape_classes()) {
    char line[512];
    std::snprintf(line, sizeof line, "%-10s %s\n", cls.c_str(), pc::synth_shape_description(cls).c_str());
    text += line;
  }
  return text;
}

OutputMarker ModelNetSource::marker(const pc::SynthShapesOptions& o) {
  return {kSynthShapesCommand,
          {{"train_per_class", o.train_per_class},
           {"test_per_class", o.test_per_class},
           {"classes", o.classes},
           {"seed", o.seed}}};
}

namespace {

// ModelNet has no validation split: a seeded shuffle of its train set gives
// {train, val} indices.
std::pair<std::vector<int64_t>, std::vector<int64_t>> train_val_indices(const ClassificationData& d, int64_t shapes) {
  std::vector<int64_t> order(static_cast<size_t>(shapes));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(d.view.seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto n_val = static_cast<std::ptrdiff_t>(d.val_fraction * static_cast<double>(order.size()));
  return {std::vector<int64_t>(order.begin() + n_val, order.end()),
          std::vector<int64_t>(order.begin(), order.begin() + n_val)};
}

}  // namespace

ClassificationData::ClassificationData() {
  protocol = "z/z";
  view.up_axis = kUpAxisFromLayout;  // the layout's (resolve_up_axis)
  load.points_per_shape = 0;         // every stored point: FPS chooses among all of them, as the paper's sampling does
}

ClassificationData ClassificationData::from_json(const nlohmann::json& j) {
  auto d = fields_from_json<ClassificationData>(j, "the run's data settings");
  d.copy_view_settings();
  return d;
}

void ClassificationData::validate() const {
  check_field_ranges(*this);
  if (!pc::is_layout_choice(load.layout))
    throw ConfigError("layout",
                      load.layout + ": expected auto, modelnet, split, flat, resampled, hdf5 or scanobjectnn");
  if (source == "synthetic" && load.layout != "auto" && load.layout != "modelnet")
    throw ConfigError("layout",
                      load.layout + ": the synthetic shapes are written as a ModelNet40 tree (auto or modelnet)");
  check_source_settings();
}

std::string ModelNetSource::write(const std::string& dir, const Synth& options) {
  const auto summary = pc::write_synth_shapes(dir, options);
  return "synthetic shapes: " + std::to_string(summary.classes.size()) + " classes, " +
         std::to_string(summary.files()) + " files in " + dir;
}

pc::ModelNetData ModelNetSource::read(const std::string& dir, const Load& load) {
  auto data = pc::load_modelnet40(dir, load);
  say_as_is(dir + " (" + data.layout + " layout" + (load.layout == "auto" ? ", detected" : "") +
            "): " + std::to_string(data.train.size()) + " train / " + std::to_string(data.test.size()) +
            " test shapes, " + std::to_string(data.train.class_names.size()) + " classes");
  if (!data.skipped.empty()) say_as_is(dir + ": " + data.skipped);
  return data;
}

ClassificationSplits make_splits(const ClassificationData& d, const pc::ModelNetData& data) {
  const auto [train_rotation, test_rotation] = parse_protocol(d.protocol);
  auto train_set = std::make_shared<const pc::PointCloudSet>(data.train);
  auto test_set = std::make_shared<const pc::PointCloudSet>(data.test);
  const auto [train_idx, val_idx] = train_val_indices(d, train_set->size());
  ClassificationSplits s;
  s.splits.train = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, true, train_rotation), train_idx);
  s.splits.val = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, false, train_rotation), val_idx);
  s.splits.test = voted_view_of(test_set, d.view, test_rotation, d.votes);
  for (const auto rotation : {train_rotation, pc::Rotation::SO3})
    if (rotation != test_rotation && std::none_of(s.extra_tests.begin(), s.extra_tests.end(), [&](const auto& e) {
          return e.first == pc::rotation_name(rotation);
        }))
      s.extra_tests.emplace_back(pc::rotation_name(rotation), voted_view_of(test_set, d.view, rotation, d.votes));
  s.class_names = data.train.class_names;
  return s;
}

data::DatasetPtr voted_view_of(const std::shared_ptr<const pc::PointCloudSet>& set, const pc::PointViewOptions& view,
                               pc::Rotation rotation, int64_t votes) {
  if (votes <= 1) return view_of(set, view, false, rotation);
  std::vector<data::DatasetPtr> views;
  for (int64_t v = 0; v < votes; ++v) {
    pc::PointViewOptions one = view;
    one.vote = v;
    views.push_back(view_of(set, one, false, rotation));
  }
  return std::make_shared<VotedViews>(std::move(views));
}

std::function<models::ModelPtr(models::Model&)> voted_test_model(int64_t votes) {
  if (votes <= 1) return {};
  return [votes](models::Model& trained) { return std::make_shared<VoteAveraged>(trained, votes); };
}

namespace {

// A run without a validation split (val_fraction 0) has no val split to
// score: said before its data are read.
void refuse_missing_val_split(const ClassificationData& d, const std::string& split) {
  if (split == "val" && d.val_fraction <= 0)
    throw ConfigError("split", "val: the run's val split holds no shapes (it was trained with val_fraction 0)");
}

}  // namespace

data::DatasetPtr eval_split(const ClassificationData& d, const pc::ModelNetData& data, const std::string& split,
                            pc::Rotation rotation, int64_t votes) {
  const bool test = split == "test";
  auto set = std::make_shared<const pc::PointCloudSet>(test ? data.test : data.train);
  data::DatasetPtr part = voted_view_of(set, d.view, rotation, votes);
  if (test) return part;
  const auto [train_idx, val_idx] = train_val_indices(d, set->size());
  return std::make_shared<data::SubsetDataset>(part, split == "val" ? val_idx : train_idx);
}

data::Batch single_cloud_batch(const ClassificationData& d, const std::string& path, pc::Rotation rotation,
                               uint64_t seed, int64_t votes) {
  pc::PointViewOptions view = d.view;
  view.rotation = rotation;
  view.seed = seed;
  view.train = false;
  const auto mesh = pc::read_shape_file(path);
  std::vector<at::Tensor> points, normals, features;
  for (int64_t v = 0; v < std::max<int64_t>(1, votes); ++v) {
    view.vote = v;
    at::Tensor n, f;
    points.push_back(pc::prepare_single_cloud(mesh, view, view.use_normals ? &n : nullptr, path, &f));
    normals.push_back(n);
    features.push_back(f);
  }
  data::Batch batch;
  batch.inputs["points"] = torch::cat(points, 0);
  if (view.use_normals) batch.inputs["normals"] = torch::cat(normals, 0);
  if (!view.point_features.empty()) batch.inputs["features"] = torch::cat(features, 0);
  batch.target = torch::zeros({1}, torch::kLong);
  return batch;
}

AttentionPictures attention_pictures(models::Model& model, const ClassificationData& data, const std::string& input,
                                     int64_t query, int64_t block, const std::string& scale, uint64_t seed,
                                     const c10::Device& device) {
  if (scale != "absolute" && scale != "row") throw UsageError("scale " + scale + ": expected absolute or row");
  const auto batch = single_cloud_batch(data, input, pc::Rotation::None, seed);
  const int64_t n = batch.input("points").size(2);
  if (query < 0 || query >= n)
    throw UsageError("query " + std::to_string(query) + ": the cloud has " + std::to_string(n) + " points");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const auto turned = rotated(batch, pc::random_so3(gen).to(torch::kFloat));
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> rows;
  int64_t keys_per_query = n;
  for (const data::Batch* b : {&batch, &turned}) {
    const auto maps = model.attention_maps(b->to(device));
    if (block < 0 || block >= static_cast<int64_t>(maps.layers.size()))
      throw UsageError("block " + std::to_string(block) + ": the model has " + std::to_string(maps.layers.size()) +
                       " blocks");
    auto row = maps.layers[static_cast<size_t>(block)][0].mean(0)[query].to(torch::kCPU, torch::kDouble);  // [N] or [k]
    if (maps.keys.defined()) {  // local attention: the query's neighbours' weights, 0 for every other point
      keys_per_query = row.size(0);
      row = torch::zeros({n}, row.options()).index_put_({maps.keys[0][query].to(torch::kCPU)}, row);
    }
    rows.push_back(row);
  }
  // Both clouds use the first one's scale, so equal weights get equal
  // colours. A row of N weights sums to 1: uniform attention is 1/N
  // everywhere, which the absolute scale shows as one colour.
  const double top = rows[0].max().item<double>(), bottom = rows[0].min().item<double>();
  const double lo = scale == "row" ? bottom : 0.0;
  const double span = std::max(top - lo, 1e-30);
  const double uniform = 1.0 / static_cast<double>(keys_per_query);
  AttentionPictures out;
  for (size_t i = 0; i < 2; ++i) {
    const auto pts = (i == 0 ? batch : turned).input("points")[0].t().contiguous();  // [N, 3]
    const float* xyz = pts.data_ptr<float>();
    const auto row = rows[i].contiguous();
    const double* weights = row.data_ptr<double>();
    pc::Mesh& cloud = out.clouds[i];
    pc::VertexProperty weight{"attention", false, {}};
    for (int64_t p = 0; p < n; ++p) {
      cloud.vertices.push_back({xyz[3 * p], xyz[3 * p + 1], xyz[3 * p + 2]});
      cloud.colors.push_back(heat_colour((weights[p] - lo) / span));
      weight.values.push_back(weights[p]);
    }
    cloud.vertex_properties.push_back(std::move(weight));
    pc::PointPicture& picture = out.pictures[i];
    picture.title = std::string(i == 0 ? "Input" : "Rotated (random SO(3))") + ": attention of point " +
                    std::to_string(query) + ", block " + std::to_string(block);
    picture.marked_point = query;
    picture.marked_label = "query";
    picture.colourbar = true;
    picture.bar_lo = lo;
    picture.bar_hi = lo + span;
    picture.bar_label = "attention";
    picture.notes = {"mean over heads; " + std::to_string(n) + " points, uniform = 1/" +
                         std::to_string(keys_per_query) + " = " + compact_number(uniform) +
                         (keys_per_query < n ? " over the query's " + std::to_string(keys_per_query) + " neighbours"
                                             : std::string()),
                     "scale " + scale + ": " + compact_number(lo) + " .. " + compact_number(lo + span) +
                         (scale == "row" ? " (stretched to the row's range)" : "")};
  }
  out.report = {{"input", input},
                {"query", query},
                {"block", block},
                {"scale", scale},
                {"max_attention_difference", (rows[0] - rows[1]).abs().max().item<double>()},
                {"max_attention", top},
                {"min_attention", bottom},
                {"uniform_attention", uniform}};
  return out;
}

TrainTask classification_train_task(std::shared_ptr<ClassificationTrainSettings> settings) {
  return point_train_task(
      settings, kClassificationCommand, "train a point-cloud classifier; writes a run folder", "runs/vnt",
      [](nlohmann::json& options) {
        // The data's classes size the head; another count given here was
        // replaced without a word.
        if (options.contains("classes"))
          throw ConfigError("model_options",
                            ": 'classes' is fixed by the data (their class folders or "
                            "--synth-classes)");
      },
      [](train::RunRequest& r, ClassificationData& d, const pc::ModelNetData&, const ClassificationSplits& s,
         const LoadContext& context, TaskRun& run) {
        if (context.resume && s.class_names != d.class_names)
          throw DataError("{resume} " + context.run_dir + ": the data's classes differ from the stored run's");
        // Said of the data, not as the model option 'classes' the user never gave.
        if (s.class_names.size() < 2)
          throw DataError(
              d.source + ": holds " +
              (s.class_names.empty() ? std::string("no class") : "1 class (" + s.class_names.front() + ")") +
              "; a classifier is trained on at least 2");
        d.class_names = s.class_names;
        r.model_options["classes"] = static_cast<int64_t>(s.class_names.size());
        run.hooks.test_model = voted_test_model(d.votes);
        const auto names = s.class_names;
        run.hooks.final_metrics = [names] { return std::make_unique<train::AccuracyMetric>(names); };
      });
}

namespace {
auto load_classifier_run(const train::CheckpointFile& checkpoint, const c10::Device& device) {
  return load_point_run<ClassificationData>(checkpoint, device, kClassificationCommand);
}
}  // namespace

nlohmann::json write_attention_pictures(const train::CheckpointFile& checkpoint, const AttentionSettings& s,
                                        uint64_t seed, const std::string& out, bool overwrite,
                                        const c10::Device& device) {
  check_outputs_apart(out, "{out}", {{"input", s.input}, {"checkpoint", checkpoint.path}});
  check_output_dir(out, "{out}", overwrite, "vnt attention");  // before the work, not after it
  auto run = load_classifier_run(checkpoint, device);
  auto pictures = attention_pictures(*run.model, run.data, s.input, s.query, s.block, s.scale, seed, device);
  const auto claim = claim_output_dir(out, "{out}", overwrite, {"vnt attention", {}});
  auto& report = pictures.report;
  const char* names[] = {"shape", "rotated"};
  for (size_t i = 0; i < 2; ++i) {
    const std::string stem = out + "/" + names[i];
    pc::write_ply_sized(stem + ".ply", pictures.clouds[i]);
    pc::write_points_png(stem + ".png", pictures.clouds[i], pictures.pictures[i]);
    report[names[i]] = stem + ".ply";
    report[std::string(names[i]) + "_png"] = stem + ".png";
  }
  return report;
}

nlohmann::json evaluate_classifier_run(const PointEvalSettings& s, const c10::Device& device) {
  const auto rotation = pc::parse_rotation(s.rotate, "rotate");
  auto run = load_classifier_run(s.checkpoint, device);
  ClassificationData d = run.data;
  d.take_data_option(s.data);
  refuse_missing_val_split(d, s.split);
  const auto loaded = d.load_data();
  if (loaded.train.class_names != run.data.class_names)
    throw DataError(d.source + ": its classes differ from those the checkpoint was trained on");
  const int64_t votes = s.votes > 0 ? s.votes : run.data.votes;
  const auto part = eval_split(d, loaded, s.split, rotation, votes);
  refuse_empty_split(part->size(), s.split);
  const auto names = run.data.class_names;
  VoteAveraged voted(*run.model, votes);
  auto metrics = train::evaluate(voted, *part, train::stored_run_eval_batch_size(run.config, s.batch_size), device,
                                 [names] { return std::make_unique<train::AccuracyMetric>(names); });
  metrics["split"] = s.split;
  metrics["rotate"] = pc::rotation_name(rotation);
  metrics["votes"] = votes;
  metrics["size"] = part->size();
  if (s.invariance_shapes > 0)
    metrics["invariance"] = measure_invariance(*run.model, *part, s.invariance_shapes, 4, s.seed, device);
  return metrics;
}

nlohmann::json ShapeClassification::to_json(const std::string& input, const std::string& rotate) const {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [name, probability] : ranked) p[name] = probability;
  return {{"input", input},
          {"rotate", rotate},
          {"votes", votes},
          {"prediction", ranked.front().first},
          {"probabilities", p}};
}

std::string ShapeClassification::text(const std::string& input, int64_t top) const {
  std::string out = input + ": " + ranked.front().first + "\n";
  for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(top), ranked.size()); ++i) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-16s %.4f\n", ranked[i].first.c_str(), ranked[i].second);
    out += line;
  }
  return out;
}

ShapeClassification classify_shape_file(const train::CheckpointFile& checkpoint, const std::string& input,
                                        const std::string& rotate, uint64_t seed, int64_t votes,
                                        const c10::Device& device) {
  const auto rotation = pc::parse_rotation(rotate, "rotate");
  auto run = load_classifier_run(checkpoint, device);
  ShapeClassification result;
  result.votes = votes > 0 ? votes : run.data.votes;
  const auto batch = single_cloud_batch(run.data, input, rotation, seed, result.votes);
  torch::NoGradGuard no_grad;
  const auto probs = average_votes(run.model->forward(batch.to(device)), result.votes).exp()[0].to(torch::kCPU);
  const auto order = std::get<1>(probs.sort(0, /*descending=*/true));
  for (int64_t i = 0; i < order.numel(); ++i) {
    const int64_t c = order[i].item<int64_t>();
    result.ranked.emplace_back(run.data.class_names.at(static_cast<size_t>(c)), probs[c].item<double>());
  }
  return result;
}

namespace {

// The shape files of a folder, below it too, in name order
// (pc::shape_files_below, the class trees' rule: .txt left out, other files
// that are not shapes counted and said); the file itself when `input` is one.
std::vector<std::string> shape_files_of(const std::string& input) {
  std::error_code error;
  if (!std::filesystem::is_directory(input, error)) {
    if (!std::filesystem::exists(input, error)) throw ConfigError("input", input + ": no such file or folder");
    return {input};
  }
  auto below = pc::shape_files_below(input);
  if (below.files.empty())
    throw ConfigError("input", input + ": holds no shape file: " + pc::shape_file_kinds_text(/*without_txt=*/true));
  if (!below.skipped.empty()) say_as_is(input + ": left out " + below.skipped);
  return std::move(below.files);
}

void check_embed_settings(const ShapeEmbedSettings& s) {
  if (s.input.empty() == s.split.empty())
    throw ConfigError("input",
                      "give a shape file or folder, or {split} for a split of the run's data (one of the two)");
  if (!s.split.empty() && s.split != "train" && s.split != "val" && s.split != "test")
    throw ConfigError("split", s.split + ": expected train, val or test");
  if (!s.data.empty() && s.split.empty()) throw ConfigError("data", "is read with {split} only");
  pc::parse_rotation(s.rotate, "rotate");
}

// [V * B, D] features of VotedViews' layout (the V views of a batch one
// after the other) -> [B, D], their mean.
at::Tensor average_view_features(const at::Tensor& features, int64_t votes) {
  return features.view({votes, features.size(0) / votes, features.size(1)}).mean(0);
}

// What embed takes besides the run, found before the checkpoint is read
// (check_embed_settings first): the rotation and --input's shape files.
struct EmbedRequest {
  pc::Rotation rotation;
  std::vector<std::string> files;
};
EmbedRequest embed_request(const ShapeEmbedSettings& s) {
  return {pc::parse_rotation(s.rotate, "rotate"),
          s.input.empty() ? std::vector<std::string>{} : shape_files_of(s.input)};
}

ShapeEmbeddings embed_run(LoadedPointRun<ClassificationData>& run, const ShapeEmbedSettings& s,
                          const EmbedRequest& request, uint64_t seed, const c10::Device& device) {
  const auto& [rotation, files] = request;
  ShapeEmbeddings result;
  result.votes = s.votes > 0 ? s.votes : run.data.votes;
  std::vector<at::Tensor> rows;
  torch::NoGradGuard no_grad;
  auto embed = [&](const data::Batch& batch) {
    rows.push_back(average_view_features(run.model->features(batch.to(device)), result.votes).to(torch::kCPU));
  };
  if (!files.empty()) {
    for (const auto& file : files) {
      embed(single_cloud_batch(run.data, file, rotation, seed, result.votes));
      result.shapes.push_back(file);
      result.labels.emplace_back();
    }
  } else {
    ClassificationData d = run.data;
    d.take_data_option(s.data);
    refuse_missing_val_split(d, s.split);
    const auto loaded = d.load_data();
    if (loaded.train.class_names != run.data.class_names)
      throw DataError(d.source + ": its classes differ from those the checkpoint was trained on");
    const auto part = eval_split(d, loaded, s.split, rotation, result.votes);
    const int64_t batch_size = run.config.at("train").at("batch_size").get<int64_t>();
    for (int64_t begin = 0; begin < part->size(); begin += batch_size) {
      std::vector<int64_t> indices(static_cast<size_t>(std::min(batch_size, part->size() - begin)));
      std::iota(indices.begin(), indices.end(), begin);
      const auto batch = part->get(indices);
      embed(batch);
      const auto target = batch.target.to(torch::kCPU).contiguous();
      const auto* classes = target.data_ptr<int64_t>();
      for (size_t i = 0; i < indices.size(); ++i) {
        result.shapes.push_back(s.split + "/" + std::to_string(indices[i]));
        result.labels.push_back(run.data.class_names.at(static_cast<size_t>(classes[i])));
      }
    }
  }
  refuse_empty_split(static_cast<int64_t>(rows.size()), s.split);
  result.features = torch::cat(rows).to(torch::kFloat).contiguous();
  return result;
}

}  // namespace

ShapeEmbeddings embed_shapes(const train::CheckpointFile& checkpoint, const ShapeEmbedSettings& s, uint64_t seed,
                             const c10::Device& device) {
  check_embed_settings(s);
  const auto request = embed_request(s);
  auto run = load_classifier_run(checkpoint, device);
  return embed_run(run, s, request, seed, device);
}

nlohmann::json write_shape_embeddings(const train::CheckpointFile& checkpoint, const ShapeEmbedSettings& s,
                                      uint64_t seed, const std::string& out, bool overwrite,
                                      const c10::Device& device) {
  // Everything that can be refused before the checkpoint is read.
  check_embed_settings(s);
  check_outputs_apart(out, "{out}", {{"input", s.input}, {"checkpoint", checkpoint.path}, {"data", s.data}});
  check_output_dir(out, "{out}", overwrite, "vnt embed");
  const auto request = embed_request(s);
  auto run = load_classifier_run(checkpoint, device);
  // Without --data the split comes from the folder the run recorded: apart from the output too.
  if (!s.split.empty() && s.data.empty())
    check_outputs_apart(out, "{out}", {{"checkpoint", run.data.folder_read(), checkpoint.path}});
  const auto embeddings = embed_run(run, s, request, seed, device);
  const auto& f = embeddings.features;
  const int64_t shapes = f.size(0), dims = f.size(1);
  std::string csv = "shape,class";
  for (int64_t j = 0; j < dims; ++j) csv += ",f" + std::to_string(j);
  csv += "\n";
  const float* values = f.data_ptr<float>();
  for (int64_t i = 0; i < shapes; ++i) {
    csv += csv_field(embeddings.shapes[static_cast<size_t>(i)]) + "," +
           csv_field(embeddings.labels[static_cast<size_t>(i)]);
    for (int64_t j = 0; j < dims; ++j) {
      char number[32];
      std::snprintf(number, sizeof number, ",%.9g", static_cast<double>(values[i * dims + j]));  // float32 round trip
      csv += number;
    }
    csv += "\n";
  }
  const auto claim = claim_output_dir(out, "{out}", overwrite, {"vnt embed", {}});
  const std::string npy = (std::filesystem::path(out) / "embeddings.npy").string();
  const std::string csv_path = (std::filesystem::path(out) / "embeddings.csv").string();
  write_npy_float32(npy, {shapes, dims}, values);
  write_file_atomic(csv_path, csv);
  return {{"shapes", shapes},   {"dims", dims}, {"votes", embeddings.votes},
          {"rotate", s.rotate}, {"npy", npy},   {"csv", csv_path}};
}

nlohmann::json compare_classifier_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                       const models::ModelLimits& limits, const c10::Device& device) {
  return compare_point_runs<ClassificationData>(
      runs, shapes, seed, limits, device, kClassificationCommand, "test_accuracy",
      [](const nlohmann::json& split) { return split.value("accuracy", 0.0); });
}

std::string classifier_compare_text(const nlohmann::json& rows, int64_t shapes) {
  const std::string note = shapes > 0 ? "(max |dlogit|: largest change of any logit over " +
                                            invariance_shapes_text(rows, shapes) +
                                            " test shapes under 4 random SO(3) rotations, float32; float64 in {json})"
                                      : "";
  return compare_table_text(
      rows, "test_accuracy", [](const nlohmann::json& r) { return r.at("protocol").get<std::string>(); },
      {"test z", "test so3", "test none"},
      [](const nlohmann::json& accuracy) {
        std::vector<std::string> cells;
        for (const char* rotation : {"z", "so3", "none"}) {
          char buf[32] = "-";
          if (accuracy.contains(rotation)) std::snprintf(buf, sizeof buf, "%.4f", accuracy.at(rotation).get<double>());
          cells.push_back(buf);
        }
        return cells;
      },
      note);
}

}  // namespace qkv::tasks
