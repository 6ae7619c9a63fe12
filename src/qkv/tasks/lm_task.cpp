#include "qkv/tasks/lm_task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/lm/exact_match.h"
#include "qkv/lm/generate.h"
#include "qkv/lm/mlp_memory.h"
#include "qkv/lm/recurrent_generate.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/train/html_kit.h"
#include "qkv/train/run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// Defaults that learn `copy` to ~99% exact match in about 20 s on one core (our choice).
LmData::LmData() { task.max_length = 6; }

void LmData::validate() const {
  check_field_ranges(*this);
  if (is_task()) task.validate();
}

data::Splits LmData::make() const {
  if (!is_task()) return data::load_text_corpus(text, context, text_fingerprint);
  return data::lm_task_datasets(data::make_lm_task(task, seed));
}

train::MetricFactory LmData::metrics() const {
  if (!is_task()) return {};
  return [] { return std::make_unique<lm::ExactMatchMetric>(); };
}

const std::vector<std::string>& lm_model_kinds() {
  static const std::vector<std::string> kinds = {"transformer", "lstm", "gru"};
  return kinds;
}

LmModel lm_model(const std::string& kind, const models::TransformerLMOptions& transformer, int64_t hidden) {
  if (std::find(lm_model_kinds().begin(), lm_model_kinds().end(), kind) == lm_model_kinds().end())
    throw ConfigError("model", kind + ": expected transformer, lstm or gru");
  if (hidden < 0) throw ConfigError("hidden", "must be at least 0 (0: the transformer's parameter count)");
  // From JSON, so that the registry's checks apply as to any run's options.
  const auto transformer_json = models::TransformerLMOptions::from_json(transformer.to_json()).to_json();
  LmModel m;
  m.budget = models::transformer_lm_size(transformer, 1).parameters;
  if (kind == "transformer") {
    if (hidden != 0) throw ConfigError("hidden", "sets the recurrent models' state; the transformer has none");
    m.name = "transformer-lm";
    m.options = transformer_json;
    m.parameters = m.budget;
    return m;
  }
  // The window shapes attention alone: a recurrent model would train as if
  // it had none, and the run's options would say otherwise.
  if (transformer.window != 0) throw ConfigError("window", "limits the transformer's attention; " + kind + " has none");
  if (transformer.sinks != 0) throw ConfigError("sinks", "limits the transformer's attention; " + kind + " has none");
  m.name = kind + "-lm";
  models::RecurrentLMOptions r;
  r.cell = kind;
  r.vocab = transformer.vocab;
  r.embed = transformer.d_model;
  r.layers = transformer.layers;
  r.dropout = transformer.dropout;
  r.hidden = hidden > 0 ? hidden : models::recurrent_hidden_for_parameters(r, m.budget);
  m.options = models::RecurrentLMOptions::from_json(r.to_json(), m.name).to_json();
  m.parameters = models::recurrent_lm_size(r, 1).parameters;
  return m;
}

models::ModelPtr load_lm_model(const train::CheckpointFile& checkpoint, nlohmann::json* config) {
  return train::load_model_from_checkpoint(checkpoint, config, kLmCommand);
}

std::shared_ptr<models::TransformerLM> load_transformer_lm(const train::CheckpointFile& checkpoint,
                                                           nlohmann::json* config) {
  nlohmann::json own;
  if (!config) config = &own;
  auto model = std::dynamic_pointer_cast<models::TransformerLM>(load_lm_model(checkpoint, config));
  if (!model)
    throw UsageError(checkpoint.path + ": its model is " + config->at("model").at("name").get<std::string>() +
                     "; this command reads transformer-lm checkpoints only");
  return model;
}

std::string complete_answer(models::Model& model, const std::string& prompt, int64_t max_new,
                            std::optional<attention::CacheDtype> cache_dtype) {
  if (auto* recurrent = dynamic_cast<models::RecurrentLM*>(&model))
    return lm::complete_recurrent(*recurrent, prompt, max_new);
  return lm::complete(dynamic_cast<models::TransformerLM&>(model), prompt, max_new, cache_dtype);
}

TrainTask lm_train_task(std::shared_ptr<const LmTrainSettings> s) {
  TrainTask task;
  task.command = kLmCommand;
  task.description = "train the byte-level transformer (or an LSTM/GRU baseline) on a built-in task or a text file";
  task.default_out = "runs/lm";
  task.defaults.epochs = 20;
  task.defaults.batch_size = 32;
  task.defaults.optim.lr = 5e-3;
  task.defaults.optim.weight_decay = 0.01;
  task.defaults.clip_grad_norm = 1.0;
  task.defaults.select_metric = "loss";  // task runs pick exact_match unless told (prepare, below)
  task.select_metric_shown = "exact_match (loss on a text file)";
  task.batch_norm = false;
  task.prepare = [s](const GivenSetting& given, train::RunRequest& r, const std::string&) {
    LmData data = s->data;
    if (given("task") && !data.text.empty()) throw ConfigError("task", "and {text} exclude each other");
    data.seed = r.seed;
    data.validate();
    if (data.is_task()) data.task.check_new_run();
    if (!data.text.empty()) {
      data.text = absolute_normal_path(data.text);  // so that --resume reads it from anywhere
      data.text_fingerprint = data::fingerprint_of(read_text_file(data.text));  // eval and --resume check it
    }
    if (data.is_task() && !given("select_metric")) r.train.select_metric = "exact_match";
    const auto model = lm_model(s->model.kind, s->model.transformer, s->model.hidden);
    r.model_name = model.name;
    r.model_options = model.options;
    if (model.name != "transformer-lm" && r.train.parallel.rank == 0)
      say_as_is(std::string(kLmCommand) + ": " + model.name + " with hidden " + model.options.at("hidden").dump() +
                ": " + train::format_integer(model.parameters) +
                " parameters; the transformer-lm of these options: " + train::format_integer(model.budget));
    r.data = data.to_json();
  };
  task.inputs = [](const train::RunRequest& r) {
    return std::vector<InputPath>{{"text", LmData::from_json(r.data).text}};
  };
  task.load = [](train::RunRequest& r, const LoadContext&) {
    const auto data = LmData::from_json(r.data);
    TaskRun run;
    run.splits = data.make();
    run.hooks.metrics = data.metrics();
    return run;
  };
  return task;
}

nlohmann::json evaluate_lm_run(const train::CheckpointFile& checkpoint, const std::string& split, int64_t batch_size,
                               const std::string& cache_dtype, const c10::Device& device) {
  std::optional<attention::CacheDtype> dtype;
  if (!cache_dtype.empty()) dtype = attention::parse_cache_dtype(cache_dtype, "{cache_dtype}");
  nlohmann::json config;
  auto model = load_lm_model(checkpoint, &config);
  model->to(device);
  auto measured = model;
  if (dtype) {
    auto transformer = std::dynamic_pointer_cast<models::TransformerLM>(model);
    if (!transformer)
      throw UsageError("{cache_dtype}: " + checkpoint.path + " is a recurrent model, which keeps no cache");
    measured = lm::decoding_with_cache(transformer, *dtype);
  }
  const auto data = LmData::from_json(config.at("data"));
  // Tasks: the instances themselves are needed below for greedy decoding.
  data::LmTaskSplits examples;
  if (data.is_task()) examples = data::make_lm_task(data.task, data.seed);
  const auto splits = data.is_task() ? data::lm_task_datasets(examples) : data.make();
  const auto& part = data::split_named(splits, split);
  auto metrics =
      train::evaluate(*measured, *part, train::stored_run_eval_batch_size(config, batch_size), device, data.metrics());
  metrics["bits_per_byte"] = metrics.at("loss").get<double>() / std::log(2.0);
  if (data.is_task()) {
    // Exact match again, by real greedy decoding (KV cache or recurrent state).
    const auto& list = split == "train" ? examples.train : split == "val" ? examples.val : examples.test;
    int64_t right = 0;
    for (const auto& e : list)
      right += complete_answer(*model, e.prompt, static_cast<int64_t>(e.answer.size()) + 1, dtype) == e.answer;
    metrics["generated_exact_match"] =
        list.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(list.size());
  }
  metrics["split"] = split;
  metrics["size"] = part->size();
  if (dtype) metrics["cache_dtype"] = attention::cache_dtype_name(*dtype);
  return metrics;
}

nlohmann::json generate_text(const GenerateSettings& s, uint64_t seed, const c10::Device& device,
                             const std::function<bool(int64_t token)>& on_token) {
  if (s.prompt.empty()) throw ConfigError("prompt", "must not be empty");
  try {
    data::check_utf8(s.prompt, "{prompt}");
  } catch (const DataError& e) {
    throw UsageError(e.what());  // an option's value, not a file: exit 2
  }
  auto gen = s.gen;
  if (!s.cache_dtype.empty()) gen.cache_dtype = attention::parse_cache_dtype(s.cache_dtype, "{cache_dtype}");
  gen.use_cache = !s.no_cache;
  if (!gen.save_cache.empty()) {
    check_outputs_apart(gen.save_cache, "save_cache",
                        {{"load_cache", gen.load_cache}, {"checkpoint", s.checkpoint.path}});
    check_output_file(gen.save_cache, "{save_cache}", s.overwrite, "lm generate");
  }
  nlohmann::json config;
  auto model = load_lm_model(s.checkpoint, &config);
  model->to(device);
  auto* recurrent = dynamic_cast<models::RecurrentLM*>(model.get());
  if (recurrent && (gen.cache_dtype || !gen.save_cache.empty() || !gen.load_cache.empty()))
    throw UsageError("{cache_dtype}, {save_cache} and {load_cache}: " + s.checkpoint.path +
                     " is a recurrent model, whose fixed state is all its memory (no KV cache)");
  // A model trained on a task answers it greedily and ends with the
  // terminator: that answer is what a user should see first (our choice).
  const bool task_default = LmData::from_json(config.at("data")).is_task() && !s.temperature_given;
  if (task_default) gen.temperature = 0;
  gen.seed = seed;
  if (s.stop_at_newline || task_default) gen.stop_token = '\n';
  OutputClaim cache_claim;
  if (!gen.save_cache.empty())
    cache_claim = claim_output_file(gen.save_cache, "{save_cache}", s.overwrite, OutputMarker{"lm generate"});
  const auto prompt = data::bytes_to_tokens(s.prompt);
  std::vector<int64_t> tokens(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + prompt.numel());
  gen.on_token = on_token;
  lm::Generation result;
  try {
    result = recurrent ? lm::generate_recurrent(*recurrent, tokens, gen)
                       : lm::generate(dynamic_cast<models::TransformerLM&>(*model), tokens, gen);
  } catch (const lm::NonFiniteLogits& e) {
    throw DataError(s.checkpoint.path + ": " + e.what());
  }
  // Bytes that do not form UTF-8 on their own are shown escaped.
  std::string shown;
  for (int64_t t : result.tokens) shown += t < 128 ? std::string(1, static_cast<char>(t)) : lm::printable_byte(t);
  nlohmann::json doc{{"prompt", s.prompt}, {"text", shown}, {"tokens", result.tokens}, {"cache", gen.use_cache}};
  if (gen.use_cache && !recurrent) {
    doc["cache_bytes"] = result.cache_bytes.total_bytes;
    doc["resumed_positions"] = result.resumed;
  }
  return doc;
}

std::vector<lm::MemoryUnit> inspect_mlp_file(const train::CheckpointFile& checkpoint, const std::string& text_file,
                                             const lm::MemoryOptions& options, const c10::Device& device) {
  const std::string text = read_text_file(text_file);
  if (text.empty()) throw DataError(text_file + ": the text file is empty");
  data::check_utf8(text, text_file);
  nlohmann::json config;
  auto model = load_transformer_lm(checkpoint, &config);
  model->to(device);
  auto read_as_trained = options;
  const auto data = LmData::from_json(config.at("data"));
  if (!data.is_task()) read_as_trained.window = data.context;
  return lm::inspect_mlp(*model, text, read_as_trained);
}

}  // namespace qkv::tasks
