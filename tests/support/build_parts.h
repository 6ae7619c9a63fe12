#pragma once
// Tests of what needs an optional library (runtime/build_parts.h) skip, saying
// so, in a build without it.
#include <gtest/gtest.h>

#include "qkv/runtime/build_parts.h"

#define QKV_SKIP_WITHOUT(part) \
  if (!::qkv::built_with(part)) GTEST_SKIP() << "this qkv was built without " << ::qkv::part_info(part).name
