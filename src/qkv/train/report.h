#pragma once
// report.html: one self-contained page (inline SVG, no scripts, no network)
// with the run's curves and its summary. The markup is well-formed XML so
// that any XML tool can check it.
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::train {

// history: one object per epoch ({"epoch": 1, "train_loss": ..., "val_accuracy": ...});
// every numeric key except "epoch" becomes a curve, and keys that differ only
// by a train_/val_/test_ prefix share a chart.
std::string render_report_html(const std::string& title, const nlohmann::json& history,
                               const nlohmann::json& summary, const nlohmann::json& config);

void write_report_html(const std::string& path, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& summary, const nlohmann::json& config);

std::string escape_html(const std::string& text);

}  // namespace qkv::train
