#pragma once
// Memory-efficient exact attention on the CPU (FlashAttention-style).
//
// Queries are cut into blocks of block_q rows and keys into blocks of block_k
// rows. For one (batch, head, query block) the forward pass walks the key
// blocks, computes the block_q x block_k score tile with one GEMM, and folds it
// into the output with an online softmax (a running row max m and row sum l;
// when m grows the partial output and l are rescaled by exp(m_old - m_new)).
// The Nq x Nk score matrix is never formed: besides the inputs the forward
// keeps only the output and one logsumexp per query row (m + log l). The
// backward pass recomputes each tile's probabilities P = exp(S - lse) and uses
// D_i = rowsum(dO_i * O_i), so that dS = P * (dP - D) needs no row reduction
// over the whole key range.
//
// Conventions are those of scaled_dot_product_attention (sdpa.h):
//   q [B,H,Nq,d], k [B,H,Nk,d], v [B,H,Nk,dv], float32 or float64, CPU;
//   logits = softmax_scale * q.k  (softmax_scale = scale / temperature);
//   causal is END-ALIGNED: query i may attend key j iff j <= i + (Nk - Nq);
//   key_padding_mask [B,Nk] bool, true = padding (never attended);
//   a query row with no visible key gets output 0 and logsumexp -inf, and
//   contributes zero gradients.
// The kernel is CPU-only: non-CPU tensors throw qkv::UsageError (the Auto
// backend of scaled_dot_product_attention never sends them here).
#include <ATen/core/Tensor.h>

#include <string>

namespace qkv::attention {

// Tile sizes; 0 = choose automatically (default_tile_sizes).
struct TileSizes {
  int64_t block_q = 0;
  int64_t block_k = 0;
};

// The tile sizes the kernel uses for head widths d (queries/keys) and dv
// (values): see docs/attention.md. The kernels hold OpenBLAS at one thread
// while they run; inside a parallel region, where they leave it alone, and
// OpenBLAS runs more than one thread, tiles are kept at block_q * block_k * max(d, dv) <= 262144 so that every tile
// GEMM stays under OpenBLAS's threading threshold (a multi-threaded GEMM on a
// tile is slower, and the kernel already runs one tile per thread).
TileSizes default_tile_sizes(int64_t d, int64_t dv);

// Empty when the tiled kernel can run on these inputs; otherwise why not
// (e.g. "q is on cuda:0; the tiled kernel is CPU-only").
std::string tiled_unsupported_reason(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

struct TiledForward {
  at::Tensor output;     // [B,H,Nq,dv], dtype of q
  at::Tensor logsumexp;  // [B,H,Nq], dtype of q; -inf for rows that see no key
};
struct TiledGradients {
  at::Tensor dq, dk, dv;
};

// The raw kernels (no autograd). Inputs need not be contiguous; shapes are
// checked (qkv::UsageError naming the argument).
TiledForward tiled_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     double softmax_scale, bool causal, const at::Tensor& key_padding_mask = {},
                                     TileSizes tiles = {});
TiledGradients tiled_attention_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& output, const at::Tensor& logsumexp,
                                        const at::Tensor& grad_output, double softmax_scale, bool causal,
                                        const at::Tensor& key_padding_mask = {}, TileSizes tiles = {});

// Differentiable (a torch::autograd::Function): returns the output [B,H,Nq,dv]
// and, when q, k or v require grad, records a backward that recomputes the
// tiles. First derivatives only (the backward itself is not differentiable).
at::Tensor tiled_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double softmax_scale,
                           bool causal = false, const at::Tensor& key_padding_mask = {}, TileSizes tiles = {});

}  // namespace qkv::attention
