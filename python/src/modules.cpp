// qkv.nn and qkv.models: the library's modules as Python objects. The
// package's nn.Module face (python/qkv/_modules.py) adopts each C++ module's
// own parameter and buffer tensors, so there is one copy of every weight and
// one forward, the library's.
#include <pybind11/stl.h>

#include <atomic>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "qkv/attention/kv_cache.h"
#include "qkv/attention/multi_head_attention.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/core/text.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/models/model.h"
#include "qkv/models/model_card.h"
#include "qkv/models/size_arithmetic.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/tasks/part_segmentation.h"
#include "qkv/tasks/stored_runs.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/run.h"
#include "qkv/train/weights.h"
#include "qkv/vn/vn_layers.h"

namespace qkv::python {
namespace {

using ModulePtr = std::shared_ptr<torch::nn::Module>;
using Named = std::vector<std::pair<std::string, at::Tensor>>;

nlohmann::json parse_options(const std::string& text, const std::string& model) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(model + " options: not JSON (" + std::string(e.what()) + ")");
  }
}

template <typename Dict>
Named named(const Dict& dict) {
  Named out;
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}

py::object tensor_or_none(const at::Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

// The Python module's masks mean what torch.nn.MultiheadAttention's do:
// key_padding_mask True = padding, a bool attn_mask True = may NOT attend
// (the library's bool_mask is the opposite, true = may attend), a float one
// added to the scores. `scores` is [B, H, Nq, Nk] (empty: unknown), which
// attn_mask must broadcast to (named as Python names it, not as the library
// does).
attention::SdpaOptions attention_options(bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                         const c10::optional<at::Tensor>& attn_mask, bool need_weights,
                                         const std::vector<int64_t>& scores) {
  attention::SdpaOptions o;
  o.causal = causal;
  if (key_padding_mask) o.key_padding_mask = *key_padding_mask;
  if (attn_mask) {
    const auto& m = *attn_mask;
    bool broadcasts = scores.empty() || m.dim() <= static_cast<int64_t>(scores.size());
    for (int64_t d = 1; broadcasts && !scores.empty() && d <= m.dim(); ++d)
      broadcasts = m.size(-d) == 1 || m.size(-d) == scores[scores.size() - static_cast<size_t>(d)];
    if (!broadcasts)
      throw UsageError("attn_mask " + shape_of(m) +
                       " does not broadcast to the scores [B, H, Nq, Nk] = " + shape_of(at::IntArrayRef(scores)));
    if (m.scalar_type() == at::kBool)
      o.bool_mask = m.logical_not();
    else if (at::isFloatingType(m.scalar_type()))
      o.float_mask = m;
    else
      throw UsageError(std::string("attn_mask must be bool (True = may not attend, as torch.nn.MultiheadAttention) "
                                   "or floating point (added to the scores), got ") +
                       c10::toString(m.scalar_type()));
  }
  o.need_weights = need_weights;
  return o;
}

// torch.distributed's ranks as those that qkv's batch norms sum their
// training statistics over (layers/rank_sum.h): `all_reduce` is a Python
// callable summing a tensor in place over the group. Attached to the batch
// norms of `modules` while it lives.
class PythonRankSum final : public RankSum {
 public:
  PythonRankSum(const std::vector<ModulePtr>& modules, py::function all_reduce, int64_t world_size)
      : all_reduce_(std::move(all_reduce)), world_size_(world_size), attachment_(modules, this) {}
  int64_t world_size() const override { return world_size_; }
  void all_reduce_sum(at::Tensor& tensor, const std::string& /*what*/) override {
    py::gil_scoped_acquire gil;  // the forwards and backwards run without it
    all_reduce_(tensor);
  }

 private:
  py::function all_reduce_;
  int64_t world_size_;
  layers::RankSumAttachment attachment_;  // declared last: detached first
};

void bind_module_tree(py::module_& m) {
  py::class_<torch::nn::Module, ModulePtr>(m, "Module", py::module_local())
      .def("children",
           [](torch::nn::Module& self) {
             std::vector<std::pair<std::string, ModulePtr>> out;
             for (const auto& item : self.named_children()) out.emplace_back(item.key(), item.value());
             return out;
           })
      .def("parameters", [](torch::nn::Module& self) { return named(self.named_parameters(/*recurse=*/false)); })
      .def("buffers", [](torch::nn::Module& self) { return named(self.named_buffers(/*recurse=*/false)); })
      .def("train", [](torch::nn::Module& self, bool on) { self.train(on); })
      .def_property_readonly("training", &torch::nn::Module::is_training)
      .def_property_readonly("type_name", &torch::nn::Module::name);
  // qkv.nn.update_bn's hold on the batch norms of the modules it was given
  // (layers/sync_batch_norm.h): reset, then averaged over the batches that
  // follow until end().
  py::class_<layers::BatchStatisticsRecount>(m, "BatchStatisticsRecount")
      .def(py::init<const std::vector<ModulePtr>&>(), py::arg("modules"))
      .def("end", &layers::BatchStatisticsRecount::end)
      .def_property_readonly("layers", &layers::BatchStatisticsRecount::layers);
  // qkv.nn.sync_batch_norm's hold.
  py::class_<PythonRankSum>(m, "BatchNormRanks")
      .def(py::init<const std::vector<ModulePtr>&, py::function, int64_t>(), py::arg("modules"), py::arg("all_reduce"),
           py::arg("world_size"));
  // forward(*args, **kwargs), a method of `root`, as the nn.Module face calls
  // it: with tensors bound to registered weights for the call (whatever its
  // modules hold at call time: functional_call's, a parametrization's,
  // pruning's, a swapped nn.Parameter), as (name, registered, tensor) triples,
  // and with the parts that have forward hooks, as (part, run_hooks) pairs:
  // run_hooks(inputs, outputs) gives the outputs to go on with.
  m.def("call_with_parts",
        [](const ModulePtr& root, const std::vector<std::tuple<std::string, at::Tensor, py::object>>& bound,
           const std::vector<std::pair<ModulePtr, py::function>>& hooks, const py::function& forward,
           const py::args& args, const py::kwargs& kwargs) {
          WeightBinding binding;
          for (const auto& [name, registered, value] : bound) {
            if (!THPVariable_Check(value.ptr()))
              throw UsageError(name + ": holds " + std::string(py::str(py::type::of(value).attr("__name__"))) +
                               ", not a tensor; the module computes with it");
            binding.bind(name, registered, value.cast<at::Tensor>());
          }
          PartHooks part_hooks(*root);
          for (const auto& [part, run_hooks] : hooks)
            part_hooks.add(*part, [run_hooks](at::TensorList inputs, const Tensors& outputs) {
              py::gil_scoped_acquire gil;  // held already: the forwards run on the calling thread
              return run_hooks(Tensors(inputs.begin(), inputs.end()), outputs).cast<Tensors>();
            });
          return forward(*args, **kwargs);
        });
}

// qkv.models.set_max_parameters(): the Python front end's --max-params,
// which every model and module built from Python here is given (the library
// takes it as an argument, as it takes the CLI's).
std::atomic<int64_t> g_max_parameters{models::kDefaultMaxParameters};

models::ModelLimits python_limits() { return {g_max_parameters.load()}; }

// A checkpoint as the Python calls name it (a file or a run folder), read
// within python_limits().
train::CheckpointFile python_checkpoint(const std::string& path, bool allow_non_finite = false) {
  train::CheckpointFile file(train::resolve_checkpoint(path));
  file.limits = python_limits();
  file.allow_non_finite = allow_non_finite;
  return file;
}

// A module's sizes checked before its constructor allocates anything, as the
// registry's models are: each size at least 1, and the parameters the sizes
// ask for (an upper bound from the sizes, saturating) within python_limits().
// qkv.nn.VNLinear(2**31, 2) was allocated and initialised, 16 GiB, before
// anything said no.
void check_module_sizes(const char* module, std::initializer_list<std::pair<const char*, int64_t>> sizes,
                        int64_t parameters) {
  for (const auto& [name, value] : sizes)
    if (value < 1)
      throw UsageError(std::string(module) + ": " + name + " must be at least 1, got " + std::to_string(value));
  const int64_t limit = python_limits().max_parameters;
  if (parameters > limit)
    throw UsageError(std::string(module) + ": these sizes ask for " +
                     (parameters == models::kSaturated ? std::string("more than 2^63") : std::to_string(parameters)) +
                     " parameters, more than max_parameters " + std::to_string(limit) +
                     " (qkv.models.set_max_parameters)");
}

void bind_vn_modules(py::module_& m) {
  using namespace vn;  // VNDefaults: the constructors' defaults, written once
  py::class_<VNLinearImpl, torch::nn::Module, std::shared_ptr<VNLinearImpl>>(m, "VNLinear")
      .def(py::init([](int64_t in, int64_t out) {
             check_module_sizes("VNLinear", {{"in_channels", in}, {"out_channels", out}}, models::sat_mul(in, out));
             return std::make_shared<VNLinearImpl>(in, out);
           }),
           py::arg("in_channels"), py::arg("out_channels"))
      .def("forward", &VNLinearImpl::forward);
  py::class_<VNLeakyReLUImpl, torch::nn::Module, std::shared_ptr<VNLeakyReLUImpl>>(m, "VNLeakyReLU")
      .def(py::init([](int64_t channels, bool share, double slope) {
             check_module_sizes("VNLeakyReLU", {{"channels", channels}},
                                models::sat_mul(channels, share ? 1 : channels));
             return std::make_shared<VNLeakyReLUImpl>(channels, share, slope);
           }),
           py::arg("channels"), py::arg("share") = VNDefaults::share,
           py::arg("negative_slope") = VNDefaults::negative_slope)
      .def("forward", &VNLeakyReLUImpl::forward);
  py::class_<VNBatchNormImpl, torch::nn::Module, std::shared_ptr<VNBatchNormImpl>>(m, "VNBatchNorm")
      .def(py::init([](int64_t channels, double momentum, double eps) {
             check_module_sizes("VNBatchNorm", {{"channels", channels}}, models::norm_parameters(channels));
             return std::make_shared<VNBatchNormImpl>(channels, momentum, eps);
           }),
           py::arg("channels"), py::arg("momentum") = VNDefaults::momentum, py::arg("eps") = VNDefaults::eps)
      .def("forward", &VNBatchNormImpl::forward);
  py::class_<VNLayerNormImpl, torch::nn::Module, std::shared_ptr<VNLayerNormImpl>>(m, "VNLayerNorm")
      .def(py::init([](int64_t channels, double eps) {
             check_module_sizes("VNLayerNorm", {{"channels", channels}}, models::norm_parameters(channels));
             return std::make_shared<VNLayerNormImpl>(channels, eps);
           }),
           py::arg("channels"), py::arg("eps") = VNDefaults::eps)
      .def("forward", &VNLayerNormImpl::forward);
  py::class_<VNLinearLeakyReLUImpl, torch::nn::Module, std::shared_ptr<VNLinearLeakyReLUImpl>>(m, "VNLinearLeakyReLU")
      .def(py::init([](int64_t in, int64_t out, bool share, double slope, bool batch_norm) {
             check_module_sizes("VNLinearLeakyReLU", {{"in_channels", in}, {"out_channels", out}},
                                models::vn_linear_leaky_relu_parameters(in, out, share));
             return std::make_shared<VNLinearLeakyReLUImpl>(in, out, share, slope, batch_norm);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("share") = VNDefaults::share,
           py::arg("negative_slope") = VNDefaults::negative_slope, py::arg("batch_norm") = VNDefaults::batch_norm)
      .def("forward", &VNLinearLeakyReLUImpl::forward);
  py::class_<VNMaxPoolImpl, torch::nn::Module, std::shared_ptr<VNMaxPoolImpl>>(m, "VNMaxPool")
      .def(py::init([](int64_t channels) {
             check_module_sizes("VNMaxPool", {{"channels", channels}}, models::sat_mul(channels, channels));
             return std::make_shared<VNMaxPoolImpl>(channels);
           }),
           py::arg("channels"))
      .def("forward", &VNMaxPoolImpl::forward);
  py::class_<VNStdFeatureImpl, torch::nn::Module, std::shared_ptr<VNStdFeatureImpl>>(m, "VNStdFeature")
      .def(py::init([](int64_t in, bool normalize_frame, bool share, double slope) {
             check_module_sizes("VNStdFeature", {{"in_channels", in}},
                                models::vn_std_feature_parameters(in, normalize_frame));
             return std::make_shared<VNStdFeatureImpl>(in, normalize_frame, share, slope);
           }),
           py::arg("in_channels"), py::arg("normalize_frame") = VNDefaults::normalize_frame,
           py::arg("share") = VNDefaults::share, py::arg("negative_slope") = VNDefaults::negative_slope)
      .def("forward", &VNStdFeatureImpl::forward);
  py::class_<VNEdgeConvImpl, torch::nn::Module, std::shared_ptr<VNEdgeConvImpl>>(m, "VNEdgeConv")
      .def(py::init([](int64_t in, int64_t out, int64_t k, bool with_cross, double slope) {
             check_module_sizes("VNEdgeConv", {{"in_channels", in}, {"out_channels", out}, {"k", k}},
                                models::vn_linear_leaky_relu_parameters(models::sat_mul(with_cross ? 3 : 2, in), out));
             return std::make_shared<VNEdgeConvImpl>(in, out, k, with_cross, slope);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("k"),
           py::arg("with_cross") = VNDefaults::with_cross, py::arg("negative_slope") = VNDefaults::negative_slope)
      .def("forward", &VNEdgeConvImpl::forward);
  py::class_<VNMultiHeadAttentionImpl, torch::nn::Module, std::shared_ptr<VNMultiHeadAttentionImpl>>(
      m, "VNMultiHeadAttention")
      .def(py::init([](int64_t channels, int64_t heads, int64_t head_dim) {
             check_module_sizes("VNMultiHeadAttention",
                                {{"channels", channels}, {"heads", heads}, {"head_dim", head_dim}},
                                models::vn_attention_parameters(channels, heads, head_dim));
             return std::make_shared<VNMultiHeadAttentionImpl>(channels, heads, head_dim);
           }),
           py::arg("channels"), py::arg("heads"), py::arg("head_dim"))
      .def(
          "forward",
          [](VNMultiHeadAttentionImpl& self, const at::Tensor& x, bool need_weights) {
            attention::SdpaOptions o;
            o.need_weights = need_weights;
            auto r = self.forward(x, o);
            return py::make_tuple(r.output, tensor_or_none(r.weights));
          },
          py::arg("x"), py::arg("need_weights") = attention::SdpaOptions().need_weights);
  py::class_<VNFeedForwardImpl, torch::nn::Module, std::shared_ptr<VNFeedForwardImpl>>(m, "VNFeedForward")
      .def(py::init([](int64_t channels, int64_t hidden) {
             check_module_sizes("VNFeedForward", {{"channels", channels}, {"hidden", hidden}},
                                models::vn_feed_forward_parameters(channels, hidden));
             return std::make_shared<VNFeedForwardImpl>(channels, hidden);
           }),
           py::arg("channels"), py::arg("hidden"))
      .def("forward", &VNFeedForwardImpl::forward);
  py::class_<VNTBlockImpl, torch::nn::Module, std::shared_ptr<VNTBlockImpl>>(m, "VNTBlock")
      .def(py::init([](int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden, bool layer_norm) {
             check_module_sizes(
                 "VNTBlock",
                 {{"channels", channels}, {"heads", heads}, {"head_dim", head_dim}, {"ffn_hidden", ffn_hidden}},
                 models::vnt_block_parameters(channels, heads, head_dim, ffn_hidden, layer_norm));
             return std::make_shared<VNTBlockImpl>(channels, heads, head_dim, ffn_hidden, layer_norm);
           }),
           py::arg("channels"), py::arg("heads"), py::arg("head_dim"), py::arg("ffn_hidden"),
           py::arg("layer_norm") = VNDefaults::layer_norm)
      .def("forward", [](VNTBlockImpl& self, const at::Tensor& x) { return self.forward(x); });
}

void bind_attention_modules(py::module_& m) {
  using namespace attention;
  py::class_<KVCache, std::shared_ptr<KVCache>>(m, "KVCache")
      .def(py::init([](int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk, int64_t dv,
                       py::object dtype, py::object device, const std::string& cache_dtype, int64_t window,
                       int64_t sinks) {
             auto options = at::TensorOptions().dtype(
                 dtype.is_none() ? at::kFloat : torch::python::detail::py_object_to_dtype(dtype));
             if (!device.is_none()) options = options.device(torch::python::detail::py_object_to_device(device));
             // The fixed-size cache of the positional arguments, in the element type and window asked for.
             auto s = fixed_cache_settings(layers, batch, heads, max_len, dk, dv, options);
             if (!cache_dtype.empty()) s.dtype = parse_cache_dtype(cache_dtype, "cache_dtype");
             s.window = window;
             s.sinks = sinks;
             return std::make_shared<KVCache>(s);
           }),
           py::arg("layers"), py::arg("batch"), py::arg("heads"), py::arg("max_len"), py::arg("key_dim"),
           py::arg("value_dim"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
           py::arg("cache_dtype") = "", py::arg("window") = 0, py::arg("sinks") = 0)
      .def("append", &KVCache::append, py::arg("layer"), py::arg("keys"), py::arg("values"))
      .def("keys", &KVCache::keys, py::arg("layer"))
      .def("values", &KVCache::values, py::arg("layer"))
      .def("length", py::overload_cast<int64_t>(&KVCache::length, py::const_), py::arg("layer"))
      .def("__len__", py::overload_cast<>(&KVCache::length, py::const_))
      .def("reset", &KVCache::reset)
      // Copies are deep (copy.copy too, as for qkv's modules): a continuation appends to its own buffers.
      .def("__deepcopy__", [](const KVCache& c, py::object) { return std::make_shared<KVCache>(c.clone()); })
      .def("__copy__", [](const KVCache& c) { return std::make_shared<KVCache>(c.clone()); })
      .def_property_readonly("layers", &KVCache::layers)
      .def_property_readonly("batch", &KVCache::batch)
      .def_property_readonly("heads", &KVCache::heads)
      .def_property_readonly("max_len", &KVCache::max_len)
      .def_property_readonly("key_dim", &KVCache::key_dim)
      .def_property_readonly("cache_dtype", [](const KVCache& c) { return std::string(cache_dtype_name(c.dtype())); })
      .def_property_readonly("value_dim", &KVCache::value_dim)
      .def_property_readonly("bytes", [](const KVCache& c) { return c.size_bytes().total_bytes; });
  m.def("kv_cache_bytes", [](int64_t layers, int64_t heads, int64_t dk, int64_t dv, int64_t seq, int64_t batch,
                             int64_t bytes_per_element) {
    const auto s = kv_cache_bytes(layers, heads, dk, dv, seq, batch, bytes_per_element);
    return py::dict(py::arg("key_bytes") = s.key_bytes, py::arg("value_bytes") = s.value_bytes,
                    py::arg("total_bytes") = s.total_bytes);
  });
  // Cloneable derives from Module virtually: the Module inside is at an
  // offset, which pybind11 applies only for classes it treats as having
  // several bases.
  const MultiHeadAttentionOptions kMhaDefaults(1, 1);  // the options' defaults, written once
  py::class_<MultiHeadAttentionImpl, torch::nn::Module, std::shared_ptr<MultiHeadAttentionImpl>>(
      m, "MultiHeadAttention", py::multiple_inheritance())
      .def(py::init([](int64_t embed_dim, int64_t heads, int64_t qk_dim, int64_t v_dim, int64_t kv_dim, bool bias,
                       double dropout, int64_t kv_heads) {
             // Sizes the constructor would refuse are left to it (it names them before allocating).
             if (embed_dim >= 1 && heads >= 1 && qk_dim >= 0 && v_dim >= 0 && kv_dim >= 0 && kv_heads >= 0) {
               auto given_or = [](int64_t given, int64_t otherwise) { return given > 0 ? given : otherwise; };
               check_module_sizes(
                   "MultiHeadAttention", {{"embed_dim", embed_dim}, {"heads", heads}},
                   models::multi_head_attention_parameters(
                       embed_dim, heads, given_or(qk_dim, embed_dim / heads), given_or(v_dim, embed_dim / heads),
                       given_or(kv_heads, heads), given_or(kv_dim, embed_dim), bias));
             }
             return std::make_shared<MultiHeadAttentionImpl>(MultiHeadAttentionOptions(embed_dim, heads)
                                                                 .kv_heads(kv_heads)
                                                                 .qk_dim(qk_dim)
                                                                 .v_dim(v_dim)
                                                                 .kv_dim(kv_dim)
                                                                 .bias(bias)
                                                                 .dropout(dropout));
           }),
           py::arg("embed_dim"), py::arg("heads"), py::arg("qk_dim") = kMhaDefaults.qk_dim(),
           py::arg("v_dim") = kMhaDefaults.v_dim(), py::arg("kv_dim") = kMhaDefaults.kv_dim(),
           py::arg("bias") = kMhaDefaults.bias(), py::arg("dropout") = kMhaDefaults.dropout(),
           py::arg("kv_heads") = kMhaDefaults.kv_heads())
      .def(
          "forward",
          [](MultiHeadAttentionImpl& self, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
             bool causal, const c10::optional<at::Tensor>& key_padding_mask, const c10::optional<at::Tensor>& attn_mask,
             bool need_weights) {
            std::vector<int64_t> scores;  // unknown for inputs the forward refuses itself
            if (query.dim() == 3 && key.dim() == 3)
              scores = {query.size(0), self.options().heads(), query.size(1), key.size(1)};
            auto r = self.forward(query, key, value,
                                  attention_options(causal, key_padding_mask, attn_mask, need_weights, scores));
            return py::make_tuple(r.output, tensor_or_none(r.weights));
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("causal") = SdpaOptions().causal,
          py::arg("key_padding_mask") = py::none(), py::arg("attn_mask") = py::none(),
          py::arg("need_weights") = SdpaOptions().need_weights)
      .def(
          "forward_cached",
          [](MultiHeadAttentionImpl& self, const at::Tensor& x, KVCache& cache, int64_t layer, bool causal) {
            attention::SdpaOptions o;
            o.causal = causal;
            return self.forward_cached(x, cache, layer, o).output;
          },
          py::arg("x"), py::arg("cache"), py::arg("layer") = 0, py::arg("causal") = true)
      .def_property_readonly("qk_dim", &MultiHeadAttentionImpl::qk_dim)
      .def_property_readonly("v_dim", &MultiHeadAttentionImpl::v_dim);
}

using NamedInputs = std::map<std::string, at::Tensor>;

data::Batch batch_of(const NamedInputs& inputs) {
  data::Batch batch;
  batch.inputs = inputs;
  return batch;
}

void bind_models(py::module_& m) {
  py::class_<models::Model, torch::nn::Module, models::ModelPtr>(m, "Model")
      .def("forward", [](models::Model& self, const NamedInputs& inputs) { return self.forward(batch_of(inputs)); })
      .def("features", [](models::Model& self, const NamedInputs& inputs) { return self.features(batch_of(inputs)); })
      .def("attention_maps", [](models::Model& self, const NamedInputs& inputs) {
        auto maps = self.attention_maps(batch_of(inputs));
        return py::make_tuple(maps.layers, tensor_or_none(maps.keys));
      });
  py::class_<models::TransformerLM, models::Model, std::shared_ptr<models::TransformerLM>>(m, "TransformerLM")
      .def(
          "forward_tokens",
          [](models::TransformerLM& self, const at::Tensor& tokens, attention::KVCache* cache) {
            return self.forward_tokens(tokens, cache);
          },
          py::arg("tokens"), py::arg("cache") = nullptr);
  // The registry as JSON text, each entry's card as `qkv params --json`
  // prints it (no sizes): the Python side reads it with json.loads.
  m.def("model_registry", [] { return models::registry_cards().dump(); });
  m.def("create_model", [](const std::string& name, const std::string& options) {
    const auto& entry = models::find_model(name);
    return entry.make(parse_options(options, name), python_limits());
  });
  m.def("resolve_model_options", [](const std::string& name, const std::string& options) {
    return models::find_model(name).resolve(parse_options(options, name)).dump();
  });
  m.def("model_inputs", [](const std::string& name, const std::string& options) {
    return models::find_model(name).inputs_with(parse_options(options, name));
  });
  m.def("model_size", [](const std::string& name, const std::string& options, int64_t points) {
    const auto s = models::find_model(name).size(parse_options(options, name), points);
    return py::make_tuple(s.parameters, s.activation_floats);
  });
  m.def("set_max_parameters", [](int64_t limit) {
    if (limit < 1) throw ConfigError("max_params", "must be at least 1");
    g_max_parameters = limit;
  });
  m.def("max_parameters", [] { return g_max_parameters.load(); });
  m.def("resolve_checkpoint", &train::resolve_checkpoint);
  m.def("load_checkpoint", [](const std::string& path, bool allow_non_finite) {
    return interruptible([&] {
      const auto file = python_checkpoint(path, allow_non_finite);
      if (ends_with(file.path, "xgboost.json"))
        throw UsageError(path + ": an XGBoost run (" + file.path + "), which has no torch model to load");
      nlohmann::json config;
      auto model = tasks::load_checked_model(file, &config);  // the CLI's checks of the stored settings
      return std::make_pair(model, config.dump());
    });
  });
  m.def(
      "predict_parts",
      [](const std::string& run, const at::Tensor& points, const std::string& category,
         const c10::optional<at::Tensor>& normals, int64_t votes, uint64_t seed, const std::string& rotate) {
        const auto parts = interruptible([&] {  // without the GIL: the tuple is made after
          return tasks::predict_cloud_parts(python_checkpoint(run), points, normals ? *normals : at::Tensor(), category,
                                            rotate, seed, votes, points.device());
        });
        return py::make_tuple(parts.labels, parts.probabilities, parts.sampled);
      },
      py::arg("run"), py::arg("points"), py::arg("category"), py::kw_only(), py::arg("normals") = py::none(),
      py::arg("votes") = tasks::kDefaultPartVotes, py::arg("seed") = 0, py::arg("rotate") = "none",
      R"doc(predict_parts(run, points, category, *, normals=None, votes=3, seed=0, rotate="none")
    -> (labels, probabilities, sampled)

A part label for every point of a cloud of any size, as `qkv seg predict`
labels a file: run is a seg run folder or checkpoint; points [N, 3] (normals
[N, 3] where the run takes them); category a ShapeNet-part name or synset.
A cloud of at most the run's --points goes through the network whole; a
larger one in `votes` random samplings of that many points (seeded by
`seed`), every point taking the averaged probabilities of its nearest sampled
point. labels [N] int64 (global part ids), probabilities [N, parts] float64
(the category's parts in order), sampled: points some sampling held.)doc");
  m.def("checkpoint_config",
        [](const std::string& path) { return train::read_checkpoint_config(train::resolve_checkpoint(path)).dump(); });
  m.def("load_weights", [](torch::nn::Module& module, const std::string& path) {
    interruptible([&] { train::load_weights(module, path); });
  });
}

}  // namespace

void bind_modules(py::module_& m) {
  bind_module_tree(m);
  bind_vn_modules(m);
  bind_attention_modules(m);
  bind_models(m);
}

}  // namespace qkv::python
