#include "qkv/tasks/mhca_explain.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "qkv/core/atomic_file.h"
#include "qkv/core/csv.h"
#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/core/npy.h"
#include "qkv/core/parse_errors.h"
#include "qkv/medical/nifti.h"
#include "qkv/picture/raster.h"
#include "qkv/train/progress.h"

namespace qkv::tasks {
namespace fs = std::filesystem;
using namespace picture;  // the drawing of the explain pictures

GroundTruth read_ground_truth(const std::string& path) {
  const auto j = read_json_file(path);
  GroundTruth truth;
  try {
    for (const auto& site : j.at("informative_sites"))
      truth.informative_cpgs.push_back(site.at("id").get<std::string>());
    for (const auto& site : j.at("informative_sites")) {
      const auto kind = site.value("kind", "");
      if (kind == "interaction")
        truth.interactions.push_back({site.at("id").get<std::string>(), site.at("region").get<std::string>(),
                                      site.at("striatum_mask_label").get<int64_t>()});
      if (kind == "cross_modal")
        truth.cross_modal.push_back({site.at("id").get<std::string>(), site.at("region").get<std::string>(),
                                     site.at("cross_modal_mask_label").get<int64_t>()});
    }
    for (const auto& subject : j.at("subjects"))
      truth.subject_labels.emplace(subject.at("id").get<std::string>(), subject.at("label").get<int64_t>());
  } catch (const nlohmann::json::exception&) {
    throw DataError(path +
                    ": not a ground-truth file of 'qkv mhca synth' (no informative_sites with ids, an "
                    "interaction site without its region, or no subjects with ids and labels)");
  }
  truth.path = path;
  const auto mask = fs::path(path).parent_path() / "striatum_mask.nii.gz";
  if (fs::exists(mask)) truth.striatum_mask = mask.string();
  const auto cross = fs::path(path).parent_path() / "cross_modal_mask.nii.gz";
  if (!truth.cross_modal.empty() && fs::exists(cross)) truth.cross_modal_mask = cross.string();
  return truth;
}

void check_ground_truth_is_of(const GroundTruth& truth, const medical::CohortData& cohort,
                              const std::vector<int64_t>& rows) {
  const auto other_cohort = truth.path + ": the ground truth of another cohort: ";
  for (const int64_t row : rows) {
    const auto& id = cohort.subject_ids[static_cast<size_t>(row)];
    const auto it = truth.subject_labels.find(id);
    if (it == truth.subject_labels.end())
      throw DataError(other_cohort + "subject " + id + " is not among its " +
                      std::to_string(truth.subject_labels.size()) + " subjects");
    const int64_t label = cohort.labels[static_cast<size_t>(row)];
    if (label != medical::kUnlabelled && label != it->second)
      throw DataError(other_cohort + "subject " + id + " is " + (it->second == 1 ? "PD" : "a control") + " there and " +
                      (label == 1 ? "PD" : "a control") + " in " + cohort.manifest_path);
  }
}

namespace {

// [n, g] linear-interpolation weights from n input voxels to g token centres.
at::Tensor axis_weights(int64_t n, int64_t g, double offset, double stride) {
  auto w = torch::zeros({n, g}, torch::kFloat32);
  auto a = w.accessor<float, 2>();
  for (int64_t u = 0; u < n; ++u) {
    const double t = std::clamp((static_cast<double>(u) - offset) / stride, 0.0, static_cast<double>(g - 1));
    const auto i0 = static_cast<int64_t>(std::floor(t));
    const int64_t i1 = std::min(i0 + 1, g - 1);
    const double f = t - static_cast<double>(i0);
    a[u][i0] += static_cast<float>(1 - f);
    a[u][i1] += static_cast<float>(f);
  }
  return w;
}

std::string format_double(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// CpG sites ranked by attention, with whether each was planted.
void write_cpg_ranking(const std::string& path, const std::vector<std::string>& ids, const at::Tensor& attention,
                       const std::set<std::string>& planted) {
  auto order = std::get<1>(attention.sort(0, /*descending=*/true));
  std::string csv = planted.empty() ? "rank,cpg_id,attention\n" : "rank,cpg_id,attention,planted\n";
  for (int64_t r = 0; r < order.size(0); ++r) {
    const int64_t i = order[r].item<int64_t>();
    csv += std::to_string(r + 1) + "," + csv_field(ids[i]) + "," + format_double(attention[i].item<double>());
    if (!planted.empty()) csv += planted.count(ids[i]) ? ",yes" : ",no";
    csv += "\n";
  }
  write_file_atomic(path, csv);
}

// The three [n, g] interpolation matrices from the encoder's input grid to
// its token grid, per axis: the map on the grid is their product with the
// token weights.
std::array<at::Tensor, 3> grid_axis_weights(const models::SpectEncoderOptions& encoder) {
  const auto grid = encoder.token_grid();
  const double offset = encoder.token_offset(), stride = encoder.token_stride();
  std::array<at::Tensor, 3> w;
  for (size_t a = 0; a < 3; ++a) w[a] = axis_weights(encoder.volume_shape[a], grid[a], offset, stride);
  return w;
}

// Voxels of `region` (a [X, Y, Z] 0/1 mask) seen from the tokens: since the
// map on the grid is linear in the token weights t, its sum inside the region
// is this vector's dot product with t.
at::Tensor region_token_weights(const at::Tensor& region, const models::SpectEncoderOptions& encoder) {
  const auto w = grid_axis_weights(encoder);
  return torch::einsum("xa,yb,zc,xyz->abc", {w[0], w[1], w[2], region.to(torch::kFloat32)})
      .reshape({-1})
      .to(torch::kDouble);
}

}  // namespace

at::Tensor token_map_to_volume(const at::Tensor& token_weights, const models::SpectEncoderOptions& encoder) {
  const auto grid = encoder.token_grid();
  auto t = token_weights.to(torch::kCPU, torch::kFloat32).reshape({grid[0], grid[1], grid[2]});
  const auto w = grid_axis_weights(encoder);
  return torch::einsum("xa,yb,zc,abc->xyz", {w[0], w[1], w[2], t});
}

namespace {

// The anatomical directions of voxel axis `axis` under `affine` (NIfTI's
// RAS+ world): the letter it points toward, then the one it points away from.
std::pair<std::string, std::string> axis_letters(const std::array<double, 16>& affine, int axis) {
  int best = 0;
  for (int r = 1; r < 3; ++r)
    if (std::abs(affine[static_cast<size_t>(r * 4 + axis)]) > std::abs(affine[static_cast<size_t>(best * 4 + axis)]))
      best = r;
  static const char* const toward[] = {"R", "A", "S"};
  static const char* const away[] = {"L", "P", "I"};
  const auto b = static_cast<size_t>(best);
  if (affine[static_cast<size_t>(best * 4 + axis)] >= 0) return {toward[b], away[b]};
  return {away[b], toward[b]};
}

}  // namespace

void write_overlay_slices(const std::string& prefix, const at::Tensor& anatomy, const at::Tensor& heat,
                          const std::array<int64_t, 3>& through, const medical::NiftiGeometry& geometry,
                          const OverlayStyle& style) {
  auto a = anatomy.to(torch::kCPU, torch::kFloat32).contiguous();
  const double lo = a.min().item<double>(), hi = a.max().item<double>();
  a = (a - lo) / std::max(hi - lo, 1e-12);
  // The heat map is windowed to its own range, as a viewer would; below the
  // threshold nothing is painted, above it the colour fades in (up to 80 %
  // opaque) so that the anatomy stays visible under it.
  auto h = heat.to(torch::kCPU, torch::kFloat32).contiguous();
  const double h_lo = h.min().item<double>(), h_hi = h.max().item<double>();
  const bool flat = !(h_hi - h_lo > 1e-6 * std::abs(h_hi));
  h = flat ? torch::zeros_like(h) : (h - h_lo) / (h_hi - h_lo);
  auto av = a.accessor<float, 3>(), hv = h.accessor<float, 3>();
  const int64_t X = a.size(0), Y = a.size(1), Z = a.size(2);
  const auto affine = geometry.affine();
  const auto i_dir = axis_letters(affine, 0), j_dir = axis_letters(affine, 1), k_dir = axis_letters(affine, 2);
  // (columns, rows, voxel of pixel): image rows run top to bottom, so the
  // row index is flipped to put +j (axial) or +k (others) up.
  struct View {
    const char* name;
    int64_t width, height;
    std::function<std::array<int64_t, 3>(int64_t, int64_t)> voxel;
    std::pair<std::string, std::string> across, up;  // letters: (right, left), (top, bottom)
    std::string slice;
  };
  const std::vector<View> views = {
      {"axial", X, Y,
       [&](int64_t c, int64_t r) {
         return std::array<int64_t, 3>{c, Y - 1 - r, through[2]};
       },
       i_dir, j_dir, "k = " + std::to_string(through[2])},
      {"coronal", X, Z,
       [&](int64_t c, int64_t r) {
         return std::array<int64_t, 3>{c, through[1], Z - 1 - r};
       },
       i_dir, k_dir, "j = " + std::to_string(through[1])},
      {"sagittal", Y, Z,
       [&](int64_t c, int64_t r) {
         return std::array<int64_t, 3>{through[0], c, Z - 1 - r};
       },
       j_dir, k_dir, "i = " + std::to_string(through[0])},
  };
  const Rgb black{0, 0, 0}, grey{90, 90, 90};
  const int64_t line = text_height(TextSize::Small), margin = 12;
  for (const auto& v : views) {
    // At least style.min_scale pixels per voxel and 360 pixels along the longer side.
    const int64_t scale =
        std::max(style.min_scale, (360 + std::max(v.width, v.height) - 1) / std::max(v.width, v.height));
    const int64_t w = v.width * scale, ht = v.height * scale;
    const int64_t left = margin + 14, top = margin + text_height(TextSize::Large) + 8 + line + 4;
    const int64_t bar_x = left + w + 14 + margin;
    // Windowing stretches any range to the full colour map: the notes say
    // how much the map really varies, so that a nearly flat one reads as such.
    const double shown_from = h_lo + style.threshold * (h_hi - h_lo);
    char spread[64];
    std::snprintf(spread, sizeof spread, "; the map varies by %.2g%% of its peak",
                  100 * (h_hi - h_lo) / std::abs(h_hi));
    const std::string notes[2] = {
        flat ? std::string("attention is flat: nothing painted")
             : "painted where attention >= " + compact_number(shown_from, 4) + " (threshold " +
                   compact_number(style.threshold) + " of its range)" + spread,
        "grey: SPECT intensity; " + std::to_string(scale) + " px per voxel; letters: RAS from the affine"};
    const int64_t bar_w = 22, bar_h = std::min<int64_t>(ht, 240);
    const double bar_hi = flat ? h_lo : h_hi;
    int64_t width = bar_x + colourbar_width(bar_w, bar_h, h_lo, bar_hi, "attention") + margin;
    for (const auto& note : notes) width = std::max(width, margin + text_width(note, TextSize::Small) + margin);
    RgbImage image(width, top + ht + line + 8 + 2 * (line + 3) + margin);
    draw_text(image, margin, margin, style.title + ": " + v.name + " slice " + v.slice, black, TextSize::Large);
    for (int64_t r = 0; r < ht; ++r)
      for (int64_t c = 0; c < w; ++c) {
        const auto p = v.voxel(c / scale, r / scale);
        const double grey_level = av[p[0]][p[1]][p[2]];
        const double t = hv[p[0]][p[1]][p[2]];
        const double alpha =
            t < style.threshold
                ? 0.0
                : 0.8 * std::clamp((t - style.threshold) / std::max(1 - style.threshold, 1e-9) + 0.25, 0.0, 1.0);
        const auto g = static_cast<uint8_t>(std::clamp(grey_level * 255.0, 0.0, 255.0));
        image.set(left + c, top + r, {g, g, g});
        image.blend(left + c, top + r, heat_colour(t), alpha);
      }
    // Orientation letters at the four edges (what a radiologist checks first).
    draw_text(image, left + w + 4, top + ht / 2 - line / 2, v.across.first, black);
    draw_text(image, left - 4 - text_width(v.across.second, TextSize::Small), top + ht / 2 - line / 2, v.across.second,
              black);
    draw_text(image, left + w / 2 - text_width(v.up.first, TextSize::Small) / 2, top - line - 2, v.up.first, black);
    draw_text(image, left + w / 2 - text_width(v.up.second, TextSize::Small) / 2, top + ht + 2, v.up.second, black);
    draw_colourbar(image, bar_x, top, bar_w, bar_h, h_lo, bar_hi, "attention");
    draw_text(image, margin, top + ht + line + 8, notes[0], grey);
    draw_text(image, margin, top + ht + 2 * line + 11, notes[1], grey);
    write_png(prefix + "_" + v.name + ".png", image);
  }
}

namespace {

// The attention map's NIfTI header says what it holds (a viewer shows it),
// not the input scan's description. NIfTI keeps 79 characters.
medical::NiftiGeometry described(medical::NiftiGeometry geometry) {
  geometry.description = "qkv mhca explain: SPECT attention (alpha_v, mean of heads and CpG queries)";
  return geometry;
}

}  // namespace

at::Tensor brain_mask(const at::Tensor& anatomy) {
  const auto a = anatomy.to(torch::kFloat32);
  const auto above = a.masked_select(a > a.mean());
  if (above.numel() == 0) return torch::ones_like(a, torch::kBool);
  return a > above.mean() * 0.5;
}

std::array<int64_t, 3> peak_voxel_in(const at::Tensor& map, const at::Tensor& mask) {
  auto masked = mask.any().item<bool>() ? map.masked_fill(mask.logical_not(), -1e30) : map;
  const int64_t peak = masked.argmax().item<int64_t>();
  return {peak / (map.size(1) * map.size(2)), (peak / map.size(2)) % map.size(1), peak % map.size(2)};
}

namespace {

// Planted (site, region) pairs scored at the model's token resolution
// (explain_subjects' "token_resolution").
class TokenResolutionScore {
 public:
  TokenResolutionScore(const std::vector<GroundTruth::Interaction>& sites, const at::Tensor& labels,
                       const models::SpectEncoderOptions& encoder, const std::vector<std::string>& cpg_ids,
                       std::string mask_path)
      : mask_path_(std::move(mask_path)), features_(static_cast<int64_t>(cpg_ids.size())), tokens_(encoder.tokens()) {
    std::unordered_map<std::string, int64_t> feature_of;
    for (size_t f = 0; f < cpg_ids.size(); ++f) feature_of.emplace(cpg_ids[f], static_cast<int64_t>(f));
    std::map<int64_t, std::vector<int64_t>> tokens_of;  // label -> own tokens
    for (const auto& site : sites) {
      auto it = feature_of.find(site.cpg);
      if (it == feature_of.end()) continue;
      for (int64_t label : {site.mask_label, mirror(site.mask_label)}) {
        if (tokens_of.count(label)) continue;
        auto w = region_token_weights((labels == static_cast<double>(label)).to(torch::kFloat32), encoder);
        const double total = w.sum().item<double>();
        std::vector<int64_t> own;
        if (total > 0) {
          w = w / total;
          for (int64_t t = 0; t < w.size(0); ++t)
            if (w[t].item<double>() >= 0.2) own.push_back(t);
          if (own.empty()) own.push_back(w.argmax().item<int64_t>());
        }
        tokens_of[label] = own;
      }
      Site s;
      s.truth = site;
      s.feature = it->second;
      s.own = tokens_of[site.mask_label];
      s.mirror = tokens_of[mirror(site.mask_label)];
      s.row_sum = torch::zeros({tokens_}, torch::kDouble);
      sites_.push_back(std::move(s));
    }
    planted_ = static_cast<int64_t>(sites.size());
    // The control: every other CpG site's attention on the planted regions' tokens.
    std::set<int64_t> regions;
    for (const auto& [label, own] : tokens_of) regions.insert(own.begin(), own.end());
    region_tokens_ = torch::tensor(std::vector<int64_t>(regions.begin(), regions.end()), torch::kLong);
    unplanted_ = torch::ones({features_}, torch::kDouble);
    for (const auto& s : sites_) unplanted_[s.feature] = 0;
  }

  bool empty() const { return sites_.empty(); }

  // One subject's maps, [H, F, T] each.
  void add(const at::Tensor& alpha_v, const at::Tensor& alpha_q) {
    const auto v = alpha_v.mean(0).to(torch::kDouble), q = alpha_q.mean(0).to(torch::kDouble);  // [F, T]
    for (auto& s : sites_) {
      const auto row = v[s.feature];
      s.row_sum += row;
      s.own_mass += mass(row, s.own);
      s.mirror_mass += mass(row, s.mirror);
      if (!s.own.empty()) s.query_share += mass(q[s.feature], s.own) / static_cast<double>(s.own.size());
    }
    if (region_tokens_.numel() > 0)
      unplanted_mass_ += (v.index_select(1, region_tokens_).sum(1) * unplanted_).sum().item<double>();
    ++subjects_;
  }

  // The subjects' mean alpha_v rows of the sites of `label`, averaged [T].
  at::Tensor mean_row(int64_t label) const {
    auto sum = torch::zeros({tokens_}, torch::kDouble);
    int64_t count = 0;
    for (const auto& s : sites_)
      if (s.truth.mask_label == label) {
        sum += s.row_sum;
        ++count;
      }
    return count > 0 ? (sum / static_cast<double>(count * std::max<int64_t>(1, subjects_))).to(torch::kFloat32)
                     : at::Tensor();
  }

  nlohmann::json result() const {
    const double n = static_cast<double>(std::max<int64_t>(1, subjects_));
    const double T = static_cast<double>(tokens_), F = static_cast<double>(features_);
    nlohmann::json list = nlohmann::json::array();
    double own_sum = 0, mirror_sum = 0, query_sum = 0;
    int64_t scored = 0, left_right = 0;
    for (const auto& s : sites_) {
      if (s.own.empty() || s.mirror.empty()) continue;
      const double own = s.own_mass / n, mirror_mass = s.mirror_mass / n, query = s.query_share / n;
      const double own_chance = static_cast<double>(s.own.size()) / T;
      const double mirror_chance = static_cast<double>(s.mirror.size()) / T;
      list.push_back({{"cpg", s.truth.cpg},
                      {"region", s.truth.region},
                      {"own_tokens", s.own},
                      {"alpha_v_own", own},
                      {"alpha_v_own_chance", own_chance},
                      {"alpha_v_own_enrichment", own / own_chance},
                      {"alpha_v_mirror", mirror_mass},
                      {"alpha_v_mirror_enrichment", mirror_mass / mirror_chance},
                      {"alpha_q_enrichment", query * F}});
      own_sum += own / own_chance;
      mirror_sum += mirror_mass / mirror_chance;
      query_sum += query * F;
      left_right += own / own_chance > mirror_mass / mirror_chance ? 1 : 0;
      ++scored;
    }
    auto mean = [&](double x) {
      return scored > 0 ? nlohmann::json(x / static_cast<double>(scored)) : nlohmann::json();
    };
    const double unplanted = unplanted_.sum().item<double>();
    const double region_chance = static_cast<double>(region_tokens_.numel()) / T;
    return {{"mask", mask_path_},
            {"planted_sites", planted_},
            {"sites_scored", scored},
            {"tokens", tokens_},
            {"mean_alpha_v_own_enrichment", mean(own_sum)},
            {"mean_alpha_v_mirror_enrichment", mean(mirror_sum)},
            {"mean_alpha_q_enrichment", mean(query_sum)},
            {"own_above_mirror", mean(static_cast<double>(left_right))},
            {"unplanted_sites", unplanted},
            {"unplanted_alpha_v_region_enrichment",
             unplanted > 0 && region_chance > 0 ? nlohmann::json(unplanted_mass_ / (n * unplanted) / region_chance)
                                                : nlohmann::json()},
            {"sites", list}};
  }

 private:
  struct Site {
    GroundTruth::Interaction truth;
    int64_t feature = 0;
    std::vector<int64_t> own, mirror;
    double own_mass = 0, mirror_mass = 0, query_share = 0;  // summed over subjects
    at::Tensor row_sum;
  };
  // Left and right regions alternate in both masks: 1 <-> 2, 3 <-> 4.
  static int64_t mirror(int64_t label) { return label % 2 == 1 ? label + 1 : label - 1; }
  static double mass(const at::Tensor& row, const std::vector<int64_t>& tokens) {
    double m = 0;
    for (auto t : tokens) m += row[t].item<double>();
    return m;
  }
  std::string mask_path_;
  int64_t features_, tokens_, planted_ = 0, subjects_ = 0;
  std::vector<Site> sites_;
  at::Tensor region_tokens_;   // every planted region's own tokens (indices, made once)
  at::Tensor unplanted_;       // [F]: 1 for a site not planted here
  double unplanted_mass_ = 0;  // their alpha_v on region_tokens_, summed over sites and subjects
};

std::string file_name_of(std::string region) {
  for (auto& c : region)
    if (c == ' ') c = '_';
  return region;
}

}  // namespace

ExplainInputs read_explain_inputs(const medical::CohortData& cohort, const ExplainOptions& options) {
  if (!cohort.volumes.defined()) throw UsageError("explain needs the SPECT volumes");
  ExplainInputs in;
  std::unordered_map<std::string, int64_t> row_of;
  for (int64_t i = 0; i < cohort.size(); ++i) row_of.emplace(cohort.subject_ids[i], i);
  auto& rows = in.rows;
  if (options.subjects.empty()) {
    rows.resize(static_cast<size_t>(cohort.size()));
    std::iota(rows.begin(), rows.end(), 0);
  } else {
    for (const auto& id : options.subjects) {
      auto it = row_of.find(id);
      if (it == row_of.end())
        throw ConfigError("subject",
                          id + ": not among the cohort's subjects with both modalities (" + cohort.match_summary + ")");
      rows.push_back(it->second);
    }
  }
  // Each subject's maps go into a folder of --out named by its id: an id that
  // is not one plain folder name ('..', 'a/b') would write outside --out.
  if (options.write_per_subject)
    for (const auto r : rows) {
      const std::string& id = cohort.subject_ids[static_cast<size_t>(r)];
      if (id.empty() || id == "." || id == ".." || id.find('/') != std::string::npos)
        throw DataError("subject " + parse::show(id) +
                        ": explain writes each subject's maps into a folder of the output named by its id, and "
                        "'.', '..' or an id holding '/' is not a plain folder name; rename the subject in the "
                        "manifest and the methylation table (nothing was written)");
    }
  if (!options.ground_truth.empty()) {
    in.truth = read_ground_truth(options.ground_truth);
    check_ground_truth_is_of(in.truth, cohort, rows);
  }
  in.mask_path = !options.striatum_mask.empty() ? options.striatum_mask : in.truth.striatum_mask;
  if (!in.mask_path.empty()) in.mask_labels = medical::read_cohort_label_mask(cohort, in.mask_path, "striatum mask");
  return in;
}

nlohmann::json explain_subjects(models::CoAttentionModel& model, const medical::CohortData& cohort,
                                const medical::Preprocessing& prep, const ExplainOptions& options,
                                const ExplainInputs& inputs, const std::string& out_dir, const c10::Device& device) {
  const auto& rows = inputs.rows;
  const auto& truth = inputs.truth;
  const auto& mask_labels = inputs.mask_labels;
  const auto& mask_path = inputs.mask_path;
  at::Tensor mask;
  if (mask_labels.defined()) mask = (mask_labels > 0).to(torch::kFloat32);
  const std::set<std::string> planted(truth.informative_cpgs.begin(), truth.informative_cpgs.end());
  // The interaction pairs among the model's features, and per striatal label
  // (1..4) the token-side weights of its voxels.
  struct PairScore {
    const GroundTruth::Interaction* truth;
    int64_t feature;
    double own = 0, others = 0;  // summed over subjects: share in its region, mean share in the other three
  };
  std::vector<PairScore> pairs;
  std::map<int64_t, at::Tensor> region_tokens;
  at::Tensor all_tokens;
  std::map<int64_t, double> region_volume_share;
  if (!truth.interactions.empty() && mask_labels.defined()) {
    std::unordered_map<std::string, int64_t> feature_of;
    for (size_t f = 0; f < prep.cpg_ids.size(); ++f) feature_of.emplace(prep.cpg_ids[f], static_cast<int64_t>(f));
    for (const auto& pair : truth.interactions) {
      auto it = feature_of.find(pair.cpg);
      if (it != feature_of.end()) pairs.push_back({&pair, it->second});
    }
    const auto& encoder = model.spect_options();
    all_tokens = region_token_weights(torch::ones_like(mask_labels), encoder);
    for (int64_t label = 1; label <= 4; ++label) {
      const auto region = (mask_labels == static_cast<double>(label)).to(torch::kFloat32);
      region_tokens[label] = region_token_weights(region, encoder);
      region_volume_share[label] = region.mean().item<double>();
    }
  }

  // The planted sites with a region, scored at the model's resolution.
  std::vector<std::pair<std::string, TokenResolutionScore>> token_scores;
  if (!truth.interactions.empty() && mask_labels.defined())
    token_scores.emplace_back("interaction", TokenResolutionScore(truth.interactions, mask_labels,
                                                                  model.spect_options(), prep.cpg_ids, mask_path));
  at::Tensor cross_labels;
  if (!truth.cross_modal.empty() && !truth.cross_modal_mask.empty()) {
    cross_labels = medical::read_cohort_label_mask(cohort, truth.cross_modal_mask, "cross-modal mask");
    token_scores.emplace_back("cross_modal",
                              TokenResolutionScore(truth.cross_modal, cross_labels, model.spect_options(), prep.cpg_ids,
                                                   truth.cross_modal_mask));
  }

  make_directories(out_dir);
  torch::NoGradGuard no_grad;
  model.eval();
  model.to(device);
  const auto& encoder = model.spect_options();
  auto dataset = medical::make_dataset(cohort, rows, prep);
  const int64_t F = static_cast<int64_t>(prep.cpg_ids.size());
  auto cpg_sum = torch::zeros({F}, torch::kDouble);
  auto map_sum = torch::zeros({encoder.volume_shape[0], encoder.volume_shape[1], encoder.volume_shape[2]});
  nlohmann::json subjects = nlohmann::json::array();
  std::vector<double> fraction_pd, fraction_control, fraction_all;  // _all: unlabelled subjects too
  // Per subject, on a terminal; stdout carries the result.
  train::ProgressBar bar("explain", static_cast<int64_t>(rows.size()),
                         rows.size() > 1 && train::ProgressBar::stderr_is_terminal());
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    const std::string& id = cohort.subject_ids[r];
    auto batch = dataset->get({static_cast<int64_t>(i)}).to(device);
    auto ex = model.forward_explained(batch);
    auto scores = ex.attention.scores[0].to(torch::kCPU, torch::kFloat32).contiguous();
    auto alpha_v = ex.attention.alpha_v[0].to(torch::kCPU, torch::kFloat32).contiguous();
    auto alpha_q = ex.attention.alpha_q[0].to(torch::kCPU, torch::kFloat32).contiguous();
    auto spect_tokens = alpha_v.mean(std::vector<int64_t>{0, 1});   // [T]
    auto cpg_attention = alpha_q.mean(std::vector<int64_t>{0, 2});  // [F]
    auto map = token_map_to_volume(spect_tokens, encoder);
    cpg_sum += cpg_attention.to(torch::kDouble);
    map_sum += map;
    const double p_pd = ex.log_probs[0][1].exp().item<double>();
    for (auto& [kind, score] : token_scores) score.add(alpha_v, alpha_q);
    const auto peak_voxel = peak_voxel_in(map, brain_mask(cohort.volumes[r]));
    const int64_t label = cohort.labels[r];
    nlohmann::json s = {{"subject_id", id},
                        {"label", label == medical::kUnlabelled ? nlohmann::json(nullptr) : nlohmann::json(label)},
                        {"p_pd", p_pd},
                        {"peak_voxel", peak_voxel}};
    if (!pairs.empty()) {
      auto per_site = alpha_v.mean(0).to(torch::kDouble);  // [F, T]
      for (auto& pair : pairs) {
        auto row = per_site[pair.feature];
        const double total = row.dot(all_tokens).item<double>();
        double others = 0;
        for (const auto& [label, weights] : region_tokens) {
          const double share = row.dot(weights).item<double>() / total;
          if (label == pair.truth->mask_label)
            pair.own += share;
          else
            others += share / 3;
        }
        pair.others += others;
      }
    }
    if (mask.defined()) {
      const double fraction = (map * mask).sum().item<double>() / map.sum().item<double>();
      s["striatal_attention_fraction"] = fraction;
      fraction_all.push_back(fraction);
      if (label != medical::kUnlabelled) (label == 1 ? fraction_pd : fraction_control).push_back(fraction);
    }
    if (options.write_per_subject) {
      const std::string dir = out_dir + "/" + id;
      make_directories(dir);
      const std::vector<int64_t> shape = scores.sizes().vec();
      write_npy_float32(dir + "/scores.npy", shape, scores.data_ptr<float>());
      write_npy_float32(dir + "/alpha_v.npy", shape, alpha_v.data_ptr<float>());
      write_npy_float32(dir + "/alpha_q.npy", shape, alpha_q.data_ptr<float>());
      // The subject's own affine, of its volume as the model saw it (turned to RAS+ with --reorient).
      const auto& geometry = cohort.geometries.at(static_cast<size_t>(r));
      medical::write_nifti(dir + "/spect_attention.nii.gz", medical::tensor_to_volume(map, described(geometry)));
      write_overlay_slices(dir + "/spect_attention", cohort.volumes[r], map, peak_voxel, geometry,
                           {options.png_scale, options.overlay_threshold, "Subject " + id});
      write_cpg_ranking(dir + "/cpg_attention.csv", prep.cpg_ids, cpg_attention, planted);
    }
    subjects.push_back(s);
    bar.update(static_cast<int64_t>(i + 1), id);
  }
  bar.clear();

  const double n = static_cast<double>(rows.size());
  auto cpg_mean = (cpg_sum / n).to(torch::kFloat32);
  auto map_mean = map_sum / n;
  write_cpg_ranking(out_dir + "/cpg_attention.csv", prep.cpg_ids, cpg_mean, planted);
  medical::write_nifti(out_dir + "/spect_attention_mean.nii.gz",
                       medical::tensor_to_volume(map_mean, described(cohort.geometry)));
  auto anatomy_mean = cohort.volumes.index_select(0, torch::tensor(rows, torch::kLong)).mean(0);
  const auto peak_voxel = peak_voxel_in(map_mean, brain_mask(anatomy_mean));
  write_overlay_slices(out_dir + "/spect_attention_mean", anatomy_mean, map_mean, peak_voxel, cohort.geometry,
                       {options.png_scale, options.overlay_threshold,
                        "Mean of " + std::to_string(rows.size()) + " subject" + (rows.size() == 1 ? "" : "s")});

  nlohmann::json result = {{"subjects", subjects}, {"features", F}, {"tokens", encoder.tokens()}};
  if (!planted.empty()) {
    auto order = std::get<1>(cpg_mean.sort(0, true));
    int64_t informative_selected = 0;
    for (const auto& id : prep.cpg_ids) informative_selected += planted.count(id);
    auto precision_at = [&](int64_t k) {
      k = std::min(k, F);
      int64_t hits = 0;
      for (int64_t r = 0; r < k; ++r) hits += planted.count(prep.cpg_ids[order[r].item<int64_t>()]);
      return k > 0 ? static_cast<double>(hits) / static_cast<double>(k) : 0.0;
    };
    result["cpg"] = {
        {"planted_sites", planted.size()},
        {"planted_among_features", informative_selected},
        {"precision_at_10", precision_at(10)},
        {"precision_at_planted", precision_at(std::max<int64_t>(1, informative_selected))},
        {"k_planted", informative_selected},
        {"chance_precision", static_cast<double>(informative_selected) / static_cast<double>(std::max<int64_t>(1, F))}};
  }
  if (mask.defined()) {
    auto mean = [](const std::vector<double>& v) {
      return v.empty() ? NAN : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    };
    const double volume_fraction = mask.mean().item<double>();
    const auto& all = fraction_all;
    result["spect"] = {
        {"striatum_mask", mask_path},
        {"striatal_attention_fraction", mean(all)},
        {"striatal_attention_fraction_pd",
         std::isnan(mean(fraction_pd)) ? nlohmann::json(nullptr) : nlohmann::json(mean(fraction_pd))},
        {"striatal_attention_fraction_control",
         std::isnan(mean(fraction_control)) ? nlohmann::json(nullptr) : nlohmann::json(mean(fraction_control))},
        {"striatum_volume_fraction", volume_fraction},
        {"enrichment", mean(all) / volume_fraction}};
  }
  if (!truth.interactions.empty() && mask_labels.defined()) {
    nlohmann::json list = nlohmann::json::array();
    double own_enrichment = 0, other_enrichment = 0;
    int64_t scored = 0;  // pairs whose region is in the mask
    std::set<std::string> interacting;
    for (const auto& pair : pairs) {
      const double own = pair.own / n, others = pair.others / n;
      const double chance = region_volume_share.at(pair.truth->mask_label);
      double others_chance = 0;
      for (const auto& [label, share] : region_volume_share)
        if (label != pair.truth->mask_label) others_chance += share / 3;
      // A mask without one of the labels (a user's --striatum-mask) has no chance level for it.
      auto ratio = [](double a, double b) { return b > 0 ? nlohmann::json(a / b) : nlohmann::json(nullptr); };
      list.push_back({{"cpg", pair.truth->cpg},
                      {"region", pair.truth->region},
                      {"region_attention_fraction", own},
                      {"region_volume_fraction", chance},
                      {"enrichment", ratio(own, chance)},
                      {"other_striatal_regions_enrichment", ratio(others, others_chance)}});
      if (!(chance > 0 && others_chance > 0)) continue;
      own_enrichment += own / chance;
      other_enrichment += others / others_chance;
      ++scored;
    }
    for (const auto& pair : pairs) interacting.insert(pair.truth->cpg);
    // Do the interacting sites rank high by alpha_q among the features?
    int64_t hits = 0;
    const auto k = static_cast<int64_t>(pairs.size());
    if (k > 0) {
      auto order = std::get<1>(cpg_mean.sort(0, true));
      for (int64_t r = 0; r < k; ++r) hits += interacting.count(prep.cpg_ids[order[r].item<int64_t>()]);
    }
    result["interactions"] = {
        {"planted_pairs", truth.interactions.size()},
        {"pairs_among_features", k},
        {"pairs", list},
        {"mean_enrichment",
         scored > 0 ? nlohmann::json(own_enrichment / static_cast<double>(scored)) : nlohmann::json(nullptr)},
        {"mean_other_striatal_regions_enrichment",
         scored > 0 ? nlohmann::json(other_enrichment / static_cast<double>(scored)) : nlohmann::json(nullptr)},
        {"precision_at_pairs",
         k > 0 ? nlohmann::json(static_cast<double>(hits) / static_cast<double>(k)) : nlohmann::json(nullptr)},
        {"chance_precision", static_cast<double>(k) / static_cast<double>(std::max<int64_t>(1, F))}};
  }
  if (!token_scores.empty()) {
    result["token_resolution"] = nlohmann::json::object();
    for (const auto& [kind, score] : token_scores) result["token_resolution"][kind] = score.result();
  }
  // Where each cross-modal region's sites look, on the mean anatomy, through
  // the region's centre.
  for (const auto& [kind, score] : token_scores) {
    if (kind != "cross_modal") continue;
    std::set<std::pair<int64_t, std::string>> regions;
    for (const auto& site : truth.cross_modal) regions.insert({site.mask_label, site.region});
    for (const auto& [label, name] : regions) {
      const auto row = score.mean_row(label);
      if (!row.defined()) continue;
      const auto voxels = (cross_labels == static_cast<double>(label)).nonzero();
      if (voxels.size(0) == 0) continue;
      const auto centre = voxels.to(torch::kDouble).mean(0).round().to(torch::kLong);
      const std::array<int64_t, 3> through{centre[0].item<int64_t>(), centre[1].item<int64_t>(),
                                           centre[2].item<int64_t>()};
      // The region itself drawn white on the anatomy, so the picture shows
      // both where the sites should look and where they do.
      const auto marked =
          anatomy_mean.masked_fill(cross_labels == static_cast<double>(label), anatomy_mean.max().item<double>() * 1.5);
      write_overlay_slices(out_dir + "/planted_" + file_name_of(name), marked, token_map_to_volume(row, encoder),
                           through, cohort.geometry,
                           {options.png_scale, options.overlay_threshold, name + " sites' alpha_v, region white"});
    }
  }
  write_file_atomic(out_dir + "/explain.json", json_text(result) + "\n");
  return result;
}

}  // namespace qkv::tasks
