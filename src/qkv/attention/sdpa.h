#pragma once
// Scaled dot-product attention: softmax(scale * q k^T / tau + masks) v, per
// batch and head, with three interchangeable implementations:
//   Naive: matmul, masked softmax, matmul (any device and dtype; forms the
//          [B,H,Nq,Nk] logits);
//   Tiled: the memory-efficient CPU kernel of tiled_attention.h (never forms
//          the Nq x Nk matrix);
//   Torch: PyTorch 2.x's fused at::scaled_dot_product_attention (on a GPU its
//          flash / memory-efficient / cuDNN kernels), given qkv's masks and
//          scale and held to qkv's rules below; only in a build against
//          LibTorch 2.1 or later (torch_attention_available()).
// All agree to rounding, including gradients (tests/attention).
//
// Masking conventions (all combine: a key is attended only if every mask allows it):
//   causal            END-ALIGNED: query i may attend key j iff j <= i + (Nk - Nq).
//                     With Nq == Nk this is the usual lower triangle; with a block of
//                     Nq new queries over Nk cached keys the last query sees all keys.
//   bool_mask         true = may attend; broadcastable to [B,H,Nq,Nk].
//   float_mask        added to the logits (after scale and temperature); broadcastable
//                     to [B,H,Nq,Nk]; -inf entries mask like false in bool_mask.
//   key_padding_mask  [B,Nk] bool, true = padding, never attended (PyTorch's polarity).
// A query row with no attendable key gets output 0 and weights 0 (not NaN), and
// its gradients are 0.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace qkv::attention {

enum class AttentionBackend { Auto, Naive, Tiled, Torch };

// "auto", "naive", "tiled", "torch"
const char* backend_name(AttentionBackend backend);

// Whether this build's LibTorch has the fused attention the Torch backend
// calls (2.1 or later: the first with a `scale` argument).
bool torch_attention_available();

struct SdpaOptions {
  std::optional<double> scale;  // default 1/sqrt(d); must be > 0
  double temperature = 1.0;     // softmax temperature tau > 0: logits = scale * q.k / tau
  bool causal = false;          // end-aligned, see above
  at::Tensor bool_mask;         // optional, broadcastable to [B,H,Nq,Nk], true = may attend
  at::Tensor float_mask;        // optional additive mask, broadcastable to [B,H,Nq,Nk]
  at::Tensor key_padding_mask;  // optional [B,Nk] bool, true = padding (ignored)
  double dropout = 0.0;         // attention dropout in [0,1), applied only when training is true
  bool training = false;
  bool need_weights = false;  // return [B,H,Nq,Nk] weights (forces the naive path)
  AttentionBackend backend = AttentionBackend::Auto;
};

struct SdpaResult {
  at::Tensor output;   // [B,H,Nq,dv]
  at::Tensor weights;  // [B,H,Nq,Nk] softmax weights (before dropout) when need_weights, else undefined
};

// q [B,H,Nq,d], k [B,H,Nk,d], v [B,H,Nk,dv]; same dtype and device. Throws
// qkv::UsageError (one line, naming the argument) for bad ranks or sizes, d == 0,
// masks of the wrong shape or dtype, non-positive scale or temperature, dropout
// outside [0,1), or a Tiled or Torch request that backend cannot serve. NaN
// and infinities in q, k or v propagate as the reference formula spreads them
// (every backend: such inputs always take the Naive path). Gradients of
// every order: a second-order gradient through the Torch backend
// differentiates the naive formula (layers/second_order.h), since PyTorch's
// fused backwards on a GPU have none of their own.
SdpaResult scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const SdpaOptions& o = {});

// The Auto rule. Off the CPU (a GPU), Torch where this build has it and the
// call needs no weights. On the CPU, Tiled when the tiled kernel can serve the call
//   - q, k, v on the CPU, float32 or float64;
//   - no need_weights, no active dropout (training && dropout > 0);
//   - no bool_mask or float_mask (causal and key_padding_mask are supported);
// and Nk >= kTiledMinKeys. Otherwise Naive. Torch is not Auto's choice on
// the CPU: there the tiled kernel was 1.0-1.8x faster than PyTorch 2.11's
// own CPU attention (bench_attention --torch). Measured with bench_attention
// (docs/attention.md): from 64 keys up the tiled forward was 1.1-1.2x faster than
// naive on one thread and 1.3-5x on two, forward+backward at parity (0.95-1.07x)
// on one thread and faster on two, with O(N d) instead of O(N^2) memory; below
// 128 keys the N^2 buffers are small and the plain path is kept.
constexpr int64_t kTiledMinKeys = 128;

// Which implementation `o.backend` resolves to for these inputs (after validation).
AttentionBackend resolve_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o);

// Empty if the Torch backend can serve this call, else the reason (one line).
std::string torch_unsupported_reason(const SdpaOptions& o);

// Empty if the tiled kernel can serve this call, else the reason (one line).
std::string tiled_unsupported_reason(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const SdpaOptions& o);

// The combined boolean "may attend" mask of causal, bool_mask and key_padding_mask,
// broadcastable to [B,H,Nq,Nk]; undefined when there is none. (float_mask is not
// included.) Exposed for tests and for code that builds its own attention.
at::Tensor combined_attend_mask(const at::Tensor& q, const at::Tensor& k, const SdpaOptions& o);

}  // namespace qkv::attention
