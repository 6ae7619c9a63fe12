#include "qkv/pointcloud/shapenet_part.h"

#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/sampling.h"

namespace qkv::pointcloud {
namespace {

namespace fs = std::filesystem;

const char* const kShapeNetSplits[3] = {"train", "val", "test"};

std::string part_range(const PartCategory& c) {
  return c.name + " (" + std::to_string(c.first_part) + "-" + std::to_string(c.first_part + c.parts - 1) + ")";
}

// The categories to keep: all, or those named in the options.
std::vector<bool> wanted_categories(const ShapeNetPartLoadOptions& o) {
  const auto n = shapenet_part_categories().size();
  std::vector<bool> keep(n, o.categories.empty());
  for (const auto& c : o.categories) keep[static_cast<size_t>(find_part_category(c, "classes"))] = true;
  return keep;
}

// One shape of the text layout: the file and its category.
struct TextItem {
  std::string path, key;  // key: "<synset>/<token>", the resampling seed's source
  int64_t category;
};

// Reads a shape file and resamples it to p points.
void load_text_shape(const TextItem& item, const ShapeNetPartLoadOptions& o, float* points, float* normals,
                     int64_t* parts) {
  const auto text = read_part_text(item.path, &shapenet_part_categories()[static_cast<size_t>(item.category)]);
  const auto& rows = text.rows;
  const auto& labels = text.parts;
  // Resampling: a random subset, or every point once plus random repeats.
  const auto m = static_cast<int64_t>(rows.size());
  const int64_t p = o.points_per_shape;
  std::vector<int64_t> pick(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) pick[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed_mix(o.seed, fnv1a(item.key)));
  if (m >= p) {
    for (int64_t i = 0; i < p; ++i)
      std::swap(pick[static_cast<size_t>(i)], pick[static_cast<size_t>(i + rng() % (m - i))]);
    pick.resize(static_cast<size_t>(p));
  } else {
    while (static_cast<int64_t>(pick.size()) < p) pick.push_back(static_cast<int64_t>(rng() % m));
    for (int64_t i = p - 1; i > 0; --i)
      std::swap(pick[static_cast<size_t>(i)], pick[static_cast<size_t>(rng() % (i + 1))]);
  }
  for (int64_t i = 0; i < p; ++i) {
    const auto& r = rows[static_cast<size_t>(pick[static_cast<size_t>(i)])];
    for (int k = 0; k < 3; ++k) points[3 * i + k] = r[k];
    if (normals)
      for (int k = 0; k < 3; ++k) normals[3 * i + k] = r[3 + k];
    parts[i] = labels[static_cast<size_t>(pick[static_cast<size_t>(i)])];
  }
}

std::vector<std::string> read_split_list(const fs::path& path) {
  if (!is_file(path)) throw DataError(path.string() + ": missing split file");
  const nlohmann::json j = read_json_file(path.string());
  if (!j.is_array()) throw DataError(path.string() + ": expected a JSON list of \"shape_data/<synset>/<token>\"");
  std::vector<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) throw DataError(path.string() + ": expected a JSON list of strings, found " + e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

PointCloudSet make_set(int64_t s, const ShapeNetPartLoadOptions& o) {
  PointCloudSet set;
  set.points = torch::empty({s, o.points_per_shape, 3}, torch::kFloat);
  if (o.with_normals) set.normals = torch::empty({s, o.points_per_shape, 3}, torch::kFloat);
  set.labels = torch::empty({s}, torch::kLong);
  set.point_labels = torch::empty({s, o.points_per_shape}, torch::kLong);
  set.class_names = shapenet_part_category_names();
  return set;
}

ShapeNetPartData load_text(const fs::path& dir, const ShapeNetPartLoadOptions& o) {
  // synsetoffset2category.txt names the categories present; each must be one of the 16.
  const auto map_path = dir / "synsetoffset2category.txt";
  std::map<std::string, int64_t> category_of_synset;
  for (const auto& l : read_list(map_path)) {
    std::istringstream fields(l.text);
    std::string name, synset, extra;
    if (!(fields >> name >> synset) || (fields >> extra))
      throw DataError(map_path.string() + ": line " + std::to_string(l.line) + ": expected '<Category> <synset>'");
    int64_t c = -1;
    try {
      c = find_part_category(synset);
    } catch (const UsageError&) {
      throw DataError(map_path.string() + ": line " + std::to_string(l.line) + ": synset " + synset +
                      " is not one of the 16 ShapeNet-part categories");
    }
    category_of_synset[synset] = c;
  }
  const auto keep = wanted_categories(o);
  ShapeNetPartData data;
  data.layout = kShapeNetPartTextLayout;
  for (int split = 0; split < 3; ++split) {
    const auto list_path =
        dir / "train_test_split" / ("shuffled_" + std::string(kShapeNetSplits[split]) + "_file_list.json");
    std::vector<TextItem> items;
    ClassCap cap(shapenet_part_categories().size(), o.max_per_category);
    for (const auto& entry : read_split_list(list_path)) {
      // "shape_data/<synset>/<token>": the last two components.
      const fs::path e(entry);
      const auto token = e.filename().string(), synset = e.parent_path().filename().string();
      const auto found = category_of_synset.find(synset);
      if (token.empty() || found == category_of_synset.end())
        throw DataError(list_path.string() + ": entry '" + entry + "': synset '" + synset + "' is not in " +
                        map_path.filename().string());
      const int64_t c = found->second;
      if (!keep[static_cast<size_t>(c)] || !cap.take(c)) continue;
      const auto path = dir / synset / (token + ".txt");
      if (!is_file(path))
        throw DataError(list_path.string() + ": lists '" + entry + "', but " + path.string() + " is missing");
      items.push_back({path.string(), synset + "/" + token, c});
    }
    if (items.empty()) throw DataError(list_path.string() + ": lists no shapes (of the categories asked for)");
    const auto s = static_cast<int64_t>(items.size());
    auto set = make_set(s, o);
    const int64_t p = o.points_per_shape;
    float* points = set.points.data_ptr<float>();
    float* normals = o.with_normals ? set.normals.data_ptr<float>() : nullptr;
    int64_t* parts = set.point_labels.data_ptr<int64_t>();
    // Errors are kept per shape and the first by index is rethrown, so the
    // message does not depend on thread timing.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(s));
    at::parallel_for(0, s, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) try {
          stop_if_interrupted("reading " + items[static_cast<size_t>(i)].path);
          load_text_shape(items[static_cast<size_t>(i)], o, points + i * p * 3, normals ? normals + i * p * 3 : nullptr,
                          parts + i * p);
        } catch (...) {
          errors[static_cast<size_t>(i)] = std::current_exception();
        }
    });
    for (const auto& err : errors)
      if (err) std::rethrow_exception(err);
    for (int64_t i = 0; i < s; ++i) {
      set.labels[i] = items[static_cast<size_t>(i)].category;
      set.sources.push_back(items[static_cast<size_t>(i)].path);
    }
    (split == 0 ? data.train : split == 1 ? data.val : data.test) = std::move(set);
  }
  return data;
}

ShapeNetPartData load_h5(const fs::path& dir, const ShapeNetPartLoadOptions& o) {
  if (o.with_normals) throw DataError(dir.string() + ": the hdf5_data layout has no normals (use the _normal layout)");
  const auto& cats = shapenet_part_categories();
  const auto n_cats = static_cast<int64_t>(cats.size());
  const auto keep = wanted_categories(o);
  const int64_t p = o.points_per_shape;
  ShapeNetPartData data;
  data.layout = kShapeNetPartH5Layout;
  for (int split = 0; split < 3; ++split) {
    const auto list_path = dir / (std::string(kShapeNetSplits[split]) + "_hdf5_file_list.txt");
    std::vector<at::Tensor> points, parts;
    KeptShapes kept{ClassCap(cats.size(), o.max_per_category)};
    for (const auto& file : listed_h5_files(dir, list_path)) {
      H5File h5(file);
      const auto [x, y] = read_h5_clouds(h5, file, p);
      const auto s = x.size(0);
      const auto pid = h5.read("pid", torch::kLong, true);
      if (pid.dim() != 2 || pid.size(0) != s || pid.size(1) != x.size(1))
        throw DataError(file + ": dataset 'pid' is not [" + std::to_string(s) + ", " + std::to_string(x.size(1)) +
                        "] like 'data'");
      const auto* yl = y.data_ptr<int64_t>();
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < s; ++i) {
        if (yl[i] < 0 || yl[i] >= n_cats)
          throw DataError(file + ": dataset 'label': category " + std::to_string(yl[i]) + " of shape " +
                          std::to_string(i) + " is outside 0.." + std::to_string(n_cats - 1));
        const auto& cat = cats[static_cast<size_t>(yl[i])];
        const auto row = pid[i].slice(0, 0, p);
        const int64_t lo = row.min().item<int64_t>(), hi = row.max().item<int64_t>();
        if (lo < cat.first_part || hi >= cat.first_part + cat.parts)
          throw DataError(file + ": dataset 'pid': shape " + std::to_string(i) + " has part " +
                          std::to_string(lo < cat.first_part ? lo : hi) + ", not a part of " + part_range(cat));
        if (keep[static_cast<size_t>(yl[i])] && kept.keep(file, i, yl[i])) rows.push_back(i);
      }
      points.push_back(finite_h5_rows(x, rows, p, file, "data"));
      parts.push_back(finite_h5_rows(pid, rows, p, file, "pid"));
    }
    if (kept.labels.empty()) throw DataError(list_path.string() + ": lists no shapes (of the categories asked for)");
    PointCloudSet set;
    set.points = torch::cat(points).contiguous();
    set.point_labels = torch::cat(parts).contiguous();
    set.labels = torch::tensor(kept.labels, torch::kLong);
    set.class_names = shapenet_part_category_names();
    set.sources = std::move(kept.sources);
    (split == 0 ? data.train : split == 1 ? data.val : data.test) = std::move(set);
  }
  return data;
}

}  // namespace

namespace {

// A point line is seven numbers; anything this long is not one, and failing
// at the first such line keeps a binary file from being held line by line.
constexpr size_t kMaxPartLine = 4096;

PartText read_part_text_unguarded(const std::string& path, const PartCategory* cat) {
  regular_file_size(path);
  std::ifstream in(path);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  PartText out;
  std::string line;
  // The exact positions until all are read (a scan far from 0 keeps its detail, as read_shape_file's).
  ExactPositions exact;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.size() > kMaxPartLine)
      throw DataError(path + ": line " + std::to_string(n) + ": longer than " + std::to_string(kMaxPartLine) +
                      " bytes (not a point line: x y z nx ny nz part)");
    const char* s = line.c_str();
    double v[7];
    int count = 0;
    for (;;) {
      while (*s == ' ' || *s == '\t' || *s == '\r' || *s == ',') ++s;
      if (!*s) break;
      char* end = nullptr;
      const double x = std::strtod(s, &end);
      if (end == s)
        throw DataError(path + ": line " + std::to_string(n) + ": not a number: '" + std::string(s).substr(0, 20) +
                        "'");
      if (count < 7) v[count] = x;
      ++count;
      s = end;
    }
    if (count == 0) continue;
    if (count != 7)
      throw DataError(path + ": line " + std::to_string(n) + ": expected 7 columns (x y z nx ny nz part), got " +
                      std::to_string(count));
    for (int k = 0; k < 6; ++k)
      if (!std::isfinite(static_cast<float>(v[k])))
        throw DataError(path + ": line " + std::to_string(n) + ": a coordinate or normal is not finite");
    const double part = v[6];
    if (!std::isfinite(part) || part != std::floor(part) || part < 0 || part >= kShapeNetPartCount)
      throw DataError(path + ": line " + std::to_string(n) + ": part " + std::to_string(part) +
                      " is not a part id (0-" + std::to_string(kShapeNetPartCount - 1) + ")");
    if (cat && (part < cat->first_part || part >= cat->first_part + cat->parts))
      throw DataError(path + ": line " + std::to_string(n) + ": part " + std::to_string(static_cast<int64_t>(part)) +
                      " is not a part of " + part_range(*cat));
    out.rows.push_back({static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2]),
                        static_cast<float>(v[3]), static_cast<float>(v[4]), static_cast<float>(v[5])});
    out.parts.push_back(static_cast<int64_t>(part));
    exact.push({v[0], v[1], v[2]});
  }
  if (in.bad()) throw DataError(path + ": read failed");
  if (out.rows.empty()) throw DataError(path + ": no points");
  out.origin = exact.origin();
  if (out.origin != std::array<double, 3>{0, 0, 0})
    for (size_t i = 0; i < exact.size(); ++i) {
      const auto p = exact.relative(i, out.origin);
      std::copy(p.begin(), p.end(), out.rows[i].begin());
    }
  return out;
}

}  // namespace

PartText read_part_text(const std::string& path, const PartCategory* cat) {
  return guard_memory(path, "a point file", [&] { return read_part_text_unguarded(path, cat); });
}

bool looks_like_part_text(const std::string& path) {
  // Only .txt: an OBJ line "v x y z r g b" has seven columns too.
  if (lower(fs::path(path).extension().string()) != ".txt") return false;
  if (!is_file(path)) return false;  // a FIFO would block the open
  std::ifstream in(path, std::ios::binary);
  std::string head(size_t{64} * 1024, '\0');  // the lines looked at, bounded whatever the file holds
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  std::istringstream lines(head);
  std::string line;
  int seen = 0;
  while (seen < 64 && std::getline(lines, line)) {
    if (lines.eof() && in.gcount() == static_cast<std::streamsize>(head.size())) break;  // cut by the bound
    for (char& c : line)
      if (c == ',') c = ' ';
    std::istringstream fields(line);
    std::vector<double> v;
    std::string field;
    while (fields >> field) {
      char* end = nullptr;
      v.push_back(std::strtod(field.c_str(), &end));
      if (end != field.c_str() + field.size()) return false;  // a word: a header, a comment
    }
    if (v.empty()) continue;
    // Any whole number as the part: the reader names one outside 0-49
    // (refused as "7 columns" by the cloud reader, which has no parts).
    if (v.size() != 7 || !is_unit_or_zero_normal(v[3], v[4], v[5]) || v[6] != std::floor(v[6])) return false;
    ++seen;
  }
  return seen > 0;
}

const std::vector<PartCategory>& shapenet_part_categories() {
  static const std::vector<PartCategory> categories{
      {"Airplane", "02691156", 0, 4}, {"Bag", "02773838", 4, 2},        {"Cap", "02954340", 6, 2},
      {"Car", "02958343", 8, 4},      {"Chair", "03001627", 12, 4},     {"Earphone", "03261776", 16, 3},
      {"Guitar", "03467517", 19, 3},  {"Knife", "03624134", 22, 2},     {"Lamp", "03636649", 24, 4},
      {"Laptop", "03642806", 28, 2},  {"Motorbike", "03790512", 30, 6}, {"Mug", "03797390", 36, 2},
      {"Pistol", "03948459", 38, 3},  {"Rocket", "04099429", 41, 3},    {"Skateboard", "04225987", 44, 3},
      {"Table", "04379243", 47, 3},
  };
  return categories;
}

std::vector<std::string> shapenet_part_category_names() {
  std::vector<std::string> names;
  for (const auto& c : shapenet_part_categories()) names.push_back(c.name);
  return names;
}

int64_t find_part_category(const std::string& name_or_synset, const std::string& key) {
  const auto& cats = shapenet_part_categories();
  for (size_t i = 0; i < cats.size(); ++i)
    if (lower(cats[i].name) == lower(name_or_synset) || cats[i].synset == name_or_synset)
      return static_cast<int64_t>(i);
  std::string known;
  for (const auto& c : cats) known += (known.empty() ? "" : ", ") + c.name;
  throw ConfigError(key, name_or_synset + ": not a ShapeNet-part category (known: " + known + ")");
}

ShapeNetPartData load_shapenet_part(const std::string& dir_name, const ShapeNetPartLoadOptions& o) {
  if (o.points_per_shape < 0)
    throw UsageError("points per shape must be >= 0 (0 = the layout's; got " + std::to_string(o.points_per_shape) +
                     ")");
  if (o.max_per_category < 0)
    throw UsageError("max per category must be >= 0 (got " + std::to_string(o.max_per_category) + ")");
  fs::path dir(dir_name);
  require_data_folder(dir_name);
  auto layout_of = [](const fs::path& d) -> std::string {
    if (is_file(d / "synsetoffset2category.txt")) return kShapeNetPartTextLayout;
    if (is_file(d / "train_hdf5_file_list.txt") || is_file(d / "test_hdf5_file_list.txt")) return kShapeNetPartH5Layout;
    return "";
  };
  std::string layout = layout_of(dir);
  for (const char* sub : {kShapeNetPartTextLayout, kShapeNetPartH5Layout})
    if (layout.empty() && is_dir(dir / sub) && !(layout = layout_of(dir / sub)).empty()) dir /= sub;
  if (layout.empty())
    throw DataError(dir_name + ": not a ShapeNet-part folder: looked for synsetoffset2category.txt (" +
                    kShapeNetPartTextLayout + ") and train_hdf5_file_list.txt (" + kShapeNetPartH5Layout +
                    "), here and in subfolders of those names");
  // 0: more points than a view takes, so that views redraw among them each
  // epoch: 2,500 per text-layout shape (the files hold ~2,600), all 2,048 of
  // the HDF5 layout.
  ShapeNetPartLoadOptions resolved = o;
  if (resolved.points_per_shape == 0)
    resolved.points_per_shape = layout == kShapeNetPartTextLayout ? kPartTextPointsByDefault : 2048;
  return layout == kShapeNetPartTextLayout ? load_text(dir, resolved) : load_h5(dir, resolved);
}

}  // namespace qkv::pointcloud
