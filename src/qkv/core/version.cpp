#include "qkv/core/version.h"

namespace qkv {

std::string qkv_version() { return QKV_VERSION; }

}  // namespace qkv
