#include "qkv/pointcloud/synth_parts.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/text.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/sampling.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_shapes.h"

namespace qkv::pointcloud {
namespace {

namespace fs = std::filesystem;

// ShapeNet category -> the synthetic class that builds it.
std::string synth_class_of(const std::string& category) { return lower(category); }

std::string shape_text(const Mesh& mesh, int64_t points, uint64_t seed, const PartCategory& category,
                       const std::string& what) {
  const auto sampled = sample_surface(mesh, points, seed, what);
  const auto* p = sampled.points.data_ptr<float>();
  const auto* n = sampled.normals.data_ptr<float>();
  const auto* f = sampled.faces.data_ptr<int64_t>();
  std::string text;
  text.reserve(static_cast<size_t>(points) * 72);
  char line[160];
  for (int64_t i = 0; i < points; ++i) {
    const int32_t local = mesh.face_parts.at(static_cast<size_t>(f[i]));
    if (local < 0 || local >= category.parts)
      throw std::logic_error(what + ": face without a valid part label (" + std::to_string(local) + ")");
    std::snprintf(line, sizeof line, "%.6f %.6f %.6f %.6f %.6f %.6f %.6f\n", p[3 * i], p[3 * i + 1], p[3 * i + 2],
                  n[3 * i], n[3 * i + 1], n[3 * i + 2], static_cast<double>(category.first_part + local));
    text += line;
  }
  return text;
}

}  // namespace

std::vector<std::string> synth_part_categories() {
  std::vector<std::string> out;
  for (const auto& c : shapenet_part_categories()) {
    const auto cls = synth_class_of(c.name);
    const auto classes = synth_shape_classes();
    if (std::find(classes.begin(), classes.end(), cls) != classes.end() && !synth_shape_part_names(cls).empty())
      out.push_back(c.name);
  }
  return out;
}

std::vector<std::string> synth_part_names(const std::string& category) {
  const auto known = synth_part_categories();
  const auto& c = shapenet_part_categories()[static_cast<size_t>(find_part_category(category))];
  if (std::find(known.begin(), known.end(), c.name) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError("category " + category + ": no synthetic shapes (synthetic categories: " + list + ")");
  }
  return synth_shape_part_names(synth_class_of(c.name));
}

std::vector<std::string> check_synth_parts_options(const SynthPartsOptions& o) {
  const std::pair<const char*, int64_t> counts[3] = {{"train_per_class", o.train_per_category},
                                                     {"val_per_class", o.val_per_category},
                                                     {"test_per_class", o.test_per_category}};
  for (const auto& [key, value] : counts)
    if (value < 0) throw ConfigError(key, std::to_string(value) + ": must be 0 or more");
  if (o.train_per_category + o.val_per_category + o.test_per_category == 0)
    throw ConfigError("train_per_class", ", {val_per_class} and {test_per_class} are all 0: nothing to write");
  if (o.points_per_shape < 1)
    throw ConfigError("points_per_shape", std::to_string(o.points_per_shape) + ": must be at least 1");
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& c : o.categories.empty() ? synth_part_categories() : o.categories) {
    synth_part_names(c);  // throws for a category without synthetic shapes
    const auto name = shapenet_part_categories()[static_cast<size_t>(find_part_category(c, "classes"))].name;
    if (!seen.insert(name).second) throw ConfigError("classes", ": '" + c + "' is listed twice");
    names.push_back(name);
  }
  return names;
}

SynthPartsSummary write_synth_parts(const std::string& out_dir, const SynthPartsOptions& o) {
  if (out_dir.empty()) throw UsageError("synth-parts: the out folder is empty");
  SynthPartsSummary summary;
  summary.categories = check_synth_parts_options(o);
  const int64_t counts[3] = {o.train_per_category, o.val_per_category, o.test_per_category};

  nlohmann::json lists[3] = {nlohmann::json::array(), nlohmann::json::array(), nlohmann::json::array()};
  std::string offsets;
  for (const auto& name : summary.categories) {
    const auto& cat = shapenet_part_categories()[static_cast<size_t>(find_part_category(name))];
    const auto cls = synth_class_of(name);
    offsets += cat.name + "\t" + cat.synset + "\n";
    make_directories((fs::path(out_dir) / cat.synset).string());
    int64_t index = 0;
    for (int split = 0; split < 3; ++split)
      for (int64_t k = 0; k < counts[split]; ++k) {
        const uint64_t seed = synth_shape_seed(o.seed, cls, ++index);
        char token[32];
        std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(seed));
        const auto path = fs::path(out_dir) / cat.synset / (std::string(token) + ".txt");
        stop_if_interrupted("writing " + path.string());
        write_file_atomic(path.string(),
                          shape_text(make_synth_shape(cls, seed), o.points_per_shape, seed, cat, path.string()));
        lists[split].push_back("shape_data/" + cat.synset + "/" + token);
        ++summary.shapes[split];
      }
  }
  // The distribution's lists are shuffled; so are these, by the seed.
  const char* const split_names[3] = {"train", "val", "test"};
  make_directories((fs::path(out_dir) / "train_test_split").string());
  for (int split = 0; split < 3; ++split) {
    std::vector<std::string> entries = lists[split].get<std::vector<std::string>>();
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(split));
    for (size_t i = entries.size(); i > 1; --i) std::swap(entries[i - 1], entries[rng() % i]);
    write_file_atomic(
        (fs::path(out_dir) / "train_test_split" / ("shuffled_" + std::string(split_names[split]) + "_file_list.json"))
            .string(),
        nlohmann::json(entries).dump() + "\n");
  }
  write_file_atomic((fs::path(out_dir) / "synsetoffset2category.txt").string(), offsets);

  std::string readme =
      "Synthetic part-segmentation shapes written by `qkv data synth-parts`: procedural\n"
      "meshes built from labelled parts, sampled on their surfaces, no download. The\n"
      "layout is ShapeNet-part's shapenetcore_partanno_segmentation_benchmark_v0_normal:\n"
      "  <synset>/<token>.txt with lines 'x y z nx ny nz part' (global part ids),\n"
      "  train_test_split/shuffled_{train,val,test}_file_list.json, synsetoffset2category.txt.\n"
      "Canonical pose: y is up, largest extent 1. Proportions and optional parts\n"
      "(engines, arm rests, table aprons) vary; an optional part may be absent.\n\n";
  readme += "seed: " + std::to_string(o.seed) + "\n";
  readme += "points per shape: " + std::to_string(o.points_per_shape) + "\n";
  readme += "shapes per category: train " + std::to_string(o.train_per_category) + ", val " +
            std::to_string(o.val_per_category) + ", test " + std::to_string(o.test_per_category) + "\n";
  readme += "categories (part id: name):\n";
  for (const auto& name : summary.categories) {
    const auto& cat = shapenet_part_categories()[static_cast<size_t>(find_part_category(name))];
    readme += "  " + cat.name + " " + cat.synset + ":";
    const auto parts = synth_part_names(name);
    for (size_t i = 0; i < parts.size(); ++i)
      readme += " " + std::to_string(cat.first_part + static_cast<int64_t>(i)) + " " + parts[i];
    readme += "\n";
  }
  write_file_atomic((fs::path(out_dir) / "README.txt").string(), readme);
  return summary;
}

}  // namespace qkv::pointcloud
