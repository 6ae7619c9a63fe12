#pragma once
// Autoregressive generation from a RecurrentLM: the prompt is read once into
// the recurrent state, then each step feeds one token and updates the state,
// whose size never changes. Tokens are picked by lm::pick_token from one
// seeded generator, so sampling follows the same rules as the transformer's.
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/lm/generate.h"
#include "qkv/models/recurrent_lm.h"

namespace qkv::lm {

// prompt: at least one token. use_cache = false recomputes the whole prefix
// from the zero state at every step (the reference the state is tested
// against); memory_limit_bytes is not used: the state is all the memory.
// UsageError for bad options, as generate().
Generation generate_recurrent(models::RecurrentLM& model, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options);

// Greedy answers for the built-in tasks: generate until the terminator.
std::string complete_recurrent(models::RecurrentLM& model, const std::string& prompt, int64_t max_new);

}  // namespace qkv::lm
