#pragma once
// Weights interchange with Python: a dict name -> tensor (parameters and
// buffers, dotted names as PyTorch's state_dict uses) saved with
// torch::pickle_save, which Python's torch.load reads.
#include <string>

namespace torch::nn {
class Module;
}

namespace qkv::train {

void export_weights(const torch::nn::Module& module, const std::string& path);

// Copies every tensor of the file into the module. Names missing from either
// side and shape mismatches are all reported, by name, in one DataError.
void load_weights(torch::nn::Module& module, const std::string& path);

}  // namespace qkv::train
