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
#include "qkv/models/transformer_lm.h"
#include "qkv/train/metrics.h"

namespace qkv::tasks {

inline constexpr const char* kLmCommand = "lm train";

struct LmData {
  data::LmTaskOptions task;
  std::string text;  // a text file instead of a task
  int64_t context = 128;
  uint64_t seed = 0;

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
  visit(Field{"task", "built-in task: copy, reverse, addition, induction"}, d.task.task);
  visit(Field{"text", "train on this UTF-8 text file instead of a task"}, d.text);
  visit(Field{"samples", "task instances (80/10/10 train/val/test)"}.range(10, 1e8), d.task.samples);
  visit(Field{"min_length", "task string length, smallest"}.range(1, 1e5), d.task.min_length);
  visit(Field{"max_length", "task string length, largest"}.range(1, 1e5), d.task.max_length);
  visit(Field{"max_digits", "addition: digits per operand, at most"}.range(1, 18), d.task.max_digits);
  visit(Field{"context", "text: training window in bytes"}.range(1, 1 << 20), d.context);
  visit(Field{"seed", "", ""}, d.seed);  // --seed
}

// The model an LM run trains, from `lm train --model`: the transformer, or a
// recurrent baseline on the transformer's parameter budget.
struct LmModel {
  std::string name;  // registry name: transformer-lm, lstm-lm, gru-lm
  nlohmann::json options;  // its options, defaults filled in
  int64_t parameters = 0;
  int64_t budget = 0;  // parameters of the transformer-lm the options describe
};

// The kinds lm_model takes: transformer, lstm, gru.
const std::vector<std::string>& lm_model_kinds();

// kind "transformer" gives `transformer` itself (hidden must be 0). "lstm"
// and "gru" give a recurrent LM with the transformer's d_model as embedding
// width, its layers as recurrent layers and its dropout, and a hidden state of
// `hidden`, or for hidden 0 the largest one whose model has at most the
// transformer's parameters. ConfigError naming "model" (an unknown kind) or
// "hidden"; UsageError for bad model options.
LmModel lm_model(const std::string& kind, const models::TransformerLMOptions& transformer, int64_t hidden = 0);

// The model of an `lm train` checkpoint (the transformer or a recurrent
// baseline), its run record in *config when given.
models::ModelPtr load_lm_model(const std::string& checkpoint, nlohmann::json* config = nullptr);
// The same for commands that read transformers only (the KV cache, the MLP
// as memory): UsageError naming the checkpoint's model otherwise.
std::shared_ptr<models::TransformerLM> load_transformer_lm(const std::string& checkpoint,
                                                           nlohmann::json* config = nullptr);

// A task's answer to `prompt` by greedy decoding (at most max_new bytes, up
// to the newline), through the KV cache (of `cache_dtype`, or the model's
// type) or the recurrent state.
std::string complete_answer(models::Model& model, const std::string& prompt, int64_t max_new,
                            std::optional<attention::CacheDtype> cache_dtype);

}  // namespace qkv::tasks
