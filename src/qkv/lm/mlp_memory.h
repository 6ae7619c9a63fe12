#pragma once
// The MLP as a key-value memory (Geva et al., "Transformer Feed-Forward Layers
// Are Key-Value Memories"): hidden unit i of a block's MLP has a key, the row
// i of W1 that it matches against the input, and a value, the column i of W2
// that it adds to the residual stream when it fires. Keys are read off by the
// text contexts that fire a unit most; values by the tokens that the value
// vector promotes when projected through the (tied) unembedding.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/models/transformer_lm.h"

namespace qkv::lm {

struct MemoryUnit {
  int64_t unit = 0;
  double mean_activation = 0, max_activation = 0;
  // The context ending at the firing byte (within its window: what the model
  // saw), and the activation.
  std::vector<std::pair<std::string, double>> top_contexts;
  std::vector<std::pair<std::string, double>> top_tokens;  // promoted byte (printable form), logit
};

struct MemoryOptions {
  int64_t layer = 0;
  int64_t units = 8;           // how many of the most active units to report
  int64_t contexts = 5;        // top contexts per unit
  int64_t tokens = 5;          // top promoted tokens per unit
  int64_t context_bytes = 24;  // bytes of context shown before the firing position
  // The text is read in windows of this many bytes, positions from 0 in
  // each: a text run's training context (tasks::inspect_mlp_file), since
  // positions past it were never trained.
  int64_t window = 256;
};

template <typename V>
void visit_fields(MemoryOptions& o, V&& visit) {
  visit(Field{"layer", "block whose MLP to inspect (0-based)", "block"}.range(0, 1023).was("layer"), o.layer);
  visit(Field{"units", "how many of the most active units"}.range(1, 1 << 20), o.units);
  visit(Field{"contexts", "top contexts (keys) per unit"}.range(1, 100000), o.contexts);
  visit(Field{"tokens", "top promoted tokens (values) per unit"}.range(1, 256), o.tokens);
}

// Units ranked by their mean activation over the text.
std::vector<MemoryUnit> inspect_mlp(models::TransformerLM& model, const std::string& text,
                                    const MemoryOptions& options);

nlohmann::json memory_units_to_json(const std::vector<MemoryUnit>& units);
// Each unit as lines for people: its activations, the contexts that fire it
// (keys) and the tokens it promotes (values).
std::string memory_units_text(const std::vector<MemoryUnit>& units);
// A byte as shown to a person: printable ASCII as is, others as \n, \x0a, ...
std::string printable_byte(int64_t byte);

}  // namespace qkv::lm
