#include "qkv/train/weights.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/shape.h"
#include "qkv/core/text.h"
#include "qkv/core/zip_entries.h"

namespace qkv::train {
std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : module.named_parameters(true)) out[p.key()] = p.value();
  for (const auto& b : module.named_buffers(true)) out[b.key()] = b.value();
  return out;
}

namespace {

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
  if (pickle[3] == 'q')
    after_dict = 5;
  else if (pickle[3] == 'r')
    after_dict = 8;
  if (after_dict > pickle.size() - 2) return false;
  pickle[pickle.size() - 2] = 'u';
  pickle.insert(after_dict, 1, '(');
  return true;
}

// One opcode of a pickle: where it starts, its length, and for the memo
// opcodes (BINPUT, LONG_BINPUT, BINGET, LONG_BINGET) the slot.
struct PickleOp {
  size_t at = 0, size = 1;
  uint8_t op = 0;
  uint64_t slot = 0;
};

// The opcodes of a protocol-2 pickle as Python's torch.save writes a state
// dict; nullopt at any other opcode or an argument running past the end.
std::optional<std::vector<PickleOp>> state_dict_pickle_ops(const std::string& pickle) {
  std::vector<PickleOp> ops;
  const size_t n = pickle.size();
  auto little = [&](size_t from, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(pickle[from + i])) << (8 * i);
    return v;
  };
  for (size_t at = 0; at < n;) {
    PickleOp o;
    o.at = at;
    o.op = static_cast<uint8_t>(pickle[at]);
    size_t arg = 0;  // bytes of a fixed argument
    int prefix = 0;  // bytes of a length prefix
    switch (o.op) {
      case 0x80:
      case 'K':
      case 'q':
      case 'h': arg = 1; break;  // PROTO BININT1 BINPUT BINGET
      case 'M': arg = 2; break;  // BININT2
      case 'J':
      case 'r':
      case 'j': arg = 4; break;     // BININT LONG_BINPUT LONG_BINGET
      case 'G': arg = 8; break;     // BINFLOAT
      case 'X': prefix = 4; break;  // BINUNICODE
      case 0x8c:
      case 0x8a: prefix = 1; break;  // SHORT_BINUNICODE LONG1
      case 'c': {                    // GLOBAL: two lines
        const auto first = pickle.find('\n', at + 1);
        const auto second = first == std::string::npos ? first : pickle.find('\n', first + 1);
        if (second == std::string::npos) return std::nullopt;
        o.size = second + 1 - at;
        break;
      }
      case '(':
      case ')':
      case '}':
      case ']':
      case 'N':
      case 0x88:
      case 0x89:
      case 'R':
      case 'b':
      case 'u':
      case 's':
      case 'e':
      case 'a':
      case 't':
      case 0x85:
      case 0x86:
      case 0x87:
      case 'Q':
      case '.': break;
      default: return std::nullopt;
    }
    if (prefix > 0) {
      if (prefix > static_cast<int>(n - at - 1)) return std::nullopt;
      const uint64_t length = little(at + 1, prefix);
      if (length > n - at - 1 - static_cast<size_t>(prefix)) return std::nullopt;
      o.size = 1 + static_cast<size_t>(prefix) + static_cast<size_t>(length);
    } else if (arg > 0) {
      if (arg > n - at - 1) return std::nullopt;
      o.size = 1 + arg;
      if (o.op == 'q' || o.op == 'h' || o.op == 'r' || o.op == 'j') o.slot = little(at + 1, static_cast<int>(arg));
    }
    ops.push_back(o);
    at += o.size;
    if (o.op == '.') break;
  }
  return ops;
}

// Python's torch.save(model.state_dict()) pickles an OrderedDict with a
// _metadata attribute: `collections.OrderedDict()` (GLOBAL, or BINGET of
// the memoized class, then EMPTY_TUPLE REDUCE), its items, and a BUILD with
// the attribute's dict of OrderedDicts. LibTorch's Unpickler turns the
// class into None and has no BUILD for a dict, nor the SETITEM that a dict
// of one entry (each {"version": 1} of _metadata) is written with. Rewrites
// such a pickle into the plain dict torch::pickle_save would write: each
// OrderedDict() becomes EMPTY_DICT, each BUILD is dropped with its state (it
// holds only module versions), each SETITEM becomes MARK ... SETITEMS, and
// the memo slots left are renumbered densely. Returns false, changing
// nothing, for a pickle of any other shape.
bool ordered_dicts_as_dicts(std::string& pickle) {
  static const std::string kOrderedDict = "ccollections\nOrderedDict\n";
  if (pickle.find(kOrderedDict) == std::string::npos) return false;
  const auto parsed = state_dict_pickle_ops(pickle);
  if (!parsed) return false;
  const auto& ops = *parsed;
  const size_t count = ops.size();
  std::vector<bool> drop(count, false), to_empty_dict(count, false);
  std::vector<int> marks_before(count, 0);
  std::set<uint64_t> class_slots;
  std::vector<size_t> stack;                     // the op where each stack item starts
  std::vector<std::pair<size_t, size_t>> marks;  // (stack size, op index) of each open MARK
  auto pop = [&](size_t items) {
    if (stack.size() < items + (marks.empty() ? 0 : marks.back().first)) return false;
    stack.resize(stack.size() - items);
    return true;
  };
  auto is = [&](size_t i, uint8_t op) { return i < count && ops[i].op == op; };
  for (size_t i = 0; i < count; ++i) {
    const auto& o = ops[i];
    switch (o.op) {
      case 'c':
      case 'h':
      case 'j': {
        const bool is_class =
            o.op == 'c' ? pickle.compare(o.at, o.size, kOrderedDict) == 0 : class_slots.count(o.slot) > 0;
        if (is_class) {  // OrderedDict [PUT] EMPTY_TUPLE REDUCE -> EMPTY_DICT
          size_t next = i + 1;
          if (o.op == 'c' && (is(next, 'q') || is(next, 'r'))) {
            class_slots.insert(ops[next].slot);
            drop[next++] = true;
          }
          if (!is(next, ')') || !is(next + 1, 'R')) return false;
          to_empty_dict[i] = true;
          drop[next] = drop[next + 1] = true;
          stack.push_back(i);
          i = next + 1;
          continue;
        }
        stack.push_back(i);
        break;
      }
      case 0x80:
      case 'q':
      case 'r': break;  // PROTO, and PUTs leave the top in place
      case 'X':
      case 0x8c:
      case 0x8a:
      case 'K':
      case 'M':
      case 'J':
      case 'G':
      case ')':
      case '}':
      case ']':
      case 'N':
      case 0x88:
      case 0x89: stack.push_back(i); break;
      case '(': marks.emplace_back(stack.size(), i); break;
      case 't': {  // TUPLE: the items above the MARK become one, starting at the MARK
        if (marks.empty()) return false;
        stack.resize(marks.back().first);
        stack.push_back(marks.back().second);
        marks.pop_back();
        break;
      }
      case 'u':
      case 'e':  // SETITEMS APPENDS: the container stays
        if (marks.empty()) return false;
        stack.resize(marks.back().first);
        marks.pop_back();
        if (stack.empty()) return false;
        break;
      case 'Q':
      case 0x85: {  // BINPERSID TUPLE1, and below: a result starts where its deepest input did
        if (stack.empty()) return false;
        const size_t start = stack.back();
        if (!pop(1)) return false;
        stack.push_back(start);
        break;
      }
      case 'R':
      case 0x86: {
        if (stack.size() < 2) return false;
        const size_t start = stack[stack.size() - 2];
        if (!pop(2)) return false;
        stack.push_back(start);
        break;
      }
      case 0x87: {
        if (stack.size() < 3) return false;
        const size_t start = stack[stack.size() - 3];
        if (!pop(3)) return false;
        stack.push_back(start);
        break;
      }
      case 'a':
        if (!pop(1)) return false;
        break;     // APPEND: the list stays
      case 's': {  // SETITEM -> MARK key value SETITEMS
        if (stack.size() < 3) return false;
        ++marks_before[stack[stack.size() - 2]];
        if (!pop(2)) return false;
        break;
      }
      case 'b': {  // BUILD: drop it and its state
        if (stack.size() < 2) return false;
        for (size_t j = stack.back(); j <= i; ++j) drop[j] = true;
        if (!pop(1)) return false;
        break;
      }
      case '.': break;
      default: return false;
    }
  }
  // Renumber the memo slots that stay, in order; a fetch of a dropped slot
  // from outside the dropped part would be a pickle of another shape.
  std::map<uint64_t, uint64_t> renumbered;
  std::string out;
  out.reserve(pickle.size());
  for (size_t i = 0; i < count; ++i) {
    const auto& o = ops[i];
    if (drop[i]) continue;
    out.append(static_cast<size_t>(marks_before[i]), '(');
    if (to_empty_dict[i]) {
      out.push_back('}');
    } else if (o.op == 'q' || o.op == 'r') {
      const uint64_t slot = renumbered.size();
      renumbered[o.slot] = slot;
      out.push_back(static_cast<char>(o.op));
      for (int b = 0; b < (o.op == 'q' ? 1 : 4); ++b) out.push_back(static_cast<char>((slot >> (8 * b)) & 0xff));
    } else if (o.op == 'h' || o.op == 'j') {
      const auto found = renumbered.find(o.slot);
      if (found == renumbered.end()) return false;
      out.push_back(static_cast<char>(o.op));
      for (int b = 0; b < (o.op == 'h' ? 1 : 4); ++b)
        out.push_back(static_cast<char>((found->second >> (8 * b)) & 0xff));
    } else if (o.op == 's') {
      out.push_back('u');
    } else {
      out.append(pickle, o.at, o.size);
    }
  }
  pickle = std::move(out);
  return true;
}

// Walks a pickle's opcodes and checks what LibTorch's Unpickler takes on
// trust:
// - every length-prefixed argument (strings, bytes, long integers, frames)
//   fits in the bytes that follow: the Unpickler reserves the declared length
//   before reading it (fuzz_weights: a 2 GB string in a 700-byte file);
// - memo slots are stored in order and fetched only once stored (it reserves
//   1 + 2 x a PUT's index);
// - no opcode takes more stack items than there are above the last MARK, and
//   the MARKs that APPENDS, SETITEMS, TUPLE, ... close exist: it pops without
//   looking (fuzz_weights: TUPLE3 on a short stack corrupted its stack).
// Stops quietly at an opcode it does not know or at STOP, leaving the
// Unpickler to judge the rest.
void check_pickle(const std::string& pickle, const std::string& path, const std::string& kind) {
  const size_t n = pickle.size();
  size_t at = 0;
  auto little = [&](size_t from, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(pickle[from + i])) << (8 * i);
    return v;
  };
  auto refuse = [&](const std::string& what) {
    throw DataError(path + ": not a " + kind + " (its pickle " + what + ")");
  };
  auto need = [&](uint64_t bytes, const char* what) {
    if (bytes > n - at)
      refuse("declares a " + std::string(what) + " of " + std::to_string(bytes) + " bytes, more than the " +
             std::to_string(n - at) + " left");
  };
  uint64_t memo = 0;          // memo slots so far: picklers number them 0, 1, 2, ...
  size_t depth = 0;           // stack items
  std::vector<size_t> marks;  // depth at each open MARK
  auto above_mark = [&] { return depth - (marks.empty() ? 0 : marks.back()); };
  auto take = [&](size_t items, uint8_t op) {  // pops `items`, as an opcode that needs them
    if (above_mark() < items)
      refuse("pops " + std::to_string(items) + " items with " + std::to_string(above_mark()) +
             " on the stack (opcode 0x" +
             [&] {
               char b[3];
               std::snprintf(b, sizeof b, "%02x", op);
               return std::string(b);
             }() +
             ")");
    depth -= items;
  };
  auto close_mark = [&] {  // pops back to the last MARK; returns the items above it
    if (marks.empty()) refuse("closes a MARK it never opened");
    const size_t items = depth - marks.back();
    depth = marks.back();
    marks.pop_back();
    return items;
  };
  while (at < n) {
    const auto op = static_cast<uint8_t>(pickle[at++]);
    if (op == 'q' || op == 'r' || op == 'h' || op == 'j') {
      const int bytes = op == 'q' || op == 'h' ? 1 : 4;
      need(static_cast<uint64_t>(bytes), "memo index");
      const uint64_t id = little(at, bytes);
      if ((op == 'q' || op == 'r') && id > memo)
        refuse("stores memo slot " + std::to_string(id) + " after " + std::to_string(memo) + " slots");
      if ((op == 'h' || op == 'j') && id >= memo)
        refuse("fetches memo slot " + std::to_string(id) + " of " + std::to_string(memo));
      if ((op == 'q' || op == 'r') && id == memo) ++memo;
    }
    int prefix = 0;    // bytes of a length prefix, whose value is that many more bytes
    size_t fixed = 0;  // bytes of a fixed-size argument
    switch (op) {
      case '.': take(1, op); return;  // STOP
      case 'X':
      case 'B':
      case 'T':
      case 0x8b:
        prefix = 4;
        ++depth;
        break;  // BINUNICODE BINBYTES BINSTRING LONG4
      case 0x8c:
      case 'C':
      case 'U':
      case 0x8a:
        prefix = 1;
        ++depth;
        break;  // SHORT_BINUNICODE SHORT_BINBYTES SHORT_BINSTRING LONG1
      case 0x8d:
      case 0x8e:
      case 0x96:
        prefix = 8;
        ++depth;
        break;                      // BINUNICODE8 BINBYTES8 BYTEARRAY8
      case 0x95: fixed = 8; break;  // FRAME (its length is a hint)
      case 0x80: fixed = 1; break;  // PROTO
      case 'K':
      case 'h':
        fixed = 1;
        ++depth;
        break;  // BININT1 BINGET
      case 'M':
        fixed = 2;
        ++depth;
        break;  // BININT2
      case 'J':
      case 'j':
        fixed = 4;
        ++depth;
        break;  // BININT LONG_BINGET
      case 'G':
        fixed = 8;
        ++depth;
        break;  // BINFLOAT
      case 'q':
      case 'r':
        take(1, op);
        ++depth;
        fixed = op == 'q' ? 1 : 4;
        break;     // BINPUT LONG_BINPUT: the top stays
      case 'c': {  // GLOBAL: two lines, one item
        for (int line = 0; line < 2; ++line) {
          const auto nl = pickle.find('\n', at);
          if (nl == std::string::npos) return;
          at = nl + 1;
        }
        ++depth;
        continue;
      }
      case '(': marks.push_back(depth); continue;  // MARK
      case ')':
      case ']':
      case '}':
      case 0x8f:
      case 'N':
      case 0x88:
      case 0x89: ++depth; continue;  // empties, None, bools
      case 0x94:
        take(1, op);
        ++depth;
        ++memo;
        continue;  // MEMOIZE: the top stays
      case 'Q':
      case 0x85:
        take(1, op);
        ++depth;
        continue;  // BINPERSID TUPLE1
      case 0x86:
      case 'R':
      case 'b':
      case 0x81:
      case 0x93:
      case 'a':  // TUPLE2 REDUCE BUILD NEWOBJ STACK_GLOBAL APPEND
        take(2, op);
        ++depth;
        continue;
      case 0x87:
      case 0x92:
        take(3, op);
        ++depth;
        continue;  // TUPLE3 NEWOBJ_EX
      case 's':
        take(3, op);
        ++depth;
        continue;  // SETITEM: the dict stays
      case '2':
        take(1, op);
        depth += 2;
        continue;                        // DUP
      case '0': take(1, op); continue;   // POP
      case '1': close_mark(); continue;  // POP_MARK
      case 't':
      case 'l':
      case 'd':
      case 0x91:
        close_mark();
        ++depth;
        continue;  // TUPLE LIST DICT FROZENSET
      case 'o':    // OBJ: class and arguments
        if (close_mark() < 1) refuse("builds an object without its class");
        ++depth;
        continue;
      case 'e':
      case 0x90:
        close_mark();
        take(1, op);
        ++depth;
        continue;  // APPENDS ADDITEMS: the container stays
      case 'u':    // SETITEMS: the dict stays
        if (close_mark() % 2 != 0) refuse("sets a key without its value");
        take(1, op);
        ++depth;
        continue;
      default: return;  // not walked further
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
// (or a standard exception) if it cannot be read. `record_bytes` gets the
// size of every storage record read, by the address of its data: the
// Unpickler sizes a storage by what the pickle declares, not by its record.
c10::IValue load_torch_save_zip(const std::vector<char>& bytes, const std::string& path, const std::string& kind,
                                std::map<const void*, size_t>& record_bytes) {
  check_zip_entries(bytes.data(), bytes.size(), path);  // sizes LibTorch would allocate unchecked
  std::istringstream stream(std::string(bytes.begin(), bytes.end()));
  caffe2::serialize::PyTorchStreamReader reader(&stream);
  const auto [data, size] = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char*>(data.get()), size);
  if (!ordered_dicts_as_dicts(pickle)) setitem_as_setitems(pickle);
  check_pickle(pickle, path, kind);  // as the Unpickler will read it
  size_t at = 0;
  auto read = [&](char* buffer, size_t n) {
    const size_t take = std::min(n, pickle.size() - at);
    std::memcpy(buffer, pickle.data() + at, take);
    at += take;
    return take;
  };
  auto read_record = [&](const std::string& name) {
    auto record = reader.getRecord("data/" + name);
    record_bytes[std::get<0>(record).get()] = std::get<1>(record);
    return std::move(std::get<0>(record));
  };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::nullopt);
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

// Whether every element a tensor's sizes, strides and offset reach lies in
// the bytes its storage's record holds. LibTorch's unpickler rebuilds a
// tensor from whatever a damaged pickle says (fuzz_weights: a read through a
// null storage) and sizes the storage by the pickle's element count, not by
// the record (fuzz_checkpoint: 213 bytes read from an 8-byte record); nothing
// reads one of these before it is checked here.
bool within_storage(const at::Tensor& t, const std::map<const void*, size_t>& record_bytes) {
  if (!t.has_storage() || t.is_sparse()) return false;
  const int64_t offset = t.storage_offset();
  if (offset < 0) return false;
  int64_t last = offset;  // index of the furthest element
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size < 0 || stride < 0) return false;
    if (size == 0) return true;  // no element is read
    int64_t reach = 0;
    if (!checked_mul(size - 1, stride, reach) || !checked_add(last, reach, last)) return false;
  }
  int64_t bytes = 0;
  const auto item = static_cast<int64_t>(t.element_size());
  if (!checked_add(last, int64_t{1}, last) || !checked_mul(last, item, bytes)) return false;
  const auto& storage = t.storage();
  const auto record = record_bytes.find(storage.data());
  return storage.data() != nullptr && record != record_bytes.end() && storage.nbytes() <= record->second &&
         bytes <= static_cast<int64_t>(storage.nbytes());
}

bool is_zip(const std::vector<char>& bytes) {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0;
}

}  // namespace

std::vector<char> tensor_dict_bytes(const std::map<std::string, at::Tensor>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  return torch::pickle_save(c10::IValue(dict));
}

void export_weights(const torch::nn::Module& module, const std::string& path) {
  write_file_atomic(path, tensor_dict_bytes(named_tensors(module)));
}

void load_weights(torch::nn::Module& module, const std::string& path) {
  guard_memory(path, "a weights file", [&] {
    regular_file_size(path);
    copy_into_module(module, read_tensor_dict(read_file_bytes(path), path, "weights file"), path,
                     "weights do not fit the model", /*refuse_non_finite=*/true);
  });
}

void check_weights_file(const std::string& path) {
  guard_memory(path, "a weights file", [&] {
    regular_file_size(path);
    read_tensor_dict(read_file_bytes(path), path, "weights file");
  });
}

std::map<std::string, at::Tensor> read_tensor_dict(const std::vector<char>& bytes, const std::string& path,
                                                   const std::string& kind) {
  c10::IValue value;
  std::map<const void*, size_t> record_bytes;
  // LibTorch's unpickler throws c10::Error for most damage but standard
  // exceptions (out_of_range, ...) for some (found by fuzz_weights): either
  // is a file that is not what it should be. Running out of memory is not.
  try {
    // torch.save and torch::pickle_save write zip archives, and LibTorch reads
    // nothing else; torch::pickle_load would still look for a zip directory at
    // the end of anything, through the reader that overflows (fuzz_weights).
    if (!is_zip(bytes))
      throw DataError(path + ": not a " + kind + " (torch.save and torch::pickle_save write a zip archive; this " +
                      "does not start like one)");
    value = load_torch_save_zip(bytes, path, kind, record_bytes);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw DataError(path + ": not a " + kind + " written by torch.save / torch::pickle_save (" +
                    std::string(c10_error ? c10_error->what_without_backtrace() : e.what()).substr(0, 200) + ")");
  }
  if (!value.isGenericDict()) throw DataError(path + ": not a " + kind + " (expected a dict of name -> tensor)");
  std::map<std::string, at::Tensor> file;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw DataError(path + ": not a " + kind + " (expected a dict of name -> tensor; found a non-tensor entry)");
    if (!within_storage(item.value().toTensor(), record_bytes))
      throw DataError(path + ": '" + item.key().toStringRef() +
                      "' reaches past the data stored for it (its sizes, strides or offset are damaged)");
    file[item.key().toStringRef()] = item.value().toTensor();
  }
  return file;
}

void copy_into_module(torch::nn::Module& module, const std::map<std::string, at::Tensor>& file, const std::string& path,
                      const std::string& misfit, bool refuse_non_finite) {
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
    std::string msg = path + ": " + misfit + ":";
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
    if (refuse_non_finite && src.is_floating_point() && !torch::isfinite(src).all().item<bool>())
      throw DataError(path + ": '" + name + "' holds NaN or infinite values");
  }
  for (auto& [name, t] : model) t.copy_(file.at(name));
}

}  // namespace qkv::train
