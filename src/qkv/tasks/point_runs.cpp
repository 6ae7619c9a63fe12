#include "qkv/tasks/point_runs.h"

namespace qkv::tasks {

void check_point_model_fits(const std::string& model, const nlohmann::json& options, int64_t points) {
  const auto& entry = models::find_model(model);
  const auto resolved = entry.resolve(options);
  if (resolved.contains("k") && resolved["k"].is_number_integer() && resolved["k"].get<int64_t>() > points)
    throw ConfigError("points", std::to_string(points) + ": " + model + "'s option 'k' takes " + resolved["k"].dump() +
                                    " neighbours, so it needs at least that many points per shape");
  models::check_activation_memory(entry, options, points, 0);
}

}  // namespace qkv::tasks
