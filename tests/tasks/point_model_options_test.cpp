// The model of a point-cloud train command (tasks/point_task.h): the paper's
// size settings become the model options of their keys, 0 leaves the model's
// default, and a size that does not apply, is out of range or contradicts
// --model-options is refused by key, whoever filled the settings.
#include <gtest/gtest.h>

#include <string>

#include "qkv/core/errors.h"
#include "qkv/tasks/point_task.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

tasks::PointModelSettings model_settings(const std::string& model) {
  tasks::PointModelSettings s;
  s.model = model;
  return s;
}

// The key of the ConfigError point_model_options throws for `s`.
std::string refused_key(const tasks::PointModelSettings& s) {
  return config_error_key_of([&] { tasks::point_model_options(s); });
}

TEST(PointModelOptions, SizesBecomeModelOptionsAndZeroLeavesTheDefault) {
  auto s = model_settings("vnt");
  s.linear_dim = 8;
  s.heads = 4;
  s.model_options = R"({"k":10})";
  const auto options = tasks::point_model_options(s);
  EXPECT_EQ(options.at("linear_dim"), 8);
  EXPECT_EQ(options.at("heads"), 4);
  EXPECT_EQ(options.at("k"), 10);
  EXPECT_FALSE(options.contains("head_dim"));  // 0: the model's own default
}

TEST(PointModelOptions, ASizeThatDoesNotApplyIsOutOfRangeOrGivenTwiceIsRefusedByKey) {
  auto dgcnn = model_settings("vn-dgcnn");
  dgcnn.heads = 4;  // VN-DGCNN has no attention
  EXPECT_EQ(refused_key(dgcnn), "heads");

  auto negative = model_settings("vnt");
  negative.linear_dim = -1;
  EXPECT_EQ(refused_key(negative), "linear_dim");
  auto huge = model_settings("vnt");
  huge.head_dim = 1 << 20;
  EXPECT_EQ(refused_key(huge), "head_dim");

  auto twice = model_settings("vnt");
  twice.heads = 4;
  twice.model_options = R"({"heads":3})";
  EXPECT_EQ(refused_key(twice), "heads");
  twice.model_options = R"({"heads":4})";  // the same value twice is one setting
  EXPECT_EQ(tasks::point_model_options(twice).at("heads"), 4);
}

}  // namespace
}  // namespace qkv::testing
