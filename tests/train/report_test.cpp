#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <regex>
#include <sstream>
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

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

nlohmann::json five_epochs() {
  nlohmann::json history = nlohmann::json::array();
  for (int e = 1; e <= 5; ++e)
    history.push_back(
        {{"epoch", e}, {"train_loss", 1.0 / e}, {"val_loss", 1.2 / e}, {"val_accuracy", 0.5 + e * 0.05}, {"lr", 0.01}});
  return history;
}

TEST(Report, WellFormedSelfContainedWithCurvesAndSummary) {
  nlohmann::json summary = {{"test", {{"accuracy", 0.93}}}, {"note", "a <b> & \"c\""}};
  const auto html = qkv::train::render_report_html("run <1>", five_epochs(), summary, {{"seed", 3}});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/"));  // only namespace URIs
  EXPECT_NE(html.find("run &lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  // The results table: a row per split, a column per metric.
  EXPECT_NE(html.find("<th>test</th><td class=\"n\">0.9300</td>"), std::string::npos) << html;
  EXPECT_NE(html.find(">accuracy</th>"), std::string::npos);
  // train_loss and val_loss share the "loss" chart, accuracy has its own; lr
  // does not change and is listed instead.
  EXPECT_EQ(count(html, "<svg"), 2u);
  EXPECT_NE(html.find(">train_loss<"), std::string::npos);
  EXPECT_NE(html.find(">val_loss<"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  // The loss chart comes first.
  EXPECT_LT(html.find("aria-label=\"loss\""), html.find("aria-label=\"accuracy\""));
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

TEST(Report, IntegersPrintAsIntegersAndNullAsDash) {
  EXPECT_EQ(qkv::train::format_cell(4), "4");
  EXPECT_EQ(qkv::train::format_cell(213807), "213,807");
  EXPECT_EQ(qkv::train::format_cell(-1234567), "-1,234,567");
  EXPECT_EQ(qkv::train::format_cell(nullptr), "-");
  EXPECT_EQ(qkv::train::format_cell(4.0), "4");
  EXPECT_EQ(qkv::train::format_cell(0.39705882352941174), "0.3971");
  EXPECT_EQ(qkv::train::format_cell(2.0964), "2.096");
  EXPECT_EQ(qkv::train::format_cell(5e-05), "5e-05");
  EXPECT_EQ(qkv::train::format_cell(nlohmann::json::array({4, 8, 8})), "4, 8, 8");
  EXPECT_EQ(qkv::train::format_number(NAN), "-");

  const nlohmann::json summary = {{"epochs", 4},
                                  {"selected_epoch", 3},
                                  {"parameters", 213807},
                                  {"world_size", nullptr},
                                  {"test", {{"accuracy", 0.75}, {"n", 4}, {"auroc", nullptr}, {"loss", 0.5}}}};
  const auto html = qkv::train::render_report_html("ints", five_epochs(), summary, {});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_EQ(html.find(">4.0"), std::string::npos);
  EXPECT_EQ(html.find("null"), std::string::npos);
  EXPECT_NE(html.find("<th>epochs</th><td>4</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>parameters</th><td>213,807</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>world_size</th><td>-</td>"), std::string::npos);
  // Columns: accuracy first, the auroc, the count, loss last.
  EXPECT_NE(html.find("<tr><th>test</th><td class=\"n\">0.7500</td><td class=\"n\">-</td><td class=\"n\">4</td>"
                      "<td class=\"n\">0.5000</td></tr>"),
            std::string::npos)
      << html;
}

TEST(Report, TestRowsNameTheirRotationAsTheTerminalDoes) {
  // An i/so3 run's "test" is SO(3)-rotated; its rows read test so3, test none, test z, not test, test_none.
  const nlohmann::json summary = {{"test", {{"accuracy", 0.5}}},
                                  {"test_none", {{"accuracy", 0.9}, {"category_iou", {{"Mug", {{"miou", 0.5}}}}}}},
                                  {"test_z", {{"accuracy", 0.8}}}};
  const nlohmann::json config = {{"data", {{"protocol", "i/so3"}}}};
  const auto html = qkv::train::render_report_html("rotations", five_epochs(), summary, config);
  EXPECT_EQ(xml_problem(html), "");
  for (const char* row : {"<tr><th>test so3</th>", "<tr><th>test none</th>", "<tr><th>test z</th>",
                          "<th class=\"n\">test none</th>"})  // the per-category table's column too
    EXPECT_NE(html.find(row), std::string::npos) << row;
  EXPECT_NE(html.find("test so3 accuracy <b>0.5</b>"), std::string::npos);  // the line under the title
  EXPECT_EQ(qkv::train::split_label("test", ""), "test");                   // a run without a protocol (MHCA)
  EXPECT_EQ(qkv::train::split_label("val", "z"), "val");
  EXPECT_EQ(qkv::train::test_label_of_config({{"data", {{"protocol", "z/i"}}}}), "none");
}

TEST(Report, SelectedEpochMarkedOnEveryChart) {
  nlohmann::json history = five_epochs();
  for (auto& row : history) row["seconds"] = 1.0 + row["epoch"].get<int>() * 0.1;
  const auto html = qkv::train::render_report_html("marked", history, {{"selected_epoch", 3}}, {});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_EQ(count(html, "<svg"), 3u);  // loss, accuracy, seconds
  EXPECT_EQ(count(html, ">selected (3)</text>"), 3u);
  EXPECT_EQ(count(html, "stroke-dasharray"), 3u);
  const auto unmarked = qkv::train::render_report_html("unmarked", history, {{"epochs", 5}}, {});
  EXPECT_EQ(unmarked.find("selected ("), std::string::npos);
  EXPECT_EQ(unmarked.find("stroke-dasharray"), std::string::npos);
  // A run still training marks its best epoch so far.
  const auto running = qkv::train::render_report_html("running", history, {{"best_epoch", 2}}, {});
  EXPECT_EQ(count(running, ">best so far (2)</text>"), 3u);
}

TEST(Report, ConstantSeriesAreListedNotCharted) {
  nlohmann::json history = nlohmann::json::array();
  for (int e = 1; e <= 4; ++e)
    history.push_back(
        {{"epoch", e}, {"train_loss", 2.0 - e * 0.1}, {"val_shapes", 12}, {"lr", 0.001}, {"seconds", 0.5 + 0.01 * e}});
  const auto html = qkv::train::render_report_html("constants", history, {}, {});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_NE(html.find("Constant over the run"), std::string::npos);
  EXPECT_NE(html.find("<th>val_shapes</th><td>12</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<th>lr</th><td>0.001</td>"), std::string::npos);
  EXPECT_EQ(html.find("aria-label=\"shapes\""), std::string::npos);
  EXPECT_EQ(html.find("aria-label=\"lr\""), std::string::npos);
  // A varying bookkeeping series is still drawn, after the loss.
  ASSERT_NE(html.find("aria-label=\"seconds\""), std::string::npos);
  EXPECT_LT(html.find("aria-label=\"loss\""), html.find("aria-label=\"seconds\""));
}

TEST(Report, PerClassScoresFromTheConfusionMatrix) {
  // Rows: true class. Class a: 3 right, 1 taken for b; class b: 4 right, 2 taken for a.
  const nlohmann::json confusion = {{3, 1}, {2, 4}};
  // The page: scikit-learn's layout computed from the matrix (the numbers
  // themselves are ClassificationReport.EqualsTheHandWorkedScikitLearnNumbers'), and the matrix itself.
  const nlohmann::json summary = {
      {"test", {{"accuracy", 0.7}, {"loss", 0.6}, {"classes", {"a", "b"}}, {"confusion", confusion}}}};
  const auto html = qkv::train::render_report_html("per class", five_epochs(), summary, {});
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_NE(html.find("Confusion matrices"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>a</th><td class=\"n\">0.6000</td><td class=\"n\">0.7500</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find(">0.7273</td><td class=\"n\">6</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>accuracy</th><td class=\"n\"></td><td class=\"n\"></td><td class=\"n\">0.7000</td>"
                      "<td class=\"n\">10</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>macro avg</th><td class=\"n\">0.7000</td><td class=\"n\">0.7083</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>weighted avg</th><td class=\"n\">0.7200</td><td class=\"n\">0.7000</td>"),
            std::string::npos);
  // The matrix and the class names are not flattened into the results table.
  EXPECT_EQ(html.find(">confusion<"), std::string::npos);
  EXPECT_EQ(html.find(">classes<"), std::string::npos);

  // The entry's own per_class and averages win over the matrix.
  nlohmann::json given = summary;
  given["test"]["per_class"] = {{{"class", "a"}, {"precision", 0.125}, {"recall", 1}, {"f1", 0.5}, {"support", 4}},
                                {{"class", "b"}, {"precision", 0.25}, {"recall", 0}, {"f1", 0}, {"support", 6}}};
  given["test"]["macro_avg"] = {{"precision", 0.1875}, {"recall", 0.5}, {"f1", 0.25}, {"support", 10}};
  const auto own = qkv::train::render_report_html("given", five_epochs(), given, {});
  EXPECT_EQ(xml_problem(own), "");
  EXPECT_NE(own.find("<tr><th>a</th><td class=\"n\">0.1250</td><td class=\"n\">1.0000</td>"), std::string::npos);
  EXPECT_NE(own.find("<th>macro avg</th><td class=\"n\">0.1875</td>"), std::string::npos);
  EXPECT_EQ(own.find(">per_class<"), std::string::npos);
  EXPECT_EQ(own.find(">macro_avg"), std::string::npos);
}

TEST(Report, TicksAreNiceAndLabelled) {
  const auto small = qkv::train::nice_ticks(0, 0.000538);
  ASSERT_EQ(small.size(), 7u);  // 0, 0.0001, ..., 0.0006
  for (size_t i = 0; i < small.size(); ++i) EXPECT_NEAR(small[i], 1e-4 * static_cast<double>(i), 1e-15);
  const auto rates = qkv::train::nice_ticks(0.13, 0.97);
  ASSERT_EQ(rates.size(), 6u);  // 0, 0.2, ..., 1
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_NEAR(rates[i], 0.2 * static_cast<double>(i), 1e-15);
  const auto loss = qkv::train::nice_ticks(1.8, 2.95);
  EXPECT_NEAR(loss.front(), 1.8, 1e-12);
  EXPECT_NEAR(loss.back(), 3.0, 1e-12);
  EXPECT_EQ(loss.size(), 7u);
  // Any range: at most 7 ticks covering it, a step of 1, 2 or 5 times a power of ten.
  for (double lo : {-3.7, 0.0, 0.001, 12.0, 4096.0})
    for (double width : {1e-5, 0.3, 7.0, 950.0}) {
      const auto t = qkv::train::nice_ticks(lo, lo + width);
      ASSERT_GE(t.size(), 2u);
      EXPECT_LE(t.size(), 7u);
      EXPECT_LE(t.front(), lo);
      EXPECT_GE(t.back(), lo + width);
      const double step = t[1] - t[0];
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 || std::fabs(mantissa - 5) < 1e-6)
          << lo << " + " << width << ": step " << step;
    }

  // On the page: every tick labelled, epochs as integers.
  nlohmann::json history = nlohmann::json::array();
  for (int e = 1; e <= 15; ++e) history.push_back({{"epoch", e}, {"train_loss", 0.000538 * (e - 1) / 14}});
  const auto html = qkv::train::render_report_html("ticks", history, {}, {});
  for (const char* label :
       {">0</text>", ">0.0001</text>", ">0.0003</text>", ">0.0006</text>", ">1</text>", ">15</text>"})
    EXPECT_NE(html.find(label), std::string::npos) << label;
  EXPECT_EQ(html.find("0.000538"), std::string::npos);
  EXPECT_EQ(html.find("15.0<"), std::string::npos);
}

TEST(Report, SettingsAsKeyValueTables) {
  const nlohmann::json config = {{"seed", 3},
                                 {"init_weights", ""},
                                 {"resumes", {{{"from_epoch", 2}}}},
                                 {"train", {{"lr", 0.001}, {"optimizer", "adam"}, {"bn", {{"gamma", 1.0}}}}},
                                 {"model", {{"channels", {4, 8, 8, 8}}, {"ids", std::vector<int>(20, 7)}}}};
  const auto html = qkv::train::render_report_html("settings", five_epochs(), {}, config);
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_NE(html.find("<th>seed</th><td>3</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>lr</th><td>0.001</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>bn.gamma</th><td>1.0</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>channels</th><td>4, 8, 8, 8</td>"), std::string::npos);
  EXPECT_NE(html.find("<code>[{&quot;from_epoch&quot;:2}]</code>"), std::string::npos);
  EXPECT_NE(html.find("<summary>20 values: 7, 7, 7, &#8230;</summary>"), std::string::npos);
}

TEST(Report, OddInputsStillRender) {
  const nlohmann::json one_epoch = nlohmann::json::array({{{"epoch", 1}, {"train_loss", 0.5}, {"lr", 0.1}}});
  const nlohmann::json odd_history =
      nlohmann::json::array({{{"epoch", 1}, {"train_loss", nullptr}, {"val_category_iou", {{"Lamp", {{"miou", 0.5}}}}}},
                             {{"train_loss", 2.0}},  // no epoch
                             "not an object",
                             {{"epoch", 2}, {"train_loss", 1.0}, {"val_loss", 1e300}},
                             {{"epoch", 3}, {"train_loss", -1e-9}, {"val_loss", 1e300}},
                             {{"epoch", 4}, {"train_loss", -1.7e308}, {"val_loss", 1.7e308}}});
  const std::vector<nlohmann::json> summaries = {
      nullptr,
      nlohmann::json::array(),
      {{"interrupted", true}, {"epoch", 2}, {"step_in_epoch", 7}},
      {{"epochs_done", 2}, {"best_epoch", 1}},
      {{"selected_epoch", 99}, {"test", {{"accuracy", 1}, {"confusion", {{1, 0}, {0}}}, {"classes", {"x"}}}}},
      {{"test", {{"accuracy", 0.5}, {"per_class", {{{"class", 3}, {"precision", nullptr}}}}}}},
      {{"val", {{"miou", 0.5}, {"category_iou", {{"Lamp", 0.3}}}}}},
      {{"big", 18446744073709551615ULL}, {"neg", -9223372036854775807LL - 1}, {"nested", {{"a", {1, 2}}}}}};
  for (const auto& history : {nlohmann::json::array(), one_epoch, odd_history})
    for (const auto& summary : summaries) {
      const auto html = qkv::train::render_report_html("odd", history, summary, nullptr);
      EXPECT_EQ(xml_problem(html), "") << summary.dump() << " " << history.dump();
    }
  const auto single = qkv::train::render_report_html("one", one_epoch, {}, {});
  EXPECT_EQ(single.find("<svg"), std::string::npos);  // nothing to draw a line through
  EXPECT_NE(single.find("Values of the only epoch"), std::string::npos);
  EXPECT_NE(single.find("<th>train_loss</th><td>0.5</td>"), std::string::npos);
  const auto interrupted = qkv::train::render_report_html("stopped", one_epoch, summaries[2], {});
  EXPECT_NE(interrupted.find("<b>interrupted</b> in epoch 2"), std::string::npos);
}

// The pixel envelope against a plain reference: the points it keeps are some
// of the input's, in their order; each pixel column keeps its first and last
// point and its lowest and highest value, at most four points.
TEST(Report, PixelEnvelopeKeepsEachColumnsEndsAndExtremes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> value(-1, 1);
  for (const double per_column : {0.5, 1.0, 3.0, 37.0}) {
    std::vector<std::pair<double, double>> points;
    for (int i = 0; i < 4000; ++i)
      points.emplace_back(10.0 + i / per_column, i % 7 == 0 ? std::round(value(rng)) : value(rng));  // ties too
    const auto kept = qkv::train::pixel_envelope(points);
    std::map<double, std::vector<size_t>> column_of;  // input indices by pixel column
    for (size_t i = 0; i < points.size(); ++i) column_of[std::floor(points[i].first)].push_back(i);
    std::map<double, std::vector<std::pair<double, double>>> kept_in;
    size_t at = 0;
    for (const auto& p : kept) {
      while (at < points.size() && points[at] != p) ++at;
      ASSERT_LT(at, points.size()) << "a kept point is not one of the input's, in order";
      kept_in[std::floor(p.first)].push_back(p);
      ++at;
    }
    ASSERT_EQ(kept_in.size(), column_of.size()) << per_column;
    for (const auto& [column, indices] : column_of) {
      const auto& mine = kept_in[column];
      EXPECT_LE(mine.size(), 4u);
      EXPECT_LE(mine.size(), indices.size());
      EXPECT_EQ(mine.front(), points[indices.front()]);
      EXPECT_EQ(mine.back(), points[indices.back()]);
      double low = 1e9, high = -1e9, kept_low = 1e9, kept_high = -1e9;
      for (const size_t i : indices) low = std::min(low, points[i].second), high = std::max(high, points[i].second);
      for (const auto& p : mine) kept_low = std::min(kept_low, p.second), kept_high = std::max(kept_high, p.second);
      EXPECT_EQ(kept_low, low);
      EXPECT_EQ(kept_high, high);
    }
    if (per_column <= 1.0) {
      EXPECT_EQ(kept, points);  // a point a column or fewer: all kept
    }
  }
}

// A run of 100,000 epochs charts in about as many points as the chart is
// wide, and its one spike is still drawn where a three-point series with the
// same axes draws it.
TEST(Report, LongRunsChartInBoundedSizeAndKeepTheirSpikes) {
  qkv::train::Series long_series{"train_loss", {}, 0.0}, short_series{"train_loss", {}, 0.0};
  for (int e = 1; e <= 100000; ++e)
    long_series.points.emplace_back(e, e == 50000 ? 5.0 : e == 1 ? 0.0 : e == 2 ? 1.0 : 0.5 + 0.4 * std::sin(e * 0.01));
  short_series.points = {{1, 0.0}, {50000, 5.0}, {100000, 1.0}};
  const auto polyline_points = [](const std::string& svg) {
    const auto begin = svg.find("points=\"") + 8;
    std::vector<std::string> points;
    std::istringstream in(svg.substr(begin, svg.find('"', begin) - begin));
    for (std::string p; in >> p;) points.push_back(p);
    return points;
  };
  const auto chart = [](const qkv::train::Series& s) {
    return qkv::train::svg_chart("loss", {s}, 1, 100000, {}, qkv::train::kMainChart);
  };
  const auto long_chart = chart(long_series);
  const auto drawn = polyline_points(long_chart);
  EXPECT_LE(drawn.size(), 4 * static_cast<size_t>(qkv::train::kMainChart.width));
  EXPECT_GT(drawn.size(), 100u);
  const auto spike = polyline_points(chart(short_series)).at(1);
  EXPECT_NE(std::find(drawn.begin(), drawn.end(), spike), drawn.end()) << spike;
  EXPECT_LT(long_chart.size(), 64u * 1024);
}
