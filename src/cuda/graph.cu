// src/cuda/graph.cu — captured steps on CUDA: a step's kernels recorded once by stream capture
// into a CUDA graph and replayed, the private pool they allocate from, and the payload of
// per-step scalars written before each replay. The public face is train/capture.hpp.
//
// Note [Captured steps]
// A graph replays the kernels of one step with the arguments they had at capture, so what
// changes from step to step cannot be a by-value kernel argument. Two things do:
//   - the generator's offset (and seed): a random kernel captured on this thread reads
//     {seed, offset} from the first 16 bytes of the graph's payload and draws from
//     offset + (its eager offset - the offset at capture), which is exactly the eager draw;
//   - an optimizer's per-step scalars (lr, bias corrections, the step count's effects): the
//     launch stages them (stage_scalars) in a payload slot and its kernel reads them there.
// Before each replay the host runs the host side of the step again (src/train/capture.cpp:
// the optimizer's step() and the scheduler's step() as recorded at capture) in replay mode:
// every launch that would take scalars computes them with the eager code, writes them into
// its slot (checked against the capture: same op, size and buffers) and launches nothing.
// graph_launch then uploads the payload with one small kernel (its bytes are the kernel's
// parameters, so the host may rewrite the mirror at once) and launches the graph. A replay is
// therefore bitwise the eager step: same kernels, same scalars, same random numbers.
//
// Everything the capture allocates comes from the graph's private pool (Note [Private pools]
// in allocator.cpp), so replays reuse the capture's addresses and eager code never gets them.
// Capture runs in cudaStreamCaptureModeRelaxed so the pool may cudaMalloc new segments while
// capturing; any synchronising call inside the step makes CUDA invalidate the capture, which
// graph_capture_end reports as an ember::Error (train/capture.cpp refuses host reads before
// they reach CUDA, naming the op).
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/graph.cuh"
#include "cuda/kernels.cuh"
#include "cuda/launch_count.hpp"
#include "ember/error.hpp"

namespace ember::cuda {
namespace {

constexpr size_t kPayloadBytes = 16384;  // per graph: {seed, offset}, then every slot
constexpr size_t kPhiloxBytes = 16;      // {seed, offset} at the payload's start
constexpr size_t kSlotAlign = 16;        // each slot starts 16-byte aligned
constexpr size_t kUploadChunk = 4096;    // payload bytes per writing launch (its parameters)

struct PayloadSlot {
  size_t offset = 0, bytes = 0;
  uint64_t fingerprint = 0;
  const char* op = "";
};

struct Graph {
  int device = 0;
  int64_t pool = 0;  // the private pool (allocator.cpp)
  cudaGraphExec_t exec = nullptr;
  int64_t kernels = 0;  // kernel nodes of the graph
  char* payload = nullptr;
  size_t payload_block = 0;
  std::vector<char> mirror = std::vector<char>(kPayloadBytes);  // host copy of the payload
  size_t used = kPhiloxBytes;
  std::vector<PayloadSlot> slots;
  uint64_t rng_start = 0;  // the generator's offset when the capture began
};

enum class Mode : uint8_t { none, capturing, replaying };

// What this thread is doing with which graph (captures and replays do not nest).
struct ThreadState {
  Mode mode = Mode::none;
  Graph* graph = nullptr;
  size_t cursor = 0;  // replaying: the next slot to stage
};
thread_local ThreadState t_state;

// The stream captures record into, one per device, made on first use (kept for the process).
cudaStream_t capture_stream(int device) {
  static std::mutex mutex;
  static cudaStream_t streams[64] = {};
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& st = streams[device];
  if (!st) EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  return st;
}

// Ends this thread's capture state: allocations and launches go back to eager ones.
void leave_capture(int device) {
  if (t_state.mode == Mode::capturing && t_state.graph)
    private_pool_capture_end(device, t_state.graph->pool);
  t_state = {};
  private_pool_route(device, 0);
  set_capture_stream(device, nullptr);
}

struct Registry {
  std::mutex mutex;
  std::unordered_map<int64_t, std::unique_ptr<Graph>> graphs;
  int64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: graphs may be destroyed by static objects
  return *r;
}

Graph& graph_of(int device, int64_t id, const char* op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.graphs.find(id);
  EMBER_CHECK(it != r.graphs.end() && it->second->device == device, op, ": graph ", id,
              " does not exist on cuda:", device);
  return *it->second;
}

struct PayloadChunk {
  unsigned char bytes[kUploadChunk];
};

__global__ void write_payload_kernel(unsigned char* dst, PayloadChunk chunk, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    dst[i] = chunk.bytes[i];
}

void upload_payload(const Graph& g, cudaStream_t st) {
  PayloadChunk chunk;
  for (size_t done = 0; done < g.used; done += kUploadChunk) {
    const size_t n = std::min(kUploadChunk, g.used - done);
    std::memcpy(chunk.bytes, g.mirror.data() + done, n);
    write_payload_kernel<<<1, 256, 0, st>>>(reinterpret_cast<unsigned char*>(g.payload) + done,
                                            chunk, static_cast<int>(n));
    EMBER_CUDA_LAUNCH_CHECK();
  }
}

void write_philox(Graph& g, uint64_t seed, uint64_t offset) {
  std::memcpy(g.mirror.data(), &seed, sizeof seed);
  std::memcpy(g.mirror.data() + sizeof seed, &offset, sizeof offset);
}

// Frees everything of `g` (its registry entry goes too); the pool's blocks still held by
// tensors made inside the capture are freed when those tensors go.
void destroy(int64_t id) {
  std::unique_ptr<Graph> g;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.graphs.find(id);
    if (it == r.graphs.end()) return;
    g = std::move(it->second);
    r.graphs.erase(it);
  }
  if (t_state.graph == g.get()) leave_capture(g->device);
  if (g->exec) (void)cudaGraphExecDestroy(g->exec);
  deallocate(g->device, g->payload, g->payload_block, Pool::Persistent);
  private_pool_release(g->device, g->pool);
}

int64_t count_kernels(cudaGraph_t graph) {
  size_t n = 0;
  EMBER_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) EMBER_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  int64_t kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    EMBER_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    kernels += type == cudaGraphNodeTypeKernel ? 1 : 0;
  }
  return kernels;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

namespace graph {

Staged stage_scalars(int device, const void* host, size_t bytes, uint64_t fingerprint,
                     const char* op, const void** device_scalars) {
  ThreadState& t = t_state;
  *device_scalars = nullptr;
  if (t.mode == Mode::none || t.graph->device != device) return Staged::eager;
  Graph& g = *t.graph;
  if (t.mode == Mode::capturing) {
    const size_t offset = round_up(g.used, kSlotAlign);
    EMBER_CHECK(offset + bytes <= kPayloadBytes, op, ": a captured step holds at most ",
                kPayloadBytes, " bytes of per-step scalars (this launch needs ", bytes,
                " more after ", offset, "); capture a smaller step");
    std::memcpy(g.mirror.data() + offset, host, bytes);
    g.used = offset + bytes;
    g.slots.push_back({offset, bytes, fingerprint, op});
    *device_scalars = g.payload + offset;
    return Staged::captured;
  }
  EMBER_CHECK(t.cursor < g.slots.size(), "CapturedStep: ", op,
              " ran during the replay but not at capture (the step took ", g.slots.size(),
              " optimizer launches then): the parameters or the optimizer changed since "
              "capture; capture the step again");
  const PayloadSlot& s = g.slots[t.cursor];
  EMBER_CHECK(std::strcmp(s.op, op) == 0 && s.bytes == bytes, "CapturedStep: launch ", t.cursor,
              " of the step is ", op, " now but was ", s.op,
              " at capture; the optimizer changed since capture: capture the step again");
  EMBER_CHECK(s.fingerprint == fingerprint, "CapturedStep: ", op, " (launch ", t.cursor,
              ") updates other buffers than at capture — a parameter was added or moved, or an "
              "optimizer state tensor was replaced (load_state_dict); capture the step again");
  std::memcpy(g.mirror.data() + s.offset, host, bytes);
  ++t.cursor;
  return Staged::skip;
}

const uint64_t* captured_philox(int device, uint64_t* start_offset) {
  const ThreadState& t = t_state;
  if (t.mode != Mode::capturing || t.graph->device != device) return nullptr;
  *start_offset = t.graph->rng_start;
  return reinterpret_cast<const uint64_t*>(t.graph->payload);
}

}  // namespace graph

int64_t graph_capture_begin(int device, uint64_t rng_seed, uint64_t rng_offset) {
  EMBER_CHECK(t_state.mode == Mode::none,
              "CapturedStep: this thread is already capturing or replaying a step (captures do "
              "not nest)");
  stream(device);  // validates the device and makes it current
  const cudaStream_t st = capture_stream(device);
  auto owned = std::make_unique<Graph>();
  Graph* g = owned.get();
  g->device = device;
  g->rng_start = rng_offset;
  write_philox(*g, rng_seed, rng_offset);
  g->pool = private_pool_create(device);
  int64_t id = 0;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    id = r.next_id++;
    r.graphs.emplace(id, std::move(owned));
  }
  private_pool_route(device, g->pool);
  try {
    g->payload =
        static_cast<char*>(allocate(device, kPayloadBytes, Pool::Persistent, &g->payload_block));
    EMBER_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
  } catch (...) {
    private_pool_route(device, 0);
    destroy(id);
    throw;
  }
  set_capture_stream(device, st);
  t_state = {Mode::capturing, g, 0};
  return id;
}

void graph_capture_end(int device, int64_t id, bool keep) {
  Graph& g = graph_of(device, id, "CapturedStep");
  EMBER_ASSERT(t_state.mode == Mode::capturing && t_state.graph == &g,
               "graph_capture_end without its capture");
  leave_capture(device);
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(capture_stream(device), &graph);
  if (!keep || err != cudaSuccess) {
    (void)cudaGetLastError();
    if (graph) (void)cudaGraphDestroy(graph);
    destroy(id);
    EMBER_CHECK(!keep, "CapturedStep: CUDA could not capture the step (", cudaGetErrorName(err),
                ": ", cudaGetErrorString(err),
                "); something inside it synchronised with the device or used another stream");
    return;
  }
  try {
    g.kernels = count_kernels(graph);
    EMBER_CUDA_CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
  } catch (...) {
    (void)cudaGraphDestroy(graph);
    destroy(id);
    throw;
  }
  (void)cudaGraphDestroy(graph);
}

void graph_replay_begin(int device, int64_t id, uint64_t rng_seed, uint64_t rng_offset) {
  Graph& g = graph_of(device, id, "CapturedStep");
  EMBER_CHECK(t_state.mode == Mode::none,
              "CapturedStep: this thread is already capturing or replaying a step (captures do "
              "not nest)");
  write_philox(g, rng_seed, rng_offset);
  t_state = {Mode::replaying, &g, 0};
}

void graph_launch(int device, int64_t id, bool launch) {
  Graph& g = graph_of(device, id, "CapturedStep");
  if (t_state.graph == &g) {
    const size_t staged = t_state.cursor;
    t_state = {};
    if (!launch) return;
    EMBER_CHECK(staged == g.slots.size(), "CapturedStep: the host side of the step staged ", staged,
                " optimizer launches but the capture had ", g.slots.size(),
                "; the optimizer changed since capture: capture the step again");
  }
  if (!launch) return;
  const cudaStream_t st = stream(device);  // the device's own stream: the capture has ended
  upload_payload(g, st);
  EMBER_CUDA_CHECK(cudaGraphLaunch(g.exec, st));
  // Note [What kernel_launches counts] (launch_count.cpp): the graph's kernels and the uploads.
  const auto uploads = static_cast<int64_t>((g.used + kUploadChunk - 1) / kUploadChunk);
  count_kernel_launches(device, g.kernels + uploads);
}

void graph_destroy(int /*device*/, int64_t id) { destroy(id); }

bool graph_recording(int device) {
  return t_state.mode != Mode::none && t_state.graph && t_state.graph->device == device;
}

int64_t graph_kernel_count(int device, int64_t id) {
  return graph_of(device, id, "CapturedStep").kernels;
}

}  // namespace ember::cuda
