// qkv lm train|eval|generate|cache-size|inspect-mlp: the decoder-only
// transformer of the attention core, on byte-level built-in tasks or text;
// train and eval also take its recurrent baseline (--model lstm|gru).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/tasks/lm_cache_size.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {

void register_lm_eval(CLI::App* parent, Action& action) {
  auto cache_dtype = std::make_shared<std::string>();
  add_eval_command(
      parent, action, "loss, accuracy and (tasks) exact match of a checkpoint; prints JSON",
      [cache_dtype](const train::CheckpointFile& checkpoint, const std::string& split, int64_t batch_size,
                    const c10::Device& device) {
        return tasks::evaluate_lm_run(checkpoint, split, batch_size, *cache_dtype, device);
      },
      [cache_dtype](CLI::App* cmd) {
        cmd->add_option(
            "--cache-dtype", *cache_dtype,
            "measure through a KV cache of this type (f32, f16, bf16, f64, int8, int4): every position attends "
            "keys and values as that cache stores them, and the tasks are decoded with it");
      });
}

void register_lm_generate(CLI::App* parent, Action& action) {
  add_settings_command<tasks::GenerateSettings>(
      parent, action,
      CommandText("generate", "continue a prompt with a trained model (KV cache by default)")
          .heading("Generation")
          .checkpoint("checkpoint file"),
      [](const auto& o, const c10::Device& device) {
        auto s = o.settings;
        s.checkpoint = o.checkpoint;
        s.temperature_given = o.given("temperature");
        s.overwrite = o.run.overwrite;
        // Text goes out byte by byte as it is made, so a pipe or a terminal sees
        // it at once and Ctrl-C keeps what was shown (tokens are bytes; the
        // terminal reassembles UTF-8). JSON is one document, printed at the end.
        install_interrupt_handler();
        auto doc = tasks::generate_text(s, o.run.seed, device, [&s](int64_t t) {
          if (!s.json) {
            std::fputc(static_cast<int>(t), stdout);
            std::fflush(stdout);
          }
          return !interrupt_requested();
        });
        const bool interrupted = interrupt_requested();
        if (interrupted) doc["interrupted"] = true;
        std::printf("%s\n", s.json ? doc.dump().c_str() : "");
        std::fflush(stdout);
        if (!interrupted) return 0;
        std::fprintf(stderr, "lm generate: interrupted after %zu bytes\n", doc.at("tokens").size());
        return kExitInterrupted;
      },
      [](CLI::App* cmd, auto& o) { add_overwrite_flag(cmd, o.run.overwrite); });
}

// lm cache-size's settings: the cache's sizes, and --article.
struct CacheSizeCommandSettings {
  tasks::CacheSizeSettings cache;
  bool article = false;
};
template <typename V>
void visit_fields(CacheSizeCommandSettings& s, V&& visit) {
  visit_fields(s.cache, visit);
}

void register_lm_cache_size(CLI::App* parent, Action& action) {
  add_settings_command<CacheSizeCommandSettings>(
      parent, action,
      CommandText("cache-size",
                  "bytes of a KV cache: keys, values and total, for a model's sizes or a trained checkpoint")
          .heading("Cache")
          .checkpoint("read layers, heads, kv heads, widths and window from this checkpoint")
          .json("print {key_bytes, value_bytes, total_bytes} (a list with --article)")
          .run_options({}),  // arithmetic: no seed, threads or device
      [](const auto& o, const c10::Device&) {
        auto s = o.settings.cache;
        s.checkpoint = o.checkpoint;
        s.dtype_given = o.given("dtype");
        s.window_given = o.given("window");
        s.sinks_given = o.given("sinks");
        std::printf("%s", tasks::cache_size_report(s, o.settings.article, o.json).c_str());
        return 0;
      },
      [](CLI::App* cmd, auto& o) {
        cmd->get_option("--checkpoint")->required(false);  // or the sizes as options
        cmd->add_flag(
            "--article", o.settings.article,
            "the article's example, then each way of shrinking it: r = 200, 4 kv heads, int8, int4, a 1024 window");
      });
}

// lm inspect-mlp's settings: the memory's and the text to run.
struct InspectMlpSettings {
  lm::MemoryOptions memory;
  std::string text;
};
template <typename V>
void visit_fields(InspectMlpSettings& s, V&& visit) {
  visit_fields(s.memory, visit);
  visit(Field{"text", "UTF-8 text to run through the model"}.needed().existing_file(), s.text);
}

void register_lm_inspect_mlp(CLI::App* parent, Action& action) {
  add_settings_command<InspectMlpSettings>(
      parent, action,
      CommandText("inspect-mlp",
                  "the MLP as a key-value memory: contexts that fire the most active units, tokens they promote")
          .heading("MLP memory")
          .checkpoint("checkpoint file")
          .json("print JSON"),
      [](const auto& o, const c10::Device& device) {
        const auto units = tasks::inspect_mlp_file(o.checkpoint, o.settings.text, o.settings.memory, device);
        std::printf("%s", o.json ? (lm::memory_units_to_json(units).dump(2) + "\n").c_str()
                                 : lm::memory_units_text(units).c_str());
        return 0;
      });
}

}  // namespace

void register_lm(CLI::App& app, Action& action) {
  add_command_group(app, action, "lm",
                    "the autoregressive transformer (and its LSTM/GRU baseline): train, eval, generate, cache-size, "
                    "inspect-mlp",
                    {field_train_command(tasks::lm_train_task), register_lm_eval, register_lm_generate,
                     register_lm_cache_size, register_lm_inspect_mlp});
}

}  // namespace qkv::cli
