#include "qkv/train/html_kit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "qkv/core/json_file.h"
#include "qkv/core/text.h"

namespace qkv::train {
namespace {

// Series colours by split, the same on every chart: train blue, val orange,
// test green; unprefixed series and further test variants take the rest.
const char* const kPalette[] = {"#2f6fdf", "#e8710a", "#1e8e3e", "#8e44ad", "#c0392b", "#00838f", "#6d4c41"};

constexpr double kCharWidth = 0.62;  // a generous average glyph width, in font sizes, for laying out SVG text

std::string printf_double(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// SVG coordinates: one decimal is finer than a pixel.
std::string coord(double v) { return fixed(v, 1); }

bool all_scalars(const nlohmann::json& array) {
  return std::all_of(array.begin(), array.end(), [](const nlohmann::json& v) { return v.is_primitive(); });
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

}  // namespace

std::string fixed(double v, int decimals) {
  // to_chars rounds as printf's %.*f does, several times faster: a chart of a
  // long run prints thousands of coordinates each time the report is written.
  char buf[64];
  const auto printed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (printed.ec == std::errc()) return std::string(buf, printed.ptr);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);  // too long for buf: cut, as before
  return buf;
}

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

double as_double(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; }

// A table cell: <td class="n"> for numbers (right-aligned, tabular digits).
std::string cell(const std::string& html, bool numeric, const std::string& attributes) {
  return std::string("<td") + (numeric ? " class=\"n\"" : "") + attributes + ">" + html + "</td>";
}

int series_rank(const std::string& name) {
  if (starts_with(name, "train_")) return 0;
  if (starts_with(name, "val_")) return 1;
  if (starts_with(name, "test_")) return 2;
  return 3;
}

std::vector<std::pair<double, double>> pixel_envelope(const std::vector<std::pair<double, double>>& points) {
  std::vector<std::pair<double, double>> kept;
  for (size_t begin = 0, end = 0; begin < points.size(); begin = end) {
    const double column = std::floor(points[begin].first);
    size_t low = begin, high = begin;
    for (end = begin + 1; end < points.size() && std::floor(points[end].first) == column; ++end) {
      if (points[end].second < points[low].second) low = end;
      if (points[end].second > points[high].second) high = end;
    }
    const size_t order[] = {begin, std::min(low, high), std::max(low, high), end - 1};
    for (size_t i = 0; i < 4; ++i)
      if (i == 0 || order[i] != order[i - 1]) kept.push_back(points[order[i]]);
  }
  return kept;
}

std::string svg_chart(const std::string& title, const std::vector<Series>& series, double x0, double x1,
                      const Marker& marker, const ChartSize& size, const std::string& x_label) {
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
    << "\" font-size=\"12\" fill=\"#57606a\" text-anchor=\"middle\">" << escape_html(x_label) << "</text>\n";
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
      std::vector<std::pair<double, double>> drawn;
      drawn.reserve(s.points.size());
      for (const auto& [x, y] : s.points) drawn.emplace_back(px(x), py(y));
      if (static_cast<double>(drawn.size()) > W - L - R) drawn = pixel_envelope(drawn);
      o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"";
      for (size_t j = 0; j < drawn.size(); ++j)
        o << (j ? " " : "") << coord(drawn[j].first) << ',' << coord(drawn[j].second);
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
  std::string html =
      "<div class=\"warn\"><b>" + std::string(warnings.size() == 1 ? "Warning" : "Warnings") + "</b><ul>\n";
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

}  // namespace qkv::train
