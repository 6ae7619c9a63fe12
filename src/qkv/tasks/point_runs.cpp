#include "qkv/tasks/point_runs.h"

#include <cstdio>
#include <set>

namespace qkv::tasks {

void check_point_model_fits(const std::string& model, const nlohmann::json& options, int64_t points,
                            const models::ModelLimits& limits) {
  const auto& entry = models::find_model(model);
  const auto resolved = entry.resolve(options);
  if (resolved.contains("k") && resolved["k"].is_number_integer() && resolved["k"].get<int64_t>() > points)
    throw ConfigError("points", std::to_string(points) + ": " + model + "'s option 'k' takes " + resolved["k"].dump() +
                                    " neighbours, so it needs at least that many points per shape");
  models::check_activation_memory(entry, options, points, 0, limits);
}

void set_point_feature_channels(const std::string& list, train::RunRequest& r, const nlohmann::json& resolved) {
  int64_t channels = 0;
  try {
    channels = pointcloud::point_feature_channels(pointcloud::parse_point_features(list, ""));
  } catch (const UsageError& e) {
    throw ConfigError("point_features", first_line(e.what()));
  }
  const bool reads = resolved.contains("point_features");
  if (channels == 0 && !(reads && resolved["point_features"] != 0)) return;
  if (!reads)
    throw ConfigError("point_features", "'" + list + "': " + r.model_name +
                                            " reads no per-point features (vnt, "
                                            "vnt+n, vnt-local and vn-dgcnn do)");
  if (r.model_options.contains("point_features") && r.model_options["point_features"] != channels)
    throw ConfigError("point_features", "'" + list + "' gives " + std::to_string(channels) +
                                            " channels, but the "
                                            "model option point_features is " +
                                            r.model_options["point_features"].dump() +
                                            " (leave the option out: it follows the list)");
  r.model_options["point_features"] = channels;
}

std::string invariance_shapes_text(const nlohmann::json& rows, int64_t asked) {
  std::set<int64_t> counts;
  for (const auto& r : rows)
    if (r.contains("invariance")) counts.insert(r.at("invariance").at("shapes").get<int64_t>());
  if (counts.empty()) return std::to_string(asked);
  return std::to_string(*counts.begin()) +
         (counts.size() > 1 ? " to " + std::to_string(*counts.rbegin()) : std::string());
}

std::string compare_table_text(const nlohmann::json& rows, const char* scores_key,
                               const std::function<std::string(const nlohmann::json& row)>& protocol,
                               const std::vector<std::string>& score_headers,
                               const std::function<std::vector<std::string>(const nlohmann::json& scores)>& scores,
                               const std::string& note) {
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.at("run").get<std::string>(), r.at("model").get<std::string>(), protocol(r),
                                      std::to_string(r.at("parameters").get<long long>())};
    for (auto& cell : scores(r.at(scores_key))) cells.push_back(std::move(cell));
    char invariance[32] = "-";
    if (r.contains("invariance"))
      std::snprintf(invariance, sizeof invariance, "%.3g",
                    r.at("invariance").at("float32").at("max_abs_logit_change").get<double>());
    cells.push_back(invariance);
    table.push_back(cells);
  }
  std::vector<std::string> header = {"run", "model", "protocol", "params"};
  header.insert(header.end(), score_headers.begin(), score_headers.end());
  header.push_back("max |dlogit|");
  return format_table(header, table) + (note.empty() ? "" : note + "\n");
}

}  // namespace qkv::tasks
