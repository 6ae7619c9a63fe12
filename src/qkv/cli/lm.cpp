// qkv lm train|eval|generate|cache-size|inspect-mlp: the decoder-only
// transformer of the attention core, on byte-level built-in tasks or text;
// train and eval also take its recurrent baseline (--model lstm|gru).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>

#include <torch/torch.h>

#include "qkv/attention/kv_cache.h"
#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/text.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/runtime.h"
#include "qkv/data/lm_data.h"
#include "qkv/lm/exact_match.h"
#include "qkv/lm/generate.h"
#include "qkv/lm/mlp_memory.h"
#include "qkv/lm/recurrent_generate.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/tasks/lm_cache_size.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/train/html_kit.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {

using tasks::LmData;

using tasks::complete_answer;
using tasks::load_lm_model;

void register_train(CLI::App* parent, Action& action) {
  struct State {
    LmData data;
    models::TransformerLMOptions model;  // the transformer, or the budget of a recurrent model
    std::string kind = "transformer";
    int64_t hidden = 0;
  };
  auto s = std::make_shared<State>();
  s->model.d_model = 64;
  TrainCommand spec;
  spec.command = tasks::kLmCommand;
  spec.description = "train the byte-level transformer (or an LSTM/GRU baseline) on a built-in task or a text file";
  spec.default_out = "runs/lm";
  // Defaults that learn `copy` to ~99% exact match in about 20 s on one core (our choice).
  spec.defaults.epochs = 20;
  spec.defaults.batch_size = 32;
  spec.defaults.optim.lr = 5e-3;
  spec.defaults.optim.weight_decay = 0.01;
  spec.defaults.clip_grad_norm = 1.0;
  spec.defaults.select_metric = "loss";  // --task runs pick exact_match unless told (prepare, below)
  spec.select_metric_shown = "exact_match (loss with --text)";
  spec.batch_norm = false;
  spec.add_data_options = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    cmd->get_option("--text")->check(CLI::ExistingFile);
  };
  spec.add_model_options = [s](CLI::App* cmd) {
    cmd->add_option("--model", s->kind,
                    "transformer, or a recurrent baseline with the transformer's parameter count: lstm or gru")
        ->capture_default_str();
    remember_flag(cmd, "model", "--model");
    add_ranged_option(cmd, "--hidden", s->hidden,
                      "lstm/gru: state size per layer; 0 = the largest within the parameter count of the transformer "
                      "that the other model options describe",
                      0, 1 << 20);
    remember_flag(cmd, "hidden", "--hidden");
    add_ranged_option(cmd, "--d-model", s->model.d_model, "model width D (lstm/gru: embedding width)", 1, 65536);
    add_ranged_option(cmd, "--layers", s->model.layers, "transformer blocks L (lstm/gru: recurrent layers)", 1, 1024);
    add_ranged_option(cmd, "--heads", s->model.heads, "attention heads h", 1, 1024);
    add_ranged_option(cmd, "--kv-heads", s->model.kv_heads,
                      "key/value heads, a divisor of h (1 = multi-query); 0 = h", 0, 1024);
    add_ranged_option(cmd, "--dk", s->model.dk, "per-head query/key width r; 0 = D/h", 0, 65536);
    add_ranged_option(cmd, "--dv", s->model.dv, "per-head value width; 0 = D/h", 0, 65536);
    add_ranged_option(cmd, "--mlp-hidden", s->model.mlp_hidden, "MLP hidden units; 0 = 4 D", 0, 1 << 20);
    add_ranged_option(cmd, "--dropout", s->model.dropout, "dropout on attention and MLP outputs", 0, 0.99);
    add_ranged_option(cmd, "--window", s->model.window,
                      "sliding window: each position attends the last W positions (as the cache decodes); 0 = all", 0,
                      1 << 30);
    add_ranged_option(cmd, "--sinks", s->model.sinks, "with --window: first positions every position still attends",
                      0, 1 << 30);
  };
  spec.prepare = [s](const CLI::App& cmd, train::RunRequest& r, const std::string&) {
    LmData data = s->data;
    if (cmd.count("--task") && !data.text.empty()) throw UsageError("--task and --text exclude each other");
    data.seed = r.seed;
    data.validate();
    if (data.is_task() && !cmd.count("--select-metric")) r.train.select_metric = "exact_match";
    const auto model = tasks::lm_model(s->kind, s->model, s->hidden);
    r.model_name = model.name;
    r.model_options = model.options;
    if (model.name != "transformer-lm" && r.train.parallel.rank == 0)
      std::fprintf(stderr, "%s: %s with hidden %s: %s parameters; the transformer-lm of these options: %s\n",
                   tasks::kLmCommand, model.name.c_str(), model.options.at("hidden").dump().c_str(),
                   train::format_integer(model.parameters).c_str(), train::format_integer(model.budget).c_str());
    r.data = data.to_json();
  };
  spec.load = [](train::RunRequest& r, const LoadContext&) {
    const auto data = LmData::from_json(r.data);
    TaskRun run;
    run.splits = data.make();
    run.hooks.metrics = data.metrics();
    return run;
  };
  register_train_command(parent, action, std::move(spec));
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "loss, accuracy and (tasks) exact match of a checkpoint; prints JSON");
  auto o = std::make_shared<EvalOptions>();
  add_eval_options(cmd, *o);
  auto cache_dtype = std::make_shared<std::string>();
  cmd->add_option("--cache-dtype", *cache_dtype,
                  "measure through a KV cache of this type (f32, f16, bf16, int8, int4): every position attends "
                  "keys and values as that cache stores them, and the tasks are decoded with it");
  cmd->callback([o, cache_dtype, &action] {
    action = [o, cache_dtype] {
      const c10::Device device = apply_common_options(o->common);
      std::optional<attention::CacheDtype> dtype;
      if (!cache_dtype->empty()) dtype = attention::parse_cache_dtype(*cache_dtype, "--cache-dtype");
      nlohmann::json config;
      auto model = load_lm_model(o->checkpoint, &config);
      model->to(device);
      auto measured = model;
      if (dtype) {
        auto transformer = std::dynamic_pointer_cast<models::TransformerLM>(model);
        if (!transformer) throw UsageError("--cache-dtype: " + o->checkpoint + " is a recurrent model, which keeps no cache");
        measured = lm::decoding_with_cache(transformer, *dtype);
      }
      const auto data = LmData::from_json(config.at("data"));
      // Tasks: the instances themselves are needed below for greedy decoding.
      data::LmTaskSplits examples;
      if (data.is_task()) examples = data::make_lm_task(data.task, data.seed);
      const auto splits = data.is_task() ? data::lm_task_datasets(examples) : data.make();
      const auto& part = pick_split(splits, o->split);
      auto metrics = train::evaluate(*measured, *part, config.at("train").at("batch_size"), device, data.metrics());
      metrics["bits_per_byte"] = metrics.at("loss").get<double>() / std::log(2.0);
      if (data.is_task()) {
        // Exact match again, by real greedy decoding (KV cache or recurrent state).
        const auto& list = o->split == "train" ? examples.train : o->split == "val" ? examples.val : examples.test;
        int64_t right = 0;
        for (const auto& e : list) right += complete_answer(*model, e.prompt, static_cast<int64_t>(e.answer.size()) + 1, dtype) == e.answer;
        metrics["generated_exact_match"] = list.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(list.size());
      }
      metrics["split"] = o->split;
      metrics["size"] = part->size();
      if (dtype) metrics["cache_dtype"] = attention::cache_dtype_name(*dtype);
      print_json(metrics);
      return 0;
    };
  });
}

void register_generate(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("generate", "continue a prompt with a trained model (KV cache by default)");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, prompt, cache_dtype;
    lm::GenerateOptions gen;
    bool no_cache = false, json = false, stop_at_newline = false;
  };
  auto o = std::make_shared<Opts>();
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint file");
  cmd->add_option("--prompt", o->prompt, "the text to continue (UTF-8)")->required();
  add_ranged_option(cmd, "--max-new", o->gen.max_new,
                    "bytes to generate at most; their keys and values must fit in this machine's memory", 0,
                    kNoMaximum);
  add_ranged_option(cmd, "--temperature", o->gen.temperature,
                    "sampling temperature; 0 = greedy. Default: greedy up to the terminator for a model trained on a task, 1 for text", 0,
                    1000);
  add_ranged_option(cmd, "--top-k", o->gen.top_k, "sample among the k most likely bytes; 0 = all", 0, 256);
  cmd->add_flag("--no-cache", o->no_cache, "recompute the whole prefix at every step instead of using the KV cache");
  cmd->add_option("--cache-dtype", o->cache_dtype,
                  "KV cache element type: f32, f16, bf16, int8 or int4 (blocks of 32 with a float16 scale); default "
                  "the model's");
  cmd->add_option("--save-cache", o->gen.save_cache,
                  "write the prompt's KV cache to this file (resume with --load-cache); --max-new 0 writes it alone");
  cmd->add_option("--load-cache", o->gen.load_cache, "start from a cache --save-cache wrote; the prompt must begin with its text")
      ->check(CLI::ExistingFile);
  add_overwrite_flag(cmd, o->common.overwrite);
  cmd->add_flag("--stop-at-newline", o->stop_at_newline,
                "stop after a newline (the built-in tasks' terminator; the default for a model trained on a task)");
  cmd->add_flag("--json", o->json, "print {prompt, text, tokens} as JSON");
  add_common_options(cmd, o->common, "");
  cmd->callback([o, cmd, &action] {
    const bool temperature_given = cmd->count("--temperature") > 0;
    action = [o, temperature_given] {
      const c10::Device device = apply_common_options(o->common);
      if (o->prompt.empty()) throw UsageError("--prompt must not be empty");
      data::check_utf8(o->prompt, "--prompt");
      auto gen = o->gen;
      if (!o->cache_dtype.empty()) gen.cache_dtype = attention::parse_cache_dtype(o->cache_dtype, "--cache-dtype");
      gen.use_cache = !o->no_cache;
      if (!gen.save_cache.empty()) {
        if (gen.save_cache == gen.load_cache) throw UsageError("--save-cache and --load-cache name the same file");
        check_output_file(gen.save_cache, "--save-cache", o->common.overwrite);
      }
      nlohmann::json config;
      auto model = load_lm_model(o->checkpoint, &config);
      model->to(device);
      auto* recurrent = dynamic_cast<models::RecurrentLM*>(model.get());
      if (recurrent && (gen.cache_dtype || !gen.save_cache.empty() || !gen.load_cache.empty()))
        throw UsageError("--cache-dtype, --save-cache and --load-cache: " + o->checkpoint +
                         " is a recurrent model, whose fixed state is all its memory (no KV cache)");
      // A model trained on a task answers it greedily and ends with the
      // terminator: that answer is what a user should see first (our choice).
      const bool task_default = LmData::from_json(config.at("data")).is_task() && !temperature_given;
      if (task_default) gen.temperature = 0;
      gen.seed = o->common.seed;
      if (o->stop_at_newline || task_default) gen.stop_token = '\n';
      if (!gen.save_cache.empty())
        claim_output_file(gen.save_cache, "--save-cache", o->common.overwrite, OutputMarker{"lm generate"});
      const auto prompt = data::bytes_to_tokens(o->prompt);
      std::vector<int64_t> tokens(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + prompt.numel());
      // Text goes out byte by byte as it is made, so a pipe or a terminal sees
      // it at once and Ctrl-C keeps what was shown (tokens are bytes; the
      // terminal reassembles UTF-8). JSON is one document, printed at the end.
      install_interrupt_handler();
      gen.on_token = [&o](int64_t t) {
        if (!o->json) {
          std::fputc(static_cast<int>(t), stdout);
          std::fflush(stdout);
        }
        return !interrupt_requested();
      };
      const auto result = recurrent ? lm::generate_recurrent(*recurrent, tokens, gen)
                                    : lm::generate(dynamic_cast<models::TransformerLM&>(*model), tokens, gen);
      const bool interrupted = interrupt_requested();
      if (o->json) {
        // Bytes that do not form UTF-8 on their own are shown escaped.
        std::string shown;
        for (int64_t t : result.tokens) shown += t < 128 ? std::string(1, static_cast<char>(t)) : lm::printable_byte(t);
        nlohmann::json doc{{"prompt", o->prompt}, {"text", shown}, {"tokens", result.tokens}, {"cache", gen.use_cache}};
        if (gen.use_cache && !recurrent) {
          doc["cache_bytes"] = result.cache_bytes.total_bytes;
          doc["resumed_positions"] = result.resumed;
        }
        if (interrupted) doc["interrupted"] = true;
        std::printf("%s\n", doc.dump().c_str());
      } else {
        std::printf("\n");
      }
      std::fflush(stdout);
      if (interrupted) {
        std::fprintf(stderr, "lm generate: interrupted after %zu bytes\n", result.tokens.size());
        return kExitInterrupted;
      }
      return 0;
    };
  });
}

void register_cache_size(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "cache-size", "bytes of a KV cache: keys, values and total, for a model's sizes or a trained checkpoint");
  struct Opts {
    tasks::CacheSizeSettings settings;
    bool json = false, article = false;
  };
  auto o = std::make_shared<Opts>();
  auto& c = o->settings;
  add_checkpoint_option(cmd, c.checkpoint, "read layers, heads, kv heads, widths and window from this checkpoint")
      ->required(false);
  add_ranged_option(cmd, "--layers", c.layers, "transformer layers", 1, kNoMaximum);
  add_ranged_option(cmd, "--heads", c.heads, "attention (query) heads per layer", 1, kNoMaximum);
  add_ranged_option(cmd, "--kv-heads", c.kv_heads, "key/value heads stored (1 = multi-query); 0 = --heads", 0,
                    kNoMaximum);
  add_ranged_option(cmd, "--dk", c.dk, "cached key width per head (r)", 1, kNoMaximum);
  add_ranged_option(cmd, "--dv", c.dv, "cached value width per head", 1, kNoMaximum);
  add_ranged_option(cmd, "--head-dim", c.head_dim, "both widths at once (--dk and --dv)", 1, kNoMaximum);
  add_ranged_option(cmd, "--seq", c.seq, "sequence length", 1, kNoMaximum);
  add_ranged_option(cmd, "--batch-size", c.batch_size, "sequences in the batch", 1, kNoMaximum);
  add_old_spelling(cmd, "--batch", "--batch-size", c.batch_size);
  add_ranged_option(cmd, "--window", c.window, "sliding window: positions kept; 0 = all", 0, kNoMaximum);
  add_ranged_option(cmd, "--sinks", c.sinks, "with a window: first positions kept besides it", 0, kNoMaximum);
  cmd->add_option("--dtype", c.dtype, "element type: f16, bf16, f32, f64, int8 or int4 (fp16, float16... accepted)")
      ->capture_default_str();
  cmd->add_flag("--article", o->article,
                "the article's example, then each way of shrinking it: r = 200, 4 kv heads, int8, int4, a 1024 window");
  cmd->add_flag("--json", o->json, "print {key_bytes, value_bytes, total_bytes} (a list with --article)");
  cmd->callback([o, cmd, &action] {
    o->settings.dtype_given = cmd->count("--dtype") > 0;
    action = [o] {
      std::vector<std::pair<std::string, attention::KVCacheShape>> rows;
      if (o->article) {
        if (!o->settings.checkpoint.empty()) throw UsageError("--article and --checkpoint exclude each other");
        attention::parse_cache_dtype(o->settings.dtype, "--dtype");
        rows = tasks::article_cache_shapes();
      } else {
        rows.emplace_back("", tasks::cache_shape(o->settings));
      }
      std::vector<attention::KVCacheSize> sizes;
      for (const auto& row : rows) sizes.push_back(attention::kv_cache_bytes(row.second));
      auto as_json = [](const attention::KVCacheSize& z) {
        return nlohmann::json{{"key_bytes", z.key_bytes}, {"value_bytes", z.value_bytes}, {"total_bytes", z.total_bytes}};
      };
      if (o->json) {
        if (!o->article) {
          std::printf("%s\n", as_json(sizes.front()).dump().c_str());
        } else {
          auto list = nlohmann::json::array();
          for (size_t i = 0; i < rows.size(); ++i) {
            auto row = as_json(sizes[i]);
            row["setting"] = rows[i].first;
            list.push_back(row);
          }
          std::printf("%s\n", list.dump(2).c_str());
        }
        return 0;
      }
      if (o->article) {
        // Decimal GB, as the article counts.
        std::printf("%-64s %12s %12s %9s\n", "", "keys", "keys+values", "of first");
        for (size_t i = 0; i < rows.size(); ++i)
          std::printf("%-64s %9.3f GB %9.3f GB %8.4fx\n", rows[i].first.c_str(), sizes[i].key_bytes / 1e9,
                      sizes[i].total_bytes / 1e9,
                      static_cast<double>(sizes[i].total_bytes) / static_cast<double>(sizes[0].total_bytes));
        return 0;
      }
      auto line = [](const char* what, int64_t bytes) {
        std::printf("%-12s %20lld bytes  (%s)\n", what, static_cast<long long>(bytes), binary_size(bytes).c_str());
      };
      line("key cache", sizes[0].key_bytes);
      line("value cache", sizes[0].value_bytes);
      line("total", sizes[0].total_bytes);
      return 0;
    };
  });
}

void register_inspect_mlp(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "inspect-mlp", "the MLP as a key-value memory: contexts that fire the most active units, tokens they promote");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, text;
    lm::MemoryOptions memory;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint file");
  add_ranged_option(cmd, "--block", o->memory.layer, "block whose MLP to inspect (0-based)", 0, 1023);
  add_old_spelling(cmd, "--layer", "--block", o->memory.layer);
  cmd->add_option("--text", o->text, "UTF-8 text to run through the model")->required()->check(CLI::ExistingFile);
  add_ranged_option(cmd, "--units", o->memory.units, "how many of the most active units", 1, 1 << 20);
  add_ranged_option(cmd, "--contexts", o->memory.contexts, "top contexts (keys) per unit", 1, 100000);
  add_ranged_option(cmd, "--tokens", o->memory.tokens, "top promoted tokens (values) per unit", 1, 256);
  cmd->add_flag("--json", o->json, "print JSON");
  add_common_options(cmd, o->common, "");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      const auto bytes = read_file_bytes(o->text);
      const std::string text(bytes.begin(), bytes.end());
      if (text.empty()) throw DataError(o->text + ": the text file is empty");
      data::check_utf8(text, o->text);
      nlohmann::json config;
      auto model = tasks::load_transformer_lm(o->checkpoint, &config);
      model->to(device);
      const auto units = lm::inspect_mlp(*model, text, o->memory);
      if (o->json) {
        std::printf("%s\n", lm::memory_units_to_json(units).dump(2).c_str());
        return 0;
      }
      for (const auto& u : units) {
        std::printf("unit %lld  mean %.3f  max %.3f\n", static_cast<long long>(u.unit), u.mean_activation, u.max_activation);
        for (const auto& [ctx, a] : u.top_contexts) std::printf("  key   %8.3f  ...%s\n", a, ctx.c_str());
        std::printf("  value");
        for (const auto& [tok, l] : u.top_tokens) std::printf("  '%s' %.2f", tok.c_str(), l);
        std::printf("\n");
      }
      return 0;
    };
  });
}

}  // namespace

void register_lm(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "lm", "the autoregressive transformer (and its LSTM/GRU baseline): train, eval, generate, cache-size, inspect-mlp");
  cmd->require_subcommand(1);
  register_train(cmd, action);
  register_eval(cmd, action);
  register_generate(cmd, action);
  register_cache_size(cmd, action);
  register_inspect_mlp(cmd, action);
}

}  // namespace qkv::cli
