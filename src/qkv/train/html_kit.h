#pragma once
// The kit every HTML page qkv writes is made of (report.html, mhca cv's
// report), so that they all look alike: the page frame and its style sheet,
// escaping, number formats, key | value settings tables, a warnings box, and
// SVG line charts with nice axes. Pages are well-formed XML, self-contained
// (inline SVG, no scripts, no network).
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv::train {

std::string escape_html(const std::string& text);

// "<!DOCTYPE html>", the head with the title and the style sheet, and the
// opening of the body's <main>; html_page_end closes them.
std::string html_page_begin(const std::string& title);
std::string html_page_end();

// A JSON object (a run's config.json, cross validation's settings) as
// key | value tables: the top-level scalars in one, each top-level object in
// a table of its own with its nested objects as dotted keys. Arrays of
// scalars are joined with ", " (a long one folded under its first values);
// other arrays in <code> as compact JSON.
std::string settings_tables(const nlohmann::json& settings);

// A highlighted box listing warnings (result_warnings.h), or "" for none.
std::string warnings_box(const std::vector<std::string>& warnings);

// Numbers as the tables print them. format_integer: thousands separated by
// commas ("213,807"). format_number: at most 4 significant digits ("0.3971",
// "2.096", "0.25", "1"), scientific below 0.001 ("5e-05"), a whole number
// with separators from 10,000 up; NaN as "-". format_cell: a JSON scalar:
// integers by format_integer, other numbers by format_number, null as "-",
// strings as they are, arrays of scalars joined with ", ".
std::string format_integer(int64_t v);
std::string format_number(double v);
std::string format_cell(const nlohmann::json& v);

// Axis ticks over [lo, hi]: the multiples of a step of 1, 2 or 5 times a
// power of ten, from the one at or below lo to the one at or above hi, the
// smallest such step that needs at most max_ticks of them (at least 2). When
// lo == hi the range is widened around it first.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 7);

// Small formats: a fixed number of decimals; "9.21 s", "12 min 5 s",
// "3 h 12 min" (progress.h's format_duration is the clock form, "1:05", for
// live progress lines); a JSON scalar as text (strings unquoted); a number or
// NaN.
std::string fixed(double v, int decimals);
std::string readable_duration(double seconds);
std::string json_scalar_text(const nlohmann::json& v);
double as_double(const nlohmann::json& v);

// A table cell: <td class="n"> for numbers (right-aligned, tabular digits).
std::string cell(const std::string& html, bool numeric, const std::string& attributes = "");

// One line of a chart: (epoch, value) points, and the first value as
// recorded (integer or float) for a series that never changes.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  nlohmann::json first;
  bool constant() const {
    for (const auto& p : points)
      if (p.second != points[0].second) return false;
    return true;
  }
};

// A vertical mark at an epoch (the selected one), with its label.
struct Marker {
  double epoch = NAN;
  std::string label;
};

struct ChartSize {
  double width, height;
  int x_ticks, y_ticks;
};
inline constexpr ChartSize kMainChart{1000, 320, 16, 7};
inline constexpr ChartSize kSmallChart{500, 230, 8, 5};

// Series order and colour by split: train_ 0, val_ 1, test_ 2, others 3.
int series_rank(const std::string& name);

// A polyline's points in screen coordinates as a chart draws them: of the
// points that fall in one pixel column (consecutive, same floor(x)) it keeps
// the first, the lowest, the highest and the last, in their order. The line
// drawn through them covers the same pixels as the line through all of them,
// and a run of 100,000 epochs charts in as many points as the chart is wide.
std::vector<std::pair<double, double>> pixel_envelope(const std::vector<std::pair<double, double>>& points);

// An SVG line chart over epochs [x0, x1] with a title, a legend, nice axes
// and the marker; x_label names the x axis (another quantity than epochs).
// A series with more points than the chart has pixel columns is drawn
// through its pixel_envelope.
std::string svg_chart(const std::string& title, const std::vector<Series>& series, double x0, double x1,
                      const Marker& marker, const ChartSize& size, const std::string& x_label = "epoch");

}  // namespace qkv::train
