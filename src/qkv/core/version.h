#pragma once
// qkv's version (the build's QKV_VERSION), which every file qkv writes records.
#include <string>

namespace qkv {

std::string qkv_version();

}  // namespace qkv
