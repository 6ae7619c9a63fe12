#include "qkv/train/checkpoint.h"

#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/json_file.h"
#include "qkv/core/shape.h"
#include "qkv/core/text.h"
#include "qkv/core/zip_entries.h"
#include "qkv/train/weights.h"

namespace qkv::train {
namespace {

// The first model weight or optimizer entry holding NaN or an infinity, as a
// DataError naming it: a checkpoint of a run that diverged predicts NaN and
// resumes into NaN.
void require_finite(const std::map<std::string, at::Tensor>& entries, const std::string& path, bool accept) {
  if (accept) return;
  for (const auto& [name, t] : entries) {
    const bool weights = name.compare(0, 6, "model/") == 0, optimizer = name.compare(0, 10, "optimizer/") == 0;
    if (!(weights || optimizer) || !t.is_floating_point() || torch::isfinite(t).all().item<bool>()) continue;
    const int64_t bad = t.numel() - torch::isfinite(t).sum().item<int64_t>();
    throw DataError(path + ": '" + name + "' holds " + std::to_string(bad) + " NaN or infinite value" +
                    (bad == 1 ? "" : "s") + " (the run diverged before this checkpoint); " +
                    (weights ? "add {allow_non_finite} to read it anyway" : "it cannot be resumed"));
  }
}

// Format 2 (since 2026-12-02): the payload is a torch.save zip of a dict
// name -> tensor, read through the weights file's checked reader. Format 1
// was LibTorch's serialize archive, a TorchScript module whose importer a
// crafted file can crash (fuzz_checkpoint, docs/reliability.md): it is read
// only when the user says the file is theirs.
constexpr char kMagic[8] = {'Q', 'K', 'V', 'C', 'K', 'P', 'T', '2'};
constexpr char kMagicFormat1[8] = {'Q', 'K', 'V', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kHeaderBytes = 8 + 8 + 4 + 4;  // magic, payload length, crc32, reserved
constexpr const char* kReadFormat1 = "QKV_READ_FORMAT1_CHECKPOINTS";
constexpr const char* kKind = "qkv checkpoint";

int format_of(const std::vector<char>& bytes) {
  if (bytes.size() >= kHeaderBytes && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) return 2;
  if (bytes.size() >= kHeaderBytes && std::memcmp(bytes.data(), kMagicFormat1, sizeof kMagic) == 0) return 1;
  return 0;
}

// Checks the header and returns the payload bytes.
std::vector<char> read_payload(const std::vector<char>& bytes, const std::string& path) {
  const int format = format_of(bytes);
  if (format == 0) throw DataError(path + ": not a qkv checkpoint (bad header)");
  uint64_t length = 0;
  uint32_t stored_crc = 0;
  std::memcpy(&length, bytes.data() + 8, 8);
  std::memcpy(&stored_crc, bytes.data() + 16, 4);
  if (bytes.size() - kHeaderBytes != length)
    throw DataError(path + ": checkpoint is truncated or has trailing data (" + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(length + kHeaderBytes) + ")");
  if (crc32(bytes.data() + kHeaderBytes, length) != stored_crc)
    throw DataError(path + ": checkpoint is corrupt (CRC mismatch)");
  if (format == 1) {
    const char* allowed = std::getenv(kReadFormat1);
    if (!allowed || std::string(allowed) != "1")
      throw DataError(path + ": a format-1 qkv checkpoint (qkv before 2026-12-02), readable only through LibTorch's " +
                      "TorchScript importer, which a crafted file can crash; if you wrote it, set " + kReadFormat1 +
                      "=1 to read it (what a run writes next is format 2)");
  }
  return std::vector<char>(bytes.begin() + kHeaderBytes, bytes.end());
}

// f(), with what LibTorch throws for a damaged archive (c10::Error, and
// standard exceptions from its TorchScript parser: fuzz_checkpoint) turned
// into a DataError naming the file. Running out of memory stays what it is.
template <typename F>
auto damaged_as_data_error(const std::string& path, const char* what, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const c10::Error& e) {
    throw DataError(path + ": " + what + ": " + first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw DataError(path + ": " + what + ": " + first_line(e.what()));
  }
}

nlohmann::json parse_json(const std::string& text, const std::string& key, const std::string& path) {
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw DataError(path + ": checkpoint field '" + key + "' nests deeper than " + std::to_string(kMaxJsonDepth) +
                    " levels");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw DataError(path + ": checkpoint field '" + key + "' is not valid JSON");
  }
}

// Text (JSON, names) as a tensor of bytes: format 2's dict holds tensors only.
at::Tensor text_tensor(const std::string& text) {
  auto t = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  if (!text.empty()) std::memcpy(t.data_ptr<uint8_t>(), text.data(), text.size());
  return t;
}

std::string text_entry(const std::map<std::string, at::Tensor>& file, const std::string& key, const std::string& path) {
  const auto it = file.find(key);
  if (it == file.end()) throw DataError(path + ": checkpoint lacks '" + key + "'");
  const at::Tensor t = it->second.contiguous();
  if (t.scalar_type() != torch::kUInt8 || t.dim() != 1)
    throw DataError(path + ": checkpoint field '" + key + "' is not text");
  if (t.numel() == 0) return {};
  return std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()), static_cast<size_t>(t.numel()));
}

std::string optimizer_kind(torch::optim::Optimizer& o) {
  if (dynamic_cast<torch::optim::AdamW*>(&o)) return "adamw";
  if (dynamic_cast<torch::optim::Adam*>(&o)) return "adam";
  if (dynamic_cast<torch::optim::SGD*>(&o)) return "sgd";
  throw std::logic_error("checkpoint: no format-2 layout for this optimizer");
}

// An optimizer's per-parameter state is keyed by the parameter's TensorImpl:
// its address printed as text in LibTorch 1.x, the address itself in 2.x.
using OptimizerStates = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
using StateKey = OptimizerStates::key_type;

template <typename Key>
Key key_of(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // what LibTorch 1.x's c10::guts::to_string(pointer) writes
    text << impl;
    return text.str();
  } else {
    return impl;
  }
}

StateKey state_key(const at::Tensor& param) { return key_of<StateKey>(param.unsafeGetTensorImpl()); }

// Adam and AdamW keep the same per-parameter state.
template <typename AdamState>
void adam_state_entries(const torch::optim::OptimizerParamState& base, const std::string& prefix,
                        std::map<std::string, at::Tensor>& out) {
  const auto& s = static_cast<const AdamState&>(base);
  out[prefix + "step"] = torch::tensor(s.step(), torch::kLong);
  out[prefix + "exp_avg"] = s.exp_avg();
  out[prefix + "exp_avg_sq"] = s.exp_avg_sq();
  if (s.max_exp_avg_sq().defined()) out[prefix + "max_exp_avg_sq"] = s.max_exp_avg_sq();
}

// "optimizer/G/I/FIELD" for parameter I of group G.
void optimizer_entries(torch::optim::Optimizer& o, std::map<std::string, at::Tensor>& out) {
  const std::string kind = optimizer_kind(o);
  out["optimizer/kind"] = text_tensor(kind);
  for (size_t g = 0; g < o.param_groups().size(); ++g) {
    const auto& params = o.param_groups()[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto it = o.state().find(state_key(params[i]));
      if (it == o.state().end()) continue;  // no step has touched it yet
      const std::string prefix = "optimizer/" + std::to_string(g) + "/" + std::to_string(i) + "/";
      if (kind == "adam")
        adam_state_entries<torch::optim::AdamParamState>(*it->second, prefix, out);
      else if (kind == "adamw")
        adam_state_entries<torch::optim::AdamWParamState>(*it->second, prefix, out);
      else if (const auto& buffer = static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer();
               buffer.defined())
        out[prefix + "momentum_buffer"] = buffer;
    }
  }
}

// The state of one parameter from its entries, each checked against the
// parameter: a moment of another shape would fail only at the next step.
template <typename AdamState>
std::unique_ptr<torch::optim::OptimizerParamState> adam_state_of(const std::map<std::string, at::Tensor>& fields,
                                                                 const at::Tensor& param, const std::string& where,
                                                                 const std::string& path) {
  for (const char* required : {"step", "exp_avg", "exp_avg_sq"})
    if (!fields.count(required)) throw DataError(path + ": checkpoint's optimizer state lacks " + where + required);
  const at::Tensor& step = fields.at("step");
  if (step.scalar_type() != torch::kLong || step.numel() != 1 || step.item<int64_t>() < 0)
    throw DataError(path + ": checkpoint's " + where + "step is not a step count");
  auto s = std::make_unique<AdamState>();
  s->step(step.item<int64_t>());
  s->exp_avg(fields.at("exp_avg").to(param.options()));
  s->exp_avg_sq(fields.at("exp_avg_sq").to(param.options()));
  if (fields.count("max_exp_avg_sq")) s->max_exp_avg_sq(fields.at("max_exp_avg_sq").to(param.options()));
  return s;
}

// The optimizer's per-parameter states from format 2's entries, every entry
// parsed and checked; the optimizer itself is not touched.
OptimizerStates optimizer_states_of(torch::optim::Optimizer& o, const std::map<std::string, at::Tensor>& file,
                                    const std::string& path) {
  const std::string kind = optimizer_kind(o);
  const std::string stored = text_entry(file, "optimizer/kind", path);
  if (stored != kind)
    throw DataError(path + ": checkpoint's optimizer is '" + stored + "', this run's is '" + kind + "'");
  std::map<std::pair<size_t, size_t>, std::map<std::string, at::Tensor>> by_param;
  const std::string prefix = "optimizer/";
  for (auto it = file.lower_bound(prefix); it != file.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (it->first == "optimizer/kind") continue;
    const std::string rest = it->first.substr(prefix.size());
    const auto slash1 = rest.find('/'), slash2 = rest.find('/', slash1 == std::string::npos ? 0 : slash1 + 1);
    size_t g = 0, i = 0;
    bool ok = slash1 != std::string::npos && slash2 != std::string::npos;
    try {
      if (ok) {
        size_t used = 0;
        g = std::stoul(rest.substr(0, slash1), &used);
        ok = used == slash1;
        i = std::stoul(rest.substr(slash1 + 1, slash2 - slash1 - 1), &used);
        ok = ok && used == slash2 - slash1 - 1;
      }
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok || g >= o.param_groups().size() || i >= o.param_groups()[g].params().size())
      throw DataError(path + ": checkpoint's optimizer state names no parameter of this model ('" + it->first + "')");
    const std::string field = rest.substr(slash2 + 1);
    const at::Tensor& param = o.param_groups()[g].params()[i];
    const bool moment =
        field == "exp_avg" || field == "exp_avg_sq" || field == "max_exp_avg_sq" || field == "momentum_buffer";
    const bool known =
        kind == "sgd" ? field == "momentum_buffer" : field == "step" || (moment && field != "momentum_buffer");
    if (!known) throw DataError(path + ": checkpoint's optimizer state has an unknown entry '" + it->first + "'");
    if (moment) {
      if (it->second.sizes() != param.sizes())
        throw DataError(path + ": checkpoint's '" + it->first + "' is " + shape_of(it->second) + ", its parameter " +
                        shape_of(param));
      if (!it->second.is_floating_point())
        throw DataError(path + ": checkpoint's '" + it->first + "' is not floating point");
    }
    by_param[{g, i}][field] = it->second;
  }
  OptimizerStates states;
  for (const auto& [at_param, fields] : by_param) {
    const at::Tensor& param = o.param_groups()[at_param.first].params()[at_param.second];
    const std::string where =
        "optimizer/" + std::to_string(at_param.first) + "/" + std::to_string(at_param.second) + "/";
    if (kind == "adam")
      states[state_key(param)] = adam_state_of<torch::optim::AdamParamState>(fields, param, where, path);
    else if (kind == "adamw")
      states[state_key(param)] = adam_state_of<torch::optim::AdamWParamState>(fields, param, where, path);
    else {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(fields.at("momentum_buffer").to(param.options()));
      states[state_key(param)] = std::move(s);
    }
  }
  return states;
}

// The state as the checkpoint's JSON text. The history, which grows by an
// epoch each time a run saves, is printed into the text as it stands rather
// than copied into a JSON object first.
std::string state_json_text(const TrainState& s) {
  const nlohmann::json fixed_size = {{"epoch", s.epoch},
                                     {"step_in_epoch", s.step_in_epoch},
                                     {"global_step", s.global_step},
                                     {"partial_loss_sum", s.partial_loss_sum},
                                     {"partial_count", s.partial_count},
                                     {"partial_correct", s.partial_correct},
                                     {"partial_seconds", s.partial_seconds},
                                     {"best_epoch", s.best_epoch},
                                     {"best_value", s.best_value},
                                     {"train_seconds", s.train_seconds},
                                     {"world_size", s.world_size}};
  std::string text = json_text(fixed_size, -1);
  text.pop_back();  // the closing brace
  return text + ",\"history\":" + json_text(s.history, -1) + "}";
}

TrainState train_state_of(const std::string& state_text, const std::string& config_text, const std::string& path) {
  const auto j = parse_json(state_text, "state", path);
  // JSON has no NaN: a diverged run's loss sum or best value is written as
  // null, and read back as the NaN it was.
  const auto real = [&j](const char* key) {
    const auto& value = j.at(key);
    return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
  };
  TrainState s;
  try {
    s.epoch = j.at("epoch");
    s.step_in_epoch = j.at("step_in_epoch");
    s.global_step = j.at("global_step");
    s.partial_loss_sum = real("partial_loss_sum");
    s.partial_count = real("partial_count");
    s.partial_correct = real("partial_correct");
    s.partial_seconds = real("partial_seconds");
    s.best_epoch = j.at("best_epoch");
    s.best_value = real("best_value");
    s.train_seconds = real("train_seconds");
    s.history = j.at("history");
    s.world_size = j.value("world_size", int64_t{1});
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": checkpoint state is incomplete: " + e.what());
  }
  if (s.world_size < 1 || s.world_size > (int64_t{1} << 20))
    throw DataError(path + ": checkpoint state has world_size " + std::to_string(s.world_size));
  s.run_config = parse_json(config_text, "config", path);
  return s;
}

// Format 1: LibTorch's serialize archive, read only with kReadFormat1 set.
namespace format1 {

torch::serialize::InputArchive open_archive(const std::vector<char>& payload, const std::string& path) {
  check_zip_entries(payload.data(), payload.size(), path);  // sizes LibTorch would allocate unchecked
  torch::serialize::InputArchive archive;
  damaged_as_data_error(path, "checkpoint payload is unreadable", [&] {
    // Onto the CPU whatever device wrote it: a file from a GPU run loads on a
    // machine without one (the trainer moves the model afterwards).
    archive.load_from(payload.data(), payload.size(), torch::Device(torch::kCPU));
    return 0;
  });
  return archive;
}

std::string read_string(torch::serialize::InputArchive& a, const std::string& key, const std::string& path) {
  return damaged_as_data_error(path, "checkpoint payload is unreadable", [&] {
    c10::IValue v;
    if (!a.try_read(key, v) || !v.isString()) throw DataError(path + ": checkpoint lacks '" + key + "'");
    return v.toStringRef();
  });
}

TrainState load(const std::vector<char>& payload, const std::string& path, torch::nn::Module& model,
                torch::optim::Optimizer* optimizer, bool accept_non_finite) {
  auto archive = open_archive(payload, path);
  damaged_as_data_error(path, "checkpoint does not fit this model", [&] {
    torch::serialize::InputArchive model_archive;
    if (!archive.try_read("model", model_archive)) throw DataError(path + ": checkpoint has no model");
    model.load(model_archive);
    std::map<std::string, at::Tensor> loaded;
    for (const auto& p : model.named_parameters()) loaded["model/" + p.key()] = p.value();
    require_finite(loaded, path, accept_non_finite);
    if (optimizer) {
      torch::serialize::InputArchive optim_archive;
      if (!archive.try_read("optimizer", optim_archive)) throw DataError(path + ": checkpoint has no optimizer state");
      optimizer->load(optim_archive);
      at::Tensor rng;
      if (!archive.try_read("rng", rng)) throw DataError(path + ": checkpoint has no RNG state");
      set_global_rng_state(rng);
    }
    return 0;
  });
  TrainState s = train_state_of(read_string(archive, "state", path), read_string(archive, "config", path), path);
  for (int64_t r = 1; r < s.world_size; ++r) {
    at::Tensor rng;
    if (archive.try_read("rng_rank_" + std::to_string(r), rng)) s.rank_rng.push_back(rng);
  }
  return s;
}

nlohmann::json config(const std::vector<char>& payload, const std::string& path) {
  auto archive = open_archive(payload, path);
  return parse_json(read_string(archive, "config", path), "config", path);
}

}  // namespace format1

// The payload's dict, checked as a weights file is.
std::map<std::string, at::Tensor> read_entries(const std::vector<char>& payload, const std::string& path) {
  return read_tensor_dict(payload, path, kKind);
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     const TrainState& s) {
  std::map<std::string, at::Tensor> entries;
  for (const auto& [name, t] : named_tensors(model)) entries["model/" + name] = t;
  if (optimizer) optimizer_entries(*optimizer, entries);
  entries["state"] = text_tensor(state_json_text(s));
  entries["config"] = text_tensor(json_text(s.run_config, -1));
  entries["rng"] = global_rng_state();
  for (size_t r = 0; r < s.rank_rng.size(); ++r) entries["rng_rank_" + std::to_string(r + 1)] = s.rank_rng[r];

  const std::vector<char> payload = tensor_dict_bytes(entries);
  std::vector<char> file(kHeaderBytes + payload.size());
  const uint64_t length = payload.size();
  const uint32_t crc = crc32(payload.data(), payload.size());
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  std::memcpy(file.data() + 8, &length, 8);
  std::memcpy(file.data() + 16, &crc, 4);
  std::memcpy(file.data() + kHeaderBytes, payload.data(), payload.size());
  write_file_atomic(path, file);
}

TrainState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                           bool accept_non_finite) {
  regular_file_size(path);
  return guard_memory(path, "a checkpoint", [&] {
    return load_checkpoint_bytes(read_file_bytes(path), path, model, optimizer, accept_non_finite);
  });
}

TrainState load_checkpoint_bytes(const std::vector<char>& file, const std::string& path, torch::nn::Module& model,
                                 torch::optim::Optimizer* optimizer, bool accept_non_finite) {
  const std::vector<char> payload = read_payload(file, path);
  if (format_of(file) == 1) return format1::load(payload, path, model, optimizer, accept_non_finite);
  const auto entries = read_entries(payload, path);
  // Everything is read and checked before the model, the optimizer or the RNG change.
  TrainState s = train_state_of(text_entry(entries, "state", path), text_entry(entries, "config", path), path);
  std::map<std::string, at::Tensor> weights;
  const std::string model_prefix = "model/";
  for (auto it = entries.lower_bound(model_prefix);
       it != entries.end() && it->first.compare(0, model_prefix.size(), model_prefix) == 0; ++it)
    weights[it->first.substr(model_prefix.size())] = it->second;
  const int64_t rng_bytes = global_rng_state().numel();
  auto generator_state = [&](const std::string& key) {
    const auto it = entries.find(key);
    if (it == entries.end()) return at::Tensor();
    const at::Tensor& t = it->second;
    if (t.scalar_type() != torch::kUInt8 || t.dim() != 1 || t.numel() != rng_bytes)
      throw DataError(path + ": checkpoint's '" + key + "' is " + shape_of(t) + " " +
                      std::string(c10::toString(t.scalar_type())) + ", not this LibTorch's generator state");
    return t;
  };
  const at::Tensor rng = generator_state("rng");
  if (optimizer && !rng.defined()) throw DataError(path + ": checkpoint has no RNG state");
  for (int64_t r = 1; r < s.world_size; ++r) {
    const at::Tensor t = generator_state("rng_rank_" + std::to_string(r));
    if (t.defined()) s.rank_rng.push_back(t);
  }
  require_finite(entries, path, accept_non_finite);
  OptimizerStates optimizer_states;
  if (optimizer) optimizer_states = optimizer_states_of(*optimizer, entries, path);
  copy_into_module(model, weights, path, "checkpoint does not fit this model",  // checks all, then copies
                   /*refuse_non_finite=*/false);
  if (optimizer) {
    optimizer->state() = std::move(optimizer_states);
    damaged_as_data_error(path, "checkpoint's RNG state is unusable", [&] {
      set_global_rng_state(rng);
      return 0;
    });
  }
  return s;
}

at::Tensor global_rng_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_global_rng_state(const at::Tensor& state) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

TrainState read_checkpoint_state(const std::string& path) {
  regular_file_size(path);
  return guard_memory(path, "a checkpoint", [&] {
    const std::vector<char> file = read_file_bytes(path);
    const std::vector<char> payload = read_payload(file, path);
    if (format_of(file) == 1) {
      auto archive = format1::open_archive(payload, path);
      return train_state_of(format1::read_string(archive, "state", path), format1::read_string(archive, "config", path),
                            path);
    }
    const auto entries = read_entries(payload, path);
    return train_state_of(text_entry(entries, "state", path), text_entry(entries, "config", path), path);
  });
}

nlohmann::json read_checkpoint_config(const std::string& path) {
  regular_file_size(path);
  return guard_memory(path, "a checkpoint", [&] {
    const std::vector<char> file = read_file_bytes(path);
    const std::vector<char> payload = read_payload(file, path);
    if (format_of(file) == 1) return format1::config(payload, path);
    return parse_json(text_entry(read_entries(payload, path), "config", path), "config", path);
  });
}

}  // namespace qkv::train
