#include "qkv/train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"
#include "qkv/train/metrics.h"
#include "qkv/train/result_warnings.h"

namespace qkv::train {
namespace {

// Summary entries that get a section of their own instead of columns of the
// results table.
const char* const kOwnSection[] = {"confusion", "classes", "per_class", "macro_avg", "weighted_avg", "category_iou"};

// Metrics a reader looks for first, in this order; other columns follow in
// the order they were first seen, then counts, then losses.
const char* const kLeadingMetrics[] = {
    "accuracy",   "balanced_accuracy", "instance_miou", "class_miou", "miou",   "exact_match", "auroc",
    "auroc_hard", "sensitivity",       "specificity",   "precision",  "recall", "f1"};

// History keys that record how the run went rather than how well it learns:
// drawn small, after the loss and metric charts.
const char* const kBookkeeping[] = {"lr",     "learning_rate", "seconds",   "shapes",   "samples",
                                    "tokens", "steps",         "batches",   "momentum", "bn_momentum",
                                    "memory", "rss",           "throughput"};

// Series colours by split, the same on every chart: train blue, val orange,
// test green; unprefixed series and further test variants take the rest.
const char* const kPalette[] = {"#2f6fdf", "#e8710a", "#1e8e3e", "#8e44ad", "#c0392b", "#00838f", "#6d4c41"};

constexpr double kCharWidth = 0.62;  // a generous average glyph width, in font sizes, for laying out SVG text

bool own_section(const std::string& key) {
  for (const char* k : kOwnSection)
    if (key == k) return true;
  return false;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string printf_double(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// SVG coordinates: one decimal is finer than a pixel.
std::string coord(double v) { return fixed(v, 1); }

// "9.21 s", "12 min 5 s", "3 h 12 min" for tables (progress.h's format_duration
// is the clock form, "1:05", for live progress lines).
std::string readable_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 60) return format_number(seconds) + " s";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 3600) return std::to_string(total / 60) + " min " + std::to_string(total % 60) + " s";
  return std::to_string(total / 3600) + " h " + std::to_string(total / 60 % 60) + " min";
}

std::string json_scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return json_text(v, -1);
}

bool all_scalars(const nlohmann::json& array) {
  return std::all_of(array.begin(), array.end(), [](const nlohmann::json& v) { return v.is_primitive(); });
}

double as_double(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; }

// A table cell: <td class="n"> for numbers (right-aligned, tabular digits).
std::string cell(const std::string& html, bool numeric, const std::string& attributes = "") {
  return std::string("<td") + (numeric ? " class=\"n\"" : "") + attributes + ">" + html + "</td>";
}

// ---------------------------------------------------------------------------
// Axes

struct Step {
  double value = 1;  // mantissa x 10^exponent
  int mantissa = 1, exponent = 0;
};

// k times the step, computed from the integer mantissa so that 3 x 0.0001 is
// the double nearest 0.0003, not 0.00030000000000000003.
double step_multiple(const Step& s, int64_t k) {
  const double m = static_cast<double>(k) * s.mantissa;
  return s.exponent >= 0 ? m * std::pow(10.0, s.exponent) : m / std::pow(10.0, -s.exponent);
}

constexpr double kTickSlack = 1e-9;  // a bound within this many steps of a multiple counts as on it

// The smallest 1-2-5 step whose multiples cover [lo, hi] (finite, lo < hi)
// with at most max_ticks of them; with integer_only, a step of at least 1.
Step nice_step(double lo, double hi, int max_ticks, bool integer_only) {
  max_ticks = std::max(max_ticks, 2);
  const double span = std::min(hi - lo, 1e300);  // past +-1e300 the difference overflows
  int e = static_cast<int>(std::floor(std::log10(span / (max_ticks - 1)))) - 1;
  if (integer_only) e = std::max(e, 0);
  for (; e < 308; ++e)
    for (int m : {1, 2, 5}) {
      Step s{0, m, e};
      s.value = step_multiple(s, 1);
      const double first = std::floor(lo / s.value + kTickSlack), last = std::ceil(hi / s.value - kTickSlack);
      if (last - first + 1 <= max_ticks) return s;
    }
  return {1e308, 1, 308};
}

struct Axis {
  std::vector<double> ticks;
  Step step;
};

// nice_ticks and their step. Near the ends of the double range a multiple
// that would overflow is replaced by the data's bound.
Axis nice_axis(double lo, double hi, int max_ticks) {
  constexpr double kMax = std::numeric_limits<double>::max();
  Axis axis;
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    axis.ticks = {0, 1};
    axis.step = {1, 1, 0};
    return axis;
  }
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo = std::max(lo - d, -kMax), hi = std::min(hi + d, kMax);
  }
  axis.step = nice_step(lo, hi, max_ticks, false);
  const auto first = static_cast<int64_t>(std::floor(lo / axis.step.value + kTickSlack));
  const auto last = static_cast<int64_t>(std::ceil(hi / axis.step.value - kTickSlack));
  for (int64_t k = first; k <= last; ++k) {
    const double v = step_multiple(axis.step, k);
    axis.ticks.push_back(std::isfinite(v) ? v : k < 0 ? lo : hi);
  }
  return axis;
}

// Decimals a tick label needs at this step, or -1 for scientific notation.
int tick_decimals(const Step& s) {
  if (s.exponent >= 0) return 0;
  return -s.exponent <= 5 ? -s.exponent : -1;
}

std::string tick_label(double v, const Step& s, double largest) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1e15) return printf_double("%.3g", v);
  if (largest >= 1e4 && s.value >= 1000) {  // 120k, 2.5M
    const bool mega = largest >= 1e7 && s.value >= 1e6;
    const double unit = mega ? 1e6 : 1e3;
    Step scaled = s;
    scaled.exponent -= mega ? 6 : 3;
    return fixed(v / unit, std::max(tick_decimals(scaled), 0)) + (mega ? "M" : "k");
  }
  const int decimals = tick_decimals(s);
  return decimals < 0 ? printf_double("%.2g", v) : fixed(v, decimals);
}

// ---------------------------------------------------------------------------
// Charts

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (epoch, value)
  nlohmann::json first;                           // the first value as recorded (integer or float)
  bool constant() const {
    return std::all_of(points.begin(), points.end(), [&](const auto& p) { return p.second == points[0].second; });
  }
};

struct Marker {
  double epoch = NAN;
  std::string label;
};

struct ChartSize {
  double width, height;
  int x_ticks, y_ticks;
};
constexpr ChartSize kMainChart{1000, 320, 16, 7};
constexpr ChartSize kSmallChart{500, 230, 8, 5};

int series_rank(const std::string& name) {
  if (starts_with(name, "train_")) return 0;
  if (starts_with(name, "val_")) return 1;
  if (starts_with(name, "test_")) return 2;
  return 3;
}

std::string svg_chart(const std::string& title, const std::vector<Series>& series, double x0, double x1,
                      const Marker& marker, const ChartSize& size) {
  const double W = size.width, H = size.height, R = 16, B = 44;
  // The legend sits on the title's line, right-aligned, and wraps onto lines
  // of its own below when it does not fit there.
  const double legend_font = 12, title_font = 14;
  std::vector<std::vector<size_t>> legend_rows(1);
  std::vector<double> item_width;
  for (const auto& s : series) item_width.push_back(26 + kCharWidth * legend_font * static_cast<double>(s.name.size()));
  // A lone series named as its chart needs no legend.
  const bool legend = !(series.size() == 1 && series[0].name == title);
  if (legend) {
    double free = W - R - 16 - (16 + kCharWidth * title_font * static_cast<double>(title.size())) - 16;
    for (size_t i = 0; i < series.size(); ++i) {
      if (item_width[i] > free && !legend_rows.back().empty()) {
        legend_rows.emplace_back();
        free = W - R - 16;
      }
      legend_rows.back().push_back(i);
      free -= item_width[i] + 18;
    }
  }
  const double T = 20 + 17 * static_cast<double>(legend_rows.size() - 1) + 26;

  double y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (const auto& p : s.points) y0 = std::min(y0, p.second), y1 = std::max(y1, p.second);
  const Axis y_axis = nice_axis(y0, y1, size.y_ticks);
  const auto& y_ticks = y_axis.ticks;
  const Step y_step = y_axis.step;
  y0 = y_ticks.front(), y1 = y_ticks.back();
  const double largest = std::max(std::fabs(y0), std::fabs(y1));
  std::vector<std::string> y_labels;
  size_t widest = 1;
  for (double v : y_ticks) {
    y_labels.push_back(tick_label(v, y_step, largest));
    widest = std::max(widest, y_labels.back().size());
  }
  const double L = 34 + kCharWidth * 11 * static_cast<double>(widest);
  const double pad = 8;  // keeps the first and last points off the axes
  auto px = [&](double x) { return L + pad + (x - x0) / (x1 - x0) * (W - L - R - 2 * pad); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" role=\"img\" aria-label=\"" << escape_html(title) << "\">\n";
  o << "<text x=\"16\" y=\"20\" font-size=\"" << title_font << "\" font-weight=\"600\" fill=\"#1f2328\">"
    << escape_html(title) << "</text>\n";

  // Grid: a line at every tick of both axes, every tick labelled.
  for (size_t i = 0; i < y_ticks.size(); ++i) {
    const std::string y = coord(py(y_ticks[i]));
    o << "<line x1=\"" << coord(L) << "\" x2=\"" << coord(W - R) << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\""
      << (i == 0 ? "#8c959f" : "#e6eaef") << "\"/>\n";
    o << "<text x=\"" << coord(L - 6) << "\" y=\"" << coord(py(y_ticks[i]) + 4)
      << "\" font-size=\"11\" fill=\"#57606a\""
      << " text-anchor=\"end\">" << y_labels[i] << "</text>\n";
  }
  const Step x_step = nice_step(x0, x1, size.x_ticks, true);
  for (int64_t k = static_cast<int64_t>(std::ceil(x0 / x_step.value - kTickSlack));; ++k) {
    const double x = step_multiple(x_step, k);
    if (x > x1 + kTickSlack * x_step.value) break;
    const std::string xs = coord(px(x));
    o << "<line x1=\"" << xs << "\" x2=\"" << xs << "\" y1=\"" << coord(T) << "\" y2=\"" << coord(H - B)
      << "\" stroke=\"#f0f2f4\"/>\n";
    o << "<line x1=\"" << xs << "\" x2=\"" << xs << "\" y1=\"" << coord(H - B) << "\" y2=\"" << coord(H - B + 4)
      << "\" stroke=\"#8c959f\"/>\n";
    o << "<text x=\"" << xs << "\" y=\"" << coord(H - B + 17) << "\" font-size=\"11\" fill=\"#57606a\""
      << " text-anchor=\"middle\">" << fixed(x, 0) << "</text>\n";
  }
  o << "<text x=\"" << coord((L + W - R) / 2) << "\" y=\"" << coord(H - 6)
    << "\" font-size=\"12\" fill=\"#57606a\" text-anchor=\"middle\">epoch</text>\n";
  const std::string mid = coord((T + H - B) / 2);
  o << "<text x=\"14\" y=\"" << mid
    << "\" font-size=\"12\" fill=\"#57606a\" text-anchor=\"middle\" transform=\"rotate(-90 14 " << mid << ")\">"
    << escape_html(title) << "</text>\n";

  // The selected epoch: a dashed line, its label above the plot.
  const bool marked = std::isfinite(marker.epoch) && marker.epoch >= x0 && marker.epoch <= x1;
  if (marked) {
    const double mx = px(marker.epoch);
    o << "<line x1=\"" << coord(mx) << "\" x2=\"" << coord(mx) << "\" y1=\"" << coord(T - 4) << "\" y2=\""
      << coord(H - B) << "\" stroke=\"#57606a\" stroke-width=\"1.2\" stroke-dasharray=\"5 4\"/>\n";
    const double half = kCharWidth * 11 * static_cast<double>(marker.label.size()) / 2;
    const char* anchor = mx - half < L ? "start" : mx + half > W - R ? "end" : "middle";
    o << "<text x=\"" << coord(mx) << "\" y=\"" << coord(T - 8) << "\" font-size=\"11\" fill=\"#57606a\" text-anchor=\""
      << anchor << "\">" << escape_html(marker.label) << "</text>\n";
  }

  // Colours by split: train, val and test keep theirs on every chart.
  std::vector<const char*> colors;
  {
    constexpr size_t n = sizeof kPalette / sizeof kPalette[0];
    std::vector<bool> used(n, false);
    for (const auto& s : series) {
      size_t c = static_cast<size_t>(series_rank(s.name));
      while (c < n && used[c]) ++c;
      if (c >= n) c = colors.size() % n;
      if (c < n) used[c] = true;
      colors.push_back(kPalette[c]);
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = colors[i];
    if (s.points.size() > 1) {
      o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"";
      for (size_t j = 0; j < s.points.size(); ++j)
        o << (j ? " " : "") << coord(px(s.points[j].first)) << ',' << coord(py(s.points[j].second));
      o << "\"/>\n";
    }
    // Dots where there is room for them.
    if (s.points.size() <= 60)
      for (const auto& [x, y] : s.points)
        o << "<circle cx=\"" << coord(px(x)) << "\" cy=\"" << coord(py(y)) << "\" r=\""
          << (s.points.size() == 1 ? "3.5" : "2.5") << "\" fill=\"" << color << "\"/>\n";
    if (marked)
      for (const auto& [x, y] : s.points)
        if (x == marker.epoch)
          o << "<circle cx=\"" << coord(px(x)) << "\" cy=\"" << coord(py(y)) << "\" r=\"4.5\" fill=\"#fff\" stroke=\""
            << color << "\" stroke-width=\"2\"/>\n";
  }

  for (size_t row = 0; row < legend_rows.size(); ++row) {
    double x = W - R;
    const double y = 20 + 17 * static_cast<double>(row);
    for (auto it = legend_rows[row].rbegin(); it != legend_rows[row].rend(); ++it) {
      const size_t i = *it;
      const char* color = colors[i];
      x -= item_width[i];
      o << "<line x1=\"" << coord(x) << "\" x2=\"" << coord(x + 20) << "\" y1=\"" << coord(y - 4) << "\" y2=\""
        << coord(y - 4) << "\" stroke=\"" << color << "\" stroke-width=\"2.5\"/>\n";
      o << "<text x=\"" << coord(x + 26) << "\" y=\"" << coord(y) << "\" font-size=\"" << legend_font
        << "\" fill=\"#1f2328\">" << escape_html(series[i].name) << "</text>\n";
      x -= 18;
    }
  }
  o << "</svg>\n";
  return o.str();
}

std::string chart_family(const std::string& key) {
  for (const char* prefix : {"train_", "val_", "test_"}) {
    const std::string p(prefix);
    if (starts_with(key, p)) return key.substr(p.size());
  }
  return key;
}

bool bookkeeping(const std::string& family) {
  for (const char* k : kBookkeeping)
    if (family == k) return true;
  return ends_with(family, "_seconds") || ends_with(family, "per_second");
}

// Where a metric's column (or chart) goes: the leading metrics in their
// order, then the rest as first seen, then counts, then losses.
int metric_rank(const std::string& key, bool count) {
  const std::string base = chart_family(key);
  for (size_t i = 0; i < sizeof kLeadingMetrics / sizeof kLeadingMetrics[0]; ++i)
    if (base == kLeadingMetrics[i]) return static_cast<int>(i);
  if (base.find("loss") != std::string::npos) return 3000;
  if (base == "perplexity") return 2999;
  if (!count) return 1000;
  // Counts: the sample count, then a binary confusion in reading order.
  static const char* const counts[] = {"n", "support", "shapes", "samples", "tokens", "tp", "fp", "tn", "fn"};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i)
    if (base == counts[i]) return 2000 + static_cast<int>(i);
  return 2100;
}

// ---------------------------------------------------------------------------
// Summary

// The selection metric without its split and direction: "val_accuracy (max)" -> "accuracy".
std::string selection_metric(const nlohmann::json& summary) {
  if (!summary.is_object() || !summary.contains("selected_by") || !summary.at("selected_by").is_string()) return "";
  std::string s = summary.at("selected_by").get<std::string>();
  if (!starts_with(s, "val_")) return "";
  s = s.substr(4);
  return s.substr(0, s.find(' '));
}

// An object-valued summary entry with at least one metric in it.
bool is_split(const nlohmann::json& value) {
  if (!value.is_object()) return false;
  for (const auto& item : value.items())
    if (!own_section(item.key()) && item.value().is_number()) return true;
  return false;
}

std::vector<std::string> split_names(const nlohmann::json& summary) {
  std::vector<std::string> names;
  if (!summary.is_object()) return names;
  for (const auto& item : summary.items())
    if (is_split(item.value())) names.push_back(item.key());
  auto rank = [](const std::string& n) { return n == "val" ? 0 : n == "test" ? 1 : starts_with(n, "test_") ? 2 : 3; };
  std::stable_sort(names.begin(), names.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return names;
}

// Scalars under `prefix`, nested objects as dotted keys; the entries with a
// section of their own are left out.
void flatten_scalars(const nlohmann::json& j, const std::string& prefix,
                     std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (j.is_object()) {
    for (const auto& item : j.items()) {
      if (own_section(item.key())) continue;
      flatten_scalars(item.value(), prefix.empty() ? item.key() : prefix + "." + item.key(), out);
    }
  } else if (!prefix.empty()) {
    out.emplace_back(prefix, j);
  }
}

std::string run_value(const std::string& key, const nlohmann::json& v) {
  if (v.is_number() && (key == "seconds" || ends_with(key, "_seconds"))) return readable_duration(v.get<double>());
  return format_cell(v);
}

// The run's scalar facts: key | value, the usual ones first.
std::string run_table(const nlohmann::json& summary, const std::vector<std::string>& splits) {
  static const char* const order[] = {
      "selected_epoch", "selected_by", "best_epoch", "epochs",     "epochs_done",   "epoch",   "step_in_epoch",
      "stopped_early",  "interrupted", "world_size", "parameters", "train_seconds", "seconds", "final_train_loss"};
  std::vector<std::pair<std::string, nlohmann::json>> rows;
  for (const auto& item : summary.items()) {
    if (std::find(splits.begin(), splits.end(), item.key()) != splits.end()) continue;
    flatten_scalars(item.value(), item.key(), rows);
  }
  auto rank = [&](const std::string& key) {
    for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i)
      if (key == order[i]) return static_cast<int>(i);
    return 100;
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  if (rows.empty()) return "";
  std::ostringstream o;
  o << "<table class=\"kv\">\n<tbody>\n";
  for (const auto& [k, v] : rows)
    o << "<tr><th>" << escape_html(k) << "</th><td>" << escape_html(run_value(k, v)) << "</td></tr>\n";
  o << "</tbody>\n</table>\n";
  return o.str();
}

// One row per split, one column per metric. A column of rates (every value
// in [0, 1]) shows 4 decimals, others 4 significant digits of the column's
// largest value; integers stay integers.
std::string results_table(const nlohmann::json& summary, const std::vector<std::string>& splits) {
  if (splits.empty()) return "";
  std::vector<std::string> columns;
  std::map<std::string, std::map<std::string, nlohmann::json>> values;  // split -> column -> value
  std::map<std::string, bool> integer_column;
  for (const auto& split : splits) {
    std::vector<std::pair<std::string, nlohmann::json>> cells;
    flatten_scalars(summary.at(split), "", cells);
    for (auto& [k, v] : cells) {
      if (!integer_column.count(k)) {
        columns.push_back(k);
        integer_column[k] = true;
      }
      if (!v.is_null() && !v.is_number_integer()) integer_column[k] = false;
      values[split][k] = v;
    }
  }
  std::stable_sort(columns.begin(), columns.end(), [&](const std::string& a, const std::string& b) {
    return metric_rank(a, integer_column[a]) < metric_rank(b, integer_column[b]);
  });
  std::map<std::string, int> decimals;  // -1: format_number
  for (const auto& c : columns) {
    double largest = 0;
    bool rates = true, numeric = true;
    for (const auto& split : splits) {
      if (!values[split].count(c)) continue;
      const auto& v = values[split][c];
      if (v.is_null()) continue;
      if (!v.is_number()) {
        numeric = false;
        continue;
      }
      const double d = v.get<double>();
      largest = std::max(largest, std::fabs(d));
      rates = rates && d >= 0 && d <= 1;
    }
    int digits = -1;
    if (numeric && !integer_column[c]) {
      if (rates)
        digits = 4;
      else if (largest >= 1e-3 && largest < 1e4)
        digits = std::max(0, 3 - static_cast<int>(std::floor(std::log10(largest))));
    }
    decimals[c] = digits;
  }
  const std::string selected = selection_metric(summary);
  std::ostringstream o;
  o << "<table class=\"results\">\n<thead><tr><th>split</th>";
  for (const auto& c : columns) {
    const bool sel = c == selected;
    o << "<th class=\"n" << (sel ? " sel" : "") << "\"" << (sel ? " title=\"the model selection metric\"" : "") << ">"
      << escape_html(c) << "</th>";
  }
  o << "</tr></thead>\n<tbody>\n";
  for (const auto& split : splits) {
    o << "<tr><th>" << escape_html(split) << "</th>";
    for (const auto& c : columns) {
      if (!values[split].count(c)) {
        o << cell("-", true);
        continue;
      }
      const auto& v = values[split][c];
      const bool numeric = v.is_number() || v.is_null();
      const std::string text =
          v.is_number_float() && decimals[c] >= 0 ? fixed(v.get<double>(), decimals[c]) : format_cell(v);
      o << cell(escape_html(text), numeric);
    }
    o << "</tr>\n";
  }
  o << "</tbody>\n</table>\n";
  return o.str();
}

// Part segmentation: one row per category, one column per evaluated split
// (val, test, test_so3, ...), each cell the category's mean shape mIoU.
std::string category_iou_table(const nlohmann::json& summary, const std::vector<std::string>& splits) {
  std::vector<std::string> columns, rows;
  for (const auto& split : splits) {
    const auto& entry = summary.at(split);
    if (!entry.contains("category_iou") || !entry.at("category_iou").is_object()) continue;
    columns.push_back(split);
    for (const auto& c : entry.at("category_iou").items())
      if (std::find(rows.begin(), rows.end(), c.key()) == rows.end()) rows.push_back(c.key());
  }
  if (columns.empty()) return "";
  auto miou = [](const nlohmann::json& entry, const char* key) {
    return entry.contains(key) && entry.at(key).is_number() ? fixed(entry.at(key).get<double>(), 4) : std::string("-");
  };
  std::ostringstream o;
  o << "<h3>Per-category mIoU</h3>\n<p class=\"note\">Mean IoU of each category's shapes; the number of shapes in "
       "grey.</p>\n<table>\n<thead><tr><th>category</th>";
  for (const auto& c : columns) o << "<th class=\"n\">" << escape_html(c) << "</th>";
  o << "</tr></thead>\n<tbody>\n";
  for (const auto& r : rows) {
    o << "<tr><th>" << escape_html(r) << "</th>";
    for (const auto& c : columns) {
      const auto& t = summary.at(c).at("category_iou");
      if (!t.contains(r) || !t.at(r).is_object()) {
        o << cell("-", true);
        continue;
      }
      const auto& e = t.at(r);
      std::string text = miou(e, "miou");
      if (e.contains("shapes")) text += " <span class=\"muted\">(" + format_cell(e.at("shapes")) + ")</span>";
      o << cell(text, true);
    }
    o << "</tr>\n";
  }
  bool first = true;
  for (const char* key : {"instance_miou", "class_miou"}) {
    o << "<tr" << (first ? " class=\"sep\"" : "") << "><th>" << key << "</th>";
    for (const auto& c : columns) o << cell(miou(summary.at(c), key), true);
    o << "</tr>\n";
    first = false;
  }
  o << "</tbody>\n</table>\n";
  return o.str();
}

// ---------------------------------------------------------------------------
// Classification

std::string class_name(const nlohmann::json& classes, size_t i) {
  if (classes.is_array() && i < classes.size()) return json_scalar_text(classes[i]);
  return std::to_string(i);
}

std::string rate_cell(const nlohmann::json& v) {
  return cell(v.is_number() ? fixed(v.get<double>(), 4) : std::string("-"), true);
}

// F1 with a bar behind it, for scanning many classes.
std::string f1_cell(const nlohmann::json& v) {
  if (!v.is_number()) return cell("-", true);
  const double f = std::clamp(v.get<double>(), 0.0, 1.0);
  const std::string pct = fixed(100 * f, 1);
  return cell(fixed(v.get<double>(), 4), true,
              " style=\"background:linear-gradient(90deg,#dbe7fb " + pct + "%,transparent " + pct + "%)\"");
}

// scikit-learn's classification_report layout: a row per class, then
// accuracy, macro avg and weighted avg. The entry's own per_class,
// macro_avg and weighted_avg are used when it has them (every run since they
// were added), else they are computed from its confusion matrix.
std::string class_report_table(const nlohmann::json& entry) {
  const bool has_matrix = entry.contains("confusion") && entry.at("confusion").is_array();
  const nlohmann::json classes = entry.contains("classes") ? entry.at("classes") : nlohmann::json();
  nlohmann::json report = entry;
  std::vector<std::vector<int64_t>> matrix;
  int64_t total = 0, correct = 0;
  if (has_matrix) {
    for (const auto& row : entry.at("confusion")) {
      matrix.emplace_back();
      for (const auto& v : row) matrix.back().push_back(std::max<int64_t>(0, std::llround(as_double(v))));
    }
    for (size_t i = 0; i < matrix.size(); ++i)
      for (size_t j = 0; j < matrix[i].size(); ++j) total += matrix[i][j], correct += i == j ? matrix[i][j] : 0;
    if (!entry.contains("per_class")) {
      std::vector<std::string> names;
      for (size_t i = 0; i < matrix.size(); ++i) names.push_back(class_name(classes, i));
      report.update(classification_report(matrix, names));
    }
  }
  const nlohmann::json rows =
      report.contains("per_class") && report.at("per_class").is_array() ? report.at("per_class") : nlohmann::json::array();
  auto average = [&](const char* key) {
    return report.contains(key) && report.at(key).is_object() ? report.at(key) : nlohmann::json();
  };
  const nlohmann::json macro = average("macro_avg"), weighted = average("weighted_avg");
  nlohmann::json accuracy = entry.contains("accuracy") ? entry.at("accuracy") : nlohmann::json();
  if (!accuracy.is_number() && total > 0) accuracy = static_cast<double>(correct) / static_cast<double>(total);
  if (!has_matrix)
    for (const auto& r : rows)
      if (r.contains("support") && r.at("support").is_number()) total += r.at("support").get<int64_t>();

  std::ostringstream o;
  o << "<table class=\"classes\">\n<thead><tr><th>class</th><th class=\"n\">precision</th><th class=\"n\">recall</th>"
       "<th class=\"n\">f1-score</th><th class=\"n\">support</th></tr></thead>\n<tbody>\n";
  auto field = [](const nlohmann::json& r, const char* key) {
    return r.is_object() && r.contains(key) ? r.at(key) : nlohmann::json();
  };
  for (const auto& r : rows) {
    const std::string name = r.contains("class") ? json_scalar_text(r.at("class")) : "";
    o << "<tr><th>" << escape_html(name) << "</th>" << rate_cell(field(r, "precision")) << rate_cell(field(r, "recall"))
      << f1_cell(field(r, "f1")) << cell(format_cell(field(r, "support")), true) << "</tr>\n";
  }
  o << "<tr class=\"sep\"><th>accuracy</th>" << cell("", true) << cell("", true) << rate_cell(accuracy)
    << cell(format_integer(total), true) << "</tr>\n";
  for (const auto& [label, r] : {std::pair<const char*, const nlohmann::json&>{"macro avg", macro},
                                 std::pair<const char*, const nlohmann::json&>{"weighted avg", weighted}}) {
    if (!r.is_object()) continue;
    o << "<tr><th>" << label << "</th>" << rate_cell(field(r, "precision")) << rate_cell(field(r, "recall"))
      << rate_cell(field(r, "f1")) << cell(format_cell(field(r, "support")), true) << "</tr>\n";
  }
  o << "</tbody>\n</table>\n";
  if (has_matrix && rows.size() < matrix.size()) {
    const size_t left_out = matrix.size() - rows.size();
    o << "<p class=\"note\">" << left_out << (left_out == 1 ? " class" : " classes")
      << " neither in this split nor predicted: no row, not in the averages.</p>\n";
  }
  return o.str();
}

// Rows: true class, columns: predicted. A cell's shade is its share of the
// row: blue on the diagonal, red off it.
std::string confusion_table(const nlohmann::json& m, const nlohmann::json& classes) {
  const bool vertical = m.size() > 4;
  std::ostringstream o;
  o << "<div class=\"scroll\"><table class=\"cm\">\n<thead><tr><th class=\"corner\">true \\ predicted</th>";
  for (size_t j = 0; j < m.size(); ++j) {
    const std::string name = escape_html(class_name(classes, j));
    o << (vertical ? "<th class=\"v\"><span>" + name + "</span></th>" : "<th class=\"n\">" + name + "</th>");
  }
  o << "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < m.size(); ++i) {
    double row_total = 0;
    for (const auto& v : m[i]) row_total += as_double(v);
    o << "<tr><th>" << escape_html(class_name(classes, i)) << "</th>";
    for (size_t j = 0; j < m[i].size(); ++j) {
      const double count = as_double(m[i][j]);
      const std::string text = format_cell(m[i][j]);
      if (!(count > 0)) {
        o << "<td class=\"z\">" << (m.size() > 10 && count == 0 ? "&#183;" : text) << "</td>";
        continue;
      }
      const double share = row_total > 0 ? count / row_total : 0.0;
      const double a = 0.12 + 0.78 * share;
      const int base[3] = {i == j ? 47 : 207, i == j ? 111 : 34, i == j ? 223 : 46};
      int rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(255 - (255 - base[c]) * a));
      o << "<td style=\"background:rgb(" << rgb[0] << ',' << rgb[1] << ',' << rgb[2] << ")"
        << (a > 0.55 ? ";color:#fff" : "") << "\">" << text << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</tbody>\n</table></div>\n";
  return o.str();
}

std::string classification_section(const nlohmann::json& summary, const std::vector<std::string>& splits) {
  std::ostringstream o;
  for (const auto& split : splits) {
    const auto& entry = summary.at(split);
    const bool matrix = entry.contains("confusion") && entry.at("confusion").is_array() && entry.contains("classes");
    if (!matrix && !(entry.contains("per_class") && entry.at("per_class").is_array())) continue;
    o << "<h3>" << escape_html(split) << "</h3>\n<div class=\"pair\">\n<div class=\"fit\">" << class_report_table(entry)
      << "</div>\n";
    if (matrix)
      o << "<div class=\"cmbox\"><p class=\"note\">Confusion matrix: rows true class, columns predicted.</p>\n"
        << confusion_table(entry.at("confusion"), entry.at("classes")) << "</div>\n";
    o << "</div>\n";
  }
  return o.str();
}

// ---------------------------------------------------------------------------
// Settings

constexpr size_t kArrayShown = 12;  // longer arrays of scalars are folded under their first values

std::string setting_value(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    return s.empty() ? "<span class=\"muted\">(empty)</span>" : escape_html(s);
  }
  if (v.is_array() && v.empty()) return "<span class=\"muted\">(none)</span>";
  if (v.is_object() && v.empty()) return "<code>{}</code>";
  if (v.is_array() && all_scalars(v)) {
    std::vector<std::string> items;
    for (const auto& x : v) items.push_back(json_scalar_text(x));
    const std::string all = join(items);
    if (items.size() <= kArrayShown) return escape_html(all);
    std::string head;
    for (size_t i = 0; i < 3; ++i) head += items[i] + ", ";
    return "<details><summary>" + std::to_string(items.size()) + " values: " + escape_html(head) +
           "&#8230;</summary><code>" + escape_html(all) + "</code></details>";
  }
  if (v.is_array() || v.is_object()) {
    const std::string text = json_text(v, -1);
    if (text.size() <= 200) return "<code>" + escape_html(text) + "</code>";
    return "<details><summary>" + std::to_string(v.size()) + (v.is_array() ? " entries" : " keys") +
           "</summary><code>" + escape_html(text) + "</code></details>";
  }
  return escape_html(json_text(v, -1));
}

void flatten_settings(const nlohmann::json& j, const std::string& prefix,
                      std::vector<std::pair<std::string, std::string>>& rows) {
  if (j.is_object() && !j.empty()) {
    for (const auto& item : j.items())
      flatten_settings(item.value(), prefix.empty() ? item.key() : prefix + "." + item.key(), rows);
  } else {
    rows.emplace_back(prefix, setting_value(j));
  }
}

std::string kv_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::ostringstream o;
  o << "<table class=\"kv\">\n<tbody>\n";
  for (const auto& [k, v] : rows) o << "<tr><th>" << escape_html(k) << "</th><td>" << v << "</td></tr>\n";
  o << "</tbody>\n</table>\n";
  return o.str();
}

// ---------------------------------------------------------------------------
// The page

const char kStyle[] =
    "body{margin:0;background:#fff;color:#1f2328;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "'Helvetica Neue',Arial,sans-serif}"
    "main{max-width:1100px;margin:0 auto;padding:28px 32px 40px}"
    "h1{font-size:24px;font-weight:600;margin:0 0 6px}"
    "h2{font-size:18px;font-weight:600;margin:34px 0 12px;padding-bottom:6px;border-bottom:1px solid #d8dee4}"
    "h3{font-size:15px;font-weight:600;margin:22px 0 8px}"
    "p{margin:6px 0}"
    ".facts{color:#59636e;margin:0}"
    ".facts b{color:#1f2328;font-weight:600}"
    ".note,.muted{color:#6e7781}"
    ".note{font-size:12.5px;margin:0 0 6px}"
    "nav{font-size:13px;margin-top:10px}"
    "nav a{color:#0969da;text-decoration:none;margin-right:16px}"
    "table{border-collapse:collapse;font-size:13px;margin:0 0 14px}"
    "th,td{padding:4px 10px;border-bottom:1px solid #e6eaef;text-align:left;white-space:nowrap;vertical-align:top}"
    "thead th{border-bottom:1px solid #afb8c1;color:#59636e;font-weight:600;vertical-align:bottom}"
    "tbody th{font-weight:500}"
    ".n{text-align:right;font-variant-numeric:tabular-nums}"
    ".c{text-align:center}"
    ".yes{color:#1e8e3e}"
    ".no{color:#afb8c1}"
    ".pm{color:#6e7781}"
    "th.sel{color:#1f2328;box-shadow:inset 0 -2px #2f6fdf}"
    "tr.sep td,tr.sep th{border-top:1px solid #afb8c1}"
    "table.kv th{color:#59636e;font-weight:500;padding-right:24px}"
    "table.kv td{font-variant-numeric:tabular-nums}"
    ".scroll{overflow:auto;max-width:100%}"
    ".pair{display:flex;flex-wrap:wrap;gap:8px 36px;align-items:flex-start}"
    ".cmbox{max-width:100%}"
    ".fit{width:min-content}"
    "table.classes td,table.classes th{padding:2px 10px;font-size:12.5px}"
    "table.cm{font-size:10.5px;margin:0}"
    "table.cm td{padding:1px 3px;min-width:14px;text-align:right;font-variant-numeric:tabular-nums;"
    "border:1px solid #fff}"
    "table.cm td.z{color:#b8bfc6}"
    "table.cm tbody th{padding:2px 8px 2px 0;font-size:11px}"
    "table.cm th.v{padding:2px;vertical-align:bottom;font-size:11px;font-weight:500}"
    "table.cm th.v span{writing-mode:vertical-rl;transform:rotate(180deg)}"
    "table.cm th.corner{font-size:10.5px;font-weight:400;color:#8c959f}"
    "svg.chart{display:block;width:100%;height:auto;margin:2px 0 14px}"
    ".small{display:grid;grid-template-columns:1fr 1fr;gap:0 28px}"
    ".cards{columns:2 440px;column-gap:36px}"
    ".card{break-inside:avoid;margin-bottom:10px}"
    ".card h3{margin-top:4px}"
    ".card table{width:100%}"
    ".card td{white-space:normal;word-break:break-word}"
    "code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f6f8fa;padding:1px 4px;"
    "border-radius:4px;word-break:break-all}"
    "details summary{cursor:pointer;color:#59636e}"
    ".warn{border-left:4px solid #bf8700;background:#fff8c5;padding:6px 12px;margin:12px 0;border-radius:4px}"
    ".warn ul{margin:4px 0 2px;padding-left:20px}"
    "footer{margin-top:36px;padding-top:8px;border-top:1px solid #e6eaef;color:#8c959f;font-size:12px}";

std::string fact(const std::string& label, const std::string& value_html, const std::string& after = "") {
  return label + (label.empty() ? "" : " ") + "<b>" + value_html + "</b>" + (after.empty() ? "" : " " + after);
}

// The line under the title: model, data, size, the selected epoch and its
// headline score, training time.
std::string facts_line(const nlohmann::json& summary, const nlohmann::json& config,
                       const std::vector<std::string>& splits) {
  std::vector<std::string> facts;
  auto text_at = [](const nlohmann::json& j, const char* a, const char* b) -> std::string {
    if (j.is_object() && j.contains(a) && j.at(a).is_object() && j.at(a).contains(b) && j.at(a).at(b).is_string())
      return j.at(a).at(b).get<std::string>();
    return "";
  };
  const std::string model = text_at(config, "model", "name");
  if (!model.empty()) facts.push_back(fact("model", escape_html(model)));
  std::string data = text_at(config, "data", "source");
  if (data.empty()) data = text_at(config, "data", "task");
  if (!data.empty()) facts.push_back(fact("data", escape_html(data)));
  const std::string protocol = text_at(config, "data", "protocol");
  if (!protocol.empty()) facts.push_back(fact("protocol", escape_html(protocol)));
  if (config.contains("data") && config.at("data").is_object() && config.at("data").contains("up_axis") &&
      config.at("data").at("up_axis").is_number_integer()) {
    const auto axis = config.at("data").at("up_axis").get<int64_t>();
    if (axis >= 0 && axis <= 2) facts.push_back(fact("up axis", std::string(1, static_cast<char>('x' + axis))));
  }
  auto number_at = [&](const char* key) {
    return summary.contains(key) && summary.at(key).is_number() ? summary.at(key) : nlohmann::json();
  };
  if (number_at("parameters").is_number())
    facts.push_back(fact("", format_cell(summary.at("parameters")), "parameters"));
  const auto selected = number_at("selected_epoch"), epochs = number_at("epochs");
  if (selected.is_number()) {
    std::string f = fact("epoch", format_cell(selected));
    if (epochs.is_number()) f += " of " + format_cell(epochs);
    if (summary.contains("selected_by") && summary.at("selected_by").is_string())
      f += " selected by " + escape_html(summary.at("selected_by").get<std::string>());
    facts.push_back(f);
  } else if (number_at("epochs_done").is_number()) {
    facts.push_back(fact("in progress:", format_cell(summary.at("epochs_done")), "epochs done"));
  }
  if (summary.value("interrupted", false)) {
    std::string f = "<b>interrupted</b>";
    if (number_at("epoch").is_number()) f += " in epoch " + format_cell(summary.at("epoch"));
    facts.push_back(f);
  }
  if (summary.value("stopped_early", false)) facts.push_back("<b>stopped early</b>");
  // The headline: the selection metric (else the first) on the test split (else val).
  std::string metric = selection_metric(summary);
  for (const char* split : {"test", "val"}) {
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) continue;
    const auto& entry = summary.at(split);
    std::string key = metric;
    if (key.empty() || !entry.contains(key) || !entry.at(key).is_number()) {
      key.clear();
      for (const char* k : kLeadingMetrics)
        if (entry.contains(k) && entry.at(k).is_number()) {
          key = k;
          break;
        }
    }
    if (key.empty()) continue;
    facts.push_back(fact(escape_html(std::string(split) + " " + key), escape_html(format_cell(entry.at(key)))));
    break;
  }
  if (number_at("train_seconds").is_number())
    facts.push_back(fact("trained", readable_duration(summary.at("train_seconds").get<double>())));
  if (number_at("world_size").is_number()) facts.push_back(fact("", format_cell(summary.at("world_size")), "ranks"));
  return join(facts, " &#183; ");
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_integer(int64_t v) {
  const bool negative = v < 0;
  // Through uint64_t: the magnitude of INT64_MIN does not fit in int64_t.
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits = std::to_string(magnitude);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return negative ? "-" + digits : digits;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e4 && a < 1e15) return format_integer(static_cast<int64_t>(std::llround(v)));
  if (a < 1e-3 || a >= 1e15) return printf_double("%.3g", v);
  return printf_double("%.4g", v);
}

std::string format_cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_unsigned())
    return v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? json_text(v, -1) : format_integer(v.get<int64_t>());
  if (v.is_number_integer()) return format_integer(v.get<int64_t>());
  if (v.is_number()) return format_number(v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && all_scalars(v)) {
    std::vector<std::string> items;
    for (const auto& x : v) items.push_back(format_cell(x));
    return join(items);
  }
  return json_text(v, -1);
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) { return nice_axis(lo, hi, max_ticks).ticks; }

std::string html_page_begin(const std::string& title) {
  return "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
         "charset=\"utf-8\"/>\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>" +
         escape_html(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
}

std::string warnings_box(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return "";
  std::string html = "<div class=\"warn\"><b>" + std::string(warnings.size() == 1 ? "Warning" : "Warnings") + "</b><ul>\n";
  for (const auto& w : warnings) html += "<li>" + escape_html(w) + "</li>\n";
  return html + "</ul></div>\n";
}

std::string html_page_end() { return "</main>\n</body>\n</html>\n"; }

std::string settings_tables(const nlohmann::json& settings) {
  if (!settings.is_object() || settings.empty())
    return "<p class=\"muted\">" +
           (settings.is_null() || settings.empty() ? std::string("None recorded.")
                                                   : escape_html(json_text(settings, -1))) +
           "</p>\n";
  std::vector<std::pair<std::string, std::string>> general;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> groups;
  for (const auto& item : settings.items()) {
    if (item.value().is_object() && !item.value().empty()) {
      groups.emplace_back(item.key(), std::vector<std::pair<std::string, std::string>>{});
      flatten_settings(item.value(), "", groups.back().second);
    } else {
      general.emplace_back(item.key(), setting_value(item.value()));
    }
  }
  std::ostringstream o;
  o << "<div class=\"cards\">\n";
  if (!general.empty()) o << "<div class=\"card\"><h3>general</h3>\n" << kv_table(general) << "</div>\n";
  for (const auto& [name, rows] : groups)
    o << "<div class=\"card\"><h3>" << escape_html(name) << "</h3>\n" << kv_table(rows) << "</div>\n";
  o << "</div>\n";
  return o.str();
}

std::string render_report_html(const std::string& title, const nlohmann::json& history,
                               const nlohmann::json& summary_in, const nlohmann::json& config) {
  const nlohmann::json summary = summary_in.is_object() ? summary_in : nlohmann::json::object();
  const auto splits = split_names(summary);

  // family -> its series, families in first-seen order
  std::vector<std::string> families;
  std::map<std::string, std::map<std::string, Series>> charts;
  std::vector<double> epochs;
  for (const auto& row : history) {
    if (!row.is_object() || !row.contains("epoch") || !row.at("epoch").is_number()) continue;
    const double epoch = row.at("epoch").get<double>();
    if (!std::isfinite(epoch)) continue;
    epochs.push_back(epoch);
    for (const auto& item : row.items()) {
      if (item.key() == "epoch" || !item.value().is_number()) continue;
      const double v = item.value().get<double>();
      if (!std::isfinite(v)) continue;
      const std::string family = chart_family(item.key());
      if (!charts.count(family)) families.push_back(family);
      auto& s = charts[family][item.key()];
      if (s.points.empty()) s.name = item.key(), s.first = item.value();
      s.points.emplace_back(epoch, v);
    }
  }
  std::sort(epochs.begin(), epochs.end());
  epochs.erase(std::unique(epochs.begin(), epochs.end()), epochs.end());
  const bool one_epoch = epochs.size() < 2;

  // Charted families (losses first, then metrics as the results table
  // orders them), bookkeeping ones apart, and the constants.
  std::vector<std::pair<std::string, std::vector<Series>>> main_charts, small_charts;
  std::vector<Series> constants;
  {
    std::vector<std::string> order = families;
    std::stable_sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
      auto rank = [](const std::string& f) { return f.find("loss") != std::string::npos ? -1 : metric_rank(f, false); };
      return rank(a) < rank(b);
    });
    for (const auto& family : order) {
      std::vector<Series> series;
      for (auto& [name, s] : charts[family]) series.push_back(s);
      std::stable_sort(series.begin(), series.end(),
                       [](const Series& a, const Series& b) { return series_rank(a.name) < series_rank(b.name); });
      const bool varies = std::any_of(series.begin(), series.end(), [](const Series& s) { return !s.constant(); });
      if (one_epoch || !varies)
        constants.insert(constants.end(), series.begin(), series.end());
      else
        (bookkeeping(family) ? small_charts : main_charts).emplace_back(family, series);
    }
  }
  Marker marker;
  if (summary.contains("selected_epoch") && summary.at("selected_epoch").is_number()) {
    marker.epoch = summary.at("selected_epoch").get<double>();
    marker.label = "selected (" + format_cell(summary.at("selected_epoch")) + ")";
  } else if (summary.contains("best_epoch") && summary.at("best_epoch").is_number()) {
    marker.epoch = summary.at("best_epoch").get<double>();
    marker.label = "best so far (" + format_cell(summary.at("best_epoch")) + ")";
  }

  const std::string run = run_table(summary, splits);
  const std::string results = results_table(summary, splits);
  const std::string categories = category_iou_table(summary, splits);
  const std::string classification = classification_section(summary, splits);

  std::ostringstream o;
  o << html_page_begin(title);
  o << "<header>\n<h1>" << escape_html(title) << "</h1>\n";
  const std::string facts = facts_line(summary, config, splits);
  if (!facts.empty()) o << "<p class=\"facts\">" << facts << "</p>\n";
  o << "<nav><a href=\"#summary\">Summary</a><a href=\"#curves\">Curves</a>"
    << (classification.empty() ? "" : "<a href=\"#classes\">Classes</a>")
    << "<a href=\"#settings\">Settings</a></nav>\n"
    << "</header>\n";

  o << warnings_box(summary_warnings(summary));
  o << "<h2 id=\"summary\">Summary</h2>\n";
  if (run.empty() && results.empty()) o << "<p class=\"muted\">No summary yet.</p>\n";
  if (!run.empty()) o << "<h3>Run</h3>\n" << run;
  if (!results.empty()) o << "<h3>Results</h3>\n" << results;
  o << categories;

  o << "<h2 id=\"curves\">Curves</h2>\n";
  if (epochs.empty()) o << "<p class=\"muted\">No completed epoch yet.</p>\n";
  const double x0 = epochs.empty() ? 0 : epochs.front(), x1 = epochs.empty() ? 1 : epochs.back();
  for (const auto& [family, series] : main_charts) o << svg_chart(family, series, x0, x1, marker, kMainChart);
  if (!small_charts.empty()) {
    o << "<h3>Bookkeeping</h3>\n<div class=\"small\">\n";
    for (const auto& [family, series] : small_charts) o << svg_chart(family, series, x0, x1, marker, kSmallChart);
    o << "</div>\n";
  }
  if (!constants.empty()) {
    o << "<h3>" << (one_epoch ? "Values of the only epoch" : "Constant over the run") << "</h3>\n"
      << "<table class=\"kv constants\">\n<tbody>\n";
    for (const auto& s : constants) {
      std::string value = escape_html(format_cell(s.first));
      if (!one_epoch && s.points.size() < epochs.size())
        value += " <span class=\"muted\">(" +
                 (s.points.size() == 1
                      ? "epoch " + fixed(s.points[0].first, 0) + " only"
                      : std::to_string(s.points.size()) + " of " + std::to_string(epochs.size()) + " epochs") +
                 ")</span>";
      o << "<tr><th>" << escape_html(s.name) << "</th><td>" << value << "</td></tr>\n";
    }
    o << "</tbody>\n</table>\n";
  }

  if (!classification.empty())
    o << "<h2 id=\"classes\">Confusion matrices and per-class scores</h2>\n" << classification;

  o << "<h2 id=\"settings\">Settings</h2>\n" << settings_tables(config);
  o << "<footer>Written by qkv";
  if (config.is_object() && config.contains("qkv_version") && config.at("qkv_version").is_string())
    o << ' ' << escape_html(config.at("qkv_version").get<std::string>());
  if (config.is_object() && config.contains("command") && config.at("command").is_string())
    o << " (" << escape_html(config.at("command").get<std::string>()) << ")";
  o << ". One self-contained file: no scripts, no network.</footer>\n";
  o << html_page_end();
  return o.str();
}

void write_report_html(const std::string& path, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& summary, const nlohmann::json& config) {
  write_file_atomic(path, render_report_html(title, history, summary, config));
}

}  // namespace qkv::train
