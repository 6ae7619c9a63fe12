#include "qkv/pointcloud/point_features.h"

#include <torch/torch.h>

#include <cmath>
#include <set>

#include "qkv/core/errors.h"

namespace qkv::pointcloud {

std::vector<std::string> parse_point_features(const std::string& list, const std::string& option) {
  std::vector<std::string> names;
  if (list.empty()) return names;
  std::set<std::string> seen;
  const std::string given = (option.empty() ? "'" : option + " '") + list + "'";
  size_t start = 0;
  while (true) {
    const size_t end = list.find(',', start);
    const std::string name = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (name.empty()) throw UsageError(given + ": an empty feature name");
    for (const char c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
        throw UsageError(given + ": '" + name + "' is not a feature name ([A-Za-z0-9_])");
    if (!seen.insert(name).second) throw UsageError(given + ": '" + name + "' named twice");
    names.push_back(name);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return names;
}

int64_t point_feature_channels(const std::vector<std::string>& names) {
  int64_t channels = 0;
  for (const auto& name : names) channels += name == kColourFeature ? 3 : 1;
  return channels;
}

namespace {

std::string features_held(const Mesh& cloud) {
  std::string held = cloud.colors.empty() ? "" : kColourFeature;
  for (const auto& p : cloud.vertex_properties) held += (held.empty() ? "" : ", ") + p.name;
  return held.empty() ? "none" : held;
}

}  // namespace

at::Tensor point_feature_rows(const Mesh& cloud, const std::vector<std::string>& names, const std::string& source) {
  const auto points = static_cast<int64_t>(cloud.vertices.size());
  if (!cloud.is_point_cloud())
    throw DataError(source +
                    ": a mesh; per-point features are read from point clouds (a mesh's vertices are not "
                    "the points sampled on its surface)");
  auto rows = torch::empty({points, point_feature_channels(names)}, torch::kFloat);
  auto* out = rows.data_ptr<float>();
  const int64_t width = rows.size(1);
  int64_t column = 0;
  for (const auto& name : names) {
    if (name == kColourFeature) {
      if (cloud.colors.size() != cloud.vertices.size())
        throw DataError(source + ": no colour (feature 'rgb'; the file holds: " + features_held(cloud) + ")");
      for (int64_t i = 0; i < points; ++i) {
        const auto& rgb = cloud.colors[static_cast<size_t>(i)];
        for (int64_t k = 0; k < 3; ++k)
          out[i * width + column + k] = static_cast<float>(rgb[static_cast<size_t>(k)]) / 255.0f;
      }
      column += 3;
      continue;
    }
    const VertexProperty* property = nullptr;
    for (const auto& p : cloud.vertex_properties)
      if (p.name == name) property = &p;
    if (property == nullptr || property->values.size() != cloud.vertices.size())
      throw DataError(source + ": no per-point '" + name + "' (the file holds: " + features_held(cloud) + ")");
    for (int64_t i = 0; i < points; ++i) {
      const auto value = static_cast<float>(property->values[static_cast<size_t>(i)]);
      if (!std::isfinite(value))
        throw DataError(source + ": point " + std::to_string(i) + ": '" + name + "' is not a finite float32");
      out[i * width + column] = value;
    }
    column += 1;
  }
  return rows;
}

}  // namespace qkv::pointcloud
