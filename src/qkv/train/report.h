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
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/train/html_kit.h"

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

// How the terminal and the report name a summary's split: "test" as "test
// TEST_LABEL" (a run's test rotation: "test so3"; "test" when empty),
// "test_NAME" as "test NAME", the others as they are.
std::string split_label(const std::string& key, const std::string& test_label);

// The test rotation a run's config.json names in data.protocol ("z/so3":
// "so3", "i" read as "none"); "" without one.
std::string test_label_of_config(const nlohmann::json& config);

void write_report_html(const std::string& path, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& summary, const nlohmann::json& config);

}  // namespace qkv::train
