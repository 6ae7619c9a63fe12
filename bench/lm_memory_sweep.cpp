// Fixed memory against growing memory (docs/lm.md, "The recurrent
// baseline"): for the copy and induction tasks at increasing string lengths,
// trains transformer-lm and an LSTM with the same parameter budget (the
// LSTM's hidden size the largest within the transformer's count) on the same
// instances with the same trainer and settings, and reports test exact match
// and bits per byte per model and length. An LSTM carries 2 x layers x hidden
// numbers from one byte to the next whatever the length; the transformer's
// keys and values grow with every position.
//
// Usage: build/bench_lm_memory_sweep OUT [--overwrite] [--threads N] [--quick]
// writes OUT/sweep.csv, sweep.json, sweep.png, report.html (rewritten after
// every run, so an interrupted sweep keeps what it measured) and OUT/runs/
// (one run folder per model, task and length: `qkv lm eval --checkpoint` reads
// them). OUT must be missing or empty; --overwrite replaces what an earlier
// sweep wrote there and nothing else. --quick is a smoke run (two lengths,
// few instances) whose numbers mean nothing.
//
// Every string of a point has exactly the point's length (min_length =
// max_length = L). The full sweep took 10 min 20 s on the 2-core development
// machine with one thread, another program busy on the other core
// (docs/lm.md has its table and picture).
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/output_policy.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/picture/raster.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/train/html_kit.h"
#include "qkv/train/run.h"

namespace {

using namespace qkv;
using namespace qkv::picture;
using nlohmann::json;

// One task of the sweep: its lengths and how much it trains (the same for
// both models).
struct TaskPlan {
  std::string task;
  std::vector<int64_t> lengths;
  int64_t samples;  // instances, split 80/10/10
  int64_t epochs;
};

// Our choice: lengths doubling from 4 to 64, where one copy run takes two
// minutes on one core; induction's letters are distinct, so 26 at most. 4000
// instances for 12 epochs are enough for the LSTM to copy at L = 4 and keep
// the whole sweep near 10 minutes.
const std::vector<TaskPlan> kPlans = {
    {"copy", {4, 8, 16, 32, 64}, 4000, 12},
    {"induction", {4, 8, 16, 26}, 4000, 12},
};
const std::vector<TaskPlan> kQuickPlans = {
    {"copy", {4, 8}, 200, 2},
    {"induction", {4, 8}, 200, 2},
};
const std::vector<std::string> kKinds = {"transformer", "lstm"};
constexpr uint64_t kSeed = 0;  // data, initial weights and batch order of every run

// The transformer whose parameter count both models get: `lm train`'s
// defaults (our choice).
models::TransformerLMOptions transformer_options() {
  models::TransformerLMOptions o;
  o.d_model = 64;
  o.layers = 2;
  o.heads = 4;
  return o;
}

// `lm train`'s training defaults, selecting the epoch by validation exact match.
train::TrainConfig train_config(int64_t epochs) {
  train::TrainConfig c;
  c.epochs = epochs;
  c.batch_size = 32;
  c.optim.lr = 5e-3;
  c.optim.weight_decay = 0.01;
  c.clip_grad_norm = 1.0;
  c.select_metric = "exact_match";
  return c;
}

// One trained model at one task and length.
struct Row {
  std::string task, model;
  int64_t length = 0, parameters = 0, width = 0;  // width: d_model or the LSTM's hidden size
  int64_t memory_floats = 0;                      // what the model carries at the end of an instance
  double exact_match = 0, bits_per_byte = 0, val_exact_match = 0, seconds = 0;
  int64_t selected_epoch = 0;
};

json row_json(const Row& r) {
  return {{"task", r.task},
          {"length", r.length},
          {"model", r.model},
          {"parameters", r.parameters},
          {"width", r.width},
          {"memory_floats", r.memory_floats},
          {"test_exact_match", r.exact_match},
          {"test_bits_per_byte", r.bits_per_byte},
          {"val_exact_match", r.val_exact_match},
          {"selected_epoch", r.selected_epoch},
          {"train_seconds", r.seconds}};
}

// Positions an instance of the task at length L occupies as model input
// (prompt, answer and terminator, minus the last byte).
int64_t instance_tokens(const std::string& task, int64_t length) {
  return task == "copy" ? 2 * length + 1 : length + 3;
}

// The floats a model keeps at the end of one instance: the LSTM's state, the
// transformer's keys and values of every position.
int64_t memory_floats(const tasks::LmModel& m, int64_t tokens) {
  if (m.name == "transformer-lm") {
    const auto o = models::TransformerLMOptions::from_json(m.options);
    return o.layers * tokens * o.heads * (o.head_dk() + o.head_dv());
  }
  return models::recurrent_state_floats(models::RecurrentLMOptions::from_json(m.options, m.name));
}

// What the sweep shows on copy: the shortest length where the LSTM's exact
// match is below 50 %, the longest where the transformer's is at least 95 %,
// and whether the second is at least 4 times the first (the target).
json finding(const std::vector<Row>& rows) {
  int64_t lstm_fails = 0, transformer_holds = 0;
  for (const auto& r : rows) {
    if (r.task != "copy") continue;
    if (r.model == "lstm-lm" && r.exact_match < 0.5 && (lstm_fails == 0 || r.length < lstm_fails))
      lstm_fails = r.length;
    if (r.model == "transformer-lm" && r.exact_match >= 0.95) transformer_holds = std::max(transformer_holds, r.length);
  }
  json f = {{"lstm_below_50_percent_from_length", lstm_fails > 0 ? json(lstm_fails) : json()},
            {"transformer_95_percent_up_to_length", transformer_holds > 0 ? json(transformer_holds) : json()}};
  f["target_met"] = lstm_fails > 0 && transformer_holds >= 4 * lstm_fails;
  return f;
}

// A length of the finding, "none" where no length qualifies.
std::string length_text(const json& length) { return length.is_number() ? length.dump() : "none"; }

std::string csv_text(const std::vector<Row>& rows) {
  std::ostringstream o;
  o << "task,length,model,parameters,width,memory_floats,test_exact_match,test_bits_per_byte,val_exact_match,"
       "selected_epoch,train_seconds\n";
  for (const auto& r : rows)
    o << r.task << ',' << r.length << ',' << r.model << ',' << r.parameters << ',' << r.width << ',' << r.memory_floats
      << ',' << train::fixed(r.exact_match, 4) << ',' << train::fixed(r.bits_per_byte, 4) << ','
      << train::fixed(r.val_exact_match, 4) << ',' << r.selected_epoch << ',' << train::fixed(r.seconds, 1) << '\n';
  return o.str();
}

// ---- The picture ------------------------------------------------------------

const Rgb kInk{31, 35, 40}, kMuted{87, 96, 106}, kGrid{230, 234, 239}, kAxis{140, 149, 159};

Rgb model_colour(const std::string& model) { return model == "transformer-lm" ? Rgb{47, 111, 223} : Rgb{232, 113, 10}; }

// A polyline, dashed for induction so the two tasks differ without colour.
void draw_series(RgbImage& image, const std::vector<std::pair<double, double>>& points, Rgb colour, bool dashed) {
  constexpr double kDash = 9, kGap = 6, kWidth = 2.5;
  for (size_t i = 1; i < points.size(); ++i) {
    const auto [x0, y0] = points[i - 1];
    const auto [x1, y1] = points[i];
    if (!dashed) {
      draw_line(image, x0, y0, x1, y1, colour, kWidth);
      continue;
    }
    const double length = std::hypot(x1 - x0, y1 - y0);
    for (double s = 0; s < length; s += kDash + kGap) {
      const double e = std::min(length, s + kDash);
      draw_line(image, x0 + (x1 - x0) * s / length, y0 + (y1 - y0) * s / length, x0 + (x1 - x0) * e / length,
                y0 + (y1 - y0) * e / length, colour, kWidth);
    }
  }
  for (const auto& [x, y] : points) {
    if (dashed) {
      fill_rect(image, static_cast<int64_t>(x) - 4, static_cast<int64_t>(y) - 4, 9, 9, colour);
    } else {
      fill_disc(image, x, y, 4.5, colour);
    }
  }
}

// Exact match against string length on a log2 axis, a line per model and
// task, the legend on the right.
RgbImage sweep_picture(const std::vector<Row>& rows, const std::string& subtitle) {
  constexpr int64_t W = 960, H = 540, left = 70, right = 250, top = 78, bottom = 62;
  RgbImage image(W, H);
  const int64_t pw = W - left - right, ph = H - top - bottom;
  draw_text(image, left, 16, "Test exact match against string length, same parameter budget", kInk, TextSize::Large);
  draw_text(image, left, 42, subtitle, kMuted);
  std::vector<int64_t> lengths;
  for (const auto& r : rows)
    if (std::find(lengths.begin(), lengths.end(), r.length) == lengths.end()) lengths.push_back(r.length);
  std::sort(lengths.begin(), lengths.end());
  if (lengths.empty()) return image;
  const double lo = std::log2(static_cast<double>(lengths.front())) - 0.25,
               hi = std::log2(static_cast<double>(lengths.back())) + 0.25;
  auto px = [&](double length) { return left + (std::log2(length) - lo) / (hi - lo) * static_cast<double>(pw); };
  auto py = [&](double v) { return top + (1.0 - v) * static_cast<double>(ph); };
  const int64_t line = text_height(TextSize::Small);
  for (int i = 0; i <= 4; ++i) {
    const double v = i / 4.0;
    const auto y = static_cast<int64_t>(std::lround(py(v)));
    fill_rect(image, left, y, pw, 1, i == 0 ? kAxis : kGrid);
    const std::string label = compact_number(v);
    draw_text(image, left - 8 - text_width(label, TextSize::Small), y - line / 2, label, kMuted);
  }
  for (const int64_t length : lengths) {
    const auto x = static_cast<int64_t>(std::lround(px(static_cast<double>(length))));
    fill_rect(image, x, top, 1, ph, kGrid);
    fill_rect(image, x, top + ph, 1, 5, kAxis);
    const std::string label = std::to_string(length);
    draw_text(image, x - text_width(label, TextSize::Small) / 2, top + ph + 8, label, kMuted);
  }
  const std::string x_label = "string length L (log scale)";
  draw_text(image, left + pw / 2 - text_width(x_label, TextSize::Small) / 2, H - 26, x_label, kMuted);
  draw_text(image, left - 50, top - line - 10, "exact match", kMuted);
  // 50 % and 95 %, the levels the finding is read at.
  for (const double level : {0.5, 0.95})
    for (int64_t x = left; x < left + pw; x += 6) fill_rect(image, x, std::lround(py(level)), 3, 1, kAxis);

  int64_t legend_y = top;
  const int64_t legend_x = left + pw + 24;
  for (const std::string task : {"copy", "induction"})
    for (const std::string model : {"transformer-lm", "lstm-lm"}) {
      std::vector<std::pair<double, double>> points;
      for (const auto& r : rows)
        if (r.task == task && r.model == model)
          points.push_back({px(static_cast<double>(r.length)), py(r.exact_match)});
      if (points.empty()) continue;
      std::sort(points.begin(), points.end());
      const bool dashed = task == "induction";
      draw_series(image, points, model_colour(model), dashed);
      const double mid = static_cast<double>(legend_y) + line / 2.0;
      draw_series(image, {{legend_x, mid}, {legend_x + 34.0, mid}}, model_colour(model), dashed);
      draw_text(image, legend_x + 44, legend_y, model + ", " + task, kInk);
      legend_y += line + 12;
    }
  return image;
}

// ---- The report -------------------------------------------------------------

std::string report_html(const std::vector<Row>& rows, const json& settings, const json& found,
                        const std::string& command, double seconds) {
  std::ostringstream o;
  o << train::html_page_begin("qkv lm: fixed memory against growing memory");
  o << "<h1>Fixed memory against growing memory</h1>\n";
  o << "<p class=\"facts\">transformer-lm and lstm-lm with the same parameter budget, trained on the same instances "
       "with the same settings; every string of a point has length L. <code>"
    << train::escape_html(command) << "</code>, " << train::readable_duration(seconds) << ".</p>\n";
  std::vector<train::Series> series;
  for (const std::string task : {"copy", "induction"})
    for (const std::string model : {"transformer-lm", "lstm-lm"}) {
      train::Series s{model + " " + task, {}, json()};
      for (const auto& r : rows)
        if (r.task == task && r.model == model) s.points.push_back({static_cast<double>(r.length), r.exact_match});
      if (!s.points.empty()) series.push_back(std::move(s));
    }
  double x1 = 1;
  for (const auto& r : rows) x1 = std::max(x1, static_cast<double>(r.length));
  if (!series.empty())
    o << train::svg_chart("test exact match", series, 0, x1, {}, train::ChartSize{1000, 360, 16, 6}, "string length L");
  o << "<p>Copy: the LSTM's exact match is below 50 % from length "
    << length_text(found.at("lstm_below_50_percent_from_length"))
    << "; the transformer's is at least 95 % up to length "
    << length_text(found.at("transformer_95_percent_up_to_length"))
    << " (target, 4&#215; the first: " << (found.at("target_met").get<bool>() ? "met" : "not met") << ").</p>\n";
  o << "<table>\n<thead><tr><th>task</th><th>L</th><th>model</th><th>parameters</th><th>width</th>"
       "<th>memory floats</th><th>test exact match</th><th>test bits/byte</th><th>val exact match</th>"
       "<th>epoch</th><th>seconds</th></tr></thead>\n<tbody>\n";
  for (const auto& r : rows)
    o << "<tr>" << train::cell(r.task, false) << train::cell(std::to_string(r.length), true)
      << train::cell(r.model, false) << train::cell(train::format_integer(r.parameters), true)
      << train::cell(std::to_string(r.width), true) << train::cell(train::format_integer(r.memory_floats), true)
      << train::cell(train::fixed(r.exact_match, 3), true) << train::cell(train::fixed(r.bits_per_byte, 3), true)
      << train::cell(train::fixed(r.val_exact_match, 3), true) << train::cell(std::to_string(r.selected_epoch), true)
      << train::cell(train::fixed(r.seconds, 0), true) << "</tr>\n";
  o << "</tbody></table>\n";
  o << "<p class=\"note\">width: d_model of the transformer, hidden size of the LSTM. memory floats: what the model "
       "keeps at the end of an instance, the LSTM's state (fixed) or the transformer's keys and values (growing "
       "with the instance).</p>\n";
  o << "<h2>Settings</h2>\n" << train::settings_tables(settings);
  o << train::html_page_end();
  return o.str();
}

void write_outputs(const std::string& out, const std::vector<Row>& rows, const json& settings,
                   const std::string& command, double seconds, bool done) {
  const json found = finding(rows);
  json doc = {{"command", command}, {"settings", settings}, {"seconds", seconds},
              {"complete", done},   {"finding", found},     {"rows", json::array()}};
  for (const auto& r : rows) doc["rows"].push_back(row_json(r));
  write_file_atomic(out + "/sweep.json", json_text(doc) + "\n");
  write_file_atomic(out + "/sweep.csv", csv_text(rows));
  const auto t = transformer_options();
  const auto transformer = tasks::lm_model("transformer", t), lstm = tasks::lm_model("lstm", t);
  const std::string subtitle = "transformer-lm d_model " + std::to_string(t.d_model) + ", " + std::to_string(t.layers) +
                               " blocks: " + train::format_integer(transformer.parameters) + " parameters; lstm-lm " +
                               std::to_string(t.layers) + " layers, hidden " + lstm.options.at("hidden").dump() + ": " +
                               train::format_integer(lstm.parameters) + "; solid copy, dashed induction";
  write_png(out + "/sweep.png", sweep_picture(rows, subtitle));
  write_file_atomic(out + "/report.html", report_html(rows, settings, found, command, seconds));
}

int usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_lm_memory_sweep: error: %s\n"
               "usage: bench_lm_memory_sweep OUT [--overwrite] [--threads N] [--quick]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  std::string out;
  bool overwrite = false, quick = false;
  int threads = 1;
  std::string command = "build/bench_lm_memory_sweep";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    command += " " + a;
    if (a == "--overwrite") {
      overwrite = true;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--threads" && i + 1 < argc) {
      command += std::string(" ") + argv[i + 1];
      threads = std::atoi(argv[++i]);
      if (threads < 0) return usage("--threads must be at least 0 (0: one per core)");
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option " + a);
    } else if (out.empty()) {
      out = a;
    } else {
      return usage("one output folder, not '" + out + "' and '" + a + "'");
    }
  }
  if (out.empty()) return usage("give the output folder");
  try {
    set_threads(threads);
    const auto& plans = quick ? kQuickPlans : kPlans;
    json settings = {{"transformer", transformer_options().to_json()},
                     {"train", train_config(1).to_json()},
                     {"seed", kSeed},
                     {"threads", at::get_num_threads()},
                     {"quick", quick}};
    for (const auto& p : plans)
      settings["tasks"][p.task] = {{"lengths", p.lengths}, {"samples", p.samples}, {"epochs", p.epochs}};
    settings["train"].erase("epochs");
    const auto claim = claim_output_dir(out, "OUT", overwrite, {"bench lm_memory_sweep", settings});
    install_interrupt_handler();
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    std::vector<Row> rows;
    for (const auto& plan : plans)
      for (const int64_t length : plan.lengths) {
        tasks::LmData data;
        data.task.task = plan.task;
        data.task.samples = plan.samples;
        data.task.min_length = data.task.max_length = length;
        data.seed = kSeed;
        data.validate();
        const auto splits = data.make();
        for (const auto& kind : kKinds) {
          const auto model = tasks::lm_model(kind, transformer_options());
          train::RunRequest request;
          request.command = tasks::kLmCommand;
          request.model_name = model.name;
          request.model_options = model.options;
          request.data = data.to_json();
          request.seed = kSeed;
          request.train = train_config(plan.epochs);
          request.train.seed = kSeed;
          train::TrainHooks hooks;
          hooks.quiet = true;
          hooks.metrics = data.metrics();
          const std::string dir = out + "/runs/" + plan.task + "-L" + std::to_string(length) + "-" + kind;
          seed_everything(kSeed);  // the initial weights depend on the run, not on what ran before
          const auto run_start = std::chrono::steady_clock::now();
          const auto result = train::execute_run(request, dir, false, splits, hooks);
          if (result.interrupted) {
            write_outputs(out, rows, settings, command, elapsed(), false);
            std::fprintf(stderr, "interrupted: %s holds the %zu runs finished\n", out.c_str(), rows.size());
            return kExitInterrupted;
          }
          Row r;
          r.task = plan.task;
          r.length = length;
          r.model = model.name;
          r.parameters = model.parameters;
          r.width = model.options.contains("hidden") ? model.options.at("hidden").get<int64_t>()
                                                     : model.options.at("d_model").get<int64_t>();
          r.memory_floats = memory_floats(model, instance_tokens(plan.task, length));
          const auto& test = result.summary.at("test");
          r.exact_match = test.at("exact_match").get<double>();
          r.bits_per_byte = test.at("loss").get<double>() / std::log(2.0);
          r.val_exact_match = result.summary.at("val").at("exact_match").get<double>();
          r.selected_epoch = result.summary.at("selected_epoch").get<int64_t>();
          r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
          rows.push_back(r);
          std::printf("%-9s L %3lld  %-14s %7lld parameters  test exact match %.3f  bits/byte %.3f  (%.0f s)\n",
                      r.task.c_str(), static_cast<long long>(length), r.model.c_str(),
                      static_cast<long long>(r.parameters), r.exact_match, r.bits_per_byte, r.seconds);
          std::fflush(stdout);
          write_outputs(out, rows, settings, command, elapsed(), false);
        }
      }
    write_outputs(out, rows, settings, command, elapsed(), true);
    const json found = finding(rows);
    std::printf("copy: lstm-lm below 50 %% from L %s, transformer-lm at least 95 %% up to L %s; target (4x) %s\n",
                length_text(found.at("lstm_below_50_percent_from_length")).c_str(),
                length_text(found.at("transformer_95_percent_up_to_length")).c_str(),
                found.at("target_met").get<bool>() ? "met" : "not met");
    std::printf("%s: sweep.csv, sweep.json, sweep.png, report.html, runs/ (%s)\n", out.c_str(),
                train::readable_duration(elapsed()).c_str());
    return 0;
  } catch (const UsageError& e) {
    return usage(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lm_memory_sweep: error: %s\n", e.what());
    return 1;
  }
}
