#pragma once
// Tensor shapes as error messages show them: "[2, 3, 16]".
#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>

namespace qkv {

inline std::string shape_of(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}
inline std::string shape_of(const at::Tensor& t) { return shape_of(t.sizes()); }

}  // namespace qkv
