// model module: a loaded checkpoint with TransformerLens-style access (to_tokens, to_string,
// run_with_cache keyed by hook names, head ablation) and its perplexity. Captured float32 CPU
// tensors are handed to numpy without a copy: the array keeps the tensor alive.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <memory>
#include <optional>
#include <set>

#include <ATen/ATen.h>

#include "bindings.hpp"
#include "sinkscope/api/interventions.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/api/patch.hpp"
#include "sinkscope/api/perplexity.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::python {
using namespace pybind11::literals;

namespace {

struct PyModel {
    model::Model model;
    tokenizer::BosPolicy bos = tokenizer::BosPolicy::ModelDefault;
};

// float32 / float64 CPU tensors are shared with numpy (contiguous ones without a copy); other
// dtypes (bfloat16, float16 runs) are widened to float32, integer tensors kept as int64.
py::array to_numpy(at::Tensor t) {
    t = t.to(at::kCPU);
    if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble &&
        t.scalar_type() != at::kLong)
        t = t.is_floating_point() ? t.to(at::kFloat) : t.to(at::kLong);
    t = t.contiguous();
    auto* owner = new at::Tensor(t);
    py::capsule keep(owner, [](void* p) { delete static_cast<at::Tensor*>(p); });
    const auto item = static_cast<py::ssize_t>(t.element_size());
    std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
    std::vector<py::ssize_t> strides;
    for (int64_t s : t.strides()) strides.push_back(s * item);
    const py::dtype dt = t.scalar_type() == at::kFloat    ? py::dtype::of<float>()
                         : t.scalar_type() == at::kDouble ? py::dtype::of<double>()
                                                          : py::dtype::of<int64_t>();
    return py::array(dt, shape, strides, t.data_ptr(), keep);
}

model::HeadMask head_mask(const model::Model& m, const std::string& heads) {
    const auto& c = m.config();
    model::HeadMask mask(model::HeadMask::Kind::Zero, c.n_layers, c.n_heads);
    for (const auto& [layer, head] : api::parse_head_list(heads, c.n_layers, c.n_heads))
        mask.ablate(layer, head);
    return mask;
}

// Token ids or a padding mask from numpy: int64 [batch, pos] (a copy; the forward owns it).
at::Tensor ids_tensor(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& a,
                      const char* what) {
    if (a.ndim() != 2)
        throw UsageError(std::string(what) + " must be [batch, pos], got rank " +
                         std::to_string(a.ndim()));
    return at::from_blob(const_cast<int64_t*>(a.data()), {a.shape(0), a.shape(1)}, at::kLong)
        .clone();
}

// An editing hook written in Python (model.py wraps the user's function): called with the
// activation as a numpy array (sharing the tensor's memory when it is float32 / float64 on the
// CPU and contiguous), its name and layer; returns None (go on with the array handed out, edited
// in place or not) or a C-contiguous float32 / float64 array of the same shape.
model::HookFn python_hook(py::function fn) {
    // The function is released with the GIL held, whichever thread drops the last copy.
    std::shared_ptr<py::function> held(new py::function(std::move(fn)), [](py::function* f) {
        py::gil_scoped_acquire gil;
        delete f;
    });
    return [held](const at::Tensor& t, const model::HookSite& site) -> at::Tensor {
        py::gil_scoped_acquire gil;
        py::array given = to_numpy(t);
        py::object out = (*held)(given, site.name, site.layer);
        py::array edited = out.is_none() ? given : py::array(out);
        if (edited.data() == t.data_ptr()) return t;  // the activation itself, edited in place
        at::ScalarType type = at::kDouble;
        if (edited.dtype().is(py::dtype::of<float>()))
            type = at::kFloat;
        else if (!edited.dtype().is(py::dtype::of<double>()))
            edited = py::array_t<double, py::array::c_style | py::array::forcecast>(edited);
        if (!(edited.flags() & py::array::c_style))
            edited = py::array::ensure(edited, py::array::c_style);
        std::vector<int64_t> shape(edited.shape(), edited.shape() + edited.ndim());
        return at::from_blob(edited.mutable_data(), shape, type).clone();
    };
}

// The ready-made interventions of `text` (api/interventions.hpp) on a batch of ids [batch, T]:
// sink positions are read from the first row (sink=bos takes a batch of one); mean and resample
// ablation need the other inputs of a run and are `sinkscope.analyze(intervene=...)`'s.
void add_ready_made(model::CaptureSpec& spec, const PyModel& p, const at::Tensor& ids,
                    const std::string& text) {
    const api::InterventionPlan plan = api::parse_interventions(text, p.model.config());
    if (plan.needs_mean_z() || plan.needs_resample())
        throw UsageError(
            "intervene: mean and resample ablation read other inputs; use "
            "sinkscope.analyze(intervene=...) or a hook");
    for (const api::Intervention& iv : plan.list)
        if (iv.sink.kind == metrics::SinkPolicy::Kind::Bos && ids.size(0) > 1)
            throw UsageError("intervene: sink=bos reads one sequence's tokens; run a batch of one");
    api::InterventionInput in;
    const at::Tensor row = ids[0].contiguous();
    in.ids.assign(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    in.bos_id = api::model_bos_id(p.model);
    api::add_interventions(spec, plan, p.model.config(), in);
}

py::dict config_dict(const model::ModelConfig& c) {
    return py::dict(
        "architecture"_a = c.architecture, "n_layers"_a = c.n_layers, "n_heads"_a = c.n_heads,
        "n_kv_heads"_a = c.n_kv_heads, "d_model"_a = c.d_model, "d_head"_a = c.d_head,
        "d_mlp"_a = c.d_mlp, "d_vocab"_a = c.d_vocab, "n_ctx"_a = c.n_ctx, "causal"_a = c.causal,
        "window"_a = c.window, "vision"_a = c.is_vision(),
        "attention"_a = model::attention_function_name(c.attention), "kv_slot"_a = c.kv_slot);
}

}  // namespace

void bind_model(py::module_& m) {
    py::class_<PyModel>(m, "Model")
        .def_static(
            "load",
            [](const std::string& path, const std::string& device, const std::string& dtype,
               const std::string& tokenizer, const std::string& bos, int threads) {
                api::ModelCliOptions o;
                o.model = path;
                o.device = device;
                o.dtype = dtype;
                o.tokenizer = tokenizer;
                o.bos = bos;
                o.threads = threads;
                const auto policy = tokenizer::parse_bos_policy(bos);
                const auto options = api::load_options(o);
                py::gil_scoped_release release;
                return PyModel{model::load_model(path, options), policy};
            },
            py::arg("path"), py::arg("device") = "cpu", py::arg("dtype") = "float32",
            py::arg("tokenizer") = "", py::arg("bos") = "default", py::arg("threads") = 0)
        .def_property_readonly("cfg",
                               [](const PyModel& p) { return config_dict(p.model.config()); })
        .def_property_readonly("path", [](const PyModel& p) { return p.model.path.string(); })
        .def_property_readonly("n_params", [](const PyModel& p) { return p.model.n_params(); })
        .def("hook_names", [](const PyModel& p) { return model::list_hooks(p.model.config()); })
        .def(
            "encode",
            [](const PyModel& p, const std::string& text) { return p.model.encode(text, p.bos); },
            py::arg("text"), "Token ids of `text` under the model's BOS policy")
        .def(
            "decode",
            [](const PyModel& p, const std::vector<int32_t>& ids) {
                if (!p.model.tokenizer())
                    throw UnsupportedError(p.model.path.string(), "the model has no tokenizer");
                return p.model.tokenizer()->decode(ids);
            },
            py::arg("ids"))
        .def(
            "decode_tokens",
            [](const PyModel& p, const std::vector<int32_t>& ids) {
                if (!p.model.tokenizer())
                    throw UnsupportedError(p.model.path.string(), "the model has no tokenizer");
                std::vector<std::string> out;
                for (int32_t id : ids) out.push_back(p.model.tokenizer()->decode_token(id));
                return out;
            },
            py::arg("ids"))
        .def(
            "run",
            [](const PyModel& p,
               const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& ids,
               const std::optional<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>&
                   attention_mask,
               const std::vector<std::string>& patterns, const std::string& heads,
               const std::vector<std::pair<std::vector<std::string>, py::function>>& hooks,
               const std::string& intervene) {
                model::ModelInput input;
                input.ids = ids_tensor(ids, "tokens");
                if (attention_mask)
                    input.attention_mask = ids_tensor(*attention_mask, "attention_mask");
                model::CaptureSpec spec(patterns);
                if (!intervene.empty()) add_ready_made(spec, p, input.ids, intervene);
                for (const auto& [names, fn] : hooks) {
                    std::set<std::string> at(names.begin(), names.end());
                    spec.edit([at](const std::string& n) { return at.count(n) > 0; },
                              python_hook(fn));
                }
                model::ForwardResult r;
                {
                    py::gil_scoped_release release;
                    const model::HeadMask mask =
                        heads.empty() ? model::HeadMask() : head_mask(p.model, heads);
                    r = p.model.forward(input, spec, heads.empty() ? nullptr : &mask);
                }
                py::dict cache;
                for (const auto& [name, t] : r.captured) cache[py::str(name)] = to_numpy(t);
                return py::make_tuple(to_numpy(r.logits), cache);
            },
            py::arg("ids"), py::arg("attention_mask"), py::arg("patterns"),
            py::arg("head_mask") = "",
            py::arg("hooks") = std::vector<std::pair<std::vector<std::string>, py::function>>(),
            py::arg("intervene") = "",
            "(logits [batch, T, vocab], {hook name: array}) of token ids [batch, T] (right "
            "padding with attention_mask); hooks kept by glob patterns, edited by "
            "[(hook names, fn(array, name, layer))]")
        .def(
            "patch",
            [](const PyModel& p, const std::vector<int32_t>& source,
               const std::vector<int32_t>& target, const std::string& hook_kinds,
               const std::string& metric, const std::string& answer, const std::string& wrong,
               bool per_head, bool per_position) {
                api::PatchOptions o;
                o.hook_kinds = hook_kinds;
                o.metric = metric;
                o.answer = answer;
                o.wrong = wrong;
                o.per_head = per_head;
                o.per_position = per_position;
                api::PatchSweep sweep;
                {
                    py::gil_scoped_release release;
                    sweep = api::patch_sweep(p.model, source, target, o);
                }
                return py::make_tuple(table_to_dict(sweep.table), sweep.target_value,
                                      sweep.source_value);
            },
            py::arg("source"), py::arg("target"), py::arg("hook_kinds"), py::arg("metric"),
            py::arg("answer"), py::arg("wrong"), py::arg("per_head"), py::arg("per_position"))
        .def(
            "perplexity",
            [](const PyModel& p, const std::vector<std::vector<int32_t>>& samples,
               const std::string& heads, int64_t stride, std::optional<uint64_t> seed) {
                api::PerplexityValue v;
                {
                    py::gil_scoped_release release;
                    v = api::evaluate_perplexity(p.model, samples, heads, stride, seed);
                }
                return py::dict(
                    (v.pseudo ? "pseudo_perplexity"_a : "perplexity"_a) = v.result.perplexity,
                    "mean_nll"_a = v.result.mean_nll, "n_tokens"_a = v.result.n_tokens,
                    "samples"_a = samples.size(), "sample_nll"_a = v.result.sample_nll,
                    "window"_a = v.window_length, "stride"_a = v.stride);
            },
            py::arg("samples"), py::arg("head_mask") = "", py::arg("stride") = 0,
            py::arg("seed") = py::none());
}

}  // namespace sinkscope::python
