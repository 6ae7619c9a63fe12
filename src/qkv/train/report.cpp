#include "qkv/train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/json_file.h"

namespace qkv::train {
namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string number(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string chart_family(const std::string& key) {
  for (const char* prefix : {"train_", "val_", "test_"}) {
    const std::string p(prefix);
    if (key.rfind(p, 0) == 0) return key.substr(p.size());
  }
  return key;
}

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (epoch, value)
};

std::string svg_chart(const std::string& title, const std::vector<Series>& series) {
  constexpr double W = 560, H = 240, L = 60, R = 130, T = 28, B = 36;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) {
    y1 = y0 + (y0 == 0 ? 1 : std::fabs(y0) * 0.1);
  }
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << ' ' << H << "\" role=\"img\" aria-label=\"" << escape_html(title) << "\">\n";
  o << "<text x=\"" << L << "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" << escape_html(title) << "</text>\n";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double y = y0 + (y1 - y0) * i / 4.0;
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
      << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << L - 4 << "\" y=\"" << py(y) + 4 << "\" font-size=\"10\" text-anchor=\"end\">" << number(y)
      << "</text>\n";
  }
  o << "<text x=\"" << L << "\" y=\"" << H - B + 14 << "\" font-size=\"10\">" << number(x0) << "</text>\n";
  o << "<text x=\"" << W - R << "\" y=\"" << H - B + 14 << "\" font-size=\"10\" text-anchor=\"end\">" << number(x1)
    << "</text>\n";
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 6 << "\" font-size=\"11\" text-anchor=\"middle\">epoch</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    const auto& s = series[i];
    if (s.points.size() == 1) {
      o << "<circle cx=\"" << px(s.points[0].first) << "\" cy=\"" << py(s.points[0].second) << "\" r=\"3\" fill=\""
        << color << "\"/>\n";
    } else {
      o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
      for (auto [x, y] : s.points) o << px(x) << ',' << py(y) << ' ';
      o << "\"/>\n";
    }
    const double ly = T + 14 + 16 * static_cast<double>(i);
    o << "<line x1=\"" << W - R + 10 << "\" x2=\"" << W - R + 28 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
      << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << W - R + 32 << "\" y=\"" << ly << "\" font-size=\"11\">" << escape_html(s.name)
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void flatten(const nlohmann::json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& rows) {
  if (j.is_null() && prefix.empty()) return;
  if (j.is_object()) {
    for (const auto& item : j.items()) {
      // Confusion matrices get a section of their own.
      if (j.contains("confusion") && (item.key() == "confusion" || item.key() == "classes")) continue;
      // So do per-category part IoUs.
      if (item.key() == "category_iou" && item.value().is_object()) continue;
      flatten(item.value(), prefix.empty() ? item.key() : prefix + "." + item.key(), rows);
    }
  } else if (j.is_number_float()) {
    rows.emplace_back(prefix, number(j.get<double>()));
  } else if (j.is_string()) {
    rows.emplace_back(prefix, j.get<std::string>());
  } else {
    rows.emplace_back(prefix, json_text(j, -1));
  }
}

std::string table(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::string>> rows;
  flatten(j, "", rows);
  std::ostringstream o;
  o << "<table>\n";
  for (const auto& [k, v] : rows) o << "<tr><th>" << escape_html(k) << "</th><td>" << escape_html(v) << "</td></tr>\n";
  o << "</table>\n";
  return o.str();
}

// Rows: true class, columns: predicted; cell shade by the row's share.
std::string confusion_table(const std::string& name, const nlohmann::json& result) {
  const auto& m = result.at("confusion");
  const auto& classes = result.at("classes");
  std::ostringstream o;
  o << "<h3>" << escape_html(name) << " (rows: true class, columns: predicted)</h3>\n<table>\n<tr><th/>";
  for (size_t j = 0; j < m.size(); ++j)
    o << "<th>" << escape_html(j < classes.size() ? classes[j].get<std::string>() : std::to_string(j)) << "</th>";
  o << "</tr>\n";
  for (size_t i = 0; i < m.size(); ++i) {
    double row_total = 0;
    for (const auto& v : m[i]) row_total += v.get<double>();
    o << "<tr><th>" << escape_html(i < classes.size() ? classes[i].get<std::string>() : std::to_string(i)) << "</th>";
    for (size_t j = 0; j < m[i].size(); ++j) {
      const double share = row_total > 0 ? m[i][j].get<double>() / row_total : 0.0;
      const int light = static_cast<int>(255 - 155 * share);
      o << "<td style=\"background:rgb(" << light << "," << light << ",255)\">" << m[i][j].get<int64_t>() << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

// Part segmentation: one row per category, one column per evaluated split
// (val, test, test_so3, ...), each cell the category's mean shape mIoU.
std::string category_iou_table(const nlohmann::json& summary) {
  std::vector<std::string> columns, rows;
  for (const auto& item : summary.items()) {
    if (!item.value().is_object() || !item.value().contains("category_iou")) continue;
    columns.push_back(item.key());
    for (const auto& c : item.value().at("category_iou").items())
      if (std::find(rows.begin(), rows.end(), c.key()) == rows.end()) rows.push_back(c.key());
  }
  if (columns.empty()) return "";
  std::ostringstream o;
  o << "<h2>Per-category mIoU</h2>\n<table>\n<tr><th>category</th>";
  for (const auto& c : columns) o << "<th>" << escape_html(c) << "</th>";
  o << "</tr>\n";
  for (const auto& r : rows) {
    o << "<tr><th>" << escape_html(r) << "</th>";
    for (const auto& c : columns) {
      const auto& t = summary.at(c).at("category_iou");
      o << "<td>" << (t.contains(r) ? number(t.at(r).at("miou").get<double>()) + " (" +
                                          std::to_string(t.at(r).at("shapes").get<int64_t>()) + ")"
                                    : std::string("-"))
        << "</td>";
    }
    o << "</tr>\n";
  }
  for (const char* key : {"instance_miou", "class_miou"}) {
    o << "<tr><th>" << key << "</th>";
    for (const auto& c : columns)
      o << "<td>" << (summary.at(c).contains(key) ? number(summary.at(c).at(key).get<double>()) : std::string("-"))
        << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n<p>Cells: mean mIoU of the category's shapes (number of shapes).</p>\n";
  return o.str();
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_report_html(const std::string& title, const nlohmann::json& history, const nlohmann::json& summary,
                               const nlohmann::json& config) {
  // family -> series name -> points, in first-seen order of families
  std::vector<std::string> families;
  std::map<std::string, std::map<std::string, Series>> charts;
  for (const auto& row : history) {
    if (!row.is_object() || !row.contains("epoch")) continue;
    const double epoch = row.at("epoch").get<double>();
    for (const auto& item : row.items()) {
      if (item.key() == "epoch" || !item.value().is_number()) continue;
      const double v = item.value().get<double>();
      if (!std::isfinite(v)) continue;
      const std::string family = chart_family(item.key());
      if (!charts.count(family)) families.push_back(family);
      auto& s = charts[family][item.key()];
      s.name = item.key();
      s.points.emplace_back(epoch, v);
    }
  }
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
    << "<title>" << escape_html(title) << "</title>\n"
    << "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin-bottom:2em}"
       "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px}th{background:#f4f4f4}"
       "svg{margin:0 1em 1em 0}</style>\n</head>\n<body>\n";
  o << "<h1>" << escape_html(title) << "</h1>\n<h2>Summary</h2>\n" << table(summary);
  bool any_confusion = false;
  for (const auto& item : summary.items())
    if (item.value().is_object() && item.value().contains("confusion") && item.value().contains("classes")) {
      if (!any_confusion) o << "<h2>Confusion matrices</h2>\n";
      any_confusion = true;
      o << confusion_table(item.key(), item.value());
    }
  o << category_iou_table(summary);
  o << "<h2>Curves</h2>\n";
  if (families.empty()) o << "<p>No completed epoch yet.</p>\n";
  for (const auto& family : families) {
    std::vector<Series> series;
    for (auto& [name, s] : charts[family]) series.push_back(s);
    o << svg_chart(family, series);
  }
  o << "<h2>Configuration</h2>\n" << table(config) << "</body>\n</html>\n";
  return o.str();
}

void write_report_html(const std::string& path, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& summary, const nlohmann::json& config) {
  write_file_atomic(path, render_report_html(title, history, summary, config));
}

}  // namespace qkv::train
