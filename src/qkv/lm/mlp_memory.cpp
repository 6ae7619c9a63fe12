#include "qkv/lm/mlp_memory.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>

#include "qkv/core/errors.h"
#include "qkv/data/lm_data.h"

namespace qkv::lm {

std::string printable_byte(int64_t b) {
  if (b == '\n') return "\\n";
  if (b == '\t') return "\\t";
  if (b >= 32 && b < 127) return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(b & 0xFF));
  return buf;
}

std::vector<MemoryUnit> inspect_mlp(models::TransformerLM& model, const std::string& text, const MemoryOptions& o) {
  const auto& mo = model.options();
  if (o.layer < 0 || o.layer >= mo.layers)
    throw ConfigError("block", std::to_string(o.layer) + ": the model has blocks 0.." + std::to_string(mo.layers - 1));
  if (text.empty()) throw DataError("inspect-mlp: the text is empty");
  if (o.units < 1 || o.contexts < 1 || o.tokens < 1)
    throw ConfigError("units", ", {contexts} and {tokens} must be positive");
  if (o.window < 1) throw UsageError("inspect-mlp: the reading window must hold at least one byte");
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = model.embedding()->weight.device();
  const int64_t hidden = mo.hidden();
  const auto tokens = data::bytes_to_tokens(text);
  const int64_t n = tokens.size(0);

  // Window by window (positions restart at 0 in each, as in training), each
  // unit's running sum, maximum and top `contexts` activations with their
  // positions: memory of a window and those few rows, whatever the text's
  // length (every position's activations, [n, hidden] twice, took about 2 KB
  // a byte of text).
  const int64_t keep = std::min(o.contexts, n);
  at::Tensor sum = torch::zeros({hidden}, torch::kDouble), max, top_values, top_positions;
  for (int64_t start = 0; start < n; start += o.window) {
    const auto w = tokens.slice(0, start, std::min(n, start + o.window)).unsqueeze(0).to(device);
    const auto act = model.mlp_activations(w, o.layer).squeeze(0).to(torch::kCPU, torch::kFloat);  // [w, hidden]
    sum += act.sum(0, false, torch::kDouble);
    const auto window_max = std::get<0>(act.max(0));
    max = max.defined() ? torch::maximum(max, window_max) : window_max;
    // Unit-major [hidden, k + w], so that topk runs along contiguous rows.
    const auto by_unit = act.t().contiguous();
    auto positions = torch::arange(start, start + act.size(0), torch::kLong).unsqueeze(0).expand_as(by_unit);
    const auto values = top_values.defined() ? torch::cat({top_values, by_unit}, 1) : by_unit;
    positions = top_positions.defined() ? torch::cat({top_positions, positions}, 1) : positions;
    const auto [best, columns] = values.topk(std::min(keep, values.size(1)), 1);
    top_values = best;
    top_positions = positions.gather(1, columns);
  }
  const auto mean = (sum / static_cast<double>(n)).to(torch::kFloat);
  const int64_t units = std::min(o.units, hidden);
  const auto ranked = std::get<1>(mean.topk(units));

  // Values through the unembedding: logits of W2[:, i] (the tied embedding maps D -> vocab).
  const auto w2 = model.block(o.layer)->mlp_out->weight.to(torch::kCPU, torch::kFloat);  // [D, hidden]
  const auto emb = model.embedding()->weight.to(torch::kCPU, torch::kFloat);             // [vocab, D]
  const auto value_logits = emb.matmul(w2);                                              // [vocab, hidden]

  std::vector<MemoryUnit> out;
  for (int64_t r = 0; r < units; ++r) {
    MemoryUnit u;
    u.unit = ranked[r].item<int64_t>();
    u.mean_activation = mean[u.unit].item<double>();
    u.max_activation = max[u.unit].item<double>();
    for (int64_t i = 0; i < keep; ++i) {
      const int64_t pos = top_positions[u.unit][i].item<int64_t>();
      const int64_t from = std::max<int64_t>(pos / o.window * o.window, pos - o.context_bytes + 1);
      std::string shown;
      for (int64_t p = from; p <= pos; ++p)
        shown += printable_byte(static_cast<unsigned char>(text[static_cast<size_t>(p)]));
      u.top_contexts.emplace_back(shown, top_values[u.unit][i].item<double>());
    }
    const auto promoted = value_logits.select(1, u.unit).topk(std::min(o.tokens, mo.vocab));
    for (int64_t i = 0; i < o.tokens && i < mo.vocab; ++i)
      u.top_tokens.emplace_back(printable_byte(std::get<1>(promoted)[i].item<int64_t>()),
                                std::get<0>(promoted)[i].item<double>());
    out.push_back(std::move(u));
  }
  return out;
}

std::string memory_units_text(const std::vector<MemoryUnit>& units) {
  std::string text;
  char line[512];
  for (const auto& u : units) {
    std::snprintf(line, sizeof line, "unit %lld  mean %.3f  max %.3f\n", static_cast<long long>(u.unit),
                  u.mean_activation, u.max_activation);
    text += line;
    for (const auto& [ctx, a] : u.top_contexts) {
      std::snprintf(line, sizeof line, "  key   %8.3f  ...", a);
      text += line + ctx + "\n";
    }
    text += "  value";
    for (const auto& [tok, l] : u.top_tokens) {
      std::snprintf(line, sizeof line, "  '%s' %.2f", tok.c_str(), l);
      text += line;
    }
    text += "\n";
  }
  return text;
}

nlohmann::json memory_units_to_json(const std::vector<MemoryUnit>& units) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& u : units) {
    nlohmann::json contexts = nlohmann::json::array(), tokens = nlohmann::json::array();
    for (const auto& [text, a] : u.top_contexts) contexts.push_back({{"context", text}, {"activation", a}});
    for (const auto& [tok, l] : u.top_tokens) tokens.push_back({{"token", tok}, {"logit", l}});
    out.push_back({{"unit", u.unit},
                   {"mean_activation", u.mean_activation},
                   {"max_activation", u.max_activation},
                   {"keys", contexts},
                   {"values", tokens}});
  }
  return out;
}

}  // namespace qkv::lm
