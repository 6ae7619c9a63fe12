#include "qkv/tasks/voting.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace qkv::tasks {

VotedViews::VotedViews(std::vector<data::DatasetPtr> views) : views_(std::move(views)) {
  if (views_.empty()) throw std::invalid_argument("VotedViews: no views");
  for (const auto& v : views_)
    if (!v || v->size() != views_.front()->size()) throw std::invalid_argument("VotedViews: views differ in size");
}

data::Batch VotedViews::get(const std::vector<int64_t>& indices) const {
  if (views_.size() == 1) return views_.front()->get(indices);
  std::vector<data::Batch> parts;
  parts.reserve(views_.size());
  for (const auto& v : views_) parts.push_back(v->get(indices));
  data::Batch out;
  out.target = parts.front().target;
  for (const auto& [name, first] : parts.front().inputs) {
    std::vector<at::Tensor> pieces;
    for (const auto& p : parts) pieces.push_back(p.inputs.at(name));
    out.inputs[name] = torch::cat(pieces, 0);
  }
  return out;
}

at::Tensor average_votes(const at::Tensor& logits, int64_t votes) {
  if (votes == 1) return torch::log_softmax(logits, -1);
  TORCH_CHECK(votes > 1 && logits.dim() >= 2 && logits.size(0) % votes == 0, "average_votes: ", logits.size(0),
              " rows are not ", votes, " views of one batch");
  std::vector<int64_t> shape = {votes, logits.size(0) / votes};
  for (int64_t d = 1; d < logits.dim(); ++d) shape.push_back(logits.size(d));
  const auto log_p = torch::log_softmax(logits.reshape(shape), -1);
  return torch::logsumexp(log_p, 0) - std::log(static_cast<double>(votes));
}

at::Tensor VoteAveraged::forward(const data::Batch& batch) {
  inner_.train(is_training());
  return average_votes(inner_.forward(batch), votes_);
}

}  // namespace qkv::tasks
