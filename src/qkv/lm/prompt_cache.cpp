#include "qkv/lm/prompt_cache.h"

#include <torch/torch.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"

namespace qkv::lm {
namespace {

constexpr char kMagic[8] = {'Q', 'K', 'V', 'K', 'V', 'C', '0', '1'};
constexpr size_t kFixed = sizeof(kMagic) + 8;  // magic + header length
constexpr int64_t kVersion = 1;

nlohmann::json cache_settings_json(const attention::KVCacheSettings& s) {
  return {{"layers", s.layers}, {"batch", s.batch}, {"kv_heads", s.kv_heads},
          {"dk", s.dk},         {"dv", s.dv},       {"dtype", attention::cache_dtype_name(s.dtype)},
          {"window", s.window}, {"sinks", s.sinks}};
}

at::ScalarType scalar_type_named(const std::string& name, const std::string& path) {
  for (auto t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kChar, at::kByte})
    if (name == c10::toString(t)) return t;
  throw DataError(path + ": unknown tensor type '" + name + "' in the cache file");
}

}  // namespace

uint32_t parameters_crc32(models::TransformerLM& model) {
  uint32_t crc = 0;
  for (const auto& p : model.parameters()) {
    const auto host = p.detach().to(torch::kCPU).contiguous();
    crc = crc32(host.data_ptr(), static_cast<size_t>(host.numel()) * host.element_size(), crc);
  }
  return crc;
}

void save_prompt_cache(const std::string& path, models::TransformerLM& model, const attention::KVCache& cache,
                       const std::vector<int64_t>& tokens, const at::Tensor& next_logits) {
  if (cache.length() != static_cast<int64_t>(tokens.size()))
    throw UsageError("save_prompt_cache: the cache holds " + std::to_string(cache.length()) + " positions but " +
                     std::to_string(tokens.size()) + " tokens were given");
  std::vector<char> payload;
  auto sections = nlohmann::json::array();
  auto add = [&](int64_t layer, const char* role, const at::Tensor& t) {
    const auto host = t.detach().to(torch::kCPU).contiguous();
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    sections.push_back({{"layer", layer},
                        {"role", role},
                        {"dtype", c10::toString(host.scalar_type())},
                        {"shape", host.sizes().vec()},
                        {"offset", payload.size()},
                        {"bytes", bytes}});
    const auto* from = static_cast<const char*>(host.data_ptr());
    payload.insert(payload.end(), from, from + bytes);
  };
  std::vector<int64_t> lengths;
  for (int64_t l = 0; l < cache.layers(); ++l) {
    const int64_t held = cache.held(l);
    const auto& st = cache.storage(l);
    lengths.push_back(cache.length(l));
    add(l, "keys", st.keys.narrow(2, 0, held));
    add(l, "values", st.values.narrow(2, 0, held));
    if (st.key_scales.defined()) {
      add(l, "key_scales", st.key_scales.narrow(2, 0, held));
      add(l, "value_scales", st.value_scales.narrow(2, 0, held));
    }
  }
  add(-1, "next_logits", next_logits.to(torch::kFloat).reshape({-1}));
  const nlohmann::json header{
      {"format", "qkv prompt cache"},
      {"version", kVersion},
      {"model", {{"options", model.options().to_json()}, {"parameters_crc32", parameters_crc32(model)}}},
      {"cache", cache_settings_json(cache.settings())},
      {"lengths", lengths},
      {"tokens", tokens},
      {"sections", sections}};
  const std::string text = header.dump();
  std::vector<char> file(kMagic, kMagic + sizeof(kMagic));
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  file.insert(file.end(), text.begin(), text.end());
  file.insert(file.end(), payload.begin(), payload.end());
  const uint32_t crc = crc32(file.data(), file.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  write_file_atomic(path, file);
}

PromptCache load_prompt_cache(const std::string& path, models::TransformerLM& model,
                              std::optional<attention::CacheDtype> dtype, int64_t memory_limit_bytes) {
  const std::vector<char> file = read_file_bytes(path);
  auto bad = [&](const std::string& what) { return DataError(path + ": " + what); };
  if (file.size() < kFixed + 4 || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0)
    throw bad("not a qkv prompt cache (lm generate {save_cache} writes them)");
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i)
    header_length |= static_cast<uint64_t>(static_cast<unsigned char>(file[sizeof(kMagic) + i])) << (8 * i);
  const size_t body = file.size() - 4;  // everything the checksum covers
  if (header_length > body - kFixed) throw bad("truncated (its header runs past the end of the file)");
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<unsigned char>(file[body + i])) << (8 * i);
  if (crc32(file.data(), body) != stored) throw bad("damaged (checksum mismatch)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.begin() + kFixed, file.begin() + kFixed + static_cast<long>(header_length));
  } catch (const nlohmann::json::exception&) {
    throw bad("its header is not JSON");
  }
  const size_t payload_at = kFixed + header_length, payload_size = body - payload_at;
  try {
    if (header.at("format") != "qkv prompt cache" || header.at("version") != kVersion)
      throw bad("not a version " + std::to_string(kVersion) + " qkv prompt cache");
    const auto& mo = model.options();
    if (header.at("model").at("options") != mo.to_json() ||
        header.at("model").at("parameters_crc32").get<uint32_t>() != parameters_crc32(model))
      throw bad("made by another model (its options or parameters differ from this checkpoint's)");
    const auto& c = header.at("cache");
    attention::CacheDtype stored;
    try {
      stored = attention::parse_cache_dtype(c.at("dtype").get<std::string>(), "its cache type");
    } catch (const UsageError& e) {
      throw bad(e.what());
    }
    auto s = models::kv_cache_settings(mo, stored, 1, model.embedding()->weight.device());
    if (c != cache_settings_json(s)) throw bad("its cache layout does not match this model's");
    if (dtype && *dtype != s.dtype)
      throw ConfigError("cache_dtype", std::string(attention::cache_dtype_name(*dtype)) + ": " + path + " holds an " +
                                           attention::cache_dtype_name(s.dtype) + " cache; give {cache_dtype} " +
                                           attention::cache_dtype_name(s.dtype) + " or leave it out");
    PromptCache out;
    out.tokens = header.at("tokens").get<std::vector<int64_t>>();
    for (const int64_t t : out.tokens)
      if (t < 0 || t >= mo.vocab) throw bad("token " + std::to_string(t) + " is outside the vocabulary");
    const auto lengths = header.at("lengths").get<std::vector<int64_t>>();
    if (static_cast<int64_t>(lengths.size()) != s.layers || out.tokens.empty())
      throw bad("it holds no prompt, or not one length per layer");
    for (const int64_t len : lengths)
      if (len != static_cast<int64_t>(out.tokens.size())) throw bad("its layers' lengths differ from its tokens");
    s.memory_limit_bytes = memory_limit_bytes;
    s.initial_length = attention::held_positions(lengths[0], s.window, s.sinks);
    // Every section's size is checked against the file before it is read.
    std::vector<attention::KVCache::Storage> rows(static_cast<size_t>(s.layers));
    for (const auto& sec : header.at("sections")) {
      const auto type = scalar_type_named(sec.at("dtype").get<std::string>(), path);
      const auto shape = sec.at("shape").get<std::vector<int64_t>>();
      const auto offset = sec.at("offset").get<uint64_t>(), bytes = sec.at("bytes").get<uint64_t>();
      uint64_t expect = c10::elementSize(type);
      for (const int64_t d : shape)
        if (d < 0 || __builtin_mul_overflow(expect, static_cast<uint64_t>(d), &expect))
          throw bad("a tensor's shape overflows");
      uint64_t end = 0;
      if (expect != bytes || __builtin_add_overflow(offset, bytes, &end) || end > payload_size)
        throw bad("truncated (a tensor runs past the end of the file)");
      // A view of the file's bytes: restore() below copies it into the cache
      // while `file` is alive; only the logits, which outlive it, are cloned.
      const auto t = torch::from_blob(const_cast<char*>(file.data() + payload_at + offset), shape,
                                      torch::TensorOptions().dtype(type));
      const auto layer = sec.at("layer").get<int64_t>();
      const auto role = sec.at("role").get<std::string>();
      // A checksum proves the bytes are the ones written, not that they are
      // numbers: a NaN key would make every later attention row NaN.
      if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
        throw bad("its " + role + (layer >= 0 ? " of layer " + std::to_string(layer) : std::string()) +
                  " hold NaN or an infinity");
      if (layer == -1 && role == "next_logits") {
        if (t.dim() != 1 || t.size(0) != mo.vocab || type != at::kFloat)
          throw bad("its logits are not [vocab] float32");
        out.next_logits = t.clone();
        continue;
      }
      if (layer < 0 || layer >= s.layers) throw bad("a tensor names layer " + std::to_string(layer));
      auto& r = rows[static_cast<size_t>(layer)];
      if (role == "keys")
        r.keys = t;
      else if (role == "values")
        r.values = t;
      else if (role == "key_scales")
        r.key_scales = t;
      else if (role == "value_scales")
        r.value_scales = t;
      else
        throw bad("unknown tensor role '" + role + "'");
    }
    if (!out.next_logits.defined()) throw bad("it holds no logits");
    for (int64_t l = 0; l < s.layers; ++l) {
      const auto& k = rows[static_cast<size_t>(l)].keys;
      if (!k.defined() || k.dim() != 4 ||
          k.size(2) != attention::held_positions(lengths[static_cast<size_t>(l)], s.window, s.sinks))
        throw bad("layer " + std::to_string(l) + " holds fewer positions than its length says");
    }
    out.cache = std::make_unique<attention::KVCache>(s);
    for (int64_t l = 0; l < s.layers; ++l) {
      try {
        out.cache->restore(l, lengths[static_cast<size_t>(l)], rows[static_cast<size_t>(l)]);
      } catch (const UsageError&) {
        throw bad("layer " + std::to_string(l) + "'s tensors do not match the cache layout");
      }
    }
    return out;
  } catch (const nlohmann::json::exception&) {
    throw bad("its header lacks a field or has one of the wrong type");
  }
}

}  // namespace qkv::lm
