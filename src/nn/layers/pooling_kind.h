// What MaxPooling2D, AveragePooling2D and their global forms share as kinds: a max or an average
// pooling over (height, width, channels) samples, whose backend calls, workspace and device check
// are the same whatever the window (each kind's build() places its window).
#pragma once

#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {

class PoolingKind : public LayerKind {
 public:
  explicit PoolingKind(bool max) : max_(max) {}
  bool takes_images() const override { return true; }
  void check_device(const Layer& l, const Backend& backend, int) const override {
    require_conv2d(l, backend);
  }
  // Max pooling's workspace: where each maximum came from, for the backward pass (as the backend
  // sizes it; asking also has it prepare that shape). Average pooling needs none.
  std::size_t workspace_bytes(const Layer&, const LayerState& li, Backend& backend,
                              int64_t batch) const override {
    return max_ ? backend.pool2d_workspace_bytes(li.own<PoolShape>(), batch) : 0;
  }
  void forward(const ForwardStep& s) const override {
    s.backend.pool2d_forward(s.state.own<PoolShape>(), s.x, s.y,
                             max_ && s.training ? s.workspace : nullptr, s.m);
  }
  void backward(BackwardStep& s) const override {
    s.backend.pool2d_backward(s.state.own<PoolShape>(), s.g, s.workspace, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }

 protected:
  PoolKind pool_kind() const { return max_ ? PoolKind::max : PoolKind::average; }
  // The global poolings' window: all of an (h, w, channels) sample, one output per channel.
  PoolShape whole_sample(int64_t h, int64_t w, int64_t channels) const {
    return {.kind = pool_kind(),
            .in_h = h,
            .in_w = w,
            .channels = channels,
            .out_h = 1,
            .out_w = 1,
            .window_h = h,
            .window_w = w,
            .stride_h = h,
            .stride_w = w};
  }
  bool max_;
};

}  // namespace crossover
