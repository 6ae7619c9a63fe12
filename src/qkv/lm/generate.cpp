#include "qkv/lm/generate.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/errors.h"
#include "qkv/data/lm_data.h"
#include "qkv/lm/prompt_cache.h"
#include "qkv/runtime/runtime.h"

namespace qkv::lm {
namespace {

// Prompt positions read per forward pass with the cache (our choice: square
// score blocks of 512 x 512 floats, 1 MiB a head).
constexpr size_t kPrefillBlock = 512;

attention::KVCacheShape cache_shape(const models::TransformerLMOptions& mo, attention::CacheDtype dtype,
                                    int64_t positions) {
  return {mo.layers, 1, mo.head_kv(), mo.head_dk(), mo.head_dv(), positions, dtype, mo.window, mo.sinks};
}

// Bytes of keys and values for `positions` positions, or -1 past int64.
int64_t context_bytes(const models::TransformerLMOptions& mo, attention::CacheDtype dtype, int64_t positions) {
  try {
    return attention::kv_cache_bytes(cache_shape(mo, dtype, positions)).total_bytes;
  } catch (const UsageError&) {
    return -1;
  }
}

// Before anything is allocated: a cache sized for a max_new of 1e12 asks the
// allocator for terabytes, and even --no-cache would run for ever.
void check_max_new(const models::TransformerLMOptions& mo, int64_t prompt, const GenerateOptions& o,
                   attention::CacheDtype dtype) {
  const int64_t limit = o.memory_limit_bytes > 0 ? o.memory_limit_bytes : physical_memory_bytes();
  // Past int64 the count saturates: a sliding window's cache holds its ring
  // whatever the count, and a full cache is too large anyway.
  int64_t positions = 0;
  if (__builtin_add_overflow(prompt, o.max_new, &positions)) positions = std::numeric_limits<int64_t>::max();
  const int64_t bytes = context_bytes(mo, dtype, positions);
  if (bytes >= 0 && bytes <= limit) return;
  const int64_t per_position = context_bytes(mo, dtype, 1);
  const int64_t most = per_position > 0 ? std::max<int64_t>(0, limit / per_position - prompt) : 0;
  throw ConfigError("max_new",
                    std::to_string(o.max_new) + ": keys and values for the prompt and that many bytes need " +
                        (bytes < 0 ? std::string("more than 2^63") : std::to_string(bytes)) + " bytes, more than the " +
                        std::to_string(limit) + " bytes of " +
                        (o.memory_limit_bytes > 0 ? "the limit" : "this machine's memory") +
                        (mo.window > 0 ? "" : "; at most " + std::to_string(most) + " with this model and prompt"));
}

}  // namespace

int64_t pick_token(const at::Tensor& logits, const GenerateOptions& o, at::Generator& gen) {
  // NaN would be picked as byte 0 by argmax and fail inside multinomial; +inf
  // turns softmax to NaN. -inf (a token ruled out) is fine.
  if (torch::isnan(logits).any().item<bool>() || torch::isposinf(logits).any().item<bool>())
    throw NonFiniteLogits(
        "the model's next-byte logits hold NaN or +infinity (its weights or the prompt's cache are "
        "not finite)");
  if (o.temperature == 0) return logits.argmax().item<int64_t>();
  // Relative to the largest logit before the division: however small the
  // temperature, the scaled values are <= 0 (the largest exactly 0) and
  // cannot overflow to +inf, which softmax would turn into NaN. A temperature
  // below 1e-30 (0 in float32) divides as 1e-30: every logit below the
  // largest already gets weight 0 there, so the pick is the same.
  const auto as_float = logits.to(torch::kFloat);
  auto scaled = (as_float - as_float.max()) / std::max(o.temperature, 1e-30);
  if (o.top_k > 0 && o.top_k < scaled.size(0)) {
    const auto kth = std::get<0>(scaled.topk(o.top_k)).min();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  return at::multinomial(torch::softmax(scaled, 0), 1, false, gen).item<int64_t>();
}

void check_generate_options(const std::vector<int64_t>& prompt, const GenerateOptions& o, int64_t vocab) {
  if (prompt.empty()) throw UsageError("generate: the prompt is empty");
  if (o.max_new < 0) throw ConfigError("max_new", "must be >= 0");
  if (!(o.temperature >= 0)) throw ConfigError("temperature", "must be >= 0");
  if (o.top_k < 0) throw ConfigError("top_k", "must be >= 0");
  for (int64_t t : prompt)
    if (t < 0 || t >= vocab) throw UsageError("generate: token " + std::to_string(t) + " is outside the vocabulary");
}

void sample_tokens(const GenerateOptions& o, at::Generator& gen, std::vector<int64_t>& sequence,
                   const std::function<at::Tensor()>& next_logits, const at::Tensor& first, Generation& out) {
  for (int64_t step = 0; step < o.max_new; ++step) {
    const auto last = step == 0 && first.defined() ? first : next_logits();
    if (o.keep_logits) out.logits.push_back(last.clone());
    const int64_t token = pick_token(last, o, gen);
    if (token == o.stop_token) break;
    out.tokens.push_back(token);
    sequence.push_back(token);
    if (o.on_token && !o.on_token(token)) {
      out.stopped_by_caller = true;
      break;
    }
  }
}

Generation generate(models::TransformerLM& model, const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  const auto& mo = model.options();
  check_generate_options(prompt, o, mo.vocab);
  const auto param = model.embedding()->weight;
  const auto dtype = o.cache_dtype ? *o.cache_dtype : attention::cache_dtype_of(param.scalar_type());
  if (!o.use_cache && (!o.load_cache.empty() || !o.save_cache.empty() || o.cache_dtype))
    throw ConfigError("no_cache", ": {load_cache}, {save_cache} and {cache_dtype} need the KV cache");
  check_max_new(mo, static_cast<int64_t>(prompt.size()), o, dtype);
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = param.device();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);

  Generation out;
  std::vector<int64_t> sequence = prompt;
  std::unique_ptr<attention::KVCache> cache;
  at::Tensor first;  // the logits after the prompt, when the cache has read it
  size_t fed = 0;
  if (o.use_cache && !o.load_cache.empty()) {
    auto loaded = load_prompt_cache(o.load_cache, model, o.cache_dtype, o.memory_limit_bytes);
    if (loaded.tokens.size() > prompt.size() || !std::equal(loaded.tokens.begin(), loaded.tokens.end(), prompt.begin()))
      throw ConfigError("load_cache", o.load_cache + ": the prompt does not begin with the " +
                                          std::to_string(loaded.tokens.size()) + " tokens it holds");
    cache = std::move(loaded.cache);
    fed = loaded.tokens.size();
    out.resumed = static_cast<int64_t>(fed);
    if (fed == prompt.size()) first = loaded.next_logits;
  } else if (o.use_cache) {
    auto s = models::kv_cache_settings(mo, dtype, 1, device);
    s.initial_length = static_cast<int64_t>(prompt.size()) + 1;  // then doubling: no max_new-sized buffer
    s.memory_limit_bytes = o.memory_limit_bytes;
    cache = std::make_unique<attention::KVCache>(s);
  }
  auto as_tensor = [&](std::vector<int64_t>::const_iterator from, std::vector<int64_t>::const_iterator to) {
    return torch::tensor(std::vector<int64_t>(from, to), torch::kLong).unsqueeze(0).to(device);
  };
  // With the cache, the first step feeds the prompt (what a loaded cache does
  // not hold of it), then one token a step.
  auto next_logits = [&]() {
    at::Tensor logits;
    if (cache) {
      // A long prompt in blocks: a block attends its own positions and the
      // cache's, so a windowed or quantised cache never needs a square
      // score matrix of the whole prompt.
      while (fed < sequence.size()) {
        const size_t n = std::min(sequence.size() - fed, kPrefillBlock);
        const auto from = sequence.begin() + static_cast<long>(fed);
        logits = model.forward_tokens(as_tensor(from, from + static_cast<long>(n)), cache.get());
        fed += n;
      }
    } else {
      logits = model.forward_tokens(as_tensor(sequence.begin(), sequence.end()));
    }
    return logits[0][logits.size(1) - 1].to(torch::kCPU, torch::kFloat);
  };
  if (cache && !first.defined()) first = next_logits();
  if (cache && !o.save_cache.empty()) save_prompt_cache(o.save_cache, model, *cache, sequence, first);
  sample_tokens(o, gen, sequence, next_logits, first, out);
  if (cache) out.cache_bytes = cache->size_bytes();
  return out;
}

std::string complete(models::TransformerLM& model, const std::string& prompt, int64_t max_new,
                     std::optional<attention::CacheDtype> cache_dtype) {
  GenerateOptions o;
  o.cache_dtype = cache_dtype;
  o.max_new = max_new;
  o.temperature = 0;
  o.stop_token = data::kLmTerminator;
  const auto tokens = data::bytes_to_tokens(prompt);
  auto result =
      generate(model, std::vector<int64_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel()), o);
  std::string text;
  for (int64_t t : result.tokens) text += static_cast<char>(t);
  return text;
}

namespace {

class DecodingWithCache : public models::Model {
 public:
  DecodingWithCache(std::shared_ptr<models::TransformerLM> lm, attention::CacheDtype dtype)
      : lm_(register_module("lm", std::move(lm))), dtype_(dtype) {}

  at::Tensor forward(const data::Batch& batch) override {
    const auto tokens = batch.input("tokens");
    auto s = models::kv_cache_settings(lm_->options(), dtype_, tokens.size(0), tokens.device());
    s.initial_length = tokens.size(1);
    attention::KVCache cache(s);
    return lm_->forward_tokens(tokens, &cache);
  }

 private:
  std::shared_ptr<models::TransformerLM> lm_;
  attention::CacheDtype dtype_;
};

}  // namespace

models::ModelPtr decoding_with_cache(std::shared_ptr<models::TransformerLM> model, attention::CacheDtype dtype) {
  return std::make_shared<DecodingWithCache>(std::move(model), dtype);
}

}  // namespace qkv::lm
