// ember/ember.hpp — everything in one include.
#pragma once

#include "ember/attention.hpp"
#include "ember/autocast.hpp"
#include "ember/autograd.hpp"
#include "ember/catalogue.hpp"
#include "ember/checkpoint.hpp"
#include "ember/device.hpp"
#include "ember/dtype.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"
#include "ember/ops.hpp"
#include "ember/profiler.hpp"
#include "ember/random.hpp"
#include "ember/runtime.hpp"
#include "ember/shape.hpp"
#include "ember/tensor.hpp"
