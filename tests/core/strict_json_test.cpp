// json_value_as: a JSON value becomes a setting's C++ type only when it holds
// one exactly; what it holds instead is said, and the target is left as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qkv/core/strict_json.h"

namespace {

template <typename T>
std::string why_not(const char* text, T& out) {
  return qkv::json_value_as(nlohmann::json::parse(text), out);
}

}  // namespace

TEST(StrictJson, IntegersOnlyWhenWholeAndInRange) {
  int64_t i = 7;
  EXPECT_EQ(why_not("8", i), "");
  EXPECT_EQ(i, 8);
  EXPECT_EQ(why_not("8.0", i), "");  // a whole number written as a float
  EXPECT_EQ(why_not("9223372036854775807", i), "");
  EXPECT_EQ(i, INT64_MAX);
  EXPECT_EQ(why_not("-9223372036854775808", i), "");
  EXPECT_EQ(i, INT64_MIN);
  for (const char* bad : {"8.5", "1e300", "9223372036854775808", "9.223372036854775807e18", "-1e19", "true", "\"8\""}) {
    i = 7;
    EXPECT_NE(why_not(bad, i), "") << bad;
    EXPECT_EQ(i, 7) << bad;  // unchanged
  }
  EXPECT_EQ(why_not("8.5", i), "not a whole number from -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(why_not("\"8\"", i), "not a number");

  uint64_t u = 0;
  EXPECT_EQ(why_not("18446744073709551615", u), "");
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_EQ(why_not("5.0", u), "");
  EXPECT_EQ(u, 5u);
  EXPECT_NE(why_not("-1", u), "");
  EXPECT_NE(why_not("1.8446744073709552e19", u), "");  // 2^64

  int small = 0;
  EXPECT_EQ(why_not("2147483647", small), "");
  EXPECT_NE(why_not("2147483648", small), "");
  EXPECT_NE(why_not("2147483648.0", small), "");
}

TEST(StrictJson, OtherTypesAndLists) {
  bool b = false;
  EXPECT_EQ(why_not("true", b), "");
  EXPECT_TRUE(b);
  EXPECT_EQ(why_not("1", b), "not true or false");
  double d = 0;
  EXPECT_EQ(why_not("3", d), "");
  EXPECT_EQ(d, 3.0);
  EXPECT_EQ(why_not("\"x\"", d), "not a number");
  std::string s = "kept";
  EXPECT_EQ(why_not("5", s), "not a string");
  EXPECT_EQ(s, "kept");
  std::vector<int64_t> list = {1};
  EXPECT_EQ(why_not("[8, 2.5]", list), "item 1 is not a whole number from -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(list, std::vector<int64_t>{1});
  EXPECT_EQ(why_not("[8, 2]", list), "");
  EXPECT_EQ(list, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(why_not("8", list), "not a list");
}
