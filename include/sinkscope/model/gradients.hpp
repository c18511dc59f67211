// Gradients of a loss with respect to a model's parameters (Fisher information, training). Every
// forward normally runs under c10::InferenceMode, which records no autograd graph; inside a
// GradientScope the forwards on this thread record it, and gradients() differentiates a scalar
// loss computed from their outputs.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

class GradientScope {
public:
    // The model's parameters require gradients and forwards on this thread record the graph
    // until the scope ends (both restored then). The model must outlive the scope.
    explicit GradientScope(const Model& model);
    ~GradientScope();
    GradientScope(const GradientScope&) = delete;
    GradientScope& operator=(const GradientScope&) = delete;

    // Model::parameters(), in that order.
    const std::vector<Parameter>& parameters() const { return params_; }
    // d loss / d parameter for every parameter, in the parameter's dtype and device (zeros where
    // the loss does not depend on it, e.g. the positions a short input does not reach).
    // keep_graph: the graph stays for another loss of the same forward (several label draws).
    std::vector<at::Tensor> gradients(const at::Tensor& loss, bool keep_graph = false) const;

private:
    std::vector<Parameter> params_;
    bool previous_ = false;
    c10::AutoGradMode grad_mode_{true};
};

}  // namespace sinkscope::model
