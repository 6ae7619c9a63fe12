#include "qkv/train/checkpoint.h"

#include <torch/torch.h>

#include <array>
#include <cstring>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/json_file.h"
#include "qkv/core/zip_entries.h"

namespace qkv::train {
namespace {

constexpr char kMagic[8] = {'Q', 'K', 'V', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kHeaderBytes = 8 + 8 + 4 + 4;  // magic, payload length, crc32, reserved


// Checks the header and returns the payload bytes.
std::vector<char> read_payload(const std::vector<char>& bytes, const std::string& path) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw DataError(path + ": not a qkv checkpoint (bad header)");
  uint64_t length = 0;
  uint32_t stored_crc = 0;
  std::memcpy(&length, bytes.data() + 8, 8);
  std::memcpy(&stored_crc, bytes.data() + 16, 4);
  if (bytes.size() - kHeaderBytes != length)
    throw DataError(path + ": checkpoint is truncated or has trailing data (" + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(length + kHeaderBytes) + ")");
  if (crc32(bytes.data() + kHeaderBytes, length) != stored_crc)
    throw DataError(path + ": checkpoint is corrupt (CRC mismatch)");
  return std::vector<char>(bytes.begin() + kHeaderBytes, bytes.end());
}

std::string first_line_of(const std::string& text) { return text.substr(0, text.find('\n')); }

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
    throw DataError(path + ": " + what + ": " + first_line_of(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw DataError(path + ": " + what + ": " + first_line_of(e.what()));
  }
}

torch::serialize::InputArchive open_archive(const std::vector<char>& file, const std::string& path) {
  std::vector<char> payload = read_payload(file, path);
  check_zip_entries(payload.data(), payload.size(), path);  // sizes LibTorch would allocate unchecked
  torch::serialize::InputArchive archive;
  damaged_as_data_error(path, "checkpoint payload is unreadable", [&] {
    archive.load_from(payload.data(), payload.size());
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

nlohmann::json parse_json(const std::string& text, const std::string& key, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw DataError(path + ": checkpoint field '" + key + "' is not valid JSON");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     const TrainState& s) {
  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  root.write("model", model_archive);
  if (optimizer) {
    torch::serialize::OutputArchive optim_archive;
    optimizer->save(optim_archive);
    root.write("optimizer", optim_archive);
  }
  nlohmann::json state = {{"epoch", s.epoch},
                          {"step_in_epoch", s.step_in_epoch},
                          {"global_step", s.global_step},
                          {"partial_loss_sum", s.partial_loss_sum},
                          {"partial_count", s.partial_count},
                          {"partial_correct", s.partial_correct},
                          {"partial_seconds", s.partial_seconds},
                          {"best_epoch", s.best_epoch},
                          {"best_value", s.best_value},
                          {"train_seconds", s.train_seconds},
                          {"history", s.history},
                          {"world_size", s.world_size}};
  root.write("state", c10::IValue(json_text(state, -1)));
  root.write("config", c10::IValue(json_text(s.run_config, -1)));
  root.write("rng", global_rng_state());
  for (size_t r = 0; r < s.rank_rng.size(); ++r) root.write("rng_rank_" + std::to_string(r + 1), s.rank_rng[r]);

  std::ostringstream payload_stream;
  root.save_to(payload_stream);
  const std::string payload = payload_stream.str();
  std::vector<char> file(kHeaderBytes + payload.size());
  const uint64_t length = payload.size();
  const uint32_t crc = crc32(payload.data(), payload.size());
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  std::memcpy(file.data() + 8, &length, 8);
  std::memcpy(file.data() + 16, &crc, 4);
  std::memcpy(file.data() + kHeaderBytes, payload.data(), payload.size());
  write_file_atomic(path, file);
}

TrainState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  regular_file_size(path);
  return guard_memory(path, "a checkpoint",
                      [&] { return load_checkpoint_bytes(read_file_bytes(path), path, model, optimizer); });
}

TrainState load_checkpoint_bytes(const std::vector<char>& file, const std::string& path, torch::nn::Module& model,
                                 torch::optim::Optimizer* optimizer) {
  auto archive = open_archive(file, path);
  damaged_as_data_error(path, "checkpoint does not fit this model", [&] {
    torch::serialize::InputArchive model_archive;
    if (!archive.try_read("model", model_archive)) throw DataError(path + ": checkpoint has no model");
    model.load(model_archive);
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
  const auto j = parse_json(read_string(archive, "state", path), "state", path);
  TrainState s;
  try {
    s.epoch = j.at("epoch");
    s.step_in_epoch = j.at("step_in_epoch");
    s.global_step = j.at("global_step");
    s.partial_loss_sum = j.at("partial_loss_sum");
    s.partial_count = j.at("partial_count");
    s.partial_correct = j.at("partial_correct");
    s.partial_seconds = j.at("partial_seconds");
    s.best_epoch = j.at("best_epoch");
    s.best_value = j.at("best_value");
    s.train_seconds = j.at("train_seconds");
    s.history = j.at("history");
    s.world_size = j.value("world_size", int64_t{1});
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": checkpoint state is incomplete: " + e.what());
  }
  s.run_config = parse_json(read_string(archive, "config", path), "config", path);
  for (int64_t r = 1; r < s.world_size; ++r) {
    at::Tensor rng;
    if (archive.try_read("rng_rank_" + std::to_string(r), rng)) s.rank_rng.push_back(rng);
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

nlohmann::json read_checkpoint_config(const std::string& path) {
  regular_file_size(path);
  return guard_memory(path, "a checkpoint", [&] {
    auto archive = open_archive(read_file_bytes(path), path);
    return parse_json(read_string(archive, "config", path), "config", path);
  });
}

}  // namespace qkv::train
