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
const char* const kOwnSection[] = {"confusion", "top_confusions", "classes",     "per_class",
                                   "macro_avg", "weighted_avg",   "category_iou"};

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

bool own_section(const std::string& key) {
  for (const char* k : kOwnSection)
    if (key == k) return true;
  return false;
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
std::string results_table(const nlohmann::json& summary, const std::vector<std::string>& splits,
                          const std::string& test_label) {
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
    o << "<tr><th>" << escape_html(split_label(split, test_label)) << "</th>";
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
std::string category_iou_table(const nlohmann::json& summary, const std::vector<std::string>& splits,
                               const std::string& test_label) {
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
  for (const auto& c : columns) o << "<th class=\"n\">" << escape_html(split_label(c, test_label)) << "</th>";
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
  const nlohmann::json rows = report.contains("per_class") && report.at("per_class").is_array()
                                  ? report.at("per_class")
                                  : nlohmann::json::array();
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

// Above kDenseConfusionClasses classes the run keeps its most frequent
// confusions, not the n x n matrix: a table of them.
std::string top_confusions_table(const nlohmann::json& entry) {
  const auto& top = entry.at("top_confusions");
  const size_t classes = entry.contains("classes") && entry.at("classes").is_array() ? entry.at("classes").size() : 0;
  std::ostringstream o;
  o << "<p class=\"note\">The " << top.size() << " most frequent confusions of "
    << format_integer(static_cast<int64_t>(classes)) << " classes (the full matrix is drawn up to "
    << kDenseConfusionClasses << " classes).</p>\n";
  o << "<table class=\"classes\">\n<thead><tr><th>true</th><th>predicted</th><th class=\"n\">count</th></tr></thead>\n"
       "<tbody>\n";
  auto text = [](const nlohmann::json& row, const char* key) {
    return row.is_object() && row.contains(key) ? json_scalar_text(row.at(key)) : std::string();
  };
  for (const auto& row : top)
    o << "<tr><th>" << escape_html(text(row, "true")) << "</th><td>" << escape_html(text(row, "predicted")) << "</td>"
      << cell(row.is_object() && row.contains("count") ? format_cell(row.at("count")) : "", true) << "</tr>\n";
  o << "</tbody>\n</table>\n";
  return o.str();
}

std::string classification_section(const nlohmann::json& summary, const std::vector<std::string>& splits,
                                   const std::string& test_label) {
  std::ostringstream o;
  for (const auto& split : splits) {
    const auto& entry = summary.at(split);
    const bool matrix = entry.contains("confusion") && entry.at("confusion").is_array() && entry.contains("classes");
    if (!matrix && !(entry.contains("per_class") && entry.at("per_class").is_array())) continue;
    o << "<h3>" << escape_html(split_label(split, test_label)) << "</h3>\n<div class=\"pair\">\n<div class=\"fit\">"
      << class_report_table(entry) << "</div>\n";
    if (matrix)
      o << "<div class=\"cmbox\"><p class=\"note\">Confusion matrix: rows true class, columns predicted.</p>\n"
        << confusion_table(entry.at("confusion"), entry.at("classes")) << "</div>\n";
    else if (entry.contains("top_confusions") && entry.at("top_confusions").is_array())
      o << "<div class=\"cmbox\">" << top_confusions_table(entry) << "</div>\n";
    o << "</div>\n";
  }
  return o.str();
}

std::string fact(const std::string& label, const std::string& value_html, const std::string& after = "") {
  return label + (label.empty() ? "" : " ") + "<b>" + value_html + "</b>" + (after.empty() ? "" : " " + after);
}

// The line under the title: model, data, size, the selected epoch and its
// headline score, training time.
std::string facts_line(const nlohmann::json& summary, const nlohmann::json& config,
                       const std::vector<std::string>& splits, const std::string& test_label) {
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
    facts.push_back(
        fact(escape_html(split_label(split, test_label) + " " + key), escape_html(format_cell(entry.at(key)))));
    break;
  }
  if (number_at("train_seconds").is_number())
    facts.push_back(fact("trained", readable_duration(summary.at("train_seconds").get<double>())));
  if (number_at("world_size").is_number()) facts.push_back(fact("", format_cell(summary.at("world_size")), "ranks"));
  return join(facts, " &#183; ");
}

}  // namespace

std::string split_label(const std::string& key, const std::string& test_label) {
  if (key == "test") return test_label.empty() ? key : "test " + test_label;
  if (starts_with(key, "test_")) return "test " + key.substr(5);
  return key;
}

std::string test_label_of_config(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("data") || !config.at("data").is_object()) return "";
  const auto& data = config.at("data");
  if (!data.contains("protocol") || !data.at("protocol").is_string()) return "";
  const std::string protocol = data.at("protocol").get<std::string>();
  const auto slash = protocol.find('/');
  if (slash == std::string::npos) return "";
  const std::string test = lower(protocol.substr(slash + 1));  // as parse_rotation reads it
  return test == "i" ? "none" : test;
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
  const std::string test_label = test_label_of_config(config);
  const std::string results = results_table(summary, splits, test_label);
  const std::string categories = category_iou_table(summary, splits, test_label);
  const std::string classification = classification_section(summary, splits, test_label);

  std::ostringstream o;
  o << html_page_begin(title);
  o << "<header>\n<h1>" << escape_html(title) << "</h1>\n";
  const std::string facts = facts_line(summary, config, splits, test_label);
  if (!facts.empty()) o << "<p class=\"facts\">" << facts << "</p>\n";
  o << "<nav><a href=\"#summary\">Summary</a><a href=\"#curves\">Curves</a>"
    << (classification.empty() ? "" : "<a href=\"#classes\">Classes</a>")
    << "<a href=\"#settings\">Settings</a></nav>\n"
    << "</header>\n";

  o << warnings_box(summary_warnings(summary, test_label));
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
