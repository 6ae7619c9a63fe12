#pragma once
// NumPy .npy files (format 1.0, little-endian float32, C order): the simplest
// way to hand an array to numpy.load, written atomically.
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

void write_npy_float32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads what write_npy_float32 writes (little-endian float32, C order);
// DataError naming the file for anything else.
std::vector<float> read_npy_float32(const std::string& path, std::vector<int64_t>& shape);

}  // namespace qkv
