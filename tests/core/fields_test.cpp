// One field list per settings struct gives its JSON both ways: what is written
// reads back equal, missing keys keep their defaults, a wrong type names the key.
#include <gtest/gtest.h>

#include "qkv/core/fields.h"
#include "support/test_files.h"

namespace demo {

struct Settings {
  int64_t count = 3;
  double rate = 0.5;
  std::string name = "x";
  std::vector<std::string> tags;
  uint64_t seed = 0;
};

template <typename V>
void visit_fields(Settings& s, V&& visit) {
  visit(qkv::Field{"count", "how many"}, s.count);
  visit(qkv::Field{"rate", "how fast"}, s.rate);
  visit(qkv::Field{"name", "what", "--called"}, s.name);
  visit(qkv::Field{"tags", "labels"}, s.tags);
  visit(qkv::Field{"seed", "", ""}, s.seed);
}

}  // namespace demo

TEST(Fields, RoundTripAndDefaults) {
  demo::Settings s;
  s.count = 7;
  s.rate = 1e-3;
  s.name = "y";
  s.tags = {"a", "b"};
  s.seed = 42;
  const auto j = qkv::fields_to_json(s);
  EXPECT_EQ(j.size(), 5u);
  EXPECT_EQ(j.at("tags"), nlohmann::json({"a", "b"}));
  const auto back = qkv::fields_from_json<demo::Settings>(j, "settings");
  EXPECT_EQ(back.count, 7);
  EXPECT_EQ(back.rate, 1e-3);
  EXPECT_EQ(back.name, "y");
  EXPECT_EQ(back.tags, s.tags);
  EXPECT_EQ(back.seed, 42u);
  const auto partial = qkv::fields_from_json<demo::Settings>({{"rate", 2.0}}, "settings");
  EXPECT_EQ(partial.count, 3);  // missing: the default
  EXPECT_EQ(partial.rate, 2.0);
}

TEST(Fields, WrongTypeNamesTheKey) {
  const auto message = qkv::testing::data_error_of(
      [] { qkv::fields_from_json<demo::Settings>({{"count", "many"}}, "the run's settings"); });
  EXPECT_NE(message.find("the run's settings"), std::string::npos) << message;
  EXPECT_NE(message.find("'count'"), std::string::npos) << message;
  EXPECT_NE(qkv::testing::data_error_of([] { qkv::fields_from_json<demo::Settings>(nlohmann::json::array(), "s"); })
                .find("JSON object"),
            std::string::npos);
}

TEST(Fields, FlagsFollowKeysUnlessNamed) {
  EXPECT_EQ(qkv::option_flag({"points_per_shape", ""}), "--points-per-shape");
  EXPECT_EQ(qkv::option_flag({"source", "", "--data"}), "--data");
}
