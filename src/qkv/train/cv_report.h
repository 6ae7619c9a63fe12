#pragma once
// What `mhca cv` shows of a cross validation's summary (summary.json's
// content): report.html, one self-contained page (the results tables, the
// pooled ROC curves, the settings), and the table it prints. Presenters
// only: the numbers are the cross validation's (tasks/mhca_cv.h).
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "qkv/train/binary_metrics.h"

namespace qkv::train {

// Each model's name, its ROC curve on every run's test predictions pooled,
// and that curve's AUROC.
using NamedRocCurves = std::vector<std::tuple<std::string, RocCurve, double>>;

// report.html: the pooled and the fold-averaged (the paper's Table 1)
// results, one row per model of summary["settings"]["models"], the ROC
// curves, the warnings and the settings.
std::string cv_report_html(const nlohmann::json& summary, const NamedRocCurves& curves);

// The table `mhca cv` prints: each of `models` pooled per run (mean +-
// sample std over runs), then fold-averaged with the population std (the
// paper's Table 1), then the warnings.
std::string cv_summary_text(const nlohmann::json& summary, const std::vector<std::string>& models);

}  // namespace qkv::train
