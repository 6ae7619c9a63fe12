#pragma once
// A prompt's KV cache on disk (llama.cpp's prompt cache): `lm generate
// --save-cache F` writes the cache after reading the prompt, with the prompt's
// tokens and the logits of the position after it; `--load-cache F` starts from
// there, so a long prompt is read once and every continuation of it costs only
// the new positions. Resuming gives bit-identical continuations: the decode
// steps read the same stored rows and start from the same logits.
//
// The file: "QKVKVC01", the header's length (8 bytes, little-endian), the
// header (JSON: the model's options and a CRC-32 of its parameters, the cache
// settings, each layer's length, the tokens, and every stored tensor's layer,
// role, dtype, shape and byte range), the tensors' bytes, and a CRC-32 of all
// that precedes it. It is written atomically; reading checks the magic, every
// size against the file's real size (overflow-checked), the checksum, and that
// the model and the requested cache settings are the ones it was made with,
// before anything is allocated from it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qkv/attention/kv_cache.h"
#include "qkv/models/transformer_lm.h"

namespace qkv::lm {

struct PromptCache {
  std::unique_ptr<attention::KVCache> cache;
  std::vector<int64_t> tokens;  // the positions the cache holds, as tokens
  at::Tensor next_logits;       // [vocab] float32: the logits after the last token
};

// The model's identity as a cache file records it: its options and a CRC-32 of
// every parameter's bytes, in registration order.
uint32_t parameters_crc32(models::TransformerLM& model);

void save_prompt_cache(const std::string& path, models::TransformerLM& model, const attention::KVCache& cache,
                       const std::vector<int64_t>& tokens, const at::Tensor& next_logits);

// DataError naming the file when it is not a cache file, is truncated or
// damaged, or was made by another model; UsageError when `dtype` (if given) is
// not the one it holds. The cache comes back on the model's device, with the
// memory limit given (0 = physical memory).
PromptCache load_prompt_cache(const std::string& path, models::TransformerLM& model,
                              std::optional<attention::CacheDtype> dtype, int64_t memory_limit_bytes);

}  // namespace qkv::lm
