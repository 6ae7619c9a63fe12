#pragma once
// Tests of what needs an optional library (runtime/build_parts.h) skip, saying
// so, in a build without it.
#include <gtest/gtest.h>

#include "qkv/runtime/build_parts.h"

namespace qkv::testing {

inline std::string part_name(Part part) {
  for (const auto& p : optional_parts())
    if (p.part == part) return p.name;
  return "an optional library";
}

}  // namespace qkv::testing

#define QKV_SKIP_WITHOUT(part) \
  if (!::qkv::built_with(part)) GTEST_SKIP() << "this qkv was built without " << ::qkv::testing::part_name(part)
