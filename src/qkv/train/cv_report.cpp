#include "qkv/train/cv_report.h"

#include <cmath>
#include <cstdio>

#include "qkv/models/model.h"
#include "qkv/train/html_kit.h"

namespace qkv::train {

namespace {

std::string format_mean_std(const MeanStd& m, double scale, int digits) {
  if (m.n == 0) return "-";
  char buf[128];
  if (m.n == 1)  // one run: no spread to show
    std::snprintf(buf, sizeof buf, "%.*f", digits, m.mean * scale);
  else
    std::snprintf(buf, sizeof buf, "%.*f <span class=\"pm\">&#177; %.*f</span>", digits, m.mean * scale, digits,
                  m.std * scale);
  return buf;
}

}  // namespace

std::string cv_report_html(const nlohmann::json& summary, const NamedRocCurves& curves) {
  const std::string cohort = summary.value("cohort", std::string());
  std::string html = html_page_begin("qkv mhca cv: " + cohort);
  html += "<header>\n<h1>Cross validation: " + escape_html(cohort) + "</h1>\n";
  const auto& settings = summary.at("settings");
  html += "<p class=\"facts\"><b>" + std::to_string(summary.value("runs", 0)) + "</b> runs of stratified <b>" +
          std::to_string(summary.value("folds", 0)) + "</b>-fold cross validation &#183; <b>" +
          std::to_string(summary.value("subjects", 0)) + "</b> subjects (" + std::to_string(summary.value("pd", 0)) +
          " PD, " + std::to_string(summary.value("controls", 0)) + " controls)";
  if (settings.contains("n_features") && settings.contains("selection"))
    html += " &#183; <b>" + format_cell(settings.at("n_features")) + "</b> CpG sites (" +
            escape_html(format_cell(settings.at("selection"))) + ")";
  if (summary.contains("match") && summary.at("match").is_string())
    html += " &#183; " + escape_html(summary.at("match").get<std::string>());
  html +=
      "</p>\n<nav><a href=\"#results\">Results</a><a href=\"#roc\">ROC</a><a href=\"#settings\">Settings</a></nav>\n"
      "</header>\n";
  // One table per aggregation: pooled (qkv's), and fold-averaged with the
  // population std (the paper's Table 1), each AUROC from probabilities and from labels.
  auto table = [&](const std::string& title, const std::string& note, const std::string& section) {
    std::string t =
        "<h3>" + title + "</h3>\n<p class=\"note\">" + note +
        "</p>\n<table class=\"cv\">\n<thead><tr><th>model</th>"
        "<th class=\"c\" title=\"uses the DNA methylation table\">DNA-m</th>"
        "<th class=\"c\" title=\"uses the SPECT volumes\">SPECT</th>"
        "<th class=\"n\">accuracy (%)</th>"
        "<th class=\"n\" title=\"AUROC of the predicted probabilities\">AUROC</th>"
        "<th class=\"n\" title=\"AUROC of the hard predictions at 0.5, as the MHCA authors' code computes it\">"
        "AUROC (labels)</th>"
        "<th class=\"n\">sensitivity</th><th class=\"n\">specificity</th>"
        "<th class=\"n\">parameters</th></tr></thead>\n<tbody>\n";
    for (const auto& name_json : settings.at("models")) {
      const std::string name = name_json.get<std::string>();
      const auto& model = summary.at("models").at(name);
      const auto& m = section.empty() ? model : model.at(section);
      auto ms = [&](const char* key) {
        MeanStd v;
        if (!m.contains(key)) return MeanStd{NAN, NAN, 0};
        v.mean = m.at(key).at("mean").is_null() ? NAN : m.at(key).at("mean").get<double>();
        v.std = m.at(key).at("std").is_null() ? NAN : m.at(key).at("std").get<double>();
        v.n = m.at(key).value("n", 0);
        return v;
      };
      auto check = [](bool yes) {
        return yes ? std::string("<td class=\"c yes\">&#10003;</td>") : std::string("<td class=\"c no\">&#10007;</td>");
      };
      const auto params = model.at("parameters");
      t += "<tr><th>" + escape_html(name) + "</th>" + check(models::find_model(name).reads("methylation")) +
           check(models::find_model(name).reads("spect")) + "<td class=\"n\">" +
           format_mean_std(ms("accuracy"), 100, 2) + "</td><td class=\"n\">" + format_mean_std(ms("auroc"), 1, 3) +
           "</td><td class=\"n\">" + format_mean_std(ms("auroc_hard"), 1, 3) + "</td><td class=\"n\">" +
           format_mean_std(ms("sensitivity"), 1, 3) + "</td><td class=\"n\">" +
           format_mean_std(ms("specificity"), 1, 3) + "</td><td class=\"n\">" +
           (params.is_number_integer() ? format_cell(params) : std::string("-")) + "</td></tr>\n";
    }
    return t + "</tbody>\n</table>\n";
  };
  if (summary.contains("warnings") && summary.at("warnings").is_array())
    html += warnings_box(summary.at("warnings").get<std::vector<std::string>>());
  html += "<h2 id=\"results\">Results</h2>\n";
  html += table("Pooled",
                "Each run's test predictions of all its folds scored together; mean &#177; sample std over runs.", "");
  html += table("Fold mean, as the paper reports",
                "Each fold scored alone, folds averaged per run; mean &#177; population std over runs.", "fold_mean");
  html += "<h2 id=\"roc\">ROC</h2>\n<p class=\"note\">All runs' test predictions pooled.</p>\n" +
          roc_svg(curves, 480, 480) + "\n";
  html += "<h2 id=\"settings\">Settings</h2>\n" + settings_tables(settings);
  html += "<footer>Written by qkv mhca cv. One self-contained file: no scripts, no network.</footer>\n";
  return html + html_page_end();
}

std::string cv_summary_text(const nlohmann::json& summary, const std::vector<std::string>& models) {
  std::string text;
  for (const char* section : {"", "fold_mean"}) {
    text +=
        *section ? "fold-averaged, population std (the paper's Table 1):\n" : "pooled per run, sample std over runs:\n";
    for (const auto& name : models) {
      const auto& model = summary.at("models").at(name);
      const auto& m = *section ? model.at(section) : model;
      auto show = [&](const char* key, double scale) {
        if (!m.contains(key) || m.at(key).at("mean").is_null()) return std::string("n/a");
        const auto& v = m.at(key);
        char buf[64];
        if (v.value("n", 0) == 1 || v.at("std").is_null())  // one run: no spread to show
          std::snprintf(buf, sizeof buf, "%.3f", v.at("mean").get<double>() * scale);
        else
          std::snprintf(buf, sizeof buf, "%.3f +- %.3f", v.at("mean").get<double>() * scale,
                        v.at("std").get<double>() * scale);
        return std::string(buf);
      };
      char line[512];
      std::snprintf(line, sizeof line,
                    "  %-10s accuracy %s %%  AUROC %s  AUROC(labels) %s  sensitivity %s  specificity %s\n",
                    name.c_str(), show("accuracy", 100).c_str(), show("auroc", 1).c_str(),
                    show("auroc_hard", 1).c_str(), show("sensitivity", 1).c_str(), show("specificity", 1).c_str());
      text += line;
    }
  }
  for (const auto& w : summary.value("warnings", std::vector<std::string>{})) text += "warning: " + w + "\n";
  return text;
}

}  // namespace qkv::train
