#include "qkv/tasks/point_runs.h"

#include <cstdio>

namespace qkv::tasks {

void check_point_model_fits(const std::string& model, const nlohmann::json& options, int64_t points) {
  const auto& entry = models::find_model(model);
  const auto resolved = entry.resolve(options);
  if (resolved.contains("k") && resolved["k"].is_number_integer() && resolved["k"].get<int64_t>() > points)
    throw ConfigError("points", std::to_string(points) + ": " + model + "'s option 'k' takes " + resolved["k"].dump() +
                                    " neighbours, so it needs at least that many points per shape");
  models::check_activation_memory(entry, options, points, 0);
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
