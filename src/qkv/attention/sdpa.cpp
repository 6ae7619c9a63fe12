#include "qkv/attention/sdpa.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "qkv/attention/tiled_attention.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/second_order.h"

namespace qkv::attention {
namespace {

constexpr const char* kFn = "scaled_dot_product_attention";

[[noreturn]] void sdpa_fail(const std::string& what) { throw UsageError(std::string(kFn) + ": " + what); }

// A mask must broadcast to [B,H,Nq,Nk]: at most 4 dims, each trailing-aligned
// size equal to the target's or 1.
void check_broadcastable(const char* name, const at::Tensor& mask, at::IntArrayRef target) {
  bool ok = mask.dim() <= static_cast<int64_t>(target.size());
  for (int64_t i = 1; ok && i <= mask.dim(); ++i) {
    const int64_t have = mask.size(mask.dim() - i), want = target[target.size() - i];
    ok = have == want || have == 1;
  }
  if (!ok)
    sdpa_fail(std::string(name) + " " + shape_of(mask) + " is not broadcastable to [B,H,Nq,Nk] = " + shape_of(target));
}

void validate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o) {
  if (!q.defined()) sdpa_fail("q is undefined");
  if (!k.defined()) sdpa_fail("k is undefined");
  if (!v.defined()) sdpa_fail("v is undefined");
  if (q.dim() != 4) sdpa_fail("q must be 4-D [B,H,Nq,d], got " + shape_of(q));
  if (k.dim() != 4) sdpa_fail("k must be 4-D [B,H,Nk,d], got " + shape_of(k));
  if (v.dim() != 4) sdpa_fail("v must be 4-D [B,H,Nk,dv], got " + shape_of(v));
  if (k.size(0) != q.size(0))
    sdpa_fail("k batch size B = " + std::to_string(k.size(0)) + " differs from q's " + std::to_string(q.size(0)));
  if (k.size(1) != q.size(1))
    sdpa_fail("k heads H = " + std::to_string(k.size(1)) + " differ from q's " + std::to_string(q.size(1)));
  if (k.size(3) != q.size(3))
    sdpa_fail("k head width d = " + std::to_string(k.size(3)) + " differs from q's " + std::to_string(q.size(3)));
  if (v.size(0) != k.size(0) || v.size(1) != k.size(1))
    sdpa_fail("v " + shape_of(v) + " differs from k " + shape_of(k) + " in B or H");
  if (v.size(2) != k.size(2))
    sdpa_fail("v has Nk = " + std::to_string(v.size(2)) + " positions but k has " + std::to_string(k.size(2)));
  if (q.size(3) == 0) sdpa_fail("q and k have head width d = 0");
  if (!at::isFloatingType(q.scalar_type()))
    sdpa_fail("q must be a floating-point tensor, got " + std::string(c10::toString(q.scalar_type())));
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    sdpa_fail("q, k and v must share one dtype, got " + std::string(c10::toString(q.scalar_type())) + ", " +
              c10::toString(k.scalar_type()) + ", " + c10::toString(v.scalar_type()));
  if (k.device() != q.device() || v.device() != q.device())
    sdpa_fail("q, k and v must be on one device, got " + q.device().str() + ", " + k.device().str() + ", " +
              v.device().str());
  if (o.scale && !(*o.scale > 0 && std::isfinite(*o.scale)))
    sdpa_fail("scale must be a positive finite number, got " + std::to_string(*o.scale));
  if (!(o.temperature > 0 && std::isfinite(o.temperature)))
    sdpa_fail("temperature must be a positive finite number, got " + std::to_string(o.temperature));
  if (!(o.dropout >= 0 && o.dropout < 1)) sdpa_fail("dropout must be in [0, 1), got " + std::to_string(o.dropout));
  const std::vector<int64_t> target{q.size(0), q.size(1), q.size(2), k.size(2)};
  if (o.bool_mask.defined()) {
    if (o.bool_mask.scalar_type() != at::kBool)
      sdpa_fail("bool_mask must have dtype bool, got " + std::string(c10::toString(o.bool_mask.scalar_type())));
    check_broadcastable("bool_mask", o.bool_mask, target);
  }
  if (o.float_mask.defined()) {
    if (!at::isFloatingType(o.float_mask.scalar_type()))
      sdpa_fail("float_mask must be floating point, got " + std::string(c10::toString(o.float_mask.scalar_type())));
    check_broadcastable("float_mask", o.float_mask, target);
  }
  if (o.key_padding_mask.defined()) {
    const auto& p = o.key_padding_mask;
    if (p.scalar_type() != at::kBool || p.dim() != 2 || p.size(0) != q.size(0) || p.size(1) != k.size(2))
      sdpa_fail("key_padding_mask must be bool [B,Nk] = [" + std::to_string(q.size(0)) + ", " +
                std::to_string(k.size(2)) + "], got " + std::string(c10::toString(p.scalar_type())) + " " +
                shape_of(p));
  }
}

double softmax_scale(const at::Tensor& q, const SdpaOptions& o) {
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return scale / o.temperature;
}

// LibTorch's fused attention (2.1 or later), where this build has it: the
// one place attention depends on LibTorch's version.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
constexpr bool kTorchAttention = true;
at::Tensor libtorch_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                              double dropout, bool causal, double scale) {
  return at::scaled_dot_product_attention(q, k, v, mask.defined() ? c10::optional<at::Tensor>(mask) : c10::nullopt,
                                          dropout, causal, scale);
}
#else
constexpr bool kTorchAttention = false;
at::Tensor libtorch_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool,
                              double) {
  sdpa_fail("backend torch: " + torch_unsupported_reason({}));  // resolve_backend refuses first
}
#endif

// The Torch backend: qkv's masks as one attn_mask (a bool mask, or a float
// one where float_mask is given); causal alone with Nq == Nk as PyTorch's
// is_causal, which its fastest kernels take (its causal is top-left aligned,
// qkv's end-aligned: the same only when Nq == Nk). A row with no attendable
// key would be NaN there (or depend on the kernel): it attends every key
// instead and its output is set to 0, so, as in the naive path, it is 0 and
// sends no gradient back.
at::Tensor torch_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o) {
  const bool masked = o.bool_mask.defined() || o.float_mask.defined() || o.key_padding_mask.defined();
  const bool plain_causal = o.causal && !masked && q.size(2) == k.size(2);
  at::Tensor mask, dead;
  if (!plain_causal) {
    mask = combined_attend_mask(q, k, o);  // causal, bool and padding; undefined without them
    if (o.float_mask.defined()) {
      at::Tensor additive = o.float_mask.to(q.device(), q.scalar_type());
      if (mask.defined()) additive = additive.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
      mask = additive;
      dead = additive.detach().amax(-1, true).eq(-std::numeric_limits<double>::infinity());
    } else if (mask.defined()) {
      dead = mask.logical_not().all(-1, true);
    }
    if (dead.defined() && dead.any().item<bool>())
      mask = mask.scalar_type() == at::kBool ? mask.logical_or(dead) : mask.masked_fill(dead, 0.0);
    else
      dead = at::Tensor();
    // PyTorch reads a mask of 2 to 4 dims; qkv's may be one ([Nk]).
    while (mask.defined() && mask.dim() < 4) mask = mask.unsqueeze(0);
  }
  const double dropout = o.training ? o.dropout : 0.0;
  at::Tensor out = libtorch_attention(q, k, v, mask, dropout, plain_causal, softmax_scale(q, o));
  return dead.defined() ? out.masked_fill(dead, 0.0) : out;
}

SdpaResult naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o);

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The Torch backend under qkv's rule for second-order gradients
// (layers/second_order.h). A first-order backward is PyTorch's own: the
// graph torch_attention recorded in the forward, on detached copies of the
// inputs. Under create_graph the naive formula is differentiated instead:
// PyTorch's fused backwards on a GPU have no derivative, and would fail.
// With active dropout the recorded graph serves both (the naive formula
// would draw another mask). float_mask is an input, for its gradient.
struct TorchAttentionFunction : public torch::autograd::Function<TorchAttentionFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const c10::optional<at::Tensor>& float_mask, const SdpaOptions& options) {
    const at::Tensor inputs[] = {q, k, v, float_mask ? *float_mask : at::Tensor()};
    std::vector<at::Tensor> leaves;
    for (size_t i = 0; i < 4; ++i)
      leaves.push_back(inputs[i].defined() ? inputs[i].detach().requires_grad_(ctx->needs_input_grad(i))
                                           : at::Tensor());
    SdpaOptions o = options;
    o.float_mask = leaves[3];
    at::Tensor out;
    {
      at::AutoGradMode record(true);
      out = torch_attention(leaves[0], leaves[1], leaves[2], o);
    }
    ctx->save_for_backward({q, k, v, inputs[3], o.bool_mask, o.key_padding_mask});
    // The recorded graph and its leaves, by identity (saved_data keeps the
    // tensors themselves).
    ctx->saved_data["recorded"] = out;
    for (size_t i = 0; i < 4; ++i)
      if (leaves[i].defined() && leaves[i].requires_grad()) ctx->saved_data["leaf" + std::to_string(i)] = leaves[i];
    ctx->saved_data["scale"] = softmax_scale(q, options);
    ctx->saved_data["causal"] = o.causal;
    ctx->saved_data["dropout"] = o.training && o.dropout > 0;
    return {out.detach()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor recorded = ctx->saved_data["recorded"].toTensor();
    const at::Tensor grad = grad_outputs[0].defined() ? grad_outputs[0] : at::zeros_like(recorded);
    const bool graph = gradient_graph_requested();
    variable_list grads(5);
    if (graph && !ctx->saved_data["dropout"].toBool()) {
      SdpaOptions o;
      o.scale = ctx->saved_data["scale"].toDouble();
      o.causal = ctx->saved_data["causal"].toBool();
      o.bool_mask = saved[4];
      o.key_padding_mask = saved[5];
      std::vector<at::Tensor> inputs{saved[0], saved[1], saved[2]};
      if (saved[3].defined()) inputs.push_back(saved[3]);
      const auto g = composed_vjp(
          [&](const std::vector<at::Tensor>& in) {
            SdpaOptions with_mask = o;
            if (in.size() > 3) with_mask.float_mask = in[3];
            return variable_list{naive_attention(in[0], in[1], in[2], with_mask).output};
          },
          inputs, {grad});
      for (size_t i = 0; i < g.size(); ++i) grads[i] = g[i];
      return grads;
    }
    std::vector<at::Tensor> wanted;
    std::vector<size_t> where;
    for (size_t i = 0; i < 4; ++i) {
      const auto leaf = ctx->saved_data.find("leaf" + std::to_string(i));
      if (leaf == ctx->saved_data.end()) continue;
      wanted.push_back(leaf->second.toTensor());
      where.push_back(i);
    }
    if (wanted.empty()) return grads;
    // retain_graph: a backward the caller runs again (retain_graph=True
    // there) needs the recorded graph again.
    const auto g = torch::autograd::grad({recorded}, wanted, {grad}, /*retain_graph=*/true, /*create_graph=*/graph,
                                         /*allow_unused=*/true);
    for (size_t i = 0; i < g.size(); ++i) grads[where[i]] = g[i];
    return grads;
  }
};

SdpaResult naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o) {
  SdpaResult r;
  at::Tensor logits = at::matmul(q * softmax_scale(q, o), k.transpose(-2, -1));  // [B,H,Nq,Nk]
  if (k.size(2) == 0) {  // no keys at all: every row is empty, output 0
    r.output = at::matmul(logits, v);
    if (o.need_weights) r.weights = logits;
    return r;
  }
  if (o.float_mask.defined()) logits = logits + o.float_mask.to(logits.device(), logits.scalar_type());
  at::Tensor allow = combined_attend_mask(q, k, o);
  if (allow.defined()) logits = logits.masked_fill(allow.logical_not(), -std::numeric_limits<double>::infinity());
  // Rows with no attendable key would be softmax(-inf, ..., -inf) = NaN: give them
  // finite logits (so softmax and its gradient stay finite), then zero their weights.
  at::Tensor dead;
  if (o.float_mask.defined())
    dead = logits.detach().amax(-1, true).eq(-std::numeric_limits<double>::infinity());
  else if (allow.defined())
    dead = allow.logical_not().all(-1, true);
  at::Tensor weights;
  // (Under a torch.func transform .item() cannot run: the masked form, which is exact either way.)
  if (dead.defined() && (under_function_transform() || dead.any().item<bool>())) {
    weights = at::softmax(logits.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0);
  } else {
    weights = at::softmax(logits, -1);
  }
  const at::Tensor used = (o.training && o.dropout > 0) ? at::dropout(weights, o.dropout, true) : weights;
  r.output = at::matmul(used, v);
  if (o.need_weights) r.weights = weights;
  return r;
}

}  // namespace

const char* backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::Auto: return "auto";
    case AttentionBackend::Naive: return "naive";
    case AttentionBackend::Tiled: return "tiled";
    case AttentionBackend::Torch: return "torch";
  }
  return "?";
}

bool torch_attention_available() { return kTorchAttention; }

std::string torch_unsupported_reason(const SdpaOptions& o) {
  if (!kTorchAttention) return std::string("LibTorch ") + TORCH_VERSION + " has no fused attention (2.1 or later has)";
  if (o.need_weights) return "need_weights requires the naive path (the fused kernels never form the weights)";
  return {};
}

at::Tensor combined_attend_mask(const at::Tensor& q, const at::Tensor& k, const SdpaOptions& o) {
  at::Tensor allow;
  const auto dev = q.device();
  if (o.causal) {
    const int64_t Nq = q.size(-2), Nk = k.size(-2);
    auto opts = at::TensorOptions().dtype(at::kLong).device(dev);
    at::Tensor i = at::arange(Nq, opts).unsqueeze(1), j = at::arange(Nk, opts).unsqueeze(0);
    allow = j.le(i + (Nk - Nq));  // [Nq,Nk], end-aligned
  }
  if (o.bool_mask.defined()) {
    at::Tensor m = o.bool_mask.to(dev);
    allow = allow.defined() ? allow.logical_and(m) : m;
  }
  if (o.key_padding_mask.defined()) {
    at::Tensor keep = o.key_padding_mask.to(dev).logical_not().view({q.size(0), 1, 1, k.size(-2)});
    allow = allow.defined() ? allow.logical_and(keep) : keep;
  }
  return allow;
}

std::string tiled_unsupported_reason(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const SdpaOptions& o) {
  std::string why = tiled_unsupported_reason(q, k, v);
  if (!why.empty()) return why;
  if (o.need_weights) return "need_weights requires the naive path (the tiled kernel never forms the weights)";
  if (o.training && o.dropout > 0) return "attention dropout is not supported by the tiled kernel";
  if (o.bool_mask.defined()) return "bool_mask is not supported by the tiled kernel (causal and key_padding_mask are)";
  if (o.float_mask.defined())
    return "float_mask is not supported by the tiled kernel (causal and key_padding_mask are)";
  return {};
}

AttentionBackend resolve_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const SdpaOptions& o) {
  switch (o.backend) {
    case AttentionBackend::Naive: return AttentionBackend::Naive;
    case AttentionBackend::Tiled: {
      std::string why = tiled_unsupported_reason(q, k, v, o);
      if (!why.empty()) sdpa_fail("backend tiled: " + why + "; use AttentionBackend::Auto or Naive");
      return AttentionBackend::Tiled;
    }
    case AttentionBackend::Torch: {
      std::string why = torch_unsupported_reason(o);
      if (!why.empty()) sdpa_fail("backend torch: " + why + "; use AttentionBackend::Auto or Naive");
      return AttentionBackend::Torch;
    }
    case AttentionBackend::Auto: break;
  }
  if (!q.device().is_cpu())
    return torch_unsupported_reason(o).empty() ? AttentionBackend::Torch : AttentionBackend::Naive;
  if (k.size(2) >= kTiledMinKeys && tiled_unsupported_reason(q, k, v, o).empty()) return AttentionBackend::Tiled;
  return AttentionBackend::Naive;
}

SdpaResult scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const SdpaOptions& o) {
  validate(q, k, v, o);
  // One rule for values that are not finite: they propagate as in the
  // reference softmax(q k^T) v. The running maximum of the tiled kernel (and
  // of PyTorch's fused ones) would skip a NaN score (a NaN key dropped, not
  // spread), so such inputs take the composed path. One sum of the three
  // decides it, one read back (a NaN or infinity anywhere makes it so; an
  // overflowing sum sends finite inputs there too: slower, the same result).
  const auto all_finite = [&] {
    at::NoGradGuard no_grad;
    return at::isfinite(q.sum() + k.sum() + v.sum()).item<bool>();
  };
  // Under a torch.func transform the tiled kernel cannot read the wrapped
  // tensors, nor can .item() run: the composed path serves it, as it does a
  // call without queries or keys, where PyTorch's kernels have nothing to do.
  const AttentionBackend backend = resolve_backend(q, k, v, o);
  const bool empty = backend == AttentionBackend::Torch && (q.size(2) == 0 || k.size(2) == 0);
  if (backend == AttentionBackend::Naive || empty || under_function_transform() || !all_finite())
    return naive_attention(q, k, v, o);
  SdpaResult r;
  if (backend == AttentionBackend::Torch) {
    const bool recording = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                                          (o.float_mask.defined() && o.float_mask.requires_grad()));
    c10::optional<at::Tensor> float_mask;
    if (o.float_mask.defined()) float_mask = o.float_mask;
    r.output = recording ? TorchAttentionFunction::apply(q, k, v, float_mask, o)[0] : torch_attention(q, k, v, o);
    return r;
  }
  at::Tensor pad = o.key_padding_mask.defined() ? o.key_padding_mask.to(q.device()) : at::Tensor();
  r.output = tiled_attention(q, k, v, softmax_scale(q, o), o.causal, pad);
  return r;
}

}  // namespace qkv::attention
