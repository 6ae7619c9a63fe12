#include "qkv/lm/recurrent_generate.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/data/lm_data.h"

namespace qkv::lm {

Generation generate_recurrent(models::RecurrentLM& model, const std::vector<int64_t>& prompt,
                              const GenerateOptions& o) {
  check_generate_options(prompt, o, model.options().vocab);
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = model.embedding()->weight.device();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);

  Generation out;
  std::vector<int64_t> sequence = prompt;
  models::RecurrentState state;
  auto as_tensor = [&](std::vector<int64_t>::const_iterator from, std::vector<int64_t>::const_iterator to) {
    return torch::tensor(std::vector<int64_t>(from, to), torch::kLong).unsqueeze(0).to(device);
  };
  // With the state, the first step reads the whole prompt, then one token a step.
  size_t fed = 0;
  auto next_logits = [&]() {
    at::Tensor logits;
    if (o.use_cache) {
      logits = model.forward_tokens(as_tensor(sequence.begin() + static_cast<long>(fed), sequence.end()), &state);
      fed = sequence.size();
    } else {
      logits = model.forward_tokens(as_tensor(sequence.begin(), sequence.end()));
    }
    return logits[0][logits.size(1) - 1].to(torch::kCPU, torch::kFloat);
  };
  sample_tokens(o, gen, sequence, next_logits, at::Tensor(), out);
  return out;
}

std::string complete_recurrent(models::RecurrentLM& model, const std::string& prompt, int64_t max_new) {
  GenerateOptions o;
  o.max_new = max_new;
  o.temperature = 0;
  o.stop_token = data::kLmTerminator;
  const auto tokens = data::bytes_to_tokens(prompt);
  auto result = generate_recurrent(
      model, std::vector<int64_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel()), o);
  std::string text;
  for (int64_t t : result.tokens) text += static_cast<char>(t);
  return text;
}

}  // namespace qkv::lm
