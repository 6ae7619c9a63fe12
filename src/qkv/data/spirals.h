#pragma once
// Built-in synthetic data for the trainer's own demo and tests: K interleaved
// 2-D spirals, one per class. Not linearly separable, so a model must learn.
#include <cstdint>

#include "qkv/data/dataset.h"

namespace qkv::data {

struct SpiralsOptions {
  int64_t classes = 3;
  int64_t points_per_class = 300;
  double noise = 0.15;  // std of the angular jitter, radians
  double turns = 1.0;   // full turns of each arm
};

// inputs["x"]: [classes * points_per_class, 2] float; target: class id.
DatasetPtr make_spirals(const SpiralsOptions& options, uint64_t seed);

}  // namespace qkv::data
