#pragma once
// Autoregressive generation from a TransformerLM: greedy (temperature 0) or
// sampled with temperature and top-k, either with the KV cache (each step runs
// one position) or recomputing the whole prefix each step (--no-cache). Both
// paths draw from the same seeded generator, so they give the same tokens.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/errors.h"

#include "qkv/models/transformer_lm.h"

namespace qkv::lm {

struct GenerateOptions {
  int64_t max_new = 64;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = the whole vocabulary
  bool use_cache = true;
  uint64_t seed = 0;
  int64_t stop_token = -1;   // stop after emitting this token (not included in tokens); -1 = never
  bool keep_logits = false;  // return each step's logits
  // Called with each new token as soon as it is picked (the stop token
  // excluded), so a caller can show text while the rest is computed; returning
  // false ends generation after that token.
  std::function<bool(int64_t token)> on_token;
  // Bound on the keys and values of prompt + max_new positions (the cache
  // grows as they arrive and never past it); 0 = this machine's physical memory.
  int64_t memory_limit_bytes = 0;
  // The cache's element type; default the model's parameter type.
  std::optional<attention::CacheDtype> cache_dtype;
  // A prompt cache (prompt_cache.h): load_cache is resumed when the prompt
  // begins with its tokens; save_cache is written once the prompt is read
  // (max_new 0 just writes it). Both need use_cache.
  std::string load_cache, save_cache;
};

struct Generation {
  std::vector<int64_t> tokens;         // the new tokens
  std::vector<at::Tensor> logits;      // per step [vocab] (float32 CPU) when keep_logits
  bool stopped_by_caller = false;      // on_token returned false
  int64_t resumed = 0;                 // prompt positions taken from load_cache
  attention::KVCacheSize cache_bytes;  // what the cache held at the end
};

// What pick_token throws for logits holding NaN or +infinity: a DataError a
// front end names the checkpoint in (the decoder does not know the file).
struct NonFiniteLogits : DataError {
  using DataError::DataError;
};

// The next token from one step's logits [vocab]: the arg-max at temperature 0,
// else a draw from softmax(logits / temperature) over the top_k most likely
// (all when top_k is 0), using `gen`. Every decoder here picks through it, so
// that one seed gives one continuation whatever the model.
int64_t pick_token(const at::Tensor& logits, const GenerateOptions& options, at::Generator& gen);

// What every decoder checks before it starts: a non-empty prompt of tokens
// below `vocab`, max_new, temperature and top_k >= 0 (UsageError).
void check_generate_options(const std::vector<int64_t>& prompt, const GenerateOptions& options, int64_t vocab);

// The sampling loop every decoder shares: up to max_new steps of
// next_logits() (the logits [vocab] after `sequence`; `first`, when defined,
// serves step 0), pick_token, the stop token, then the token appended to
// `sequence` and `out.tokens` and passed to on_token.
void sample_tokens(const GenerateOptions& options, at::Generator& gen, std::vector<int64_t>& sequence,
                   const std::function<at::Tensor()>& next_logits, const at::Tensor& first, Generation& out);

// prompt: at least one token. Throws UsageError for bad options, naming
// --max-new with the largest value that fits when prompt + max_new positions
// of keys and values exceed the memory limit; DataError for a cache file that
// is damaged or not this model's, UsageError for a prompt that does not begin
// with the cached one.
Generation generate(models::TransformerLM& model, const std::vector<int64_t>& prompt, const GenerateOptions& options);

// Greedy answers for the built-in tasks: generate until the terminator, with
// a cache of `cache_dtype` (default the model's parameter type).
std::string complete(models::TransformerLM& model, const std::string& prompt, int64_t max_new,
                     std::optional<attention::CacheDtype> cache_dtype = std::nullopt);

// The model as a decoder with a cache of `dtype` computes it: forward(batch)
// reads each sequence through a fresh cache in one pass, every position
// attending the keys and values as that cache stores them (what decoding
// with it sees), so that the trainer's evaluation measures the cache's
// quality cost (loss, bits per byte, teacher-forced exact match).
models::ModelPtr decoding_with_cache(std::shared_ptr<models::TransformerLM> model, attention::CacheDtype dtype);

}  // namespace qkv::lm
