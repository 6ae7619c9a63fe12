#include "qkv/medical/cohort_data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <unordered_map>

#include "qkv/core/checked.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/medical/orientation.h"
#include "qkv/runtime/parallel.h"

namespace qkv::medical {

std::vector<int64_t> CohortData::volume_shape() const {
  if (!volumes.defined()) return {};
  return {volumes.size(1), volumes.size(2), volumes.size(3)};
}

std::vector<int64_t> CohortData::labels_of(const std::vector<int64_t>& rows) const {
  std::vector<int64_t> out;
  out.reserve(rows.size());
  for (auto r : rows) out.push_back(labels.at(r));
  return out;
}

at::Tensor volume_to_tensor(const medical::Volume& volume) {
  const auto& d = volume.dims;
  auto flat = torch::from_blob(const_cast<float*>(volume.voxels.data()), {d[2], d[1], d[0]}, torch::kFloat32);
  return flat.permute({2, 1, 0}).contiguous();
}

medical::Volume tensor_to_volume(const at::Tensor& xyz, const medical::NiftiGeometry& geometry) {
  medical::Volume v;
  v.dims = {xyz.size(0), xyz.size(1), xyz.size(2)};
  v.geometry = geometry;
  auto kji = xyz.to(torch::kCPU, torch::kFloat32).permute({2, 1, 0}).contiguous();
  v.voxels.assign(kji.data_ptr<float>(), kji.data_ptr<float>() + kji.numel());
  return v;
}

namespace {

std::string grid_text(const std::vector<int64_t>& d) {
  std::string out;
  for (auto v : d) out += (out.empty() ? "" : "x") + std::to_string(v);
  return out;
}

// Every volume's header against the grid (the checkpoint's, or else the
// first volume's), before anything the size of a volume is read or allocated.
// When volumes are to be turned to RAS+ their axes may come in any order, so
// only the sizes are compared here, as sets; the grids are compared again
// once turned.
std::vector<int64_t> check_grids(const std::vector<std::string>& paths, const std::vector<int64_t>& expected,
                                 bool any_axis_order) {
  auto comparable = [&](std::vector<int64_t> d) {
    if (any_axis_order) std::sort(d.begin(), d.end());
    return d;
  };
  std::vector<int64_t> grid = expected;
  std::string grid_owner = "the checkpoint";
  for (const auto& path : paths) {
    const auto d = medical::read_nifti_grid(path);
    const std::vector<int64_t> dims(d.begin(), d.end());
    if (grid.empty()) {
      grid = dims;
      grid_owner = path;
    } else if (comparable(dims) != comparable(grid)) {
      throw DataError(path + ": grid " + grid_text(dims) + " differs from " + grid_owner + "'s " + grid_text(grid) +
                      " (every volume must be on one grid)");
    }
  }
  return grid;
}

// Where two volumes of one grid disagree on where their voxels lie (the
// voxel -> world affines, sform else qform else spacing), or "" when they
// agree within 1e-3 mm per entry, scaled by the entry's size (our
// tolerance: headers written by different tools round differently). A
// flipped or permuted volume on the same grid would otherwise reach the
// model as a mirrored or rotated brain.
std::string affine_difference(const medical::NiftiGeometry& a, const medical::NiftiGeometry& b,
                              const std::string& b_owner = "the first volume's") {
  const auto ma = a.affine(), mb = b.affine();
  bool axes_differ = false, origin_differs = false;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      const double x = ma[static_cast<size_t>(4 * r + c)], y = mb[static_cast<size_t>(4 * r + c)];
      if (std::abs(x - y) > 1e-3 * std::max(1.0, std::max(std::abs(x), std::abs(y))))
        (c < 3 ? axes_differ : origin_differs) = true;
    }
  if (!axes_differ && !origin_differs) return "";
  auto row = [](const std::array<double, 16>& m, int r) {
    char text[96];
    std::snprintf(text, sizeof text, "(%g %g %g %g)", m[static_cast<size_t>(4 * r)], m[static_cast<size_t>(4 * r + 1)],
                  m[static_cast<size_t>(4 * r + 2)], m[static_cast<size_t>(4 * r + 3)]);
    return std::string(text);
  };
  std::string what = "its origin differs";
  if (axes_differ) {
    const auto code_a = medical::orientation_code(a), code_b = medical::orientation_code(b);
    what = code_a != code_b ? "its orientation (" + code_a + " against " + code_b + ") differs"
                            : "its voxel axes (spacing or an oblique turn) differ";
  }
  return what + " from " + b_owner + ": affine " + row(ma, 0) + " " + row(ma, 1) + " " + row(ma, 2) + " against " +
         row(mb, 0) + " " + row(mb, 1) + " " + row(mb, 2);
}

}  // namespace

uint32_t cohort_data_crc32(const CohortData& c) {
  uint32_t crc = 0;
  auto add_text = [&](const std::string& text) { crc = crc32(text.c_str(), text.size() + 1, crc); };  // with its NUL
  for (const auto& id : c.subject_ids) add_text(id);
  crc = crc32(c.labels.data(), c.labels.size() * sizeof(int64_t), crc);
  for (const auto& id : c.methylation.cpg_ids) add_text(id);
  crc = crc32(c.methylation.values.data(), c.methylation.values.size() * sizeof(float), crc);
  if (c.volumes.defined()) {
    const auto volumes = c.volumes.contiguous();
    crc = crc32(volumes.data_ptr(), volumes.nbytes(), crc);
  }
  return crc;
}

Volume read_cohort_volume(const std::string& path, bool to_ras, bool* turned) {
  auto v = medical::read_nifti(path);
  // Every volume's affine checked as it is read, so that one whose voxel
  // axis has no direction is named by its file.
  const bool turn = medical::orientation_code(v.geometry, path) != "RAS" && to_ras;
  if (turned) *turned = turn;
  return turn ? medical::reorient_to_ras(v, path) : v;
}

at::Tensor read_cohort_label_mask(const CohortData& cohort, const std::string& path, const std::string& what) {
  const auto mask = read_cohort_volume(path, cohort.reoriented);
  const auto shape = cohort.volume_shape();
  if (std::vector<int64_t>(mask.dims.begin(), mask.dims.end()) != shape)
    throw DataError(path + ": " + what + " on grid " + grid_text({mask.dims.begin(), mask.dims.end()}) +
                    ", not the volumes' " + grid_text(shape) + (cohort.reoriented ? " (both turned to RAS+)" : ""));
  if (const auto why = affine_difference(mask.geometry, cohort.geometry, "the volumes'"); !why.empty())
    throw DataError(path + ": " + what + ": " + why + (cohort.reoriented ? " (both turned to RAS+)" : ""));
  return volume_to_tensor(mask);
}

CohortData load_cohort(const std::string& manifest_path, const std::string& methylation_path, bool load_volumes,
                       int64_t threads, bool quiet, const std::vector<int64_t>& expected_grid, double max_missing,
                       bool to_ras, CohortUse use) {
  auto manifest = medical::read_manifest(manifest_path, use == CohortUse::Predict);
  const int64_t min_subjects = use == CohortUse::Fit ? 2 : 1;
  auto table = medical::read_methylation_table(methylation_path);
  auto match = medical::match_cohort(manifest, table);
  CohortData c;
  c.manifest_path = manifest_path;
  c.methylation_path = methylation_path;
  c.match_summary = match.describe();

  // Subjects with most beta-values missing are named (their imputed values
  // are mostly training means); those above max_missing are left out.
  std::vector<std::string> sparse, dropped;
  {
    std::vector<size_t> kept;
    const int64_t cols = table.cols();
    for (size_t i = 0; i < match.manifest_rows.size(); ++i) {
      const float* row = table.values.data() + match.methylation_rows[i] * cols;
      const int64_t missing = std::count_if(row, row + cols, [](float v) { return std::isnan(v); });
      const double share = cols > 0 ? static_cast<double>(missing) / static_cast<double>(cols) : 0.0;
      const auto& id = manifest.subjects[match.manifest_rows[i]].id;
      char text[32];
      std::snprintf(text, sizeof text, " (%.0f%%)", 100 * share);
      if (share > max_missing)
        dropped.push_back(id + text);
      else
        kept.push_back(i);
      if (share >= 0.5 && share <= max_missing) sparse.push_back(id + text);
    }
    if (static_cast<int64_t>(kept.size()) < min_subjects) {
      if (!dropped.empty())
        throw ConfigError("max_missing", range_number_text(max_missing) + ": leaves " + std::to_string(kept.size()) +
                                             " of " + std::to_string(match.manifest_rows.size()) + " subjects of " +
                                             methylation_path + "; allow a larger share of missing beta-values");
      throw DataError(manifest_path + ": " + counted(static_cast<int64_t>(kept.size()), "subject") +
                      " in both it and " + methylation_path + "; fitting needs " + std::to_string(min_subjects));
    }
    std::vector<int64_t> manifest_rows, methylation_rows;
    for (size_t i : kept) {
      manifest_rows.push_back(match.manifest_rows[i]);
      methylation_rows.push_back(match.methylation_rows[i]);
    }
    match.manifest_rows = std::move(manifest_rows);
    match.methylation_rows = std::move(methylation_rows);
  }
  auto some = [](const std::vector<std::string>& ids) {
    std::vector<std::string> first(ids.begin(),
                                   ids.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(5, ids.size())));
    return join(first) + (ids.size() > 5 ? ", ..." : "");
  };

  const int64_t n = static_cast<int64_t>(match.manifest_rows.size());
  std::vector<std::string> ids;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = manifest.subjects[match.manifest_rows[i]];
    c.subject_ids.push_back(s.id);
    c.labels.push_back(s.label);
    c.spect_paths.push_back(s.spect_path);
    ids.push_back(s.id);
  }
  // A classifier learns nothing from one class (select and XGBoost refused
  // it each in its own words, a network trained on and said little).
  if (use == CohortUse::Fit &&
      std::adjacent_find(c.labels.begin(), c.labels.end(), std::not_equal_to<>()) == c.labels.end())
    throw DataError(manifest_path + ": every subject it shares with " + methylation_path + " is labelled " +
                    (c.labels.front() == 1 ? "1 (PD)" : "0 (control)") + "; a classifier needs both classes");
  c.methylation.path = table.path;
  c.methylation.cpg_ids = table.cpg_ids;
  c.methylation.subject_ids = ids;
  c.methylation.values.resize(static_cast<size_t>(n * table.cols()));
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(table.values.begin() + match.methylation_rows[i] * table.cols(), table.cols(),
                c.methylation.values.begin() + i * table.cols());
  // Said once the cohort has loaded, so that a failure stays one line.
  const int64_t missing = c.methylation.missing_count();
  // A CpG site with no value for any subject has no mean to impute: fitted
  // on, it is 0.5 everywhere (column_means), which says nothing; named, not
  // hidden. (To predict, a checkpoint's recorded means fill the gaps.)
  std::vector<std::string> empty_sites;
  if (use == CohortUse::Fit && missing >= n)
    for (int64_t col = 0; col < table.cols(); ++col) {
      bool any = false;
      for (int64_t row = 0; row < n && !any; ++row) any = !std::isnan(c.methylation.at(row, col));
      if (!any) empty_sites.push_back(table.cpg_ids[static_cast<size_t>(col)]);
    }
  auto report = [&] {
    if (quiet) return;
    if (!empty_sites.empty())
      say_as_is("cohort: warning: " +
                (empty_sites.size() == 1 ? std::string("1 CpG site has")
                                         : std::to_string(empty_sites.size()) + " CpG sites have") +
                " no value for any subject in " + methylation_path + ": " + some(empty_sites) +
                " (each is 0.5 for every subject and tells the models nothing)");
    if (!match.only_in_manifest.empty() || !match.only_in_methylation.empty())
      say_as_is("cohort: " + c.match_summary + "; only subjects in both are used");
    if (missing > 0)
      say_as_is("cohort: " + std::to_string(missing) + " of " + std::to_string(c.methylation.values.size()) +
                " beta-values missing in " + methylation_path +
                "; each is replaced by its CpG's mean over the training subjects (for a checkpoint, the means it "
                "recorded)");
    if (!sparse.empty())
      say_as_is("cohort: warning: " +
                (sparse.size() == 1 ? std::string("1 subject has") : std::to_string(sparse.size()) + " subjects have") +
                " at least half their beta-values missing: " + some(sparse) +
                " (--max-missing leaves out subjects above a share)");
    if (!dropped.empty())
      say_as_is("cohort: left out " + counted(static_cast<int64_t>(dropped.size()), "subject") + " with more than " +
                range_number_text(100 * max_missing) + "% of their beta-values missing: " + some(dropped));
  };
  if (!load_volumes) {
    report();
    return c;
  }

  // Volumes are read in parallel; the first one fixes the grid.
  const auto grid = check_grids(c.spect_paths, expected_grid, to_ras);
  int64_t total = n;
  for (auto d : grid)
    if (!checked_mul(total, d, total)) total = -1;
  if (total < 0)
    throw DataError(manifest_path + ": " + std::to_string(n) + " volumes of " + grid_text(grid) +
                    " voxels are too many to hold in memory");
  std::atomic<int64_t> turned{0};
  auto read_volume = [&](const std::string& path) {
    bool was_turned = false;
    auto v = read_cohort_volume(path, to_ras, &was_turned);
    if (was_turned) ++turned;
    return v;
  };
  auto first = read_volume(c.spect_paths.at(0));
  if (to_ras && !expected_grid.empty() && std::vector<int64_t>(first.dims.begin(), first.dims.end()) != expected_grid)
    throw DataError(c.spect_paths[0] + ": grid " + grid_text({first.dims.begin(), first.dims.end()}) +
                    " turned to RAS+ differs from the checkpoint's " + grid_text(expected_grid));
  c.geometry = first.geometry;
  c.geometries.assign(static_cast<size_t>(n), first.geometry);
  c.reoriented = to_ras;
  const auto dims = first.dims;
  try {
    c.volumes = torch::empty({n, dims[0], dims[1], dims[2]}, torch::kFloat32);
  } catch (const c10::Error&) {
    throw DataError(manifest_path + ": out of memory stacking " + std::to_string(n) + " volumes of " + grid_text(grid) +
                    " voxels (" + std::to_string(total * 4) + " bytes)");
  }
  c.volumes[0].copy_(volume_to_tensor(first));
  try {
    parallel_tasks(n - 1, parallel_workers(n - 1, threads > 0 ? threads : 2), [&](int64_t, int64_t task) {
      const int64_t i = task + 1;
      auto v = read_volume(c.spect_paths[i]);
      if (v.dims != dims)
        throw DataError(c.spect_paths[i] + ": grid " + std::to_string(v.dims[0]) + "x" + std::to_string(v.dims[1]) +
                        "x" + std::to_string(v.dims[2]) + " differs from " + c.spect_paths[0] + "'s " +
                        std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
                        " (every volume must be on one grid)");
      if (const auto why = affine_difference(v.geometry, first.geometry); !why.empty())
        throw DataError(c.spect_paths[i] + ": " + why + " (" + c.spect_paths[0] +
                        "; every volume must lie the same way in space: resample it onto the first one's grid, "
                        "or turn them all to RAS+ (--reorient) where they differ only in axis order and direction)");
      c.volumes[i].copy_(volume_to_tensor(v));
      c.geometries[static_cast<size_t>(i)] = v.geometry;
    });
  } catch (const std::exception& e) {
    throw DataError(e.what());
  }
  if (to_ras && !quiet)
    say_as_is("cohort: " + std::to_string(turned.load()) + " of " + std::to_string(n) +
              " volumes turned to RAS+ (axes permuted and flipped; no resampling)");
  report();
  return c;
}

nlohmann::json Preprocessing::to_json() const {
  return {{"normalisation", normalisation},
          {"volume_min", volume_min},
          {"volume_max", volume_max},
          {"cpg_ids", cpg_ids},
          {"cpg_means", cpg_means}};
}

Preprocessing Preprocessing::from_json(const nlohmann::json& j) {
  Preprocessing p;
  try {
    p.normalisation = j.at("normalisation").get<std::string>();
    p.volume_min = j.at("volume_min").get<double>();
    p.volume_max = j.at("volume_max").get<double>();
    p.cpg_ids = j.at("cpg_ids").get<std::vector<std::string>>();
    p.cpg_means = j.at("cpg_means").get<std::vector<float>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("run configuration: malformed preprocessing record (") + e.what() + ")");
  }
  if (p.cpg_ids.size() != p.cpg_means.size())
    throw DataError("run configuration: preprocessing has " + std::to_string(p.cpg_ids.size()) + " CpG ids but " +
                    std::to_string(p.cpg_means.size()) + " means");
  return p;
}

namespace {

std::vector<int64_t> column_indices(const medical::MethylationTable& table, const std::vector<std::string>& ids) {
  std::unordered_map<std::string, int64_t> where;
  for (int64_t c = 0; c < table.cols(); ++c) where.emplace(table.cpg_ids[c], c);
  std::vector<int64_t> cols;
  std::string missing;
  int64_t missing_count = 0;
  for (const auto& id : ids) {
    auto it = where.find(id);
    if (it == where.end()) {
      if (missing_count++ < 5) missing += (missing.empty() ? "" : ", ") + id;
      continue;
    }
    cols.push_back(it->second);
  }
  if (missing_count > 0)
    throw DataError(table.path + ": lacks " + std::to_string(missing_count) + " of the run's CpG sites (" + missing +
                    (missing_count > 5 ? ", ...)" : ")"));
  return cols;
}

at::Tensor normalised_volumes(const CohortData& cohort, const std::vector<int64_t>& rows, const Preprocessing& prep) {
  auto index = torch::tensor(rows, torch::kLong);
  auto v = cohort.volumes.index_select(0, index);
  if (prep.normalisation == "subject") {
    auto flat = v.flatten(1);
    auto lo = std::get<0>(flat.min(1)).view({-1, 1, 1, 1});
    auto hi = std::get<0>(flat.max(1)).view({-1, 1, 1, 1});
    return (v - lo) / (hi - lo).clamp_min(1e-12);
  }
  const double range = std::max(prep.volume_max - prep.volume_min, 1e-12);
  return (v - prep.volume_min) / range;
}

}  // namespace

Preprocessing fit_preprocessing(const CohortData& cohort, const std::vector<int64_t>& train_rows,
                                const std::vector<std::string>& cpg_ids, const std::string& normalisation) {
  if (normalisation != "global" && normalisation != "subject")
    throw ConfigError("normalisation", "must be global or subject (got '" + normalisation + "')");
  if (train_rows.empty()) throw DataError("no training subjects to fit the preprocessing on");
  Preprocessing p;
  p.normalisation = normalisation;
  if (cohort.volumes.defined() && normalisation == "global") {
    p.volume_min = std::numeric_limits<double>::infinity();
    p.volume_max = -p.volume_min;
    for (auto r : train_rows) {  // row by row: a copy of every training volume would be ~1 GB at full size
      p.volume_min = std::min(p.volume_min, cohort.volumes[r].min().item<double>());
      p.volume_max = std::max(p.volume_max, cohort.volumes[r].max().item<double>());
    }
    if (!(p.volume_max > p.volume_min))
      throw DataError(cohort.manifest_path + ": every training volume holds the single value " +
                      std::to_string(p.volume_min) + "; nothing to normalise");
  }
  p.cpg_ids = cpg_ids;
  auto selected = medical::select_cpgs(cohort.methylation, cpg_ids);
  p.cpg_means = medical::column_means(selected, train_rows);
  return p;
}

std::vector<float> methylation_matrix(const CohortData& cohort, const std::vector<int64_t>& rows,
                                      const Preprocessing& prep) {
  const auto cols = column_indices(cohort.methylation, prep.cpg_ids);
  const int64_t f = static_cast<int64_t>(cols.size());
  std::vector<float> m(rows.size() * cols.size());
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c = 0; c < f; ++c) {
      const float x = cohort.methylation.at(rows[r], cols[c]);
      m[r * f + c] = std::isnan(x) ? prep.cpg_means[c] : x;
    }
  return m;
}

std::shared_ptr<data::TensorDataset> make_dataset(const CohortData& cohort, const std::vector<int64_t>& rows,
                                                  const Preprocessing& prep) {
  const int64_t n = static_cast<int64_t>(rows.size());
  auto meth = methylation_matrix(cohort, rows, prep);
  std::map<std::string, at::Tensor> inputs;
  inputs["methylation"] =
      torch::from_blob(meth.data(), {n, static_cast<int64_t>(prep.cpg_ids.size())}, torch::kFloat32).clone();
  if (cohort.volumes.defined()) inputs["spect"] = normalised_volumes(cohort, rows, prep).unsqueeze(1);
  return std::make_shared<data::TensorDataset>(std::move(inputs), torch::tensor(cohort.labels_of(rows), torch::kLong));
}

at::Tensor cpg_std(const CohortData& cohort, const std::vector<int64_t>& rows, const Preprocessing& prep) {
  auto beta = methylation_matrix(cohort, rows, prep);
  const auto shape = std::vector<int64_t>{static_cast<int64_t>(rows.size()), static_cast<int64_t>(prep.cpg_ids.size())};
  return torch::from_blob(beta.data(), shape, torch::kFloat32).std(0);
}

namespace {

// Volumes [M, 1, X, Y, Z] turned by Rz Ry Rx with the angles [M, 3] (radians,
// about x, y, z), resampled trilinearly, the border value outside.
at::Tensor rotate_volumes(const at::Tensor& volumes, const at::Tensor& angles) {
  const int64_t m = volumes.size(0);
  auto theta = torch::zeros({m, 3, 4}, torch::kDouble);
  for (int64_t s = 0; s < m; ++s) {
    const double a = angles[s][0].item<double>(), bb = angles[s][1].item<double>(), c = angles[s][2].item<double>();
    auto rx =
        torch::tensor({1.0, 0.0, 0.0, 0.0, std::cos(a), -std::sin(a), 0.0, std::sin(a), std::cos(a)}, torch::kDouble)
            .view({3, 3});
    auto ry = torch::tensor({std::cos(bb), 0.0, std::sin(bb), 0.0, 1.0, 0.0, -std::sin(bb), 0.0, std::cos(bb)},
                            torch::kDouble)
                  .view({3, 3});
    auto rz =
        torch::tensor({std::cos(c), -std::sin(c), 0.0, std::sin(c), std::cos(c), 0.0, 0.0, 0.0, 1.0}, torch::kDouble)
            .view({3, 3});
    theta[s].slice(1, 0, 3).copy_(rz.matmul(ry).matmul(rx));
  }
  auto grid = torch::nn::functional::affine_grid(theta.to(volumes.dtype()), volumes.sizes().vec(), false);
  return torch::nn::functional::grid_sample(volumes, grid,
                                            torch::nn::functional::GridSampleFuncOptions()
                                                .mode(torch::kBilinear)
                                                .padding_mode(torch::kBorder)
                                                .align_corners(false));
}

// A dataset and rows appended to it (TensorDataset-like, same inputs).
class WithExtraRows : public data::Dataset {
 public:
  WithExtraRows(data::DatasetPtr base, data::Batch extra) : base_(std::move(base)), extra_(std::move(extra)) {}
  int64_t size() const override { return base_->size() + extra_.size(); }
  data::Batch get(const std::vector<int64_t>& indices) const override {
    const int64_t n = base_->size();
    std::vector<int64_t> from_base, from_extra;
    for (auto i : indices) (i < n ? from_base : from_extra).push_back(i < n ? i : i - n);
    if (from_extra.empty()) return base_->get(indices);
    // Rows keep the order asked for: gather both parts, then permute.
    data::Batch a = from_base.empty() ? data::Batch{} : base_->get(from_base);
    const auto pick = torch::tensor(from_extra, torch::kLong);
    data::Batch out;
    std::vector<int64_t> order;
    int64_t next_base = 0, next_extra = static_cast<int64_t>(from_base.size());
    for (auto i : indices) order.push_back(i < n ? next_base++ : next_extra++);
    const auto perm = torch::tensor(order, torch::kLong);
    for (const auto& [name, t] : extra_.inputs) {
      auto e = t.index_select(0, pick);
      auto both = from_base.empty() ? e : torch::cat({a.inputs.at(name), e}, 0);
      out.inputs[name] = both.index_select(0, perm);
    }
    auto e = extra_.target.index_select(0, pick);
    out.target = (from_base.empty() ? e : torch::cat({a.target, e}, 0)).index_select(0, perm);
    return out;
  }

 private:
  data::DatasetPtr base_;
  data::Batch extra_;
};

}  // namespace

data::Batch Augmentation::operator()(const data::Batch& batch) const {
  if (fraction <= 0) return batch;
  const int64_t b = batch.size();
  auto chosen = torch::rand({b}) < fraction;
  if (!chosen.any().item<bool>()) return batch;
  data::Batch out = batch;
  auto idx = chosen.nonzero().view({-1});
  const int64_t m = idx.size(0);
  if (batch.inputs.count("spect")) {
    auto spect = batch.inputs.at("spect").clone();
    auto angles = (torch::rand({m, 3}, torch::kDouble) * 2 - 1) * (max_degrees * M_PI / 180.0);
    spect.index_copy_(0, idx, rotate_volumes(spect.index_select(0, idx), angles));
    out.inputs["spect"] = spect;
  }
  if (batch.inputs.count("methylation") && cpg_std.defined() && noise > 0) {
    auto meth = batch.inputs.at("methylation").clone();
    auto picked = meth.index_select(0, idx);
    picked = (picked + torch::randn(picked.sizes()) * (cpg_std * noise)).clamp(0.0, 1.0);
    meth.index_copy_(0, idx, picked);
    out.inputs["methylation"] = meth;
  }
  return out;
}

data::DatasetPtr enlarge_training_set(const data::DatasetPtr& train, const Augmentation& a, uint64_t seed) {
  const int64_t n = train->size();
  const auto copies = static_cast<int64_t>(std::floor(static_cast<double>(n) * a.fraction));
  if (copies <= 0 || n == 0) return train;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto rows = torch::randint(n, {copies}, gen, torch::kLong);  // with replacement, as MultiAug's OneOf
  std::vector<int64_t> picked(rows.data_ptr<int64_t>(), rows.data_ptr<int64_t>() + copies);
  data::Batch extra = train->get(picked);
  if (extra.inputs.count("spect")) {
    // Each copy turns about a random non-empty subset of the axes, each by U(-max, max) degrees.
    auto angles = torch::zeros({copies, 3}, torch::kDouble);
    for (int64_t s = 0; s < copies; ++s) {
      at::Tensor axes;
      do axes = torch::rand({3}, gen, torch::kDouble) < 0.5;
      while (!axes.any().item<bool>());
      const auto turn = (torch::rand({3}, gen, torch::kDouble) * 2 - 1) * (a.max_degrees * M_PI / 180.0);
      angles[s].copy_(torch::where(axes, turn, torch::zeros_like(turn)));
    }
    extra.inputs["spect"] = rotate_volumes(extra.inputs.at("spect"), angles);
  }
  if (extra.inputs.count("methylation") && a.cpg_std.defined() && a.noise > 0) {
    auto& meth = extra.inputs.at("methylation");
    meth = meth + torch::randn(meth.sizes(), gen, meth.scalar_type()) * (a.cpg_std * a.noise);  // not clamped
  }
  return std::make_shared<WithExtraRows>(train, std::move(extra));
}

AugmentedTraining augmented_training(const data::DatasetPtr& train, const Augmentation& a, uint64_t seed) {
  if (a.mode == "enlarge") return {enlarge_training_set(train, a, seed), {}};
  return {train, a};
}

}  // namespace qkv::medical
