#include <gtest/gtest.h>

#include <regex>
#include <vector>

#include "qkv/train/report.h"

namespace {

// A small XML well-formedness check: every tag closes in order, attributes are
// quoted, entities are known. Enough to catch a broken report.
std::string xml_problem(const std::string& doc) {
  std::vector<std::string> stack;
  size_t i = 0;
  if (doc.rfind("<!DOCTYPE html>", 0) == 0) i = doc.find('>') + 1;
  while (i < doc.size()) {
    if (doc[i] == '&') {
      static const std::regex entity("^&(amp|lt|gt|quot|#[0-9]+);");
      if (!std::regex_search(doc.begin() + static_cast<long>(i), doc.end(), entity))
        return "bad entity at " + std::to_string(i);
      ++i;
      continue;
    }
    if (doc[i] != '<') {
      if (doc[i] == '>') return "stray > at " + std::to_string(i);
      ++i;
      continue;
    }
    const size_t end = doc.find('>', i);
    if (end == std::string::npos) return "unclosed tag at " + std::to_string(i);
    std::string tag = doc.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "< inside tag at " + std::to_string(i);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    static const std::regex attrs("^[a-zA-Z0-9:-]+(\\s+[a-zA-Z][a-zA-Z0-9:-]*=\"[^\"<]*\")*\\s*/?$");
    if (!std::regex_match(tag, attrs)) return "malformed tag <" + tag + ">";
    if (!self_closing) stack.push_back(name);
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

}  // namespace

TEST(Report, WellFormedSelfContainedWithCurvesAndSummary) {
  nlohmann::json history = nlohmann::json::array();
  for (int e = 1; e <= 5; ++e)
    history.push_back({{"epoch", e}, {"train_loss", 1.0 / e}, {"val_loss", 1.2 / e}, {"val_accuracy", 0.5 + e * 0.05},
                       {"lr", 0.01}});
  nlohmann::json summary = {{"test", {{"accuracy", 0.93}}}, {"note", "a <b> & \"c\""}};
  const auto html = qkv::train::render_report_html("run <1>", history, summary, {{"seed", 3}});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/"));  // only namespace URIs
  EXPECT_NE(html.find("run &lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(html.find("test.accuracy"), std::string::npos);
  // train_loss and val_loss share the "loss" chart; accuracy and lr get their own.
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);
  EXPECT_NE(html.find(">train_loss<"), std::string::npos);
  EXPECT_NE(html.find(">val_loss<"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
}

TEST(Report, CheckerCatchesBrokenMarkup) {
  EXPECT_NE(xml_problem("<html><body></html>"), "");
  EXPECT_NE(xml_problem("<p a=b></p>"), "");
  EXPECT_NE(xml_problem("<p>&nbsp;</p>"), "");
  EXPECT_EQ(xml_problem("<p a=\"b\"><br/></p>"), "");
}

TEST(Report, EmptyHistoryStillRenders) {
  const auto html = qkv::train::render_report_html("empty", nlohmann::json::array(), {}, {});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_NE(html.find("No completed epoch"), std::string::npos);
}
