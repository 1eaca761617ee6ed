// ember/replay.hpp — a device-resident replay buffer (ggmlR's ag_buffer / ag_get_rows;
// docs/rl.md): a fixed-capacity table of rows per named field, allocated once in the
// Persistent pool of one device, written a batch of rows at a time in ring order and read
// back by index. Sampling draws its indices on the device from ember's generator and reads
// the filled count from a device scalar, so a train::CapturedStep can sample from the buffer
// on every replay with no host transfer.
//
//   ReplayBuffer buf(10000, {{"obs", {4}}, {"action", {}, DType::i64}, {"reward", {}},
//                            {"next_obs", {4}}, {"done", {}}});
//   buf.push({{"obs", obs}, {"action", a}, {"reward", r}, {"next_obs", obs2}, {"done", d}});
//   ReplayBatch b = buf.sample(64);            // b["obs"] is [64, 4], on the buffer's device
//   Tensor q = qnet(b["obs"]);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.hpp"

namespace ember {

/// Rows `indices` (1-D, i64 or i32) of `table` along dim 0, as ggmlR's ag_get_rows:
/// index_select(table, 0, indices). When `table` requires grad the gradient flows back to it
/// (scatter-add: a row picked twice gets both gradients), as an embedding's weight does. An
/// index outside [0, rows) is an ember::Error (on a GPU, reported at the next sync).
/// Example: Tensor rows = get_rows(weight, from_vector<int64_t>({2, 0, 2}, {3}));
Tensor get_rows(const Tensor& table, const Tensor& indices);

/// One field of a replay buffer: its name, the shape of one row (empty: a scalar per row)
/// and its dtype.
struct ReplayField {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

/// Tensors by field name, rows along dim 0: what push() takes and sample()/get() return.
class ReplayBatch {
 public:
  ReplayBatch() = default;
  ReplayBatch(std::initializer_list<std::pair<const std::string, Tensor>> items);
  /// The tensor of field `name`; ember::Error naming the fields present when it is absent.
  const Tensor& operator[](const std::string& name) const;
  void set(const std::string& name, Tensor t) { items_[name] = std::move(t); }
  bool contains(const std::string& name) const { return items_.count(name) != 0; }
  const std::map<std::string, Tensor>& items() const { return items_; }

 private:
  std::map<std::string, Tensor> items_;
};

struct ReplayBufferOptions {
  /// Where the tables live (default: the default device).
  std::optional<Device> device = std::nullopt;
};

/// A fixed-capacity ring of rows, one table per field ([capacity, *field.shape]), in the
/// Persistent pool of its device. A handle with reference semantics: copies share the buffer.
/// `release_device(d)` moves its tables (and its filled count) to the host with the rest of
/// d's tensors; the buffer keeps working there.
class ReplayBuffer {
 public:
  /// Allocates the tables, zero-filled. ember::Error for a capacity below 1, no fields, a
  /// field with an empty or repeated name, or a row shape with a negative size.
  ReplayBuffer(int64_t capacity, std::vector<ReplayField> fields, ReplayBufferOptions options = {});

  /// Writes rows in ring order after the last ones written, overwriting the oldest once full:
  /// each field's tensor is [B, *field.shape] (or one row, field.shape), the same B for all,
  /// every field present and no other, dtypes exactly the fields'. A batch that runs past the
  /// end wraps to row 0; of a batch larger than the capacity only its last `capacity` rows
  /// stay, where a row-by-row push would have left them. Rows on the buffer's device are
  /// copied there with no host round trip. Refused inside a captured step (the write
  /// position and the filled count are host state a replay would not advance): push outside
  /// the step, as an environment loop does.
  void push(const ReplayBatch& rows);

  /// `batch_size` indices drawn uniformly from the filled rows, on the device, from ember's
  /// generator, with no host read (Note [Replay sampling reads the count on the device] in
  /// src/train/replay.cpp): inside a captured step every replay draws new indices from the
  /// rows filled by then. ember::Error for batch_size < 1 or an empty buffer.
  Tensor sample_indices(int64_t batch_size) const;
  /// The rows of sample_indices(batch_size), every field gathered: {name: [batch_size, ...]}.
  ReplayBatch sample(int64_t batch_size) const;
  /// The rows at `indices` (1-D, i64 or i32, on the buffer's device), every field gathered.
  /// Outside a captured step an index outside the filled rows [0, size()) is an ember::Error
  /// naming it: checking costs one device read (the indices' least and greatest value);
  /// inside a capture there is no check (an index beyond the capacity is reported by the
  /// gather at the next sync; indices from sample_indices are in range by construction).
  ReplayBatch get(const Tensor& indices) const;

  /// Rows filled (at most capacity()); a host counter, no device read.
  int64_t size() const;
  int64_t capacity() const;
  /// The row the next push writes first.
  int64_t position() const;
  /// The filled count as the device reads it: a 0-d f64 tensor in the Persistent pool.
  const Tensor& filled() const;
  /// The whole table of field `name`, [capacity, *shape] (rows past size() are zeros or stale).
  const Tensor& table(const std::string& name) const;
  const std::vector<ReplayField>& fields() const;
  /// The device of the tables (the host after release_device).
  Device device() const;
  /// Forgets every row (size 0, position 0); the tables keep their memory.
  void clear();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ember
