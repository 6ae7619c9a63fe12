#pragma once
// What the byte-level language models (transformer-lm, lstm-lm, gru-lm)
// share: their vocabulary option, one token per byte unless told otherwise.
#include <cstdint>

#include "qkv/core/fields.h"

namespace qkv::models {

inline constexpr int64_t kByteVocab = 256;

inline Field vocab_field() { return Field{"vocab", "vocabulary size (256: one token per byte)"}.at_least(2); }

}  // namespace qkv::models
