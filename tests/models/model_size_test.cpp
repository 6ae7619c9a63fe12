// A model's size from its options alone (ModelEntry::size): the parameter
// count equals the built model's for every registered model over many option
// sets; huge options are sized without building anything; counts that do not
// fit in int64 saturate; the activation estimate follows the point count.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/models/model.h"
#include "qkv/models/size_arithmetic.h"
#include "support/bounded_child.h"
#include "support/option_values.h"

namespace model_size_test {

using nlohmann::json;
using qkv::models::ModelEntry;
using qkv::models::ModelSize;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kPoints = 64;

json merged(json base, const json& changes) {
  base.update(changes);
  return base;
}

// Option sets per model: small sizes (cheap to build) with each boolean
// flipped and other widths, heads, blocks, lists, pooling and classes. The
// model's defaults are checked too. A new model needs a line here.
const std::map<std::string, std::vector<json>>& option_sets() {
  static const json vnt = {{"linear_dim", 4}, {"heads", 2}, {"head_dim", 4}, {"k", 4}, {"head_hidden", {8}}};
  static const std::vector<json> vnt_variants = {
      json::object(),
      {{"edge_cross", true}},
      {{"normals", true}},
      {{"normals", false}},
      {{"layer_norm", true}},
      {{"normalize_frame", true}},
      {{"pooling", "max"}},
      {{"pooling", "mean"}},
      {{"head_hidden", json::array()}},
      {{"head_hidden", {8, 6, 5}}},
      {{"blocks", 1}, {"linear_dim", 2}},  // the invariant layer's smallest input, 4 channels
      {{"blocks", 1}, {"linear_dim", 3}},  // 6 channels: in / 2 and in / 4 round down
      {{"blocks", 2}, {"linear_dim", 5}, {"heads", 3}, {"head_dim", 2}},
      {{"ffn_hidden", 5}},
      {{"classes", 3}, {"dropout", 0.0}},
      {{"edge_cross", true}, {"normals", true}, {"layer_norm", true}, {"normalize_frame", true}},
  };
  static const json vnt_seg = {{"linear_dim", 4}, {"heads", 2},        {"head_dim", 4},
                               {"k", 4},          {"category_dim", 4}, {"seg_hidden", {8}}};
  static const std::vector<json> vnt_seg_variants = {
      json::object(),
      {{"normals", true}},
      {{"edge_cross", true}},
      {{"layer_norm", true}},
      {{"normalize_frame", true}},
      {{"pooling", "max+mean"}},
      {{"pooling", "mean"}},
      {{"categories", 3}, {"parts", 7}, {"category_dim", 2}},
      {{"seg_hidden", json::array()}},
      {{"seg_hidden", {8, 6, 5}}, {"dropout", 0.3}},
      {{"blocks", 2}, {"ffn_hidden", 3}, {"seg_negative_slope", 0.2}},
  };
  static const json xyz = {{"d_model", 8}, {"layers", 1}, {"heads", 2}, {"embed_hidden", 8}};
  static const std::vector<json> xyz_variants = {
      json::object(),        {{"layers", 2}},
      {{"heads", 4}},        {{"d_model", 6}, {"heads", 3}, {"mlp_hidden", 5}},
      {{"embed_hidden", 3}}, {{"pooling", "max"}},
      {{"pooling", "mean"}}, {{"pooling", "max+mean"}},
  };
  // 8^3 volumes with padded convolutions: a 4 x 4 x 4 grid of 64 tokens.
  static const json spect = {{"volume_shape", {8, 8, 8}}, {"channels", {4, 4}}, {"padding", 1}};
  static const json mhca =
      merged(spect, {{"features", 64}, {"embedding", 8}, {"heads", 2}, {"width", 4}, {"hidden", 8}});
  static const json concatnet = merged(spect, {{"features", 64}, {"embedding", 8}, {"width", 4}, {"hidden", 8}});
  static const json mhca_x =
      merged(spect, {{"features", 10}, {"embedding", 6}, {"heads", 2}, {"width", 4}, {"hidden", 8}});
  static const std::vector<json> mhca_x_variants = {
      mhca_x,
      merged(mhca_x, {{"scores", "relu_dot"}, {"positions", false}, {"value_dim", 3}, {"classes", 3}}),
      merged(mhca_x, {{"readout", "mlp"}, {"readout_hidden", 5}, {"standardise", true}}),
      merged(mhca_x, {{"value_source", "intensity"}, {"heads", 4}}),
      merged(mhca_x, {{"site_linear", true}, {"site_dropout", 0.3}, {"attention", "uniform"}, {"values", "zero"}}),
      merged(mhca_x, {{"volume_shape", {12, 12, 12}}, {"padding", 0}, {"channels", {2, 3}}, {"features", 300}}),
  };
  // Both cells under both names, one layer and several, a vocabulary of its own.
  static const std::vector<json> recurrent_variants = {
      {{"embed", 8}, {"hidden", 8}},
      {{"embed", 5}, {"hidden", 7}, {"layers", 1}, {"cell", "lstm"}},
      {{"embed", 5}, {"hidden", 7}, {"layers", 3}, {"cell", "gru"}, {"dropout", 0.1}},
      {{"embed", 3}, {"hidden", 4}, {"vocab", 11}},
  };
  auto each = [](const json& base, const std::vector<json>& changes) {
    std::vector<json> out;
    for (const auto& c : changes) out.push_back(merged(base, c));
    return out;
  };
  static const std::map<std::string, std::vector<json>> table = {
      {"mlp",
       {{{"hidden", 8}},
        {{"layers", 0}},
        {{"layers", 3}, {"hidden", 5}, {"in_features", 7}, {"classes", 4}},
        {{"layers", 1}, {"dropout", 0.5}}}},
      {"transformer-lm",
       {{{"d_model", 16}, {"layers", 1}},
        {{"d_model", 16}, {"layers", 2}, {"heads", 2}, {"dk", 3}, {"dv", 5}, {"mlp_hidden", 7}, {"vocab", 11}},
        {{"d_model", 12}, {"heads", 3}, {"layers", 1}, {"dropout", 0.1}},
        {{"d_model", 6}, {"heads", 4}, {"dk", 2}, {"dv", 3}, {"layers", 1}}}},
      {"lstm-lm", recurrent_variants},
      {"gru-lm", recurrent_variants},
      {"vnt", each(vnt, vnt_variants)},
      {"vnt+n", each(vnt, vnt_variants)},
      {"vnt-local", each(merged(vnt, {{"neighbours", 6}}),
                         [&] {
                           auto v = vnt_variants;
                           v.push_back({{"neighbours", 4}});  // the edge conv's graph
                           v.push_back({{"neighbours", 2}});  // fewer than the edge conv's k
                           v.push_back({{"neighbours", 1}, {"heads", 1}, {"head_dim", 1}});
                           return v;
                         }())},
      {"vn-dgcnn", {{{"k", 4}}, {{"pooling", "max"}}, {{"classes", 10}, {"dropout", 0.0}}}},
      {"xyz-transformer", each(merged(xyz, {{"head_hidden", {8}}}),
                               [&] {
                                 auto v = xyz_variants;
                                 v.push_back({{"head_hidden", json::array()}, {"classes", 5}});
                                 v.push_back({{"head_hidden", {7, 3}}});
                                 return v;
                               }())},
      {"vnt-seg", each(vnt_seg, vnt_seg_variants)},
      {"vn-dgcnn-seg",
       {{{"k", 4}},
        {{"pooling", "max"}},
        {{"categories", 4}, {"parts", 9}, {"category_dim", 3}, {"seg_hidden", {16}}},
        {{"seg_hidden", json::array()}, {"dropout", 0.0}}}},
      {"xyz-transformer-seg",
       each(merged(xyz, {{"category_dim", 4}, {"seg_hidden", {8}}}),
            [&] {
              auto v = xyz_variants;
              v.push_back({{"categories", 2}, {"parts", 3}, {"seg_hidden", {5, 4}}, {"dropout", 0.2}});
              return v;
            }())},
      {"mhca",
       {mhca, merged(mhca, {{"volume_shape", {12, 12, 12}}, {"padding", 0}, {"features", 27}}),  // 3 x 3 x 3
        merged(mhca, {{"volume_shape", {8, 10, 12}}, {"channels", {4, 6}}, {"features", 120}}),  // 4 x 5 x 6
        merged(mhca, {{"channels", {2, 3, 5}}, {"features", 8}}),                                // 2 x 2 x 2
        merged(mhca, {{"embedding", 5}, {"heads", 4}, {"width", 8}, {"hidden", 3}, {"classes", 3}}),
        merged(mhca, {{"heads", 1}, {"key_dim_init", 2.0}, {"attention_dropout", 0.1}})}},
      {"concatnet",
       {concatnet, merged(concatnet, {{"features", 10}, {"embedding", 3}, {"width", 5}, {"hidden", 6}, {"classes", 4}}),
        merged(concatnet, {{"volume_shape", {12, 12, 12}}, {"padding", 0}, {"channels", {2, 3}}})}},
      {"mhca-x", mhca_x_variants},
      {"mhca-x-uniform", mhca_x_variants},
      {"mhca-x-no-values", mhca_x_variants},
      {"spectnet",
       {merged(spect, {{"hidden", 8}}), merged(spect, {{"hidden", 3}, {"classes", 5}, {"channels", {2, 3, 5}}}),
        merged(spect, {{"volume_shape", {12, 9, 10}}, {"padding", 0}})}},
  };
  return table;
}

bool uses_points(const ModelEntry& e) { return e.task == "classification" || e.task == "segmentation"; }

int64_t built_parameters(const ModelEntry& e, const json& options) {
  return qkv::models::count_parameters(*e.make(options));
}

TEST(ModelSize, EveryModelSaysItsSizeAndItsParameterCountIsExact) {
  std::set<std::string> registered;
  for (const auto& e : qkv::models::model_registry()) {
    SCOPED_TRACE(e.name);
    if (!e.network) continue;  // counts nothing (registry_test)
    registered.insert(e.name);
    ASSERT_TRUE(static_cast<bool>(e.size)) << e.name << " has no size function";
    ASSERT_TRUE(option_sets().count(e.name)) << "option_sets() needs a line for " << e.name;
    std::vector<json> sets = {json::object()};  // the defaults
    for (const auto& o : option_sets().at(e.name)) sets.push_back(o);
    for (const auto& options : sets) {
      SCOPED_TRACE(options.dump());
      const ModelSize size = e.size(options, kPoints);
      EXPECT_EQ(size.parameters, built_parameters(e, options));
      EXPECT_GT(size.activation_floats, 0);
      EXPECT_LT(size.activation_floats, int64_t{1} << 40);
    }
  }
  std::set<std::string> listed;
  for (const auto& [name, sets] : option_sets()) listed.insert(name);
  EXPECT_EQ(listed, registered);
}

// Every option a model declares (its field list, through the registry),
// changed alone from the defaults: where the model takes the new value, the
// size function must count what the constructor builds. An option added to
// a model without its size function following fails here, with no line to add.
TEST(ModelSize, EveryDeclaredOptionChangedAloneKeepsTheCountExact) {
  for (const auto& e : qkv::models::model_registry()) {
    if (!e.network) continue;
    int64_t checked = 0;
    for (const auto& option : e.options) {
      const json options = {{option.key, qkv::testing::changed(option.default_value)}};
      SCOPED_TRACE(e.name + " " + options.dump());
      qkv::models::ModelPtr model;
      try {
        model = e.make(options);
      } catch (const qkv::UsageError&) {
        continue;  // a value this model refuses (a divisor, a shape): nothing built to count
      }
      EXPECT_EQ(e.size(options, kPoints).parameters, qkv::models::count_parameters(*model));
      ++checked;
    }
    // Most options take their neighbouring value; a model whose every change
    // is refused would check nothing.
    EXPECT_GE(2 * checked, static_cast<int64_t>(e.options.size())) << e.name << ": " << checked << " checked";
  }
}

TEST(ModelSize, ReproducesThePublishedCounts) {
  // The counts the models' headers quote from the papers (and their code).
  EXPECT_EQ(qkv::models::find_model("vn-dgcnn").size(json::object(), 1024).parameters, 2899830);
  EXPECT_EQ(qkv::models::find_model("vn-dgcnn-seg").size(json::object(), 2048).parameters, 1306090);
  EXPECT_EQ(qkv::models::find_model("mhca").size(json::object(), 1).parameters, 2020883);
  EXPECT_EQ(qkv::models::find_model("concatnet").size(json::object(), 1).parameters, 3824066);
  EXPECT_EQ(qkv::models::find_model("spectnet").size(json::object(), 1).parameters, 3793378);
}

TEST(ModelSize, HugeOptionsAreSizedWithoutBuilding) {
  const auto& vnt = qkv::models::find_model("vnt");
  const int64_t big = int64_t{1} << 28;
  // Each is far too large to build; size() only reads the options.
  const std::vector<std::pair<std::string, json>> huge = {
      {"vnt", {{"blocks", 100000000}}},
      {"vnt", {{"head_hidden", {100000000, 256}}}},
      {"vnt", {{"ffn_hidden", 1000000000}}},
      {"vnt", {{"linear_dim", 4000000}}},
      {"vnt+n", {{"blocks", 100000000}}},
      {"vnt-local", {{"blocks", 100000000}}},
      {"vnt-seg", {{"linear_dim", 4000000}}},
      {"vnt-seg", {{"seg_hidden", {100000000, 256}}}},
      {"xyz-transformer", {{"head_hidden", {100000000, 256}}}},
      {"xyz-transformer", {{"d_model", 4000000}}},
      {"xyz-transformer-seg", {{"layers", 100000000}}},
      {"transformer-lm", {{"d_model", 10000000000}}},
      {"transformer-lm", {{"layers", 100000000}}},
      {"lstm-lm", {{"hidden", 100000000}}},
      {"gru-lm", {{"layers", 100000000}}},
      {"mlp", {{"hidden", 100000000}}},
      // 3 convolutions on a padded 8^3 volume: 2 x 2 x 2 tokens.
      {"mhca", {{"channels", {4096, 4096, 4096}}, {"volume_shape", {8, 8, 8}}, {"padding", 1}, {"features", 8}}},
      {"concatnet", {{"features", 1000000000}}},
      {"mhca-x", {{"features", 1000000}, {"embedding", 4096}}},
      {"spectnet", {{"channels", {4096, 4096, 4096}}, {"volume_shape", {8, 8, 8}}, {"padding", 1}}},
  };
  const int64_t peak_before = qkv::testing::proc_status_bytes("VmHWM:");
  for (const auto& item : huge) {
    SCOPED_TRACE(item.first + " " + item.second.dump());
    const auto& entry = qkv::models::find_model(item.first);
    EXPECT_GT(entry.size(item.second, 1024).parameters, big);
    // Building is refused before anything is allocated.
    EXPECT_THROW(entry.make(item.second), qkv::UsageError);
  }
  // Nothing of that size was allocated: the peak grew by far less than 300 MB.
  EXPECT_LT(qkv::testing::proc_status_bytes("VmHWM:") - peak_before, int64_t{300} << 20);
  // k = 10^8 neighbours: the edge convolution's features of 1024 points.
  const auto knn = vnt.size({{"k", 100000000}}, 1024);
  EXPECT_GT(knn.activation_floats, int64_t{1} << 40);
  EXPECT_LT(knn.parameters, big);  // k adds no parameter
}

TEST(ModelSize, CountsThatDoNotFitSaturate) {
  using qkv::models::sat_add;
  using qkv::models::sat_mul;
  EXPECT_EQ(sat_mul(int64_t{3037000499}, int64_t{3037000499}), int64_t{9223372030926249001});
  EXPECT_EQ(sat_mul(int64_t{3037000500}, int64_t{3037000500}), kMax);
  EXPECT_EQ(sat_mul(kMax, int64_t{2}), kMax);
  EXPECT_EQ(sat_mul(kMax, int64_t{0}), 0);
  EXPECT_EQ(sat_mul(int64_t{1} << 40, int64_t{1} << 20, int64_t{1} << 10), kMax);
  EXPECT_EQ(sat_add(kMax, int64_t{1}), kMax);
  EXPECT_EQ(sat_add(kMax - 1, int64_t{1}), kMax);
  EXPECT_EQ(sat_add(int64_t{1} << 62, int64_t{1} << 62, int64_t{1}), kMax);

  const std::vector<std::pair<std::string, json>> beyond_int64 = {
      {"vnt", {{"head_hidden", {4000000000, 4000000000, 4000000000}}}},
      {"vnt", {{"ffn_hidden", 4000000000}}},
      {"vnt", {{"blocks", 1000000000000}}},
      {"vnt-seg", {{"seg_hidden", {4000000000, 4000000000}}}},
      {"xyz-transformer", {{"d_model", 4000000000}}},
      {"transformer-lm", {{"d_model", int64_t{1} << 40}}},
      {"transformer-lm", {{"layers", kMax}}},
      {"lstm-lm", {{"hidden", int64_t{1} << 40}}},
      {"gru-lm", {{"layers", kMax}}},
      {"mlp", {{"hidden", 4000000000}}},
      {"mlp", {{"layers", kMax}}},
      {"concatnet", {{"features", kMax}}},
      {"mhca", {{"hidden", kMax}}},
  };
  for (const auto& [name, options] : beyond_int64) {
    SCOPED_TRACE(name + " " + options.dump());
    EXPECT_EQ(qkv::models::find_model(name).size(options, 1024).parameters, kMax);
  }
  // The activation estimate saturates too.
  EXPECT_EQ(qkv::models::find_model("vnt").size(json::object(), kMax).activation_floats, kMax);
  EXPECT_EQ(qkv::models::find_model("transformer-lm").size(json::object(), kMax).activation_floats, kMax);
  EXPECT_EQ(qkv::models::find_model("vnt").size({{"k", kMax}}, 2).activation_floats, kMax);
}

TEST(ModelSize, ActivationsFollowThePoints) {
  for (const auto& e : qkv::models::model_registry()) {
    SCOPED_TRACE(e.name);
    if (!e.network) continue;
    const auto& options = option_sets().at(e.name).front();
    const auto small = e.size(options, 1024), large = e.size(options, 2048);
    EXPECT_EQ(small.parameters, large.parameters) << "the points change no parameter";
    if (uses_points(e) || e.task == "lm") {
      EXPECT_GE(large.activation_floats, 2 * small.activation_floats - small.activation_floats / 10);
    } else {
      EXPECT_EQ(large.activation_floats, small.activation_floats) << "a model without points ignores them";
    }
  }
  // Attention over the points: doubling them more than doubles the estimate.
  for (const std::string name :
       {"vnt", "vnt+n", "vnt-seg", "xyz-transformer", "xyz-transformer-seg", "transformer-lm"}) {
    SCOPED_TRACE(name);
    const auto& e = qkv::models::find_model(name);
    EXPECT_GT(e.size(json::object(), 2048).activation_floats, 2 * e.size(json::object(), 1024).activation_floats);
  }
  // More neighbours, more edge features.
  const auto& vnt = qkv::models::find_model("vnt");
  EXPECT_GT(vnt.size({{"k", 40}}, 1024).activation_floats, vnt.size({{"k", 20}}, 1024).activation_floats);
  const auto& dgcnn = qkv::models::find_model("vn-dgcnn");
  EXPECT_GT(dgcnn.size({{"k", 40}, {"pooling", "max"}}, 1024).activation_floats,
            dgcnn.size({{"k", 20}, {"pooling", "max"}}, 1024).activation_floats);
  // A bigger volume, bigger feature maps.
  const auto& spectnet = qkv::models::find_model("spectnet");
  EXPECT_GT(spectnet.size(json::object(), 1).activation_floats,
            spectnet.size(option_sets().at("spectnet").front(), 1).activation_floats);
}

TEST(ModelSize, BadOptionsAndPointCountsThrowUsageError) {
  for (const auto& e : qkv::models::model_registry()) {
    SCOPED_TRACE(e.name);
    EXPECT_THROW(e.size({{"no_such_option", 1}}, 64), qkv::UsageError);
    if (uses_points(e) || e.task == "lm") {
      EXPECT_THROW(e.size(json::object(), 0), qkv::UsageError);
    }
  }
  EXPECT_THROW(qkv::models::find_model("vnt").size({{"blocks", 0}}, 64), qkv::UsageError);
  EXPECT_THROW(qkv::models::find_model("mhca").size({{"features", 7}}, 64), qkv::UsageError);
  EXPECT_THROW(qkv::models::find_model("transformer-lm").size({{"d_model", 7}}, 64), qkv::UsageError);
}

}  // namespace model_size_test
