#include "qkv/train/weights.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/core/file_input.h"
#include "qkv/core/shape.h"

namespace qkv::train {
namespace {

std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : module.named_parameters(true)) out[p.key()] = p.value();
  for (const auto& b : module.named_buffers(true)) out[b.key()] = b.value();
  return out;
}

// LibTorch's unpickler lacks the SETITEM opcode, which Python's pickler (and
// so torch.save) uses for a dict of one entry, and for the last entry of a
// dict whose size is 1 more than a multiple of 1000. When the outermost
// object is a dict and the stream ends in SETITEM, a MARK right after the
// dict turns that SETITEM into SETITEMS with the same meaning: every inner
// MARK is consumed by its own opcode, so the final one pops exactly the last
// key and value onto the dict. Returns false if the pickle is not of that shape.
bool setitem_as_setitems(std::string& pickle) {
  // PROTO 2, EMPTY_DICT, then optionally BINPUT n / LONG_BINPUT n.
  if (pickle.size() < 5 || pickle[0] != '\x80' || pickle[2] != '}') return false;
  if (pickle.compare(pickle.size() - 2, 2, "s.") != 0) return false;
  size_t after_dict = 3;
  if (pickle[3] == 'q') after_dict = 5;
  else if (pickle[3] == 'r') after_dict = 8;
  if (after_dict > pickle.size() - 2) return false;
  pickle[pickle.size() - 2] = 'u';
  pickle.insert(after_dict, 1, '(');
  return true;
}

// What torch::pickle_load does for a zip archive, with the pickle patched by
// setitem_as_setitems where that applies, and with reads that stop at the end
// of the file: pickle_load's own reader copies whatever range the archive's
// directory names, past the end of a damaged file's buffer (found by
// fuzz_weights: a heap overflow in LibTorch 1.13's miniz callback). c10::Error
// (or a standard exception) if it cannot be read.
c10::IValue load_torch_save_zip(const std::vector<char>& bytes) {
  std::istringstream stream(std::string(bytes.begin(), bytes.end()));
  caffe2::serialize::PyTorchStreamReader reader(&stream);
  const auto [data, size] = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char*>(data.get()), size);
  setitem_as_setitems(pickle);
  size_t at = 0;
  auto read = [&](char* buffer, size_t n) {
    const size_t take = std::min(n, pickle.size() - at);
    std::memcpy(buffer, pickle.data() + at, take);
    at += take;
    return take;
  };
  auto read_record = [&](const std::string& name) { return std::get<0>(reader.getRecord("data/" + name)); };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::nullopt);
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

bool is_zip(const std::vector<char>& bytes) { return bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0; }

void load_weights_unguarded(torch::nn::Module& module, const std::string& path);

}  // namespace

void export_weights(const torch::nn::Module& module, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : named_tensors(module)) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  write_file_atomic(path, torch::pickle_save(c10::IValue(dict)));
}

void load_weights(torch::nn::Module& module, const std::string& path) {
  guard_memory(path, "a weights file", [&] { load_weights_unguarded(module, path); });
}

namespace {

void load_weights_unguarded(torch::nn::Module& module, const std::string& path) {
  regular_file_size(path);
  const std::vector<char> bytes = read_file_bytes(path);
  c10::IValue value;
  // LibTorch's unpickler throws c10::Error for most damage but standard
  // exceptions (out_of_range, ...) for some (found by fuzz_weights): either
  // is a file that is not a weights file. Running out of memory is not.
  try {
    value = is_zip(bytes) ? load_torch_save_zip(bytes) : torch::pickle_load(bytes);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw DataError(path + ": not a weights file written by torch.save / torch::pickle_save (" +
                    std::string(c10_error ? c10_error->what_without_backtrace() : e.what()).substr(0, 200) + ")");
  }
  if (!value.isGenericDict()) throw DataError(path + ": expected a dict of name -> tensor");
  std::map<std::string, at::Tensor> file;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw DataError(path + ": expected a dict of name -> tensor (found a non-tensor entry)");
    file[item.key().toStringRef()] = item.value().toTensor();
  }
  auto model = named_tensors(module);
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : model) {
    auto it = file.find(name);
    if (it == file.end())
      missing.push_back(name);
    else if (it->second.sizes() != t.sizes())
      mismatched.push_back(name + " " + shape_of(it->second) + " vs model " + shape_of(t));
  }
  for (const auto& [name, t] : file)
    if (!model.count(name)) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string msg = path + ": weights do not fit the model:";
    if (!missing.empty()) msg += " missing " + join(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected " + join(unexpected) + ";";
    if (!mismatched.empty()) msg += " shape mismatch " + join(mismatched) + ";";
    msg.pop_back();
    throw DataError(msg);
  }
  torch::NoGradGuard no_grad;
  // Every entry is checked before any is copied: a refused file leaves the model as it was.
  for (auto& [name, t] : model) {
    const auto& src = file.at(name);
    if (!src.is_floating_point() && t.is_floating_point())
      throw DataError(path + ": '" + name + "' is " + std::string(c10::toString(src.scalar_type())) +
                      ", expected floating point");
    if (src.is_floating_point() && !torch::isfinite(src).all().item<bool>())
      throw DataError(path + ": '" + name + "' holds NaN or infinite values");
  }
  for (auto& [name, t] : model) t.copy_(file.at(name));
}

}  // namespace

}  // namespace qkv::train
