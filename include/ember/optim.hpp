// ember/optim.hpp — optimizers, learning-rate schedulers and gradient clipping in one include.
#pragma once

#include "ember/optim/adam.hpp"
#include "ember/optim/adaptive.hpp"
#include "ember/optim/asgd_rprop.hpp"
#include "ember/optim/clip.hpp"
#include "ember/optim/grad_scaler.hpp"
#include "ember/optim/lbfgs.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/optim/scheduler.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/optim/swa.hpp"
