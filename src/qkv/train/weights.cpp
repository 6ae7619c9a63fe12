#include "qkv/train/weights.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <map>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"

namespace qkv::train {
namespace {

std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : module.named_parameters(true)) out[p.key()] = p.value();
  for (const auto& b : module.named_buffers(true)) out[b.key()] = b.value();
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void export_weights(const torch::nn::Module& module, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : named_tensors(module)) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  write_file_atomic(path, torch::pickle_save(c10::IValue(dict)));
}

void load_weights(torch::nn::Module& module, const std::string& path) {
  const std::vector<char> bytes = read_file_bytes(path);
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw DataError(path + ": not a weights file written by torch.save / torch::pickle_save (" +
                    std::string(e.what_without_backtrace()).substr(0, 200) + ")");
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
  for (auto& [name, t] : model) {
    const auto& src = file.at(name);
    if (!src.is_floating_point() && t.is_floating_point())
      throw DataError(path + ": '" + name + "' is " + std::string(c10::toString(src.scalar_type())) +
                      ", expected floating point");
    t.copy_(src);
  }
}

}  // namespace qkv::train
