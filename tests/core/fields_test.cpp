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
  visit(qkv::Field{"count", "how many"}.at_least(1), s.count);
  visit(qkv::Field{"rate", "how fast"}.range(0, 1), s.rate);
  visit(qkv::Field{"name", "what", "called"}, s.name);
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
  const auto partial = qkv::fields_from_json<demo::Settings>({{"rate", 0.25}}, "settings");
  EXPECT_EQ(partial.count, 3);  // missing: the default
  EXPECT_EQ(partial.rate, 0.25);
}

TEST(Fields, WrongTypeNamesTheKey) {
  const auto message = qkv::testing::data_error_of([] {
    qkv::fields_from_json<demo::Settings>({{"count", "many"}}, "the run's settings");
  });
  EXPECT_NE(message.find("the run's settings"), std::string::npos) << message;
  EXPECT_NE(message.find("'count'"), std::string::npos) << message;
  EXPECT_NE(qkv::testing::data_error_of([] {
              qkv::fields_from_json<demo::Settings>(nlohmann::json::array(), "s");
            }).find("JSON object"),
            std::string::npos);
}

TEST(Fields, FlagsFollowKeysUnlessNamed) {
  EXPECT_EQ(qkv::option_name({"points_per_shape", ""}), "points-per-shape");
  EXPECT_EQ(qkv::option_name({"source", "", "data"}), "data");
}

TEST(Fields, RangesAreCheckedWhenReadBack) {
  // A config.json edited by hand (or corrupted) cannot smuggle in a value the
  // option would refuse.
  const auto message = [](const nlohmann::json& j) {
    return qkv::testing::data_error_of([&] { qkv::fields_from_json<demo::Settings>(j, "settings.json"); });
  };
  EXPECT_NE(message({{"count", 0}}).find("settings.json: 'count' must be at least 1 (0)"), std::string::npos)
      << message({{"count", 0}});
  EXPECT_NE(message({{"rate", 1.5}}).find("'rate' must be in [0, 1]"), std::string::npos) << message({{"rate", 1.5}});
  EXPECT_EQ(message({{"count", 1}, {"rate", 1.0}}), "(no DataError)");
}

TEST(Fields, RangeProblemsNameTheBound) {
  const auto f = qkv::Field{"k", "h"}.range(0.5, 2);
  EXPECT_EQ(qkv::field_range_problem(f, 1.0), "");
  EXPECT_EQ(qkv::field_range_problem(f, 0.25), "must be in [0.5, 2]");
  EXPECT_EQ(qkv::field_range_problem(f, std::nan("")), "must be a finite number");
  EXPECT_EQ(qkv::field_range_problem(qkv::Field{"k", "h"}, INFINITY), "must be a finite number");
  EXPECT_EQ(qkv::field_range_problem(qkv::Field{"k", "h"}, -1e300), "");  // no range: any finite value
  EXPECT_FALSE((qkv::Field{"k", "h"}.has_range()));
  EXPECT_TRUE((qkv::Field{"k", "h"}.at_least(1).has_range()));
}

TEST(Fields, OpenBoundsAreNotReached) {
  const auto rate = qkv::Field{"k", "h"}.range(0, 1).above(0);  // (0, 1]
  EXPECT_EQ(qkv::field_range_problem(rate, 0.0), "must be in (0, 1]");
  EXPECT_EQ(qkv::field_range_problem(rate, 1e-300), "");
  EXPECT_EQ(qkv::field_range_problem(rate, 1.0), "");
  const auto share = qkv::Field{"k", "h"}.at_least(0).below(1);  // [0, 1)
  EXPECT_EQ(qkv::field_range_problem(share, 0.0), "");
  EXPECT_EQ(qkv::field_range_problem(share, 1.0), "must be in [0, 1)");
  EXPECT_EQ(qkv::field_range_problem(share, std::nextafter(1.0, 0.0)), "");
  EXPECT_EQ(qkv::field_range_problem(qkv::Field{"k", "h"}.above(0), 0.0), "must be greater than 0");
  EXPECT_EQ(qkv::field_range_problem(qkv::Field{"k", "h"}.below(2), 2.0), "must be less than 2");
  EXPECT_EQ(qkv::field_range_text(rate), "(0, 1]");
  EXPECT_EQ(qkv::field_range_text(share), "[0, 1)");
  EXPECT_EQ(qkv::field_range_text(qkv::Field{"k", "h"}.above(0)), "> 0");
  EXPECT_EQ(qkv::field_range_text(qkv::Field{"k", "h"}.at_least(1)), ">= 1");
  EXPECT_EQ(qkv::field_range_text(qkv::Field{"k", "h"}), "");
}

TEST(Fields, RangesAreCheckedOnAStructFilledInCode) {
  demo::Settings s;
  EXPECT_NO_THROW(qkv::check_field_ranges(s));
  s.rate = 1.5;
  try {
    qkv::check_field_ranges(s);
    FAIL() << "rate 1.5 accepted";
  } catch (const qkv::ConfigError& e) {
    EXPECT_EQ(e.key, "rate");
    EXPECT_EQ(std::string(e.what()), "rate must be in [0, 1], got 1.5");
  }
  s.rate = std::nan("");
  EXPECT_THROW(qkv::check_field_ranges(s), qkv::ConfigError);
}

// The library names settings by key, other settings in a problem as {key};
// each front end names them its own way (the CLI by flag).
TEST(ConfigErrors, KeysAreNamedByTheFrontEnd) {
  const qkv::ConfigError e("no_cache", ": {load_cache} and {cache_dtype} need the KV cache");
  EXPECT_EQ(std::string(e.what()), "no_cache: load_cache and cache_dtype need the KV cache");
  auto flag = [](std::string key) {
    for (auto& c : key)
      if (c == '_') c = '-';
    return "--" + key;
  };
  EXPECT_EQ(qkv::setting_message(e.key, e.problem, flag),
            "--no-cache: --load-cache and --cache-dtype need the KV cache");
  EXPECT_EQ(qkv::setting_message("max_new", "must be >= 0", flag), "--max-new must be >= 0");
  // Braces that are not a key (JSON, paths, empty) are left as they are.
  const std::string text = "{\"a\": 1} {Bad} {x-y} {} {open";
  EXPECT_EQ(qkv::name_keys(text, flag), text);
}

namespace demo {
struct Mode {
  std::string scale = "absolute";
};
template <typename V>
void visit_fields(Mode& m, V&& visit) {
  visit(qkv::Field{"scale", "colour scale"}.one_of("absolute|row"), m.scale);
}
}  // namespace demo

// A text field with choices refuses other words by key, in code and in config.json alike.
TEST(Fields, ChoicesAreCheckedLikeRanges) {
  EXPECT_EQ(qkv::field_choices(qkv::Field{"k", "h"}.one_of("a|bc|d")), (std::vector<std::string>{"a", "bc", "d"}));
  EXPECT_TRUE(qkv::field_choices(qkv::Field{"k", "h"}).empty());
  demo::Mode m;
  EXPECT_NO_THROW(qkv::check_field_ranges(m));
  m.scale = "Row";
  try {
    qkv::check_field_ranges(m);
    FAIL() << "scale Row accepted";
  } catch (const qkv::ConfigError& e) {
    EXPECT_EQ(e.key, "scale");
    EXPECT_EQ(std::string(e.what()), "scale must be one of absolute, row, got 'Row'");
  }
  const auto message = qkv::testing::data_error_of([] {
    qkv::fields_from_json<demo::Mode>({{"scale", "log"}}, "config.json");
  });
  EXPECT_EQ(message, "config.json: 'scale' must be one of absolute, row, got 'log'");
  EXPECT_EQ(qkv::fields_from_json<demo::Mode>({{"scale", "row"}}, "config.json").scale, "row");
}

// A setting given as text, as a recipe gives it: parsed by the field's type
// and checked like config.json's values; unknown keys are not set.
TEST(Fields, SetFromTextParsesByTypeAndChecks) {
  demo::Settings s;
  EXPECT_TRUE(qkv::set_field_from_text(s, "count", "7", "recipe r"));
  EXPECT_TRUE(qkv::set_field_from_text(s, "rate", "0.25", "recipe r"));
  EXPECT_TRUE(qkv::set_field_from_text(s, "name", "plain words", "recipe r"));
  EXPECT_TRUE(qkv::set_field_from_text(s, "tags", "a,b", "recipe r"));
  EXPECT_EQ(s.count, 7);
  EXPECT_DOUBLE_EQ(s.rate, 0.25);
  EXPECT_EQ(s.name, "plain words");
  EXPECT_EQ(s.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(qkv::set_field_from_text(s, "speed", "1", "recipe r"));
  EXPECT_EQ(qkv::testing::data_error_of([&] { qkv::set_field_from_text(s, "rate", "2", "recipe r"); }),
            "recipe r: 'rate' must be in [0, 1] (2)");
  EXPECT_NE(qkv::testing::data_error_of([&] {
              qkv::set_field_from_text(s, "count", "many", "recipe r");
            }).find("recipe r: 'count'"),
            std::string::npos);
  demo::Mode m;
  EXPECT_NE(qkv::testing::data_error_of([&] {
              qkv::set_field_from_text(m, "scale", "log", "recipe r");
            }).find("must be one of absolute, row"),
            std::string::npos);
}
