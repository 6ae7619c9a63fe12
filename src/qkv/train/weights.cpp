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
#include "qkv/core/zip_entries.h"

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

// Walks a pickle's opcodes and checks that every length-prefixed argument
// (strings, bytes, long integers, frames) fits in the bytes that follow:
// LibTorch's Unpickler reserves the declared length before reading it
// (fuzz_weights: a 2 GB string in a 700-byte file). Stops quietly at an
// opcode it does not know or at STOP, leaving the Unpickler to judge the rest.
void check_pickle_lengths(const std::string& pickle, const std::string& path) {
  const size_t n = pickle.size();
  size_t at = 0;
  auto little = [&](size_t from, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(pickle[from + i])) << (8 * i);
    return v;
  };
  auto need = [&](uint64_t bytes, const char* what) {
    if (bytes > n - at)
      throw DataError(path + ": not a weights file (its pickle declares a " + what + " of " + std::to_string(bytes) +
                      " bytes, more than the " + std::to_string(n - at) + " left)");
  };
  uint64_t memo = 0;  // memo slots so far: picklers number them 0, 1, 2, ...
  while (at < n) {
    const auto op = static_cast<uint8_t>(pickle[at++]);
    // LibTorch reserves 1 + 2 x a PUT's index: an index far beyond the slots so far asks for gigabytes.
    if (op == 'q' || op == 'r') {
      need(op == 'q' ? 1 : 4, "memo index");
      const uint64_t id = little(at, op == 'q' ? 1 : 4);
      if (id > memo)
        throw DataError(path + ": not a weights file (its pickle stores memo slot " + std::to_string(id) + " after " +
                        std::to_string(memo) + " slots)");
      if (id == memo) ++memo;
    }
    if (op == 0x94) ++memo;  // MEMOIZE
    int prefix = 0;  // bytes of a length prefix, whose value is that many more bytes
    size_t fixed = 0;  // bytes of a fixed-size argument
    switch (op) {
      case '.': return;  // STOP
      case 'X': case 'B': case 'T': case 0x8b: prefix = 4; break;  // BINUNICODE BINBYTES BINSTRING LONG4
      case 0x8c: case 'C': case 'U': case 0x8a: prefix = 1; break;  // SHORT_BINUNICODE SHORT_BINBYTES SHORT_BINSTRING LONG1
      case 0x8d: case 0x8e: case 0x96: prefix = 8; break;             // BINUNICODE8 BINBYTES8 BYTEARRAY8
      case 0x95: fixed = 8; break;                                     // FRAME (its length is a hint)
      case 0x80: case 'K': case 'q': case 'h': fixed = 1; break;       // PROTO BININT1 BINPUT BINGET
      case 'M': fixed = 2; break;                                      // BININT2
      case 'J': case 'r': case 'j': fixed = 4; break;                  // BININT LONG_BINPUT LONG_BINGET
      case 'G': fixed = 8; break;                                      // BINFLOAT
      case 'c': {                                                      // GLOBAL: two lines
        for (int line = 0; line < 2; ++line) {
          const auto nl = pickle.find('\n', at);
          if (nl == std::string::npos) return;
          at = nl + 1;
        }
        continue;
      }
      case '(': case ')': case ']': case '}': case 'Q': case 'R': case 'b': case 't': case 'u': case 's': case 'e':
      case 'a': case 'N': case 0x88: case 0x89: case 0x85: case 0x86: case 0x87: case '0': case '1': case 0x94:
      case 0x81: case 0x92: case 0x93: case 0x8f: case 0x90: case 0x91: case 'l': case 'd': case 'o': case '2':
        continue;  // no argument
      default:
        return;  // not walked further
    }
    if (prefix > 0) {
      need(static_cast<uint64_t>(prefix), "length");
      const uint64_t length = little(at, prefix);
      at += static_cast<size_t>(prefix);
      need(length, "string or number");
      at += static_cast<size_t>(length);
    } else {
      need(fixed, "fixed argument");
      at += fixed;
    }
  }
}

// What torch::pickle_load does for a zip archive, with the pickle patched by
// setitem_as_setitems where that applies, and with reads that stop at the end
// of the file: pickle_load's own reader copies whatever range the archive's
// directory names, past the end of a damaged file's buffer (found by
// fuzz_weights: a heap overflow in LibTorch 1.13's miniz callback). c10::Error
// (or a standard exception) if it cannot be read.
c10::IValue load_torch_save_zip(const std::vector<char>& bytes, const std::string& path) {
  check_zip_entries(bytes.data(), bytes.size(), path);  // sizes LibTorch would allocate unchecked
  std::istringstream stream(std::string(bytes.begin(), bytes.end()));
  caffe2::serialize::PyTorchStreamReader reader(&stream);
  const auto [data, size] = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char*>(data.get()), size);
  check_pickle_lengths(pickle, path);
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
    if (!is_zip(bytes)) check_pickle_lengths(std::string(bytes.begin(), bytes.end()), path);
    value = is_zip(bytes) ? load_torch_save_zip(bytes, path) : torch::pickle_load(bytes);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const DataError&) {
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
