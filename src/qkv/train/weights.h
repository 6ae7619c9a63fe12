#pragma once
// Weights interchange with Python: a dict name -> tensor (parameters and
// buffers, dotted names as PyTorch's state_dict uses) saved with
// torch::pickle_save, which Python's torch.load reads. Checkpoints use the
// same container (train/checkpoint.h), so one checked reader serves both.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace qkv::train {

void export_weights(const torch::nn::Module& module, const std::string& path);

// Copies every tensor of the file into the module. Names missing from either
// side and shape mismatches are all reported, by name, in one DataError.
void load_weights(torch::nn::Module& module, const std::string& path);

// A weights file read as load_weights reads it, fitted to no model:
// DataError naming the file when it is not one (a run checks --init-weights
// so before it writes anything; whether the tensors fit is known once the
// model is built).
void check_weights_file(const std::string& path);

// A module's parameters and buffers by their dotted names.
std::map<std::string, at::Tensor> named_tensors(const torch::nn::Module& module);

// The bytes torch.save would write for a dict name -> tensor (each on the
// CPU, contiguous).
std::vector<char> tensor_dict_bytes(const std::map<std::string, at::Tensor>& tensors);

// The dict name -> tensor held by a torch.save / torch::pickle_save zip
// archive's bytes. The archive's directory, the pickle's opcodes and every
// tensor's extent are checked before LibTorch trusts them; anything else is a
// DataError "PATH: not a KIND (...)". Running out of memory stays bad_alloc.
std::map<std::string, at::Tensor> read_tensor_dict(const std::vector<char>& bytes, const std::string& path,
                                                   const std::string& kind);

// Copies `tensors` into the module's parameters and buffers of the same
// names, after checking all of them (names, shapes, floating point, and
// finite values when `refuse_non_finite`): a refused file leaves the module
// as it was. The DataError reads "PATH: MISFIT: missing ...; unexpected ...;
// shape mismatch ...". Weights from elsewhere must be finite; a checkpoint
// restores what its run had, a diverged batch-norm statistic included.
void copy_into_module(torch::nn::Module& module, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& path, const std::string& misfit, bool refuse_non_finite);

}  // namespace qkv::train
