#pragma once
// The language-model tasks: the built-in byte-level tasks (copy, reverse,
// addition, induction) or a text file, as config.json records them, the
// splits and the metric. `qkv lm` is its CLI.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/data/lm_data.h"
#include "qkv/lm/generate.h"
#include "qkv/lm/mlp_memory.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/metrics.h"

namespace qkv::tasks {

inline constexpr const char* kLmCommand = "lm train";

struct LmData {
  data::LmTaskOptions task;
  std::string text;  // a text file instead of a task
  int64_t context = 128;
  uint64_t seed = 0;
  data::TextFingerprint text_fingerprint;  // of `text` when the run began

  LmData();
  bool is_task() const { return text.empty(); }
  nlohmann::json to_json() const { return fields_to_json(*this); }
  static LmData from_json(const nlohmann::json& j) { return fields_from_json<LmData>(j, "the run's data settings"); }
  void validate() const;  // ConfigError naming the key
  data::Splits make() const;
  // Exact match for the tasks; the trainer's default (accuracy) for text.
  train::MetricFactory metrics() const;
};

template <typename V>
void visit_fields(LmData& d, V&& visit) {
  visit(Field{"text", "train on this UTF-8 text file instead of a task"}.existing_file(), d.text);
  visit_fields(d.task, visit);
  visit(Field{"context", "text: training window in bytes"}.range(1, 1 << 20), d.context);
  visit(Field{"seed", "", ""}, d.seed);  // --seed
  visit(Field{"text_bytes", "", ""}, d.text_fingerprint.bytes);
  visit(Field{"text_crc32", "", ""}, d.text_fingerprint.crc32);
}

// The model an LM run trains, from `lm train --model`: the transformer, or a
// recurrent baseline on the transformer's parameter budget.
struct LmModel {
  std::string name;        // registry name: transformer-lm, lstm-lm, gru-lm
  nlohmann::json options;  // its options, defaults filled in
  int64_t parameters = 0;
  int64_t budget = 0;  // parameters of the transformer-lm the options describe
};

// `lm train`'s model settings: the kind, a recurrent model's state size,
// and the transformer's sizes (a recurrent model's budget and widths).
struct LmModelSettings {
  std::string kind = "transformer";
  int64_t hidden = 0;
  models::TransformerLMOptions transformer;
  LmModelSettings() { transformer.d_model = 64; }  // our choice, with LmData's defaults
};

template <typename V>
void visit_fields(LmModelSettings& s, V&& visit) {
  auto& t = s.transformer;
  visit(Field{"model", "transformer, or a recurrent baseline with the transformer's parameter count: lstm or gru"},
        s.kind);
  visit(Field{"hidden",
              "lstm/gru: state size per layer; 0 = the largest within the parameter count of the transformer that "
              "the other model options describe"}
            .range(0, 1 << 20),
        s.hidden);
  visit(Field{"d_model", "model width D (lstm/gru: embedding width)"}.range(1, 65536), t.d_model);
  visit(Field{"layers", "transformer blocks L (lstm/gru: recurrent layers)"}.range(1, 1024), t.layers);
  visit(Field{"heads", "attention heads h"}.range(1, 1024), t.heads);
  visit(Field{"kv_heads", "key/value heads, a divisor of h (1 = multi-query); 0 = h"}.range(0, 1024), t.kv_heads);
  visit(Field{"dk", "per-head query/key width r; 0 = D/h"}.range(0, 65536), t.dk);
  visit(Field{"dv", "per-head value width; 0 = D/h"}.range(0, 65536), t.dv);
  visit(Field{"mlp_hidden", "MLP hidden units; 0 = 4 D"}.range(0, 1 << 20), t.mlp_hidden);
  visit(Field{"dropout", "dropout on attention and MLP outputs"}.range(0, 0.99), t.dropout);
  visit(Field{"window", "sliding window: each position attends the last W positions (as the cache decodes); 0 = all"}
            .range(0, 1 << 30),
        t.window);
  visit(Field{"sinks", "with --window: first positions every position still attends"}.range(0, 1 << 30), t.sinks);
}

// The kinds lm_model takes: transformer, lstm, gru.
const std::vector<std::string>& lm_model_kinds();

// kind "transformer" gives `transformer` itself (hidden must be 0). "lstm"
// and "gru" give a recurrent LM with the transformer's d_model as embedding
// width, its layers as recurrent layers and its dropout, and a hidden state of
// `hidden`, or for hidden 0 the largest one whose model has at most the
// transformer's parameters. ConfigError naming "model" (an unknown kind) or
// "hidden"; UsageError for bad model options.
LmModel lm_model(const std::string& kind, const models::TransformerLMOptions& transformer, int64_t hidden = 0);

struct LmTrainSettings {
  LmData data;
  LmModelSettings model;
};

// `lm train` on `settings`, which the front end fills before a run. Defaults
// that learn `copy` to ~99% exact match in about 20 s on one core (our
// choice); a task run selects by exact match unless select_metric is given.
TrainTask lm_train_task(std::shared_ptr<const LmTrainSettings> settings);

// The model of an `lm train` checkpoint (the transformer or a recurrent
// baseline), its run record in *config when given.
models::ModelPtr load_lm_model(const train::CheckpointFile& checkpoint, nlohmann::json* config = nullptr);
// The same for commands that read transformers only (the KV cache, the MLP
// as memory): UsageError naming the checkpoint's model otherwise.
std::shared_ptr<models::TransformerLM> load_transformer_lm(const train::CheckpointFile& checkpoint,
                                                           nlohmann::json* config = nullptr);

// A task's answer to `prompt` by greedy decoding (at most max_new bytes, up
// to the newline), through the KV cache (of `cache_dtype`, or the model's
// type) or the recurrent state.
std::string complete_answer(models::Model& model, const std::string& prompt, int64_t max_new,
                            std::optional<attention::CacheDtype> cache_dtype);

// `lm eval`: loss, bits per byte, accuracy and (tasks) exact match of a
// checkpoint on its run's `split`; for a task also the exact match of real
// greedy decoding. With `cache_dtype` (f32, f16, bf16, f64, int8, int4; "" =
// none) every position attends keys and values as that cache stores them and
// the answers are decoded with it (a recurrent model keeps no cache: UsageError).
// `batch_size` 0 = the run's (train::stored_run_eval_batch_size).
nlohmann::json evaluate_lm_run(const train::CheckpointFile& checkpoint, const std::string& split, int64_t batch_size,
                               const std::string& cache_dtype, const c10::Device& device);

// `lm generate`: a prompt continued by a trained model.
struct GenerateSettings {
  train::CheckpointFile checkpoint;
  std::string prompt, cache_dtype;
  lm::GenerateOptions gen;
  bool no_cache = false, stop_at_newline = false, json = false;
  bool temperature_given = false;  // else a model trained on a task answers greedily
  bool overwrite = false;          // of save_cache, when qkv wrote it
};

template <typename V>
void visit_fields(GenerateSettings& s, V&& visit) {
  visit(Field{"prompt", "the text to continue (UTF-8)"}.needed(), s.prompt);
  visit(Field{"max_new", "bytes to generate at most; their keys and values must fit in this machine's memory"}.at_least(
            0),
        s.gen.max_new);
  visit(Field{"temperature",
              "sampling temperature; 0 = greedy. Default: greedy up to the terminator for a model trained on a "
              "task, 1 for text"}
            .range(0, 1000),
        s.gen.temperature);
  visit(Field{"top_k", "sample among the k most likely bytes; 0 = all"}.range(0, 256), s.gen.top_k);
  visit(Field{"no_cache", "recompute the whole prefix at every step instead of using the KV cache"}, s.no_cache);
  visit(Field{"cache_dtype",
              "KV cache element type: f32, f16, bf16, f64, int8 or int4 (blocks of 32 with a float16 scale); default "
              "the model's"},
        s.cache_dtype);
  visit(Field{"save_cache",
              "write the prompt's KV cache to this file (resume with --load-cache); --max-new 0 writes it alone"},
        s.gen.save_cache);
  visit(
      Field{"load_cache", "start from a cache --save-cache wrote; the prompt must begin with its text"}.existing_file(),
      s.gen.load_cache);
  visit(Field{"stop_at_newline",
              "stop after a newline (the built-in tasks' terminator; the default for a model trained on a task)"},
        s.stop_at_newline);
  visit(Field{"json", "print {prompt, text, tokens} as JSON"}, s.json);
}

// Generates from s.prompt, calling on_token with each new byte as it is made
// (returning false stops). Returns {prompt, text (bytes that are not UTF-8
// on their own escaped), tokens, cache[, cache_bytes, resumed_positions]}.
// ConfigError/UsageError for bad settings or a recurrent model with cache
// settings; the prompt cache file is checked before the model is read.
nlohmann::json generate_text(const GenerateSettings& s, uint64_t seed, const c10::Device& device,
                             const std::function<bool(int64_t token)>& on_token);

// `lm inspect-mlp`: the units of a transformer checkpoint's MLP read over a
// UTF-8 text file (DataError naming it when empty or not UTF-8).
std::vector<lm::MemoryUnit> inspect_mlp_file(const train::CheckpointFile& checkpoint, const std::string& text_file,
                                             const lm::MemoryOptions& options, const c10::Device& device);

}  // namespace qkv::tasks
