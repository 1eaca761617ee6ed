// bench/launch_floor.hpp — the launch-floor probes of bench_capture (bench/launch_floor.cu,
// built into bench_capture when ember is built with CUDA).
#pragma once

#include <string>
#include <vector>

/// One way of launching one kernel: µs per launch call on the host (queue never full), µs
/// per kernel on the GPU when the launches run back to back in the stream, and per kernel
/// when they are captured into one CUDA graph and replayed.
struct LaunchFloorFigure {
  std::string name;
  double host_us = 0.0;
  double stream_us = 0.0;
  double graph_us = 0.0;
};

/// A host call's cost, µs.
struct LaunchFloorCall {
  std::string name;
  double us = 0.0;
};

struct LaunchFloor {
  std::vector<LaunchFloorFigure> launches;
  std::vector<LaunchFloorCall> calls;
};

/// Runs every probe on cuda:0 (about a second). A probe that fails has NaN figures; throws
/// std::runtime_error when the probes cannot start.
LaunchFloor launch_floor();
