// src/io/write_order.hpp — writes to one file land in the order they were issued.
//
// Note [Writes land in issue order]
// Every write of a safetensors file (write_safetensors, hence save_model, save_checkpoint and
// save_checkpoint_async) takes a write_order::Turn for its target when it is issued — on the
// caller's thread, at the call, even for an asynchronous checkpoint written later on a background
// thread — and waits for its turn just before it creates its temporary file. The turn comes
// when every write to the same file issued before it has finished (renamed into place, or
// failed). So an asynchronous checkpoint still being written can no longer rename its older
// state over a later synchronous save of the same path: the later save waits for it (issue 27
// item 7: 7 of 20 runs ended with the older state). Writes to other files do not wait. Files
// are the same when their paths are after std::filesystem::weakly_canonical (a symlink and its
// target count as one file: waiting then is merely unnecessary). A turn always points back to
// earlier writes and a write never waits on a later one, so no set of turns can deadlock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::io::write_order {

/// A place in the queue of writes to one file, taken when the write is issued. wait() blocks
/// until every write to the same file issued before this one has finished; destroying the
/// turn (after the write, or without it when it failed or never ran) lets the next one go.
///   write_order::Turn turn(path);   // at the call
///   ...                     // prepare, possibly on another thread
///   turn.wait();            // then create the temporary file, write, rename
class Turn {
 public:
  explicit Turn(const std::string& path);
  ~Turn();
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;
  void wait();

 private:
  std::string file_;  // the canonical path
  uint64_t number_;   // issue order, across all files
};

/// write_safetensors, in `turn` (src/io/safetensors.cpp): prepares the bytes, waits for the
/// turn, then writes atomically. write_safetensors(path, ...) takes its turn at the call.
void write_safetensors_in_turn(Turn& turn, const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors,
                               std::map<std::string, std::string> metadata);

}  // namespace ember::io::write_order
