#pragma once
// What `qkv vnt` and `qkv seg` share on the command line: the model choice
// and its size flags, turned into registry options.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::cli {

struct PointModelOptions {
  std::string model;
  std::string model_options = "{}";
  int64_t linear_dim = 0, heads = 0, head_dim = 0;
};

// --model (one of the registry's models for `task`), --linear-dim, --heads,
// --head-dim (the paper's values in the help), --model-options.
void add_point_model_options(CLI::App* cmd, PointModelOptions& o, const std::string& task, int64_t paper_linear_dim,
                             int64_t paper_heads);

// --model-options as JSON plus the size flags that are set (> 0). A flag
// applies where the model has that option (the registry's defaults say);
// otherwise a UsageError names it.
nlohmann::json model_options_from_cli(const PointModelOptions& o);

}  // namespace qkv::cli
