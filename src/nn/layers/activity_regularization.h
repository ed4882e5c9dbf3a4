// Keras's ActivityRegularization and the add_loss term of a traced call(): their constructors.
// (Every layer's activity_regularizer is Layer::activity.)
#pragma once

#include "nn/layer.h"

namespace crossover {

// Keras's ActivityRegularization(l1, l2): the identity, whose output's penalty l1 sum(|y|) +
// l2 sum(y^2), divided by the batch's size, joins the loss (its Layer::activity). Requires
// finite factors of at least 0.
Layer ActivityRegularization(double l1 = 0.0, double l2 = 0.0);

// The term a custom layer's call() adds with add_loss(scale * mean(x)) or add_loss(scale *
// sum(x)) (x a symbolic tensor of the call, the mean or sum over every value of the batch's):
// the identity on x, its output read by no layer or by the next; in fit's and evaluate's steps
// its value joins the loss and its gradient x's. Keras has no layer class for it.
struct AddLossArgs {
  double scale = 1.0;
  bool mean = true;  // else the sum
};
Layer AddLoss(double scale, bool mean);

}  // namespace crossover
