#include "qkv/tasks/spirals_task.h"

#include <cmath>

#include "qkv/core/errors.h"

namespace qkv::tasks {

void SpiralsData::validate() const {
  if (spirals.classes < 2) throw ConfigError("classes", "must be at least 2");
  if (spirals.points_per_class < 1) throw ConfigError("points_per_class", "must be at least 1");
  if (!(spirals.noise >= 0) || !std::isfinite(spirals.noise)) throw ConfigError("noise", "must be >= 0");
  if (!(spirals.turns > 0) || !std::isfinite(spirals.turns)) throw ConfigError("turns", "must be > 0");
  if (!(val_fraction >= 0 && val_fraction < 1)) throw ConfigError("val_fraction", "must be in [0, 1)");
  if (!(test_fraction >= 0 && test_fraction < 1 && val_fraction + test_fraction < 1))
    throw ConfigError("test_fraction", "must be in [0, 1) with val_fraction + test_fraction < 1");
}

data::Splits SpiralsData::make() const {
  return data::random_split(data::make_spirals(spirals, split_seed), val_fraction, test_fraction, split_seed);
}

}  // namespace qkv::tasks
