#pragma once
// VN multi-head projections straight to and from the attention core's rows.
//
// VNMultiHeadAttention's W^Q, W^K, W^V map x [B, C, 3, N] to H heads of d
// channels, and the attention core wants each head's points as rows of their
// 3d entries, [B, H, N, 3d]. Composed (vn_linear, view, permute, copy) that is
// a GEMM with C = 16 input channels, which OpenBLAS runs far below its rate,
// and then a strided copy of the whole projection (VNT-Net at paper
// settings: ~0.3 s of its 2 s inference in copies). Here each (cloud, axis,
// head) is one small GEMM writing straight into the rows, whose entries are
// axis-major: row[i * d + j] is channel j along axis i. The attention's score
// sums over all entries and its output keeps v's order, so any order that q,
// k and v share gives the same attention (vn_attention_rows).
// vn_heads_merge is the way back for W^O. Both are autograd Functions, each
// one's backward the other's product plus a weight gradient; CPU float32 and
// float64 (other devices and dtypes take the composed versions, which are
// also the tests' reference).
#include <ATen/core/Tensor.h>

#include "qkv/attention/sdpa.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::vn {

// x [B, C, 3, N], weight [H*d, C] -> rows [B, H, N, 3d]:
// rows[b, h, n, i*d + j] = sum_c weight[h*d + j, c] x[b, c, i, n].
at::Tensor vn_heads_split(const at::Tensor& x, const at::Tensor& weight, int64_t heads);
at::Tensor vn_heads_split_composed(const at::Tensor& x, const at::Tensor& weight, int64_t heads);

// rows [B, H, N, 3d] (axis-major, as vn_heads_split), weight [C_out, H*d] ->
// [B, C_out, 3, N]: out[b, c, i, n] = sum_{h, j} weight[c, h*d + j] rows[b, h, n, i*d + j].
at::Tensor vn_heads_merge(const at::Tensor& rows, const at::Tensor& weight);
at::Tensor vn_heads_merge_composed(const at::Tensor& rows, const at::Tensor& weight);

// The layouts alone: projected features [B, H*d, 3, N] <-> rows [B, H, N, 3d]
// (vn_heads_split(x, W) is vn_heads_rows(W x); vn_heads_merge(rows, W) is W vn_heads_features(rows)).
at::Tensor vn_heads_rows(const at::Tensor& features, int64_t heads);
at::Tensor vn_heads_features(const at::Tensor& rows);

// vn_attention on rows: q [B, H, Nq, 3C], k [B, H, Nk, 3C], v [B, H, Nk, 3Cv],
// each row a point's 3C entries in an order q and k share; the output
// [B, H, Nq, 3Cv] keeps v's order. channels = C sets the default scale
// 1/sqrt(C), as vn_attention (which flattens [.., C, 3] and calls this).
VNAttentionResult vn_attention_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t channels,
                                    attention::SdpaOptions options = {});

}  // namespace qkv::vn
