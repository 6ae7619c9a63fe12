#include "qkv/tasks/lm_task.h"

#include <torch/torch.h>

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/lm/exact_match.h"
#include "qkv/lm/recurrent_generate.h"
#include "qkv/lm/generate.h"
#include "qkv/train/run.h"
#include "qkv/models/recurrent_lm.h"

namespace qkv::tasks {

// Defaults that learn `copy` to ~99% exact match in about 20 s on one core (our choice).
LmData::LmData() { task.max_length = 6; }

void LmData::validate() const {
  if (is_task()) task.validate();
  if (context < 1) throw ConfigError("context", "must be at least 1");
}

data::Splits LmData::make() const {
  if (!is_task()) return data::load_text_corpus(text, context);
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

models::ModelPtr load_lm_model(const std::string& checkpoint, nlohmann::json* config) {
  return train::load_model_from_checkpoint(checkpoint, config, kLmCommand);
}

std::shared_ptr<models::TransformerLM> load_transformer_lm(const std::string& checkpoint, nlohmann::json* config) {
  nlohmann::json own;
  if (!config) config = &own;
  auto model = std::dynamic_pointer_cast<models::TransformerLM>(load_lm_model(checkpoint, config));
  if (!model)
    throw UsageError(checkpoint + ": its model is " + config->at("model").at("name").get<std::string>() +
                     "; this command reads transformer-lm checkpoints only");
  return model;
}

std::string complete_answer(models::Model& model, const std::string& prompt, int64_t max_new,
                            std::optional<attention::CacheDtype> cache_dtype) {
  if (auto* recurrent = dynamic_cast<models::RecurrentLM*>(&model))
    return lm::complete_recurrent(*recurrent, prompt, max_new);
  return lm::complete(dynamic_cast<models::TransformerLM&>(model), prompt, max_new, cache_dtype);
}

}  // namespace qkv::tasks
