// src/train/replay.cpp — ReplayBuffer and get_rows (ember/replay.hpp, docs/rl.md): the tables
// in the Persistent pool, ring-order writes by slice copies on the tables' device, and
// sampling on the device from the filled count kept there.
#include "ember/replay.hpp"

#include <algorithm>
#include <set>

#include "core/capture.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"
#include "ember/ops.hpp"
#include "ember/runtime.hpp"

namespace ember {

// Note [Replay sampling reads the count on the device]
// A captured step bakes every host value it launches with into the graph: a sampler that
// called randint(0, size()) would draw from the rows filled at capture time on every replay,
// however many were pushed since. So the buffer keeps its filled count twice: on the host
// (size(), for checks and the write position) and as a 0-d f64 tensor on the tables' device in
// the Persistent pool, which push() rewrites in place (a fill kernel: its value travels as a
// launch argument, no copy is counted). sample_indices draws u ~ U[0, 1) in f64 with rand()
// (the generator a replay advances like eager code: Note [Captured steps]) and takes
// min(floor(u * count), count - 1): the graph reads the count each replay, eager and captured
// calls draw the same indices for the same seed, and nothing is read back. f64 keeps the
// indices uniform for any capacity below 2^52 (f32's 24 bits would skew a million-row buffer
// by 6%); the min guards the rounding edge of u * count. An empty buffer is refused on the
// host; a clear() after capture leaves count 0, and the index -1 it gives is reported by the
// gather at the next sync.

Tensor get_rows(const Tensor& table, const Tensor& indices) {
  EMBER_CHECK(table.defined(), "get_rows: the table is an empty tensor handle");
  EMBER_CHECK(indices.defined(), "get_rows: the indices are an empty tensor handle");
  EMBER_CHECK(table.dim() >= 1, "get_rows: table shape ", table.shape().to_string(),
              " (expected at least one dim: rows along dim 0)");
  EMBER_CHECK(indices.dim() == 1, "get_rows: indices shape ", indices.shape().to_string(),
              " (expected a 1-D index)");
  return index_select(table, 0, indices);
}

ReplayBatch::ReplayBatch(std::initializer_list<std::pair<const std::string, Tensor>> items)
    : items_(items) {}

const Tensor& ReplayBatch::operator[](const std::string& name) const {
  auto it = items_.find(name);
  if (it == items_.end()) {
    std::string present;
    for (const auto& [n, t] : items_) present += (present.empty() ? "" : ", ") + n;
    detail::throw_error(
        detail::concat("ReplayBatch: no field '", name, "' (the batch has: ", present, ")"));
  }
  return it->second;
}

namespace {
// ", 4, 3" for a row shape [4, 3]: the dims after B in an expected batch shape.
std::string batch_dims(const Shape& row) {
  std::string s;
  for (int64_t d : row) s += detail::concat(", ", d);
  return s;
}
}  // namespace

struct ReplayBuffer::Impl {
  int64_t capacity = 0;
  std::vector<ReplayField> fields;
  std::vector<Tensor> tables;  // one per field, [capacity, *shape], Persistent
  Tensor count;                // 0-d f64, the filled count, Persistent
  int64_t size = 0;
  int64_t position = 0;

  std::string field_list() const {
    std::string s;
    for (const ReplayField& f : fields) s += (s.empty() ? "" : ", ") + f.name;
    return s;
  }

  // Rows of every field at `indices` (already checked).
  ReplayBatch gather(const Tensor& indices) const {
    ReplayBatch out;
    for (size_t i = 0; i < fields.size(); ++i)
      out.set(fields[i].name, get_rows(tables[i], indices));
    return out;
  }
};

ReplayBuffer::ReplayBuffer(int64_t capacity, std::vector<ReplayField> fields,
                           ReplayBufferOptions options)
    : impl_(std::make_shared<Impl>()) {
  EMBER_CHECK(capacity >= 1, "ReplayBuffer: capacity ", capacity, " (expected at least 1 row)");
  EMBER_CHECK(!fields.empty(),
              "ReplayBuffer: no fields (expected at least one, e.g. {\"obs\", {4}})");
  std::set<std::string> names;
  for (const ReplayField& f : fields) {
    EMBER_CHECK(!f.name.empty(), "ReplayBuffer: a field has an empty name");
    EMBER_CHECK(names.insert(f.name).second, "ReplayBuffer: field '", f.name,
                "' is named twice (expected distinct names)");
    for (int64_t d : f.shape)
      EMBER_CHECK(d >= 0, "ReplayBuffer: field '", f.name, "' has row shape ", f.shape.to_string(),
                  " (expected sizes >= 0)");
  }
  const Device device = options.device.value_or(default_device());
  Impl& s = *impl_;
  s.capacity = capacity;
  s.fields = std::move(fields);
  PoolGuard persistent(Pool::Persistent);
  for (const ReplayField& f : s.fields) {
    std::vector<int64_t> dims{capacity};
    dims.insert(dims.end(), f.shape.begin(), f.shape.end());
    s.tables.push_back(zeros(Shape(dims), {.dtype = f.dtype, .device = device}));
  }
  s.count = zeros({}, {.dtype = DType::f64, .device = device});
}

void ReplayBuffer::push(const ReplayBatch& rows) {
  Impl& s = *impl_;
  EMBER_CHECK(detail::active_capture() == nullptr,
              "ReplayBuffer::push: called inside a captured step (the write position and the "
              "filled count are host state a replay would not advance; push outside the step)");
  for (const auto& [name, t] : rows.items()) {
    bool known = false;
    for (const ReplayField& f : s.fields) known = known || f.name == name;
    EMBER_CHECK(known, "ReplayBuffer::push: unknown field '", name,
                "' (the buffer has: ", s.field_list(), ")");
  }
  // Every field as [B, *shape], checked before anything is written.
  std::vector<Tensor> batch;
  int64_t count = -1;
  for (const ReplayField& f : s.fields) {
    EMBER_CHECK(rows.contains(f.name), "ReplayBuffer::push: field '", f.name,
                "' is missing (expected every field: ", s.field_list(), ")");
    Tensor t = rows[f.name];
    EMBER_CHECK(t.defined(), "ReplayBuffer::push: field '", f.name, "' is an empty tensor handle");
    EMBER_CHECK(t.dtype() == f.dtype, "ReplayBuffer::push: field '", f.name, "' has dtype ",
                dtype_name(t.dtype()), " (expected ", dtype_name(f.dtype), ")");
    if (t.shape() == f.shape) t = t.unsqueeze(0);  // one row
    std::vector<int64_t> want = f.shape.vec();
    want.insert(want.begin(), t.dim() > 0 ? t.shape()[0] : -1);
    EMBER_CHECK(t.dim() > 0 && t.shape() == Shape(want), "ReplayBuffer::push: field '", f.name,
                "' has shape ", rows[f.name].shape().to_string(), " (expected [B",
                batch_dims(f.shape), "] or one row ", f.shape.to_string(), ")");
    EMBER_CHECK(count < 0 || t.shape()[0] == count, "ReplayBuffer::push: field '", f.name, "' has ",
                t.shape()[0], " rows and '", s.fields[0].name, "' ", count,
                " (expected the same count for every field)");
    count = t.shape()[0];
    batch.push_back(t.detach());
  }
  if (count == 0) return;
  // Of more rows than the capacity only the last `capacity` stay, at the rows a row-by-row
  // push would have left them in.
  const int64_t kept = std::min(count, s.capacity);
  const int64_t start = (s.position + count - kept) % s.capacity;
  const int64_t first = std::min(kept, s.capacity - start);  // before the wrap
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor src = batch[i].narrow(0, count - kept, kept);
    s.tables[i].narrow(0, start, first).copy_(src.narrow(0, 0, first));
    if (first < kept)
      s.tables[i].narrow(0, 0, kept - first).copy_(src.narrow(0, first, kept - first));
  }
  s.position = (s.position + count) % s.capacity;
  s.size = std::min(s.capacity, s.size + count);
  s.count.fill_(static_cast<double>(s.size));
}

Tensor ReplayBuffer::sample_indices(int64_t batch_size) const {
  const Impl& s = *impl_;
  EMBER_CHECK(batch_size >= 1, "ReplayBuffer::sample: batch size ", batch_size,
              " (expected at least 1)");
  EMBER_CHECK(s.size > 0,
              "ReplayBuffer::sample: the buffer is empty (expected push() before "
              "sample())");
  // Note [Replay sampling reads the count on the device]
  NoGradGuard no_grad;
  const Tensor u = rand({batch_size}, {.dtype = DType::f64, .device = s.count.device()});
  return minimum(floor(u * s.count), s.count - 1.0).to(DType::i64);
}

ReplayBatch ReplayBuffer::sample(int64_t batch_size) const {
  return impl_->gather(sample_indices(batch_size));
}

ReplayBatch ReplayBuffer::get(const Tensor& indices) const {
  const Impl& s = *impl_;
  EMBER_CHECK(indices.defined(), "ReplayBuffer::get: the indices are an empty tensor handle");
  EMBER_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
              "ReplayBuffer::get: indices dtype ", dtype_name(indices.dtype()),
              " (expected i64 or i32)");
  EMBER_CHECK(indices.dim() == 1, "ReplayBuffer::get: indices shape ", indices.shape().to_string(),
              " (expected a 1-D index)");
  EMBER_CHECK(indices.device() == device(), "ReplayBuffer::get: indices on ",
              indices.device().str(), " (expected the buffer's device, ", device().str(), ")");
  if (detail::active_capture() == nullptr && indices.numel() > 0) {
    // One device read: the least and the greatest index.
    const Tensor i64 = indices.to(DType::i64);
    const std::vector<int64_t> range =
        stack({amin(i64), amax(i64)}).to(Device::cpu()).to_vector<int64_t>();
    const int64_t bad = range[0] < 0 ? range[0] : range[1];
    EMBER_CHECK(range[0] >= 0 && range[1] < s.size, "ReplayBuffer::get: index ", bad,
                " is outside the filled rows (expected indices in [0, ", s.size, "); capacity ",
                s.capacity, ")");
  }
  return s.gather(indices);
}

int64_t ReplayBuffer::size() const { return impl_->size; }
int64_t ReplayBuffer::capacity() const { return impl_->capacity; }
int64_t ReplayBuffer::position() const { return impl_->position; }
const Tensor& ReplayBuffer::filled() const { return impl_->count; }
const std::vector<ReplayField>& ReplayBuffer::fields() const { return impl_->fields; }
Device ReplayBuffer::device() const { return impl_->count.device(); }

const Tensor& ReplayBuffer::table(const std::string& name) const {
  const Impl& s = *impl_;
  for (size_t i = 0; i < s.fields.size(); ++i)
    if (s.fields[i].name == name) return s.tables[i];
  detail::throw_error(detail::concat("ReplayBuffer::table: no field '", name,
                                     "' (the buffer has: ", s.field_list(), ")"));
}

void ReplayBuffer::clear() {
  Impl& s = *impl_;
  EMBER_CHECK(detail::active_capture() == nullptr,
              "ReplayBuffer::clear: called inside a captured step (clear outside the step)");
  s.size = 0;
  s.position = 0;
  s.count.fill_(0.0);
}

}  // namespace ember
