#include "qkv/pointcloud/modelnet.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/text.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/point_features.h"
#include "qkv/pointcloud/sampling.h"

namespace qkv::pointcloud {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOffLayout = kModelNetOffLayout;
constexpr const char* kResampledLayout = kModelNetResampledLayout;
constexpr const char* kH5Layout = kModelNetH5Layout;
const char* const kModelNetSplits[2] = {"train", "test"};

// Archive debris such as .DS_Store or __MACOSX is not a class.
bool is_hidden(const std::string& name) { return name.empty() || name[0] == '.' || name.rfind("__", 0) == 0; }

// A folder's name is a class name, recorded in JSON (UTF-8 only) and printed
// in tables and CSV: bytes that are not UTF-8 would be replaced (caf\xe9 and
// caf\xe8 both "caf\ufffd", one class in the predictions), a control
// character would break a line. Refused, the path shown escaped.
void check_class_name(const fs::path& folder) {
  const std::string name = folder.filename().string();
  const bool control =
      std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (!is_valid_utf8(name) || control)
    throw DataError(printable_path(folder.string()) + ": a class folder's name must be UTF-8 without control " +
                    "characters (it becomes the class name in JSON, tables and CSV); rename the folder");
}

std::vector<fs::path> sorted_entries(const fs::path& dir, bool dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_hidden(it->path().filename().string())) continue;
    if (!(dirs ? is_dir(it->path()) : is_file(it->path()))) continue;
    if (dirs) check_class_name(it->path());
    out.push_back(it->path());
  }
  if (ec) throw DataError(dir.string() + ": cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> read_class_names(const fs::path& path) {
  std::vector<std::string> names;
  std::map<std::string, int64_t> seen;
  for (const auto& l : read_list(path)) {
    if (!seen.emplace(l.text, l.line).second)
      throw DataError(path.string() + ": line " + std::to_string(l.line) + ": class '" + l.text +
                      "' already named on line " + std::to_string(seen[l.text]));
    names.push_back(l.text);
  }
  if (names.empty()) throw DataError(path.string() + ": no class names");
  return names;
}

// One shape to load: where it is, its class, and (for OFF meshes) its sampling seed.
struct Item {
  std::string path;
  int64_t label = 0;
  uint64_t seed = 0;
};

// Where one shape's rows go: points and normals [P, 3], features [P, F]
// (normals and features null when not loaded).
struct ShapeRows {
  float* points;
  float* normals;
  float* features;
};

// Loads every item into [S, P, 3] (plus normals and features) in parallel. Errors are
// collected per item and the first by index is rethrown, so that the message
// does not depend on thread timing.
template <typename Load>
PointCloudSet load_items(const std::vector<Item>& items, std::vector<std::string> class_names,
                         const ModelNetLoadOptions& o, Load load) {
  const auto s = static_cast<int64_t>(items.size());
  const int64_t p = o.points_per_shape;
  PointCloudSet set;
  set.points = torch::empty({s, p, 3}, torch::kFloat);
  if (o.with_normals) set.normals = torch::empty({s, p, 3}, torch::kFloat);
  const int64_t f = point_feature_channels(o.point_features);
  if (f > 0) set.features = torch::empty({s, p, f}, torch::kFloat);
  set.labels = torch::empty({s}, torch::kLong);
  set.class_names = std::move(class_names);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(s));
  float* points = set.points.data_ptr<float>();
  float* normals = o.with_normals ? set.normals.data_ptr<float>() : nullptr;
  float* features = f > 0 ? set.features.data_ptr<float>() : nullptr;
  at::parallel_for(0, s, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      try {
        stop_if_interrupted("reading " + items[static_cast<size_t>(i)].path);
        load(items[static_cast<size_t>(i)], ShapeRows{points + i * p * 3, normals ? normals + i * p * 3 : nullptr,
                                                      features ? features + i * p * f : nullptr});
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  auto* labels = set.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < s; ++i) {
    labels[i] = items[static_cast<size_t>(i)].label;
    set.sources.push_back(items[static_cast<size_t>(i)].path);
  }
  return set;
}

void copy_rows(const at::Tensor& src, float* dst) {
  const auto c = src.to(torch::kFloat).contiguous();
  std::memcpy(dst, c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
}

// ---------------------------------------------------------------------------- OFF meshes

// A file of a ModelNet-style tree that is read as a shape: any format
// read_shape_file reads except plain .txt, which in a folder of meshes is
// far more often a note than a point list (a .xyz or .csv is read).
bool is_tree_shape_file(const fs::path& f) {
  const auto ext = lower(f.extension().string());
  return ext != ".txt" && is_shape_file_extension(ext);
}

const std::string& tree_shape_extensions() {
  static const std::string text = [] {
    std::string out;
    for (const char* e : kShapeFileExtensions)
      if (std::string(e) != ".txt") out += (out.empty() ? "" : " ") + std::string(e);
    return out;
  }();
  return text;
}

// Files of a class tree that are not shape files, by extension: how many,
// and the first one met (for a message).
struct SkippedFiles {
  std::map<std::string, std::pair<int64_t, std::string>> by_extension;

  void add(const fs::path& f) {
    const auto ext = lower(f.extension().string());
    add_as(ext.empty() ? "no extension" : ext, f);
  }
  // Counted under `kind` instead of its extension ("subfolder").
  void add_as(const std::string& kind, const fs::path& f) {
    auto& entry = by_extension[kind];
    if (entry.first++ == 0) entry.second = f.string();
  }
  // "3 files that qkv does not read as shapes (2 .mtl, 1 .png)", or "".
  std::string text() const {
    int64_t total = 0;
    std::string kinds;
    for (const auto& [ext, entry] : by_extension) {
      total += entry.first;
      kinds += (kinds.empty() ? "" : ", ") + std::to_string(entry.first) + " " + ext;
    }
    if (total == 0) return "";
    return std::to_string(total) + " file" + (total == 1 ? "" : "s") + " that qkv does not read as shapes (" + kinds +
           ")";
  }
};

// The shape files of one folder, sorted; everything else in it goes to
// `skipped`, counted so that the user hears of it: other files by extension,
// subfolders (a class is one folder deep), and what is not a regular file
// (a FIFO or device, or a link to one, even when named .obj).
std::vector<fs::path> shape_files_in(const fs::path& folder, SkippedFiles& skipped) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& f = it->path();
    if (is_hidden(f.filename().string())) continue;
    if (is_dir(f))
      skipped.add_as("subfolder", f);
    else if (!is_file(f))
      skipped.add_as("not a regular file", f);
    else if (is_tree_shape_file(f))
      out.push_back(f);
    else
      skipped.add(f);
  }
  if (ec) throw DataError(folder.string() + ": cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// Shape files lying in `folder` itself, beside its class folders, where no
// class claims them: counted, so that a shape put one level too high is heard of.
void count_shapes_outside_classes(const fs::path& folder, SkippedFiles& skipped) {
  for (const auto& f : sorted_entries(folder, false))
    if (is_tree_shape_file(f)) skipped.add_as("outside a class folder", f);
}

}  // namespace

ShapeFilesBelow shape_files_below(const std::string& folder) {
  ShapeFilesBelow out;
  SkippedFiles skipped;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& f = it->path();
    if (is_hidden(f.filename().string())) {
      if (is_dir(f)) it.disable_recursion_pending();
      continue;
    }
    if (is_dir(f)) continue;
    if (!is_file(f))
      skipped.add_as("not a regular file", f);
    else if (is_tree_shape_file(f))
      out.files.push_back(f.string());
    else if (lower(f.extension().string()) != ".txt")
      skipped.add(f);
  }
  if (ec) throw DataError(folder + ": cannot list the folder (" + ec.message() + ")");
  std::sort(out.files.begin(), out.files.end());
  out.skipped = skipped.text();
  return out;
}

namespace {

// A tree of shape files by class and split, whatever its layout: the files
// of class c in split s are files[s][c], found in folders[s][c].
struct ClassFiles {
  std::vector<std::string> class_names;
  std::vector<std::vector<fs::path>> files[2];
  std::vector<std::string> folders[2];
  SkippedFiles skipped;
};

// Samples every file of a class tree (a shape's seed comes from its path below
// `root`, so its points do not depend on which other shapes are loaded).
ModelNetData load_class_files(const ClassFiles& tree, const fs::path& root, const std::string& layout,
                              const ModelNetLoadOptions& o) {
  ModelNetData data;
  data.layout = layout;
  if (const auto skipped = tree.skipped.text(); !skipped.empty()) {
    if (o.strict)
      throw DataError(tree.skipped.by_extension.begin()->second.second + ": not read as a shape (" +
                      tree.skipped.by_extension.begin()->first + "; " + tree_shape_extensions() +
                      " in class folders are read); in strict mode a tree holds nothing else, and " + root.string() +
                      " holds " + skipped);
    data.skipped = "skipped " + skipped;
  }
  for (int split = 0; split < 2; ++split) {
    std::vector<Item> items;
    for (size_t c = 0; c < tree.class_names.size(); ++c) {
      const auto& files = tree.files[split][c];
      if (files.empty())
        throw DataError(tree.folders[split][c] + ": no shape files (" + tree_shape_extensions() + "; class '" +
                        tree.class_names[c] + "' is empty)");
      const size_t take =
          o.max_per_class > 0 ? std::min(files.size(), static_cast<size_t>(o.max_per_class)) : files.size();
      for (size_t i = 0; i < take; ++i) {
        const auto relative = fs::relative(files[i], root).generic_string();
        items.push_back({files[i].string(), static_cast<int64_t>(c), seed_mix(o.seed, fnv1a(relative))});
      }
    }
    ModelNetLoadOptions meshes = o;
    if (meshes.points_per_shape == 0) meshes.points_per_shape = kMeshSamplesByDefault;
    auto set = load_items(items, tree.class_names, meshes, [&](const Item& item, const ShapeRows& rows) {
      const auto shape = read_shape_file(item.path);
      // The features first: a mesh, or a cloud without them, is refused before it is sampled.
      const auto features = rows.features ? point_feature_rows(shape, o.point_features, item.path) : at::Tensor();
      const auto sampled = sample_surface(shape, meshes.points_per_shape, item.seed, item.path);
      copy_rows(sampled.points, rows.points);
      if (rows.normals) {
        // A mesh's normals are its faces'; a cloud's, the file's own columns.
        if (!sampled.normals.defined()) throw DataError(item.path + ": the point cloud has no normals");
        copy_rows(sampled.normals, rows.normals);
      }
      if (rows.features) copy_rows(features.index_select(0, sampled.indices), rows.features);
    });
    (split == 0 ? data.train : data.test) = std::move(set);
  }
  return data;
}

// ModelNet40's own tree: <class>/{train,test}/*.
ModelNetData load_off_tree(const fs::path& dir, const ModelNetLoadOptions& o) {
  ClassFiles tree;
  const auto class_dirs = sorted_entries(dir, true);
  if (class_dirs.empty())
    throw DataError(dir.string() + ": no class folders (the ModelNet40 layout: <class>/{train,test}/*)");
  for (const auto& d : class_dirs) tree.class_names.push_back(d.filename().string());
  count_shapes_outside_classes(dir, tree.skipped);
  for (int split = 0; split < 2; ++split)
    for (size_t c = 0; c < class_dirs.size(); ++c) {
      const auto split_dir = class_dirs[c] / kModelNetSplits[split];
      if (!is_dir(split_dir))
        throw DataError(split_dir.string() + ": missing folder (class '" + tree.class_names[c] + "')");
      tree.files[split].push_back(shape_files_in(split_dir, tree.skipped));
      tree.folders[split].push_back(split_dir.string());
    }
  return load_class_files(tree, dir, kOffLayout, o);
}

// {train,test}/<class>/*: the classes are train's folders, and test has each.
ModelNetData load_split_tree(const fs::path& dir, const ModelNetLoadOptions& o) {
  ClassFiles tree;
  for (const char* split : kModelNetSplits)
    if (!is_dir(dir / split))
      throw DataError((dir / split).string() + ": missing folder (the split layout: {train,test}/<class>/*)");
  for (const auto& d : sorted_entries(dir / "train", true)) tree.class_names.push_back(d.filename().string());
  if (tree.class_names.empty())
    throw DataError((dir / "train").string() + ": no class folders (the split layout: {train,test}/<class>/*)");
  for (int split = 0; split < 2; ++split)
    for (const auto& name : tree.class_names) {
      const auto folder = dir / kModelNetSplits[split] / name;
      if (!is_dir(folder)) throw DataError(folder.string() + ": missing folder (class '" + name + "' of train/)");
      tree.files[split].push_back(shape_files_in(folder, tree.skipped));
      tree.folders[split].push_back(folder.string());
    }
  for (const auto& folder : {dir, dir / "train", dir / "test"}) count_shapes_outside_classes(folder, tree.skipped);
  for (const auto& d : sorted_entries(dir / "test", true))
    if (std::find(tree.class_names.begin(), tree.class_names.end(), d.filename().string()) == tree.class_names.end())
      throw DataError(d.string() + ": a test class that train/ does not have");
  return load_class_files(tree, dir, kSplitLayout, o);
}

// <class>/*: each class's files shuffled with a seed of its own and cut into
// test (test_fraction of them, rounded, at least one) and train.
ModelNetData load_flat_tree(const fs::path& dir, const ModelNetLoadOptions& o) {
  ClassFiles tree;
  for (const auto& d : sorted_entries(dir, true)) {
    const auto name = d.filename().string();
    auto files = shape_files_in(d, tree.skipped);
    if (files.size() < 2)
      throw DataError(d.string() + ": " + std::to_string(files.size()) + " shape file" +
                      (files.size() == 1 ? "" : "s") +
                      "; a flat folder is split into train and test, which needs at least 2 per class");
    std::mt19937_64 rng(seed_mix(o.seed, fnv1a(name)));
    std::shuffle(files.begin(), files.end(), rng);
    const auto n = static_cast<int64_t>(files.size());
    const int64_t test = std::clamp<int64_t>(std::llround(o.test_fraction * static_cast<double>(n)), 1, n - 1);
    tree.class_names.push_back(name);
    tree.files[1].emplace_back(files.begin(), files.begin() + test);
    tree.files[0].emplace_back(files.begin() + test, files.end());
    std::sort(tree.files[0].back().begin(), tree.files[0].back().end());
    std::sort(tree.files[1].back().begin(), tree.files[1].back().end());
    tree.folders[0].push_back(d.string());
    tree.folders[1].push_back(d.string());
  }
  if (tree.class_names.empty()) throw DataError(dir.string() + ": no class folders (the flat layout: <class>/*)");
  count_shapes_outside_classes(dir, tree.skipped);
  return load_class_files(tree, dir, kFlatLayout, o);
}

// ---------------------------------------------------------------------------- normal_resampled

ModelNetData load_resampled(const fs::path& dir, const std::string& prefix, const ModelNetLoadOptions& o) {
  fs::path names_path = dir / (prefix + "_shape_names.txt");
  if (!is_file(names_path) && is_file(dir / "shape_names.txt")) names_path = dir / "shape_names.txt";
  const auto class_names = read_class_names(names_path);
  std::map<std::string, int64_t> label_of;
  for (size_t i = 0; i < class_names.size(); ++i) label_of[class_names[i]] = static_cast<int64_t>(i);

  ModelNetData data;
  data.layout = kResampledLayout;
  for (int split = 0; split < 2; ++split) {
    const auto list_path = dir / (prefix + "_" + kModelNetSplits[split] + ".txt");
    const auto where = [&](int64_t line) { return list_path.string() + ": line " + std::to_string(line) + ": "; };
    std::vector<Item> items;
    ClassCap cap(class_names.size(), o.max_per_class);
    for (const auto& l : read_list(list_path)) {
      const auto cut = l.text.rfind('_');
      if (cut == std::string::npos || cut == 0)
        throw DataError(where(l.line) + "'" + l.text + "' is not of the form <class>_<number>");
      const auto cls = l.text.substr(0, cut);
      const auto it = label_of.find(cls);
      if (it == label_of.end())
        throw DataError(where(l.line) + "unknown class '" + cls + "' (not in " + names_path.filename().string() + ")");
      if (!cap.take(it->second)) continue;
      items.push_back({(dir / cls / (l.text + ".txt")).string(), it->second, 0});
    }
    if (items.empty()) throw DataError(list_path.string() + ": lists no shapes");
    for (size_t c = 0; c < class_names.size(); ++c)
      if (cap.taken[c] == 0) throw DataError(list_path.string() + ": no shapes of class '" + class_names[c] + "'");
    // 0: every point the files hold, as many as the first training file has
    // (10,000 in the distribution); every other file must have as many.
    ModelNetLoadOptions each = o;
    if (each.points_per_shape == 0) {
      if (data.train.size() > 0) {
        each.points_per_shape = data.train.points.size(1);
      } else {
        each.points_per_shape = static_cast<int64_t>(read_point_text(items.front().path).vertices.size());
        if (each.points_per_shape == 0) throw DataError(items.front().path + ": no points");
      }
    }
    auto set = load_items(items, class_names, each, [&](const Item& item, const ShapeRows& rows) {
      float* points = rows.points;
      float* normals = rows.normals;
      const auto cloud = read_point_text(item.path, each.points_per_shape);
      const auto n = static_cast<int64_t>(cloud.vertices.size());
      if (n < each.points_per_shape)
        throw DataError(item.path + ": " + std::to_string(n) + " points, fewer than the " +
                        std::to_string(each.points_per_shape) +
                        (o.points_per_shape == 0 ? " of " + items.front().path : std::string(" asked for")));
      if (normals && !cloud.has_normals())
        throw DataError(item.path + ": no normals (expected lines x,y,z,nx,ny,nz, every nx,ny,nz a unit vector)");
      for (int64_t i = 0; i < each.points_per_shape; ++i)
        for (size_t k = 0; k < 3; ++k) {
          points[3 * i + static_cast<int64_t>(k)] = cloud.vertices[static_cast<size_t>(i)][k];
          if (normals) normals[3 * i + static_cast<int64_t>(k)] = cloud.normals[static_cast<size_t>(i)][k];
        }
    });
    (split == 0 ? data.train : data.test) = std::move(set);
  }
  return data;
}

// ---------------------------------------------------------------------------- ply_hdf5_2048

// One split of an HDF5 layout: the shapes of `files`, as `o` allows, with
// `p` points each (0: as many as the first file holds; set then). `list`
// names where the files came from in messages, `names_file` the class list.
PointCloudSet load_h5_split(const std::vector<std::string>& files, const std::vector<std::string>& class_names,
                            const std::string& names_file, const std::string& list, const ModelNetLoadOptions& o,
                            int64_t& p) {
  const auto n_classes = static_cast<int64_t>(class_names.size());
  std::vector<at::Tensor> points, normals;
  KeptShapes kept{ClassCap(class_names.size(), o.max_per_class)};
  for (const auto& file : files) {
    H5File h5(file);
    const auto [x, y] = read_h5_clouds(h5, file, p);
    if (p == 0) p = x.size(1);
    const auto s = x.size(0);
    at::Tensor nx;
    if (o.with_normals) {
      if (!h5.has("normal")) throw DataError(file + ": no dataset 'normal' (normals were asked for)");
      nx = h5.read("normal", torch::kFloat, false);
      if (nx.sizes() != x.sizes()) throw DataError(file + ": dataset 'normal' is not shaped like 'data'");
    }
    const auto* yl = y.data_ptr<int64_t>();
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < s; ++i) {
      if (yl[i] < 0 || yl[i] >= n_classes)
        throw DataError(file + ": dataset 'label': label " + std::to_string(yl[i]) + " of shape " + std::to_string(i) +
                        " is outside 0.." + std::to_string(n_classes - 1) + " (" + std::to_string(n_classes) +
                        " names in " + names_file + ")");
      if (kept.keep(file, i, yl[i])) rows.push_back(i);
    }
    points.push_back(finite_h5_rows(x, rows, p, file, "data"));
    if (o.with_normals) normals.push_back(finite_h5_rows(nx, rows, p, file, "normal"));
  }
  if (kept.labels.empty()) throw DataError(list + ": lists no shapes");
  for (size_t c = 0; c < class_names.size(); ++c)
    if (kept.cap.taken[c] == 0) throw DataError(list + ": no shapes of class '" + class_names[c] + "'");
  PointCloudSet set;
  set.points = torch::cat(points).contiguous();
  if (o.with_normals) set.normals = torch::cat(normals).contiguous();
  set.labels = torch::tensor(kept.labels, torch::kLong);
  set.class_names = class_names;
  set.sources = std::move(kept.sources);
  return set;
}

ModelNetData load_h5(const fs::path& dir, const ModelNetLoadOptions& o) {
  fs::path names_path = dir / "shape_names.txt";
  if (!is_file(names_path) && is_file(dir / "modelnet40_shape_names.txt"))
    names_path = dir / "modelnet40_shape_names.txt";
  const auto class_names = read_class_names(names_path);
  int64_t p = o.points_per_shape;  // 0: every stored point, as many as the first file holds

  ModelNetData data;
  data.layout = kH5Layout;
  for (int split = 0; split < 2; ++split) {
    const auto list_path = dir / (std::string(kModelNetSplits[split]) + "_files.txt");
    (split == 0 ? data.train : data.test) = load_h5_split(listed_h5_files(dir, list_path), class_names,
                                                          names_path.filename().string(), list_path.string(), o, p);
  }
  return data;
}

// ---------------------------------------------------------------------------- ScanObjectNN

// A variant's folder below h5_files/ and the suffix of its file names.
std::pair<const char*, std::string> scanobjectnn_files_of(const std::string& variant) {
  if (variant == "OBJ_ONLY") return {"main_split_nobg", ""};
  if (variant == "OBJ_BG") return {"main_split", ""};
  if (variant == "PB_T25") return {"main_split", "_augmented25_norot"};
  if (variant == "PB_T25_R") return {"main_split", "_augmented25rot"};
  if (variant == "PB_T50_R") return {"main_split", "_augmentedrot"};
  if (variant == "PB_T50_RS") return {"main_split", "_augmentedrot_scale75"};
  std::string words;
  for (const char* c = kScanObjectNNVariants; *c; ++c) words += *c == '|' ? std::string(", ") : std::string(1, *c);
  throw UsageError("ScanObjectNN variant '" + variant + "': expected one of " + words);
}

// Whether `dir` holds ScanObjectNN's files: its h5_files folder, or one of
// the split folders in it.
bool looks_like_scanobjectnn(const fs::path& dir) {
  for (const auto& d : {dir, dir / "main_split", dir / "main_split_nobg"})
    if (is_file(d / "training_objectdataset.h5") || is_file(d / "training_objectdataset_augmentedrot_scale75.h5"))
      return true;
  return false;
}

ModelNetData load_scanobjectnn(const fs::path& given, const ModelNetLoadOptions& o) {
  const auto [folder, suffix] = scanobjectnn_files_of(o.scanobjectnn_variant);
  const fs::path dir = given.has_filename() ? given : given.parent_path();  // "main_split_nobg/" too
  ModelNetData data;
  data.layout = kScanObjectNNLayout;
  int64_t p = o.points_per_shape;
  for (int split = 0; split < 2; ++split) {
    const std::string name = std::string(split == 0 ? "training" : "test") + "_objectdataset" + suffix + ".h5";
    // The h5_files folder, or the variant's folder itself.
    fs::path file = dir / folder / name;
    if (!is_file(file) && is_file(dir / name) && dir.filename() == folder) file = dir / name;
    if (!is_file(file))
      throw DataError(file.string() + ": no such file (ScanObjectNN " + o.scanobjectnn_variant +
                      "; give its h5_files " + "folder, which holds main_split/ and main_split_nobg/)");
    (split == 0 ? data.train : data.test) =
        load_h5_split({file.string()}, scanobjectnn_class_names(), "ScanObjectNN's class list", file.string(), o, p);
  }
  return data;
}

}  // namespace

const std::vector<std::string>& scanobjectnn_class_names() {
  static const std::vector<std::string> names = {"bag",   "bin",   "box", "cabinet", "chair", "desk", "display", "door",
                                                 "shelf", "table", "bed", "pillow",  "sink",  "sofa", "toilet"};
  return names;
}

namespace {

// ---------------------------------------------------------------------------- detection

struct Detected {
  std::string layout;
  std::string prefix;  // of the resampled layout's list files
};

std::optional<Detected> detect(const fs::path& dir) {
  if (is_file(dir / "train_files.txt") || is_file(dir / "test_files.txt")) return Detected{kH5Layout, ""};
  for (const auto& f : sorted_entries(dir, false))
    if (lower(f.extension().string()) == ".h5") return Detected{kH5Layout, ""};
  if (is_file(dir / "modelnet40_train.txt") || is_file(dir / "modelnet40_test.txt") ||
      is_file(dir / "modelnet40_shape_names.txt"))
    return Detected{kResampledLayout, "modelnet40"};
  // The same layout under another name, e.g. modelnet10_train.txt.
  for (const auto& f : sorted_entries(dir, false)) {
    const auto name = f.filename().string();
    const std::string suffix = "_train.txt";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return Detected{kResampledLayout, name.substr(0, name.size() - suffix.size())};
  }
  const auto subfolders = sorted_entries(dir, true);
  for (const auto& d : subfolders)
    if (is_dir(d / "train") || is_dir(d / "test")) return Detected{kOffLayout, ""};
  if (is_dir(dir / "train") && is_dir(dir / "test") && !sorted_entries(dir / "train", true).empty())
    return Detected{kSplitLayout, ""};
  for (const auto& d : subfolders)
    for (const auto& f : sorted_entries(d, false))
      if (is_tree_shape_file(f)) return Detected{kFlatLayout, ""};
  return std::nullopt;
}

ModelNetData load_any_layout(const std::string& dir_name, const ModelNetLoadOptions& o);

}  // namespace

ModelNetData load_modelnet40(const std::string& dir_name, const ModelNetLoadOptions& o) {
  auto data = load_any_layout(dir_name, o);
  if (!o.point_features.empty() && !data.train.features.defined())
    throw UsageError(dir_name + ": point features: the " + data.layout +
                     " layout holds none (a class tree of .ply "
                     "or .pcd point clouds does)");
  return data;
}

namespace {

ModelNetData load_any_layout(const std::string& dir_name, const ModelNetLoadOptions& o) {
  if (o.points_per_shape < 0)
    throw UsageError("points per shape must be >= 0 (0 = every stored point; got " +
                     std::to_string(o.points_per_shape) + ")");
  if (o.max_per_class < 0) throw UsageError("max per class must be >= 0 (got " + std::to_string(o.max_per_class) + ")");
  if (!(o.test_fraction > 0 && o.test_fraction < 1))
    throw UsageError("test fraction must be in (0, 1) (got " + std::to_string(o.test_fraction) + ")");
  if (!is_layout_choice(o.layout))
    throw UsageError("layout '" + o.layout +
                     "': expected one of auto, modelnet, split, flat, resampled, hdf5, scanobjectnn");
  fs::path dir(dir_name);
  require_data_folder(dir_name);
  // A layout named by the caller is read as such, whatever else the folder holds.
  if (o.layout == "modelnet") return load_off_tree(dir, o);
  if (o.layout == "split") return load_split_tree(dir, o);
  if (o.layout == "flat") return load_flat_tree(dir, o);
  if (o.layout == "scanobjectnn" || (o.layout == "auto" && looks_like_scanobjectnn(dir)))
    return load_scanobjectnn(dir, o);
  auto found = detect(dir);
  if (!found) {
    // Also accept the folder that holds the unpacked download.
    for (const char* sub : {kH5Layout, kResampledLayout, kOffLayout})
      if (is_dir(dir / sub) && (found = detect(dir / sub))) {
        dir /= sub;
        break;
      }
  }
  if (o.layout != "auto") {
    const char* wanted = o.layout == "hdf5" ? kH5Layout : kResampledLayout;
    if (!found || found->layout != wanted)
      throw DataError(
          dir_name + ": not a " + wanted + " folder" +
          (o.layout == "hdf5" ? " (no train_files.txt, test_files.txt or .h5 file)" : " (no <name>_train.txt list)") +
          (found ? "; it looks like the " + std::string(found->layout) + " layout" : ""));
  }
  if (!found)
    throw DataError(dir_name +
                    ": not a ModelNet40 folder: looked for train_files.txt (modelnet40_ply_hdf5_2048), "
                    "modelnet40_train.txt (modelnet40_normal_resampled) and <class>/train/ with shape files (" +
                    tree_shape_extensions() +
                    "; ModelNet40), train/<class>/ (split) and <class>/ with shape files (flat), "
                    "here and in subfolders of those names");
  if (found->layout == kH5Layout) return load_h5(dir, o);
  if (found->layout == kResampledLayout) return load_resampled(dir, found->prefix, o);
  if (found->layout == kSplitLayout) return load_split_tree(dir, o);
  if (found->layout == kFlatLayout) return load_flat_tree(dir, o);
  return load_off_tree(dir, o);
}

}  // namespace

}  // namespace qkv::pointcloud
