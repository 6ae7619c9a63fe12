#include "qkv/tasks/lm_task.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/lm/exact_match.h"

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

}  // namespace qkv::tasks
