// The registry's capabilities: every model names its task, the inputs its
// forward() reads (checked by running it without each), and help for exactly
// the options resolve() returns; options round-trip; the task lists.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/models/model.h"
#include "support/option_values.h"
#include "support/paths.h"

using namespace qkv;
using qkv::testing::changed;

namespace {

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (const auto& item : j.items()) keys.insert(item.key());
  return keys;
}

// Small options per model, so that a forward pass is cheap. A new model needs
// a line here (ForwardReadsExactlyTheDeclaredInputs checks the table covers
// the registry).
const std::map<std::string, nlohmann::json>& small_options() {
  static const nlohmann::json vnt = {{"linear_dim", 4}, {"heads", 2}, {"head_dim", 4}, {"k", 4}, {"head_hidden", {8}}};
  static const nlohmann::json vnt_seg = {{"linear_dim", 4}, {"heads", 2},        {"head_dim", 4},
                                         {"k", 4},          {"category_dim", 4}, {"seg_hidden", {8}}};
  static const nlohmann::json xyz = {{"d_model", 8}, {"layers", 1}, {"heads", 2}, {"embed_hidden", 8}};
  // An 8^3 volume with padded convolutions: a 4 x 4 x 4 grid of 64 tokens.
  static const nlohmann::json spect = {{"volume_shape", {8, 8, 8}}, {"channels", {4, 4}}, {"padding", 1}};
  auto with = [](nlohmann::json a, const nlohmann::json& b) {
    a.update(b);
    return a;
  };
  static const std::map<std::string, nlohmann::json> table = {
      {"mlp", {{"hidden", 8}}},
      {"transformer-lm", {{"d_model", 16}, {"layers", 1}}},
      {"lstm-lm", {{"embed", 8}, {"hidden", 8}}},
      {"gru-lm", {{"embed", 8}, {"hidden", 8}}},
      {"vnt", vnt},
      {"vnt+n", vnt},
      {"vnt-local", with(vnt, {{"neighbours", 6}})},
      {"vn-dgcnn", {{"k", 4}}},
      {"xyz-transformer", with(xyz, {{"head_hidden", {8}}})},
      {"vnt-seg", vnt_seg},
      {"vn-dgcnn-seg", {{"k", 4}}},
      {"xyz-transformer-seg", with(xyz, {{"category_dim", 4}, {"seg_hidden", {8}}})},
      {"mhca", with(spect, {{"features", 64}, {"embedding", 8}, {"heads", 2}, {"width", 4}, {"hidden", 8}})},
      {"concatnet", with(spect, {{"features", 64}, {"embedding", 8}, {"width", 4}, {"hidden", 8}})},
      {"spectnet", with(spect, {{"hidden", 8}})},
      {"mhca-x", with(spect, {{"features", 64}, {"embedding", 8}, {"heads", 2}, {"width", 4}, {"hidden", 8}})},
      {"mhca-x-uniform", with(spect, {{"features", 64}, {"heads", 2}, {"width", 4}, {"hidden", 8}})},
      {"mhca-x-no-values", with(spect, {{"features", 64}, {"heads", 2}, {"width", 4}, {"hidden", 8}})},
  };
  return table;
}

// A test tensor for a Batch input, shaped for small_options(); 2 samples.
at::Tensor test_input(const std::string& name) {
  const int64_t b = 2, n = 24;
  if (name == "x") return torch::randn({b, 2});
  if (name == "tokens") return torch::randint(0, 256, {b, 5}, torch::kLong);
  if (name == "points") return torch::randn({b, 3, n});
  if (name == "normals") {
    const auto v = torch::randn({b, 3, n});
    return v / v.norm(2, 1, true);
  }
  if (name == "category") return torch::tensor({3, 11}, torch::kLong);
  if (name == "spect") return torch::rand({b, 1, 8, 8, 8});
  if (name == "methylation") return torch::rand({b, 64});
  ADD_FAILURE() << "no test tensor for input '" << name << "'";
  return {};
}

data::Batch batch_of(const std::vector<std::string>& names) {
  torch::manual_seed(0);
  data::Batch batch;
  for (const auto& name : names) batch.inputs[name] = test_input(name);
  batch.target = torch::zeros({2}, torch::kLong);
  return batch;
}

}  // namespace

TEST(Registry, EveryModelHasATaskInputsAndHelpForExactlyItsOptions) {
  std::set<std::string> tasks;
  for (const auto& t : models::model_tasks()) {
    EXPECT_FALSE(t.description.empty()) << t.name;
    tasks.insert(t.name);
  }
  ASSERT_FALSE(models::model_registry().empty());
  for (const auto& e : models::model_registry()) {
    SCOPED_TRACE(e.name);
    EXPECT_FALSE(e.description.empty());
    EXPECT_EQ(tasks.count(e.task), 1u) << "task '" << e.task << "'";
    EXPECT_FALSE(e.inputs.empty());
    EXPECT_EQ(e.inputs_with(nlohmann::json::object()), e.inputs);
    const auto defaults = e.resolve(nlohmann::json::object());
    std::set<std::string> described;
    for (const auto& o : e.options) {
      EXPECT_TRUE(described.insert(o.key).second) << "help twice for '" << o.key << "'";
      EXPECT_FALSE(o.help.empty()) << "no help for '" << o.key << "'";
      EXPECT_EQ(o.help.find('\n'), std::string::npos) << o.key;
      EXPECT_TRUE(defaults.contains(o.key)) << "help for '" << o.key << "', which the model does not have";
      if (defaults.contains(o.key)) {
        EXPECT_EQ(o.default_value, defaults.at(o.key)) << o.key;
      }
    }
    EXPECT_EQ(described, keys_of(defaults));
  }
}

TEST(Registry, ForwardReadsExactlyTheDeclaredInputs) {
  std::set<std::string> covered;
  for (const auto& [name, options] : small_options()) covered.insert(name);
  std::set<std::string> registered;
  for (const auto& e : models::model_registry()) {
    if (e.network) {
      registered.insert(e.name);
      continue;
    }
    // A model that is not a network says so instead of building, and counts nothing.
    try {
      e.make(nlohmann::json::object());
      ADD_FAILURE() << e.name << " built a module";
    } catch (const UsageError& err) {
      EXPECT_NE(std::string(err.what()).find("not a network"), std::string::npos) << err.what();
    }
    EXPECT_EQ(e.size(nlohmann::json::object(), 1).parameters, 0) << e.name;
  }
  EXPECT_EQ(covered, registered) << "small_options() needs a line per registered network";

  torch::NoGradGuard no_grad;
  auto check = [](const models::ModelEntry& e, const nlohmann::json& options) {
    SCOPED_TRACE(e.name + " " + options.dump());
    const auto inputs = e.inputs_with(options);
    auto model = e.make(options);
    model->eval();
    EXPECT_NO_THROW(model->forward(batch_of(inputs)));
    for (const auto& missing : inputs) {
      std::vector<std::string> fewer;
      for (const auto& n : inputs)
        if (n != missing) fewer.push_back(n);
      EXPECT_ANY_THROW(model->forward(batch_of(fewer))) << "forward() did not need '" << missing << "'";
    }
  };
  for (const auto& e : models::model_registry())
    if (small_options().count(e.name)) check(e, small_options().at(e.name));
  // "normals" follows the option of that name.
  auto with_normals = small_options().at("vnt-seg");
  with_normals["normals"] = true;
  EXPECT_EQ(models::find_model("vnt-seg").inputs_with(with_normals),
            (std::vector<std::string>{"points", "normals", "category"}));
  check(models::find_model("vnt-seg"), with_normals);
  auto without_normals = small_options().at("vnt+n");
  without_normals["normals"] = false;
  EXPECT_EQ(models::find_model("vnt+n").inputs_with(without_normals), std::vector<std::string>{"points"});
  check(models::find_model("vnt+n"), without_normals);
}

TEST(Registry, OptionsRoundTripThroughResolve) {
  for (const auto& e : models::model_registry()) {
    SCOPED_TRACE(e.name);
    const auto defaults = e.resolve(nlohmann::json::object());
    EXPECT_EQ(e.resolve(defaults), defaults) << "config.json's options must give the same model";
    // Each option changed alone comes back as given, the others at their
    // defaults, or is refused with a UsageError about its value (e.g. mhca's
    // features must match its volume) — never as an unknown option.
    int round_trips = 0;
    for (const auto& item : defaults.items()) {
      auto options = defaults;
      options[item.key()] = changed(item.value());
      try {
        EXPECT_EQ(e.resolve(options), options) << item.key();
        ++round_trips;
      } catch (const UsageError& err) {
        EXPECT_EQ(std::string(err.what()).find("unknown option"), std::string::npos) << err.what();
      }
    }
    EXPECT_GE(round_trips, 1) << "no option of " << e.name << " round-trips";
  }
}

TEST(Registry, ModelsForTask) {
  EXPECT_EQ(models::models_for_task("classification"),
            (std::vector<std::string>{"vnt", "vnt+n", "vnt-local", "vn-dgcnn", "xyz-transformer"}));
  EXPECT_EQ(models::models_for_task("segmentation"),
            (std::vector<std::string>{"vnt-seg", "vn-dgcnn-seg", "xyz-transformer-seg"}));
  EXPECT_EQ(models::models_for_task("mhca"),
            (std::vector<std::string>{"mhca", "concatnet", "spectnet", "mhca-x", "mhca-x-uniform", "mhca-x-no-values",
                                      "xgboost"}));
  EXPECT_FALSE(models::find_model("xgboost").network);
  EXPECT_EQ(models::models_for_task("lm"), (std::vector<std::string>{"transformer-lm", "lstm-lm", "gru-lm"}));
  EXPECT_EQ(models::models_for_task("spirals"), std::vector<std::string>{"mlp"});
  EXPECT_THROW(models::models_for_task("regression"), std::invalid_argument);
  // Every model belongs to exactly one listed task.
  size_t listed = 0;
  for (const auto& t : models::model_tasks()) listed += models::models_for_task(t.name).size();
  EXPECT_EQ(listed, models::model_registry().size());
}

TEST(Registry, ModelHelpHasALinePerModelOfTheTask) {
  const auto help = models::model_help("segmentation");
  EXPECT_EQ(help, "vnt-seg              " + models::find_model("vnt-seg").description + "\n" + "vn-dgcnn-seg         " +
                      models::find_model("vn-dgcnn-seg").description + "\n" + "xyz-transformer-seg  " +
                      models::find_model("xyz-transformer-seg").description);
  EXPECT_THROW(models::model_help("nope"), std::invalid_argument);
}

// docs/models.md's table of models names every registered model, so that a
// new model cannot land undocumented.
TEST(Registry, EveryRegisteredModelIsInTheDocsTableOfModels) {
  const std::string path = std::string(qkv::testing::source_dir()) + "/docs/models.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string docs = text.str();
  const auto table = docs.find("## The models");
  ASSERT_NE(table, std::string::npos) << path << " has no '## The models' section";
  const std::string section = docs.substr(table, docs.find("\n## ", table + 1) - table);
  for (const auto& e : models::model_registry())
    EXPECT_NE(section.find("`" + e.name + "`"), std::string::npos) << e.name << " is not in " << path << "'s table";
}
