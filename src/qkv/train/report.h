#pragma once
// report.html: one self-contained page (inline SVG, no scripts, no network)
// with the run's curves and its summary. The markup is well-formed XML so
// that any XML tool can check it.
//
// The page, top to bottom: the title and a line of key facts; the run's
// scalar facts (selected epoch, epochs, parameters, ...) as a two-column
// table; one row per evaluated split (val, test, test_so3, ...) with one
// column per metric; the per-category mIoU of part segmentation; the curves,
// with the selected epoch marked; per-class precision / recall / F1 and the
// confusion matrix of each classification split; the settings as key | value
// tables.
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::train {

// history: one object per epoch ({"epoch": 1, "train_loss": ..., "val_accuracy": ...});
// every numeric key except "epoch" becomes a curve, and keys that differ only
// by a train_/val_/test_ prefix share a chart. A chart whose every series has
// one value all run long is not drawn: its series are listed as constants.
// Bookkeeping series (lr, seconds, shapes, samples, tokens, ...) get smaller
// charts after the loss and metric charts. summary["selected_epoch"] (or, in
// a run still training, summary["best_epoch"]) is marked on every chart.
std::string render_report_html(const std::string& title, const nlohmann::json& history, const nlohmann::json& summary,
                               const nlohmann::json& config);

void write_report_html(const std::string& path, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& summary, const nlohmann::json& config);

std::string escape_html(const std::string& text);

// The pieces other pages (qkv mhca cv's report) share with report.html, so
// that every report qkv writes looks alike.

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

}  // namespace qkv::train
