// GradientScope (model/gradients.hpp): the switch between inference-mode and recording forwards,
// and reverse-mode gradients of a loss with respect to the parameters.
#include "sinkscope/model/gradients.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"

namespace sinkscope::model {

namespace {
// Per thread: a forward on another thread (a data-parallel worker) keeps inference mode.
thread_local bool t_record_gradients = false;
}  // namespace

bool detail::gradients_recorded() {
    return t_record_gradients;
}

GradientScope::GradientScope(const Model& model)
    : params_(model.parameters()), previous_(t_record_gradients) {
    for (Parameter& p : params_) {
        SS_CHECK(!p.tensor.is_inference(), "parameter created under inference mode");
        p.tensor.requires_grad_(true);
    }
    t_record_gradients = true;
}

GradientScope::~GradientScope() {
    t_record_gradients = previous_;
    for (Parameter& p : params_) p.tensor.requires_grad_(false);
}

std::vector<at::Tensor> GradientScope::gradients(const at::Tensor& loss, bool keep_graph) const {
    SS_CHECK(loss.dim() == 0 && loss.requires_grad(),
             "gradients() needs a scalar loss computed inside the scope");
    std::vector<at::Tensor> inputs;
    inputs.reserve(params_.size());
    for (const Parameter& p : params_) inputs.push_back(p.tensor);
    std::vector<at::Tensor> g;
    try {
        g = torch::autograd::grad({loss}, inputs, /*grad_outputs=*/{}, keep_graph,
                                  /*create_graph=*/false, /*allow_unused=*/true);
    } catch (const c10::Error& e) {  // one line, without libtorch's backtrace
        throw InternalError(std::string("libtorch autograd: ") + e.what_without_backtrace());
    }
    for (size_t i = 0; i < g.size(); ++i)
        if (!g[i].defined()) g[i] = at::zeros_like(inputs[i]);
    return g;
}

}  // namespace sinkscope::model
