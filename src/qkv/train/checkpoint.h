#pragma once
// Checkpoints: model, optimizer, RNG state and the trainer's position, in one
// file written atomically. The payload is LibTorch's archive; a small header
// (magic, payload length, CRC-32) lets a truncated or corrupt file be rejected
// with a message before LibTorch ever parses it.
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace qkv::train {

// Where the trainer stands. At an epoch boundary step_in_epoch is 0; after an
// interruption it counts the batches of epoch `epoch` (0-based) already done,
// and the partial sums carry that epoch's running training metrics.
struct TrainState {
  int64_t epoch = 0;  // completed epochs
  int64_t step_in_epoch = 0;
  int64_t global_step = 0;
  double partial_loss_sum = 0, partial_count = 0, partial_correct = 0;
  double partial_seconds = 0;
  int64_t best_epoch = -1;  // 1-based epoch of the best validation score, -1 if none yet
  double best_value = 0;
  double train_seconds = 0;
  nlohmann::json history = nlohmann::json::array();      // one object per completed epoch
  nlohmann::json run_config = nlohmann::json::object();  // what config.json holds
  // Distributed runs: how many ranks trained, and the RNG states of ranks
  // 1..W-1 (rank 0's is the global one every checkpoint holds).
  int64_t world_size = 1;
  std::vector<at::Tensor> rank_rng;
};

void save_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     const TrainState& state);

// Restores model (and optimizer, and the global RNG, when `optimizer` is given)
// and returns the trainer state. Throws DataError naming the file when it is
// missing, truncated, corrupt or from another model, and naming the tensor
// when a weight or optimizer entry holds NaN or an infinity (unless
// `accept_non_finite`: --allow-non-finite, or the trainer reloading the best
// epoch of its own run to test it); nothing is changed then.
TrainState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                           bool accept_non_finite = false);

// The same from a checkpoint file's bytes (read by rank 0 and broadcast);
// `name` names the file in messages.
TrainState load_checkpoint_bytes(const std::vector<char>& file, const std::string& name, torch::nn::Module& model,
                                 torch::optim::Optimizer* optimizer, bool accept_non_finite = false);

// The state of LibTorch's global CPU generator (what checkpoints store), and
// its restoration.
at::Tensor global_rng_state();
void set_global_rng_state(const at::Tensor& state);

// Only the run configuration, to rebuild the model before loading weights.
nlohmann::json read_checkpoint_config(const std::string& path);

// Only the trainer's position (epochs done, history, configuration), with no
// model: what a resume would continue from.
TrainState read_checkpoint_state(const std::string& path);

}  // namespace qkv::train
