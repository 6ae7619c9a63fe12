#include "qkv/tasks/part_segmentation.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/sampling.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/tasks/point_runs.h"
#include "qkv/train/part_iou.h"

namespace qkv::tasks {

namespace pc = qkv::pointcloud;

std::string write_synth_parts_to(const std::string& out, pc::SynthPartsOptions options, bool overwrite) {
  const auto summary = write_synthetic_set(out, options, overwrite, ShapeNetPartSource::marker(options),
                                           pc::check_synth_parts_options, pc::write_synth_parts);
  return "synth-parts: " + std::to_string(summary.categories.size()) + " categories, " +
         std::to_string(summary.files()) + " shapes (" + std::to_string(summary.shapes[0]) + " train, " +
         std::to_string(summary.shapes[1]) + " val, " + std::to_string(summary.shapes[2]) + " test) in " + out + "\n";
}

std::string synth_parts_list_text() {
  std::string text;
  for (const auto& name : pc::synth_part_categories()) {
    const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(pc::find_part_category(name))];
    char line[256];
    std::snprintf(line, sizeof line, "%-10s %s ", cat.name.c_str(), cat.synset.c_str());
    text += line;
    const auto parts = pc::synth_part_names(name);
    for (size_t i = 0; i < parts.size(); ++i)
      text += " " + std::to_string(cat.first_part + static_cast<int64_t>(i)) + " " + parts[i];
    text += "\n";
  }
  return text;
}

OutputMarker ShapeNetPartSource::marker(const pc::SynthPartsOptions& o) {
  return {kSynthPartsCommand,
          {{"train_per_category", o.train_per_category},
           {"val_per_category", o.val_per_category},
           {"test_per_category", o.test_per_category},
           {"points_per_shape", o.points_per_shape},
           {"categories", o.categories},
           {"seed", o.seed}}};
}

PartSegData::PartSegData() {
  protocol = "i/i";
  view.num_points = 2048;
  view.sampling = "random";          // the reader's points are already a random sample: take them all, shuffled
  view.up_axis = kUpAxisFromLayout;  // the layout's (resolve_up_axis)
  load.points_per_shape = 0;         // the layout's: more than a view takes, so each epoch draws anew
}

PartSegData PartSegData::from_json(const nlohmann::json& j) {
  auto d = fields_from_json<PartSegData>(j, "the run's data settings");
  d.copy_view_settings();
  return d;
}

void PartSegData::validate() const {
  check_field_ranges(*this);
  check_source_settings();
}

std::string ShapeNetPartSource::write(const std::string& dir, const Synth& options) {
  const auto summary = pc::write_synth_parts(dir, options);
  return "synthetic parts: " + std::to_string(summary.categories.size()) + " categories, " +
         std::to_string(summary.files()) + " shapes in " + dir;
}

pc::ShapeNetPartData ShapeNetPartSource::read(const std::string& dir, const Load& load) {
  auto data = pc::load_shapenet_part(dir, load);
  say_as_is(dir + " (" + data.layout + "): " + std::to_string(data.train.size()) + " train / " +
            std::to_string(data.val.size()) + " val / " + std::to_string(data.test.size()) + " test shapes");
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

at::Tensor predict_among_class_parts(const data::Batch& batch, const at::Tensor& logits) {
  // [categories, 50]: which parts each class has (PartIoUMetric scores the same way).
  static const at::Tensor allowed = [] {
    const auto& cats = pc::shapenet_part_categories();
    auto mask = torch::zeros({static_cast<int64_t>(cats.size()), pc::kShapeNetPartCount}, torch::kBool);
    for (size_t c = 0; c < cats.size(); ++c)
      mask[static_cast<int64_t>(c)].slice(0, cats[c].first_part, cats[c].first_part + cats[c].parts).fill_(true);
    return mask;
  }();
  const auto rows = allowed.to(logits.device()).index_select(0, batch.inputs.at("category").reshape({-1}));  // [B, 50]
  return logits.masked_fill(~rows.unsqueeze(1), -std::numeric_limits<float>::infinity()).argmax(-1);
}

namespace {

// The category's part probabilities [N, parts] of one cloud (points [1, 3, N]).
at::Tensor part_probabilities(models::Model& model, const at::Tensor& points, const at::Tensor& normals,
                              int64_t category, const pc::PartCategory& cat, const c10::Device& device) {
  data::Batch batch;
  batch.inputs["points"] = points;
  if (normals.defined()) batch.inputs["normals"] = normals;
  batch.inputs["category"] = torch::full({1}, category, torch::kLong);
  batch.target = torch::zeros({1, points.size(2)}, torch::kLong);
  const auto logits = model.forward(batch.to(device))[0].to(torch::kCPU);  // [N, 50]
  return torch::softmax(logits.slice(1, cat.first_part, cat.first_part + cat.parts).to(torch::kDouble), 1);
}

}  // namespace

namespace {

// What predict_parts and predict_cloud_parts share: the run's classes
// checked before anything is read.
const pc::PartCategory& checked_part_category(const PartSegData& data, int64_t category, int64_t votes) {
  if (votes < 1) throw ConfigError("votes", "must be at least 1, got " + std::to_string(votes));
  const auto& cat = pc::shapenet_part_categories().at(static_cast<size_t>(category));
  const auto& seen = data.trained_categories;
  if (!seen.empty() && std::find(seen.begin(), seen.end(), cat.name) == seen.end())
    throw UsageError("class " + cat.name + ": the run was trained on " + join(seen) +
                     " only");  // before any file is read
  return cat;
}

// Every point of `mesh` as the run's views prepare it ([1, 3, N], and its
// normals where the run takes them), the same points in the shape's own
// coordinates ([N, 3]), and their part probabilities [N, parts]: the cloud
// whole when it has the run's points; a smaller one filled up to that size
// with repeats of its own points, as a training view of a small file is (so
// that a cloud of fewer points than the model's k neighbours has labels too),
// each point taking its first row; a larger one by `votes` samplings of the
// run's size, each point taking the averaged probabilities of its nearest
// sampled point. `sampled`: the points some vote saw.
struct EveryPointParts {
  at::Tensor points, unprepared, probabilities;
  int64_t sampled = 0;
};
EveryPointParts label_every_point(models::Model& model, const PartSegData& data, const pc::Mesh& mesh, int64_t category,
                                  const pc::PartCategory& cat, pc::Rotation rotation, uint64_t seed,
                                  const c10::Device& device, int64_t votes, const std::string& source) {
  pc::PointViewOptions every = data.view;
  every.rotation = rotation;
  every.seed = seed;
  at::Tensor normals;
  EveryPointParts out;
  out.points = pc::prepare_every_point(mesh, every, data.view.use_normals ? &normals : nullptr, source, nullptr,
                                       &out.unprepared);
  const auto& points = out.points;
  const int64_t n = points.size(2), run_points = data.view.num_points;

  torch::NoGradGuard no_grad;
  model.eval();
  out.sampled = n;
  if (n == run_points) {
    out.probabilities = part_probabilities(model, points, normals, category, cat, device);
    return out;
  }
  // The probabilities of the run's size of points at `indices`, normalised
  // together as a training view is.
  auto probabilities_at = [&](const at::Tensor& indices) {
    auto chosen = points.index_select(2, indices);
    if (data.view.normalize) chosen = pc::normalize_unit_sphere(chosen[0].t()).t().unsqueeze(0);
    const auto chosen_normals = normals.defined() ? normals.index_select(2, indices).contiguous() : at::Tensor();
    return part_probabilities(model, chosen.contiguous(), chosen_normals, category, cat, device);
  };
  if (n < run_points) {
    // Every point as often as the size allows (n-th, 2n-th... repeats),
    // whatever the seed: a turned copy is filled the same way.
    out.probabilities = probabilities_at(torch::arange(run_points, torch::kLong).remainder(n)).slice(0, 0, n);
    return out;
  }
  // Votes on samplings of the run's size, then each point from its nearest sampled point.
  auto sum = torch::zeros({n, cat.parts}, torch::kDouble);
  auto count = torch::zeros({n}, torch::kDouble);
  for (int64_t v = 0; v < votes; ++v) {
    // "sample" + v: each vote's own stream, the same for the cloud however it is turned.
    auto gen =
        at::make_generator<at::CPUGeneratorImpl>(pc::seed_mix(seed, 0x73616d706c65ULL + static_cast<uint64_t>(v)));
    const auto subset = torch::randperm(n, gen, torch::kLong).slice(0, 0, run_points);
    sum.index_add_(0, subset, probabilities_at(subset));
    count.index_add_(0, subset, torch::ones({run_points}, torch::kDouble));
  }
  const auto taken = (count > 0).nonzero().squeeze(1);
  out.sampled = taken.size(0);
  const auto mean = sum.index_select(0, taken) / count.index_select(0, taken).unsqueeze(1);
  const auto xyz = points[0].t();  // [N, 3]
  out.probabilities = mean.index_select(0, pc::nearest_point_indices(xyz, xyz.index_select(0, taken)));
  return out;
}

}  // namespace

PartPrediction predict_parts(models::Model& model, const PartSegData& data, const std::string& input, int64_t category,
                             pc::Rotation rotation, uint64_t seed, const c10::Device& device, int64_t votes) {
  const auto& cat = checked_part_category(data, category, votes);

  // The points to label: every point of a cloud, or surface samples of a mesh.
  pc::Mesh mesh;
  std::vector<int64_t> truth;
  if (pc::looks_like_part_text(input)) {
    auto text = pc::read_part_text(input, &cat);
    for (const auto& r : text.rows) {
      mesh.vertices.push_back({r[0], r[1], r[2]});
      mesh.normals.push_back({r[3], r[4], r[5]});
    }
    truth = std::move(text.parts);
    mesh.origin = text.origin;
  } else {
    mesh = pc::read_shape_file(input);
  }
  const auto labelled = label_every_point(model, data, mesh, category, cat, rotation, seed, device, votes, input);
  const auto& points = labelled.points;
  const auto& probabilities = labelled.probabilities;
  const int64_t n = points.size(2), run_points = data.view.num_points, sampled = labelled.sampled;
  const auto local = probabilities.argmax(1).contiguous();
  const auto labels = local + cat.first_part;

  PartPrediction out;
  // Part names are known for the built-in shapes (generated, or the folder
  // `data synth-parts` wrote: PartSegData::named_parts); ShapeNet-part's
  // files carry numbers only, so a real run's parts are named by their ids.
  for (int64_t p = 0; p < cat.parts; ++p) out.part_names.push_back("part " + std::to_string(cat.first_part + p));
  const auto synthetic = pc::synth_part_categories();
  if ((data.named_parts || data.source == "synthetic") &&
      std::find(synthetic.begin(), synthetic.end(), cat.name) != synthetic.end()) {
    const auto known = pc::synth_part_names(cat.name);
    if (static_cast<int64_t>(known.size()) == cat.parts) out.part_names = known;
  }
  out.per_part.assign(static_cast<size_t>(cat.parts), 0);
  // In the input's own coordinates, so that the labelled cloud lies on the
  // scan in a viewer (the network saw them centred, scaled and turned).
  const auto pts = labelled.unprepared.contiguous();  // [N, 3]
  const float* xyz = pts.data_ptr<float>();
  const int64_t* part_of = local.data_ptr<int64_t>();
  pc::VertexProperty label{"label", true, {}}, true_label{"true_label", true, {}};
  for (int64_t i = 0; i < n; ++i) {
    out.cloud.vertices.push_back({xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]});
    const int64_t part = part_of[i];
    out.cloud.colors.push_back(pc::part_colour(part));
    label.values.push_back(static_cast<double>(cat.first_part + part));
    if (!truth.empty()) true_label.values.push_back(static_cast<double>(truth[static_cast<size_t>(i)]));
    ++out.per_part[static_cast<size_t>(part)];
    out.labels.push_back(cat.first_part + part);
  }
  out.cloud.origin = mesh.origin;
  out.cloud.vertex_properties.push_back(std::move(label));
  if (!truth.empty()) out.cloud.vertex_properties.push_back(std::move(true_label));
  out.picture.title = cat.name + ": " + std::to_string(n) + " points, predicted parts";
  for (int64_t p = 0; p < cat.parts; ++p)
    out.picture.legend.push_back(
        {out.part_names[static_cast<size_t>(p)] + " (" + std::to_string(out.per_part[static_cast<size_t>(p)]) + ")",
         pc::part_colour(p)});

  out.report = {{"input", input}, {"category", cat.name}, {"points", n}, {"rotate", pc::rotation_name(rotation)}};
  if (n > run_points)
    out.report["votes"] = {{"samplings", votes}, {"points_each", run_points}, {"points_sampled", sampled}};
  nlohmann::json counts = nlohmann::json::object(), parts_json = nlohmann::json::array();
  for (int64_t p = 0; p < cat.parts; ++p) {
    const auto k = static_cast<size_t>(p);
    counts[std::to_string(cat.first_part + p)] = out.per_part[k];
    parts_json.push_back({{"part", cat.first_part + p}, {"name", out.part_names[k]}, {"points", out.per_part[k]}});
  }
  out.report["points_per_part"] = counts;
  out.report["parts"] = parts_json;
  if (!truth.empty()) {
    const auto t = torch::tensor(truth, torch::kLong);
    std::vector<int64_t> parts(static_cast<size_t>(cat.parts));
    std::iota(parts.begin(), parts.end(), cat.first_part);
    out.report["accuracy"] = (labels == t).to(torch::kDouble).mean().item<double>();
    out.report["miou"] = train::shape_part_miou(labels, t, parts);
  }
  return out;
}

CloudParts predict_cloud_parts(const train::CheckpointFile& checkpoint, const at::Tensor& points,
                               const at::Tensor& normals, const std::string& category, const std::string& rotate,
                               uint64_t seed, int64_t votes, const c10::Device& device) {
  if (!points.defined() || points.dim() != 2 || points.size(1) != 3 || !points.is_floating_point())
    throw ConfigError("points", "expected a floating-point tensor [N, 3]");
  if (points.size(0) == 0) throw ConfigError("points", "the cloud has no points");
  if (normals.defined() && (normals.dim() != 2 || normals.sizes() != points.sizes()))
    throw ConfigError("normals", "expected [N, 3] like the points");
  const int64_t index = pc::find_part_category(category, "category");
  const auto rotation = pc::parse_rotation(rotate, "rotate");
  auto run = load_point_run<PartSegData>(checkpoint, device, kPartSegmentationCommand);
  const auto& cat = checked_part_category(run.data, index, votes);
  // A cloud as a reader returns one: float32 vectors relative to an origin
  // (a float64 cloud far from 0 keeps its detail, as a file of it does).
  auto vectors_of = [](const at::Tensor& rows) {
    const auto t = rows.detach().to(torch::kCPU, torch::kFloat).contiguous();
    const float* v = t.data_ptr<float>();
    std::vector<pc::Vec3> out(static_cast<size_t>(t.size(0)));
    for (size_t i = 0; i < out.size(); ++i) out[i] = {v[3 * i], v[3 * i + 1], v[3 * i + 2]};
    return out;
  };
  // The bounds in the input's own type; a float64 copy only where an origin is taken.
  const auto given = points.detach().to(torch::kCPU);
  const auto low = std::get<0>(given.min(0)).to(torch::kDouble), high = std::get<0>(given.max(0)).to(torch::kDouble);
  pc::Mesh mesh;
  mesh.origin = pc::origin_of_box({low[0].item<double>(), low[1].item<double>(), low[2].item<double>()},
                                  {high[0].item<double>(), high[1].item<double>(), high[2].item<double>()});
  mesh.vertices =
      vectors_of(mesh.has_origin() ? given.to(torch::kDouble) -
                                         torch::tensor({mesh.origin[0], mesh.origin[1], mesh.origin[2]}, torch::kDouble)
                                   : given);
  if (normals.defined()) mesh.normals = vectors_of(normals);
  const auto labelled =
      label_every_point(*run.model, run.data, mesh, index, cat, rotation, seed, device, votes, "points");
  return {labelled.probabilities.argmax(1) + cat.first_part, labelled.probabilities, labelled.sampled};
}

TrainTask part_segmentation_train_task(std::shared_ptr<PartSegTrainSettings> settings) {
  auto task = point_train_task(
      settings, kPartSegmentationCommand, "train a part segmenter; writes a run folder", "runs/seg",
      [](nlohmann::json& options) {
        // The model's shape is fixed by the data set: 16 categories, 50 parts.
        for (const char* key : {"categories", "parts"})
          if (options.contains(key))
            throw ConfigError("model_options",
                              std::string(": '") + key + "' is fixed by ShapeNet-part (16 categories, 50 parts)");
        options["categories"] = static_cast<int64_t>(pc::shapenet_part_categories().size());
        options["parts"] = pc::kShapeNetPartCount;
      },
      [](train::RunRequest& r, PartSegData& d, const pc::ShapeNetPartData& loaded, const PartSegSplits&,
         const LoadContext&, TaskRun& run) {
        d.trained_categories.clear();
        d.named_parts = d.named_parts || is_qkv_synthetic_source(d.source);
        if (loaded.train.size() > 0) {
          const auto present = std::get<0>(torch::_unique(loaded.train.labels));
          for (int64_t i = 0; i < present.numel(); ++i)
            d.trained_categories.push_back(
                pc::shapenet_part_categories().at(static_cast<size_t>(present[i].item<int64_t>())).name);
        }
        run.hooks.metrics = part_iou_metric();
        run.hooks.predict = predict_among_class_parts;
        run.hooks.title = "qkv seg train: " + r.model_name;
      });
  task.defaults.select_metric = "instance_miou";
  return task;
}

nlohmann::json evaluate_segmenter_run(const PointEvalSettings& s, const c10::Device& device) {
  const auto rotation = pc::parse_rotation(s.rotate, "rotate");
  auto run = load_point_run<PartSegData>(s.checkpoint, device, kPartSegmentationCommand);
  PartSegData d = run.data;
  d.take_data_option(s.data);
  const auto loaded = d.load_data();
  const auto& set = s.split == "train" ? loaded.train : s.split == "val" ? loaded.val : loaded.test;
  refuse_empty_split(set.size(), s.split);
  const auto part = view_of(std::make_shared<const pc::PointCloudSet>(set), d.view, false, rotation);
  auto metrics = train::evaluate(*run.model, *part, train::stored_run_eval_batch_size(run.config, s.batch_size), device,
                                 part_iou_metric());
  metrics["split"] = s.split;
  metrics["rotate"] = pc::rotation_name(rotation);
  metrics["size"] = part->size();
  if (s.invariance_shapes > 0)
    metrics["invariance"] = measure_invariance(*run.model, *part, s.invariance_shapes, 4, s.seed, device);
  return metrics;
}

PartPredictResult predict_parts_to_files(const PartPredictSettings& s, const c10::Device& device) {
  if (s.category.empty()) throw ConfigError("category", "is required (the object's ShapeNet-part category)");
  const int64_t category = pc::find_part_category(s.category, "category");
  const auto rotation = pc::parse_rotation(s.rotate, "rotate");
  if (s.out.empty()) throw ConfigError("out", ": must name a folder");
  if (ends_with(s.out, ".ply"))
    throw ConfigError("out", "is a folder (it receives <input name>.parts.ply and .png), got " + s.out);
  const std::string stem = (std::filesystem::path(s.out) / std::filesystem::path(s.input).stem()).string();
  const std::string ply = stem + ".parts.ply", png = stem + ".parts.png";
  // The outputs before the checkpoint is read: a refusal costs nothing.
  check_outputs_apart(s.out, "{out}", {{"input", s.input}, {"checkpoint", s.checkpoint.path}});
  check_files_folder(s.out, "{out}");
  check_output_file(ply, "{out}", s.overwrite, "seg predict");
  check_output_file(png, "{out}", s.overwrite, "seg predict");
  auto run = load_point_run<PartSegData>(s.checkpoint, device, kPartSegmentationCommand);
  auto prediction = predict_parts(*run.model, run.data, s.input, category, rotation, s.seed, device, s.votes);
  const auto ply_claim = claim_output_file(ply, "{out}", s.overwrite, {"seg predict", {}});
  const auto png_claim = claim_output_file(png, "{out}", s.overwrite, {"seg predict", {}});
  pc::write_ply_sized(ply, prediction.cloud);
  pc::write_points_png(png, prediction.cloud, prediction.picture);
  PartPredictResult result;
  result.report = prediction.report;
  result.report["rotate"] = s.rotate;
  result.report["ply"] = ply;
  result.report["png"] = png;
  result.labels = prediction.labels;
  const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(category)];
  char line[256];
  std::snprintf(line, sizeof line, "%s: %s, %lld points -> ", s.input.c_str(), cat.name.c_str(),
                static_cast<long long>(result.report.at("points").get<int64_t>()));
  result.text = line + ply + "\n";
  if (result.report.contains("votes")) {
    const auto& v = result.report.at("votes");
    std::snprintf(
        line, sizeof line,
        "  %lld votes on samplings of the run's %lld points (%lld points sampled); every other point labelled "
        "from its nearest sampled point\n",
        static_cast<long long>(v.at("samplings").get<int64_t>()),
        static_cast<long long>(v.at("points_each").get<int64_t>()),
        static_cast<long long>(v.at("points_sampled").get<int64_t>()));
    result.text += line;
  }
  size_t width = 0;
  for (const auto& name : prediction.part_names) width = std::max(width, name.size());
  for (int64_t p = 0; p < cat.parts; ++p) {
    std::snprintf(line, sizeof line, "  %2lld %-*s %6lld points\n", static_cast<long long>(cat.first_part + p),
                  static_cast<int>(width), prediction.part_names[static_cast<size_t>(p)].c_str(),
                  static_cast<long long>(prediction.per_part[static_cast<size_t>(p)]));
    result.text += line;
  }
  if (result.report.contains("miou")) {
    std::snprintf(line, sizeof line, "  against the file's labels: accuracy %.4f, mIoU %.4f\n",
                  result.report["accuracy"].get<double>(), result.report["miou"].get<double>());
    result.text += line;
  }
  return result;
}

nlohmann::json compare_segmenter_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                      const models::ModelLimits& limits, const c10::Device& device) {
  return compare_point_runs<PartSegData>(runs, shapes, seed, limits, device, kPartSegmentationCommand, "test",
                                         [](const nlohmann::json& split) {
                                           return nlohmann::json{{"instance_miou", split.value("instance_miou", 0.0)},
                                                                 {"class_miou", split.value("class_miou", 0.0)}};
                                         });
}

std::string segmenter_compare_text(const nlohmann::json& rows, int64_t shapes) {
  auto paper = [](const std::string& r) {
    const auto name = pc::rotation_name(pc::parse_rotation(r));
    return name == "none" ? std::string("I") : name == "so3" ? std::string("SO(3)") : name;
  };
  return compare_table_text(
      rows, "test",
      [&](const nlohmann::json& r) {
        const auto protocol = r.at("protocol").get<std::string>();
        const auto slash = protocol.find('/');
        return paper(protocol.substr(0, slash)) + "/" + paper(protocol.substr(slash + 1));
      },
      {"test I: inst / class", "test z: inst / class", "test SO(3): inst / class"},
      [](const nlohmann::json& test) {
        std::vector<std::string> cells;
        for (const char* rotation : {"none", "z", "so3"}) {
          char buf[64] = "-";
          if (test.contains(rotation))
            std::snprintf(buf, sizeof buf, "%.4f / %.4f", test.at(rotation).at("instance_miou").get<double>(),
                          test.at(rotation).at("class_miou").get<double>());
          cells.push_back(buf);
        }
        return cells;
      },
      "(inst / class: instance and class mIoU on the test set rotated as the column says; max |dlogit|: largest "
      "change of any per-point logit over " +
          invariance_shapes_text(rows, shapes) +
          " test shapes under 4 random SO(3) rotations, float32; float64 in {json})");
}

}  // namespace qkv::tasks
