#include "qkv/core/npy.h"

#include <cstring>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"

namespace qkv {
namespace {
constexpr char kMagic[] = "\x93NUMPY";
}

void write_npy_float32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t count = 1;
  for (auto d : shape) {
    dims += std::to_string(d) + ", ";
    count *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(3,)" for one dimension, "(2, 3)" otherwise
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, header length, header: padded with spaces and a newline
  // so that the data start on a 64-byte boundary.
  const size_t preamble = 6 + 2 + 2;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::vector<char> bytes(kMagic, kMagic + 6);
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  const auto* raw = reinterpret_cast<const char*>(data);
  bytes.insert(bytes.end(), raw, raw + count * sizeof(float));
  write_file_atomic(path, bytes);
}

std::vector<float> read_npy_float32(const std::string& path, std::vector<int64_t>& shape) {
  const auto bytes = read_file_bytes(path);
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) throw DataError(path + ": not a .npy file");
  const size_t header_len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < 10 + header_len) throw DataError(path + ": truncated .npy header");
  const std::string header(bytes.begin() + 10, bytes.begin() + 10 + static_cast<std::ptrdiff_t>(header_len));
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw DataError(path + ": only little-endian float32 C-order .npy files are read");
  const auto open = header.find('('), close = header.find(')');
  if (open == std::string::npos || close == std::string::npos) throw DataError(path + ": .npy header has no shape");
  shape.clear();
  int64_t count = 1;
  const std::string dims = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    const auto comma = dims.find(',', pos);
    const std::string item = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_not_of(' ') != std::string::npos) {
      shape.push_back(std::stoll(item));
      count *= shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const size_t offset = 10 + header_len;
  if (bytes.size() != offset + static_cast<size_t>(count) * sizeof(float))
    throw DataError(path + ": data size does not match the shape");
  std::vector<float> data(static_cast<size_t>(count));
  std::memcpy(data.data(), bytes.data() + offset, data.size() * sizeof(float));
  return data;
}

}  // namespace qkv
