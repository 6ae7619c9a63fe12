// Every model's options are one field list (models/options.h); these tests
// are derived from those lists, so a new option is tested the moment it is
// declared: its value out of range, off its words or of the wrong type is
// refused naming the model and the key; unknown keys are refused; the
// defaults round-trip through JSON; every option has help.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/models/mhca.h"
#include "qkv/models/mhca_x.h"
#include "qkv/models/mlp.h"
#include "qkv/models/options.h"
#include "qkv/models/part_seg.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/models/vn_dgcnn.h"
#include "qkv/models/vnt_local.h"
#include "qkv/models/vnt_net.h"
#include "qkv/models/xyz_transformer.h"
#include "support/test_files.h"

using namespace qkv;
using qkv::testing::usage_error_of;

namespace {

using Resolve = std::function<nlohmann::json(const nlohmann::json&)>;

// Values of `f`'s member that its declaration refuses: below and above its
// range, off its words, or of another type. Each must be refused by name.
template <typename T>
std::vector<nlohmann::json> refused_values(const Field& f) {
  std::vector<nlohmann::json> bad;
  constexpr double kNone = std::numeric_limits<double>::max();
  const bool has_min = f.min != -kNone, has_max = f.max != kNone;
  auto below = [&] { return f.min_open ? f.min : f.min - (std::is_integral_v<T> ? 1.0 : 0.5); };
  auto above = [&] { return f.max_open ? f.max : f.max + (std::is_integral_v<T> ? 1.0 : 0.5); };
  if constexpr (std::is_same_v<T, bool>) {
    bad.push_back(1);
  } else if constexpr (std::is_integral_v<T>) {
    if (has_min) bad.push_back(static_cast<int64_t>(below()));
    if (has_max) bad.push_back(static_cast<int64_t>(above()));
    bad.push_back(2.5);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (has_min) bad.push_back(below());
    if (has_max) bad.push_back(above());
    bad.push_back("0.5");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (f.choices) bad.push_back("no-such-word");
    bad.push_back(3);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (has_min) bad.push_back({static_cast<int64_t>(below())});
    if (has_max) bad.push_back({static_cast<int64_t>(above())});
    bad.push_back(7);
  }
  return bad;
}

template <typename Options>
void expect_declared_options_checked(const std::string& model, const Resolve& resolve) {
  SCOPED_TRACE(model);
  const nlohmann::json defaults = resolve(nlohmann::json::object());
  EXPECT_EQ(resolve(defaults), defaults) << "the defaults must round-trip";
  Options declared;
  size_t fields = 0;
  visit_fields(declared, [&](const Field& f, auto& member) {
    ++fields;
    using T = std::decay_t<decltype(member)>;
    EXPECT_TRUE(defaults.contains(f.key)) << f.key;
    EXPECT_GT(std::string(f.help).size(), 5u) << f.key << " needs help";
    for (const auto& value : refused_values<T>(f)) {
      const std::string message = usage_error_of([&] { resolve({{f.key, value}}); });
      EXPECT_NE(message.find(model + " option '" + f.key + "'"), std::string::npos)
          << f.key << " = " << value.dump() << " gave: '" << message << "'";
    }
  });
  EXPECT_EQ(fields, defaults.size()) << "to_json writes exactly the declared fields";
  EXPECT_NE(usage_error_of([&] {
              resolve({{"no_such_option", 1}});
            }).find(model + ": unknown option 'no_such_option'"),
            std::string::npos);
  EXPECT_NE(usage_error_of([&] { resolve(nlohmann::json::array()); }).find("expected a JSON object"),
            std::string::npos);
}

template <typename Options>
Resolve resolver() {
  return [](const nlohmann::json& j) { return Options::from_json(j).to_json(); };
}

template <typename Options>
Resolve named_resolver(const std::string& name) {
  return [name](const nlohmann::json& j) { return Options::from_json(j, name).to_json(); };
}

}  // namespace

TEST(ModelOptionFields, EveryDeclaredOptionIsCheckedByItsDeclaration) {
  using namespace qkv::models;
  expect_declared_options_checked<MLPOptions>("mlp", resolver<MLPOptions>());
  expect_declared_options_checked<TransformerLMOptions>("transformer-lm", resolver<TransformerLMOptions>());
  expect_declared_options_checked<RecurrentLMOptions>("gru-lm", named_resolver<RecurrentLMOptions>("gru-lm"));
  expect_declared_options_checked<VNTNetOptions>("vnt+n", named_resolver<VNTNetOptions>("vnt+n"));
  expect_declared_options_checked<VNTLocalOptions>("vnt-local", named_resolver<VNTLocalOptions>("vnt-local"));
  expect_declared_options_checked<VNDGCNNOptions>("vn-dgcnn", resolver<VNDGCNNOptions>());
  expect_declared_options_checked<XYZTransformerOptions>("xyz-transformer", resolver<XYZTransformerOptions>());
  expect_declared_options_checked<VNTSegOptions>("vnt-seg", resolver<VNTSegOptions>());
  expect_declared_options_checked<VNDGCNNSegOptions>("vn-dgcnn-seg", resolver<VNDGCNNSegOptions>());
  expect_declared_options_checked<XYZTransformerSegOptions>("xyz-transformer-seg",
                                                            resolver<XYZTransformerSegOptions>());
  expect_declared_options_checked<MHCAOptions>("mhca", resolver<MHCAOptions>());
  expect_declared_options_checked<ConcatNetOptions>("concatnet", resolver<ConcatNetOptions>());
  expect_declared_options_checked<SpectNetOptions>("spectnet", resolver<SpectNetOptions>());
  expect_declared_options_checked<MHCAXOptions>("mhca-x-uniform", named_resolver<MHCAXOptions>("mhca-x-uniform"));
}

TEST(ModelOptionFields, TheRegistryNameSetsItsDefaultsAndTheSegmentersSayWhereTheirsComeFrom) {
  using namespace qkv::models;
  EXPECT_TRUE(VNTNetOptions::from_json({}, "vnt+n").normals);
  EXPECT_FALSE(VNTNetOptions::from_json({}, "vnt").normals);
  EXPECT_EQ(MHCAXOptions::from_json({}, "mhca-x-no-values").values, "zero");
  const auto help = model_option_help<VNTSegOptions>();
  auto source_of = [&](const std::string& key) {
    for (const auto& h : help)
      if (h.key == key) return h.source;
    ADD_FAILURE() << "no option " << key;
    return std::string();
  };
  EXPECT_EQ(source_of("linear_dim"), "the paper (segmentation)");  // vnt's says "the paper (classification)"
  EXPECT_EQ(source_of("pooling"), "our choice (the paper is silent)");
  // vnt's k is "as DGCNN and Vector Neurons", whose part segmentation takes 40.
  EXPECT_NE(source_of("k").find("Vector Neurons' part segmentation takes 40"), std::string::npos);
  EXPECT_EQ(source_of("head_dim"), "the paper");  // as vnt's
}
