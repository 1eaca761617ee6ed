// tests/test_distributed.cpp — ember::distributed (docs/distributed.md): the autograd hook
// DDP builds on, the world of one (no MPI needed), DistributedDataParallel and the sampler in
// one process, and the two-rank runs: tests/distributed_worker.cpp under
// `mpirun --oversubscribe --allow-run-as-root -np 2` (skipped, saying why, without MPI), and
// as two processes meeting through a rendezvous file (the tcp backend, no mpirun; the
// DistributedTcp cases at the end).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "cuda_skip.hpp"
#include "ember/data/distributed_sampler.hpp"
#include "ember/distributed.hpp"
#include "ember/distributed/data_parallel.hpp"
#include "ember/ember.hpp"
#include "ember/hooks.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
namespace dist = ember::distributed;
using ember::test_util::contains;
using test_util::error_of;

// ---- the post-accumulate-grad hook ----

TEST(AutogradHooks, RunOncePerBackwardWithTheAccumulatedGradient) {
  Tensor w = parameter(tensor({1.0f, 2.0f, 3.0f}, {3}));
  std::vector<std::vector<float>> seen;
  autograd::HookHandle h = autograd::register_post_accumulate_grad_hook(
      w, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<float>()); });
  ((w * w).sum() + (w * 3.0).sum()).backward();  // w used twice: one call, the summed gradient
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{5.0f, 7.0f, 9.0f}));
  (w * 1.0).sum().backward();  // accumulates: the hook sees the total
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{6.0f, 8.0f, 10.0f}));
  ember::grad({(w * 2.0).sum()}, {w});  // grad() accumulates nothing, runs no hook
  EXPECT_EQ(seen.size(), 2u);
  h.remove();
  EXPECT_FALSE(h.active());
  (w * 1.0).sum().backward();
  EXPECT_EQ(seen.size(), 2u);
}

TEST(AutogradHooks, MayChangeTheGradientAndRefuseNonLeaves) {
  Tensor w = parameter(tensor({1.0f, 2.0f}, {2}));
  auto h = autograd::register_post_accumulate_grad_hook(w, [](const Tensor& leaf) {
    Tensor g = leaf.grad();
    g.mul_(10.0);
  });
  (w * 1.0).sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{10.0f, 10.0f}));
  Tensor y = w * 2.0;
  EXPECT_TRUE(contains(
      error_of([&] { autograd::register_post_accumulate_grad_hook(y, [](const Tensor&) {}); }),
      "expected a leaf that requires grad"));
  EXPECT_TRUE(contains(error_of([&] {
                         autograd::register_post_accumulate_grad_hook(Tensor(),
                                                                      [](const Tensor&) {});
                       }),
                       "register_post_accumulate_grad_hook"));
}

// ---- the world of one ----

class DistributedLocal : public ::testing::Test {
 protected:
  void SetUp() override { dist::init({.abort_on_uncaught = false}); }
  void TearDown() override { dist::finalize(); }
};

TEST(Distributed, RefusesUseBeforeInit) {
  ASSERT_FALSE(dist::is_initialized());
  EXPECT_TRUE(contains(error_of([] { dist::rank(); }), "init() has not been called"));
  Tensor t = zeros({2});
  EXPECT_TRUE(contains(error_of([&] { dist::all_reduce(t); }),
                       "distributed::all_reduce: distributed::init() has not been called"));
  nn::Linear fc(2, 2);
  EXPECT_TRUE(contains(error_of([&] { dist::DistributedDataParallel ddp(fc); }),
                       "DistributedDataParallel: distributed::init() has not been called"));
  EXPECT_TRUE(
      contains(error_of([] { dist::init({.world_size = 2, .backend = dist::BackendKind::local}); }),
               "the local backend is a world of one process"));
  EXPECT_TRUE(contains(error_of([] { dist::init({.rank = 3, .world_size = 1}); }),
                       "rank 3 is out of range"));
  EXPECT_FALSE(dist::is_initialized());
}

TEST(Distributed, NamesTheMissingMpiBackend) {
  const std::string e = error_of([] {
    dist::init({.backend = dist::BackendKind::mpi, .mpi_library = "/nonexistent/libember_mpi.so"});
  });
  EXPECT_TRUE(contains(e,
                       "distributed::init: cannot load the MPI backend (tried "
                       "/nonexistent/libember_mpi.so: "))
      << e;
  EXPECT_TRUE(contains(e, "EMBER_MPI_LIBRARY")) << e;
  EXPECT_FALSE(dist::is_initialized());
}

TEST_F(DistributedLocal, IsAWorldOfOneWhereCollectivesAreTheIdentity) {
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::world_size(), 1);
  EXPECT_EQ(dist::local_rank(), 0);
  EXPECT_EQ(dist::backend_name(), "local");
  Tensor t = tensor({1.0f, -2.0f}, {2});
  for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::avg, dist::ReduceOp::max})
    dist::all_reduce(t, op);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.0f, -2.0f}));
  dist::broadcast(t, 0);
  EXPECT_EQ(dist::all_gather(t).shape(), Shape({1, 2}));
  EXPECT_EQ(dist::reduce_scatter(t).to_vector<float>(), t.to_vector<float>());
  dist::Work w = dist::all_reduce_async(t);
  EXPECT_TRUE(w.test());
  w.wait();
  dist::barrier();
  EXPECT_TRUE(contains(error_of([] { dist::init(); }), "already initialised"));
}

TEST_F(DistributedLocal, NamesBadArguments) {
  Tensor undefined;
  EXPECT_TRUE(contains(error_of([&] { dist::all_reduce(undefined); }),
                       "distributed::all_reduce: the tensor is undefined"));
  Tensor ints = zeros({2}, {.dtype = DType::i64});
  EXPECT_TRUE(contains(error_of([&] { dist::all_reduce(ints, dist::ReduceOp::avg); }),
                       "ReduceOp::avg needs a floating tensor (got i64"));
  Tensor t = zeros({2});
  EXPECT_TRUE(contains(error_of([&] { dist::broadcast(t, 1); }), "root 1 is not a rank"));
  EXPECT_TRUE(contains(error_of([&] { dist::reduce_scatter(zeros({})); }),
                       "the first dim must split into world_size blocks"));
}

// ---- DistributedDataParallel in one process ----

nn::Sequential tanh_net() {
  nn::Sequential net;
  net->push_back(nn::Linear(4, 8));
  net->push_back(nn::Tanh());
  net->push_back(nn::Linear(8, 2));
  return net;
}

// 3 Adam steps of the bare model `a` and of `ddp` (around a copy of `a`) on the same batch.
void train_side_by_side(nn::Sequential& a, dist::DistributedDataParallel& ddp, const Tensor& x,
                        const Tensor& y) {
  optim::Adam oa(a->parameters(), {.lr = 0.01}), ob(ddp->module()->parameters(), {.lr = 0.01});
  for (int step = 0; step < 3; ++step) {
    oa.zero_grad();
    ob.zero_grad();
    mse_loss(a(x), y).backward();
    mse_loss(ddp(x), y).backward();
    oa.step();
    ob.step();
  }
}

TEST_F(DistributedLocal, DataParallelTrainsLikeTheBareModule) {
  manual_seed(1);
  nn::Sequential a = tanh_net();
  nn::Sequential b = tanh_net();
  b->load_state_dict(a->state_dict());
  dist::DistributedDataParallel ddp(b, {.bucket_cap_mb = 1e-5});  // 10 bytes: 4 buckets
  const auto buckets = ddp->bucket_parameter_names();
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0], (std::vector<std::string>{"2.bias"}));  // reverse registration order
  EXPECT_EQ(ddp->state_dict()[0].first, "module.0.weight");     // PyTorch's DDP names
  Tensor x = randn({6, 4}), y = randn({6, 2});
  train_side_by_side(a, ddp, x, y);
  EXPECT_EQ(ddp->reductions_started(), 0);  // a world of one communicates nothing
  for (size_t i = 0; i < a->parameters().size(); ++i)
    EXPECT_EQ(a->parameters()[i].to_vector<float>(), b->parameters()[i].to_vector<float>());
  auto guard = ddp->no_sync();
  EXPECT_NO_THROW(mse_loss(ddp(x), y).backward());
  nn::Linear fc(2, 2);
  EXPECT_TRUE(
      contains(error_of([&] { dist::DistributedDataParallel bad(fc, {.bucket_cap_mb = 0}); }),
               "bucket_cap_mb must be positive"));
}

// reduce_in_world_of_one keeps the hooks and the bucket copies (the all-reduce is the
// identity on the CPU): the same training, with one reduction per bucket per step.
TEST_F(DistributedLocal, DataParallelCanReduceInAWorldOfOne) {
  manual_seed(2);
  nn::Sequential a = tanh_net();
  nn::Sequential b = tanh_net();
  b->load_state_dict(a->state_dict());
  dist::DistributedDataParallel ddp(b, {.bucket_cap_mb = 1e-5, .reduce_in_world_of_one = true});
  Tensor x = randn({6, 4}), y = randn({6, 2});
  train_side_by_side(a, ddp, x, y);
  EXPECT_EQ(ddp->reductions_started(), 3 * 4);
  for (size_t i = 0; i < a->parameters().size(); ++i)
    EXPECT_EQ(a->parameters()[i].to_vector<float>(), b->parameters()[i].to_vector<float>());
}

// ---- the sampler ----

TEST(DistributedSampler, ShardsAreDisjointCoverTheDataAndPadLikePyTorch) {
  for (int64_t n : {0, 1, 5, 10, 11}) {
    for (int replicas : {1, 2, 3, 4}) {
      for (bool drop_last : {false, true}) {
        std::vector<int64_t> all;
        int64_t per_rank = -1;
        for (int r = 0; r < replicas; ++r) {
          data::DistributedSampler s(
              n, {.num_replicas = replicas, .rank = r, .seed = 9, .drop_last = drop_last});
          std::vector<int64_t> mine = s.indices();
          if (per_rank < 0) per_rank = int64_t(mine.size());
          EXPECT_EQ(int64_t(mine.size()), per_rank) << "equal shards";
          EXPECT_EQ(int64_t(mine.size()), s.num_samples());
          all.insert(all.end(), mine.begin(), mine.end());
        }
        const std::set<int64_t> distinct(all.begin(), all.end());
        if (drop_last) {
          EXPECT_EQ(per_rank, n / replicas);
          EXPECT_EQ(distinct.size(), all.size()) << "disjoint, n " << n << " R " << replicas;
        } else {
          EXPECT_EQ(per_rank, (n + replicas - 1) / replicas);
          EXPECT_EQ(int64_t(distinct.size()), n) << "cover, n " << n << " R " << replicas;
        }
      }
    }
  }
  // PyTorch's example: 5 examples on 2 ranks, no shuffle: [0, 2, 4] and [1, 3, 0].
  EXPECT_EQ(data::DistributedSampler(5, {.num_replicas = 2, .rank = 1, .shuffle = false}).indices(),
            (std::vector<int64_t>{1, 3, 0}));
  data::DistributedSampler s(20, {.num_replicas = 2, .rank = 0, .seed = 4});
  const std::vector<int64_t> e0 = s.indices();
  s.set_epoch(1);
  EXPECT_NE(s.indices(), e0);
  EXPECT_EQ(s.indices(0), e0);
  EXPECT_TRUE(
      contains(error_of([] { data::DistributedSampler(4, {.num_replicas = 2, .rank = 2}); }),
               "rank 2 is out of range (expected 0 .. 1)"));
}

TEST(DistributedSampler, ShardMapsBatchesToTheBase) {
  Tensor x = arange(10.0).reshape({10, 1});
  auto ds = std::make_shared<data::TensorDataset>(x, arange(10.0));
  data::DistributedShard shard(ds, {.num_replicas = 3, .rank = 2, .shuffle = false});
  EXPECT_EQ(shard.size(), 4);
  EXPECT_EQ(shard.indices(), (std::vector<int64_t>{2, 5, 8, 1}));
  std::vector<int64_t> idx{0, 3};
  EXPECT_EQ(shard.get_batch(idx).target.to_vector<float>(), (std::vector<float>{2.0f, 1.0f}));
  EXPECT_TRUE(contains(error_of([&] { shard.get(4); }), "index 4 is out of range"));
}

// ---- two ranks under mpirun ----

struct JobResult {
  int status = -1;  // exit status of mpirun (or of `timeout`)
  std::string output;
  double seconds = 0;
};

// Runs a shell command (stderr joined to stdout), timing it.
[[maybe_unused]] JobResult run_shell(const std::string& cmd) {
  const auto start = std::chrono::steady_clock::now();
  JobResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

#if defined(EMBER_DISTRIBUTED_WORKER) && defined(EMBER_MPIRUN)
constexpr bool kHaveMpi = true;
// `program` on `np` ranks (two by default), with `env` ("NAME=value ...") in front.
// --bind-to none: ctest runs two tests at a time on two cores; --mca btl self,vader: one host.
JobResult run_mpi(const std::string& program, int np = 2, const std::string& env = "") {
  return run_shell(env + " timeout 60 " + EMBER_MPIRUN +
                   " --oversubscribe --allow-run-as-root --bind-to none"
                   " --mca btl self,vader -np " +
                   std::to_string(np) + " " + program + " 2>&1");
}
JobResult run_job(const std::string& mode, int np = 2, const std::string& env = "") {
  return run_mpi(std::string(EMBER_DISTRIBUTED_WORKER) + " " + mode, np, env);
}
#else
constexpr bool kHaveMpi = false;
[[maybe_unused]] JobResult run_mpi(const std::string&, int = 2, const std::string& = "") {
  return {};
}
JobResult run_job(const std::string&, int = 2, const std::string& = "") { return {}; }
#endif

#define SKIP_WITHOUT_MPIRUN()                                                                  \
  do {                                                                                         \
    if (!kHaveMpi)                                                                             \
      GTEST_SKIP() << "built without MPI (install openmpi-bin and libopenmpi-dev: make deps, " \
                      "then reconfigure)";                                                     \
    if (!std::filesystem::exists(EMBER_MPIRUN_PATH))                                           \
      GTEST_SKIP() << "mpirun not found at " << EMBER_MPIRUN_PATH;                             \
  } while (0)
#if defined(EMBER_MPIRUN)
#define EMBER_MPIRUN_PATH EMBER_MPIRUN
#else
#define EMBER_MPIRUN_PATH ""
#endif

// The job must succeed and rank 0 print "<mode> ok".
void expect_job_ok(const std::string& mode, const std::string& args = "") {
  const JobResult r = run_job(args.empty() ? mode : mode + " " + args);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, mode + " ok")) << r.output;
}

// The job must fail, end within a bounded time (no hang) and print `message`.
void expect_job_ends(const std::string& mode, const std::string& message) {
  const JobResult r = run_job(mode);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "timed out: the job hung\n" << r.output;
  EXPECT_LT(r.seconds, 30.0) << r.output;
  EXPECT_TRUE(contains(r.output, message)) << r.output;
}

TEST(DistributedMpi, CollectivesOnTwoRanks) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ok("collectives");
}

TEST(DistributedMpi, DataParallelEqualsOneProcessOnTheCombinedBatch) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ok("ddp");
}

TEST(DistributedMpi, SamplerShardsAreDisjointAndCoverTheData) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ok("sampler");
}

TEST(DistributedMpi, AResumedRunEqualsAnUninterruptedOne) {
  SKIP_WITHOUT_MPIRUN();
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("ember_dist_resume_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  expect_job_ok("resume", dir.string());
  std::filesystem::remove_all(dir);
}

[[maybe_unused]] size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST(DistributedMpi, TheTrainCommandRunsDataParallelAndResumes) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_CLI();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("ember_dist_cli_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::FILE* f = std::fopen((dir / "data.csv").c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 40; ++i) std::fprintf(f, "%d.%d,%d,%d\n", i % 3, i, i % 5, i % 2);
    std::fclose(f);
  }
  const std::string base = std::string(EMBER_CLI_PATH) + " train --distributed --dataset " +
                           (dir / "data.csv").string() +
                           " --label 2 --batch-size 4 --progress lines -o " +
                           (dir / "m.safetensors").string() + " --checkpoint-every 2";
  const JobResult first = run_mpi(base + " --epochs 2");
  EXPECT_EQ(first.status, 0) << first.output;
  EXPECT_EQ(count_of(first.output, "Sequential("), 1u) << "rank 0 alone prints\n" << first.output;
  EXPECT_EQ(count_of(first.output, "saved "), 1u) << first.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "m.safetensors.ckpt"));
  const JobResult resumed =
      run_mpi(base + " --epochs 3 --resume " + (dir / "m.safetensors.ckpt").string());
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(count_of(resumed.output, "resumed from"), 1u) << resumed.output;
  EXPECT_EQ(count_of(resumed.output, "epoch 3/3"), 1u) << resumed.output;
  // An error after joining the job ends every rank, each naming itself.
  const JobResult bad = run_mpi(std::string(EMBER_CLI_PATH) + " train --distributed --dataset " +
                                (dir / "data.csv").string() + " --label 7");
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_TRUE(contains(bad.output, "of 2: error: read_csv")) << bad.output;
  std::filesystem::remove_all(dir);
}

// ---- the GPU (tests/distributed_worker.cpp's nccl and cuda_ddp modes) ----

// libnccl.so.2: $EMBER_NCCL_LIBRARY, else the one of Python's torch wheel (nvidia.nccl), else "".
std::string find_nccl() {
  if (const char* env = std::getenv("EMBER_NCCL_LIBRARY"); env && *env)
    return std::filesystem::exists(env) ? env : "";
  FILE* pipe = popen(
      "python3 -c \"import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])\" 2>/dev/null", "r");
  if (!pipe) return "";
  char buf[4096] = {};
  const size_t n = fread(buf, 1, sizeof buf - 1, pipe);
  pclose(pipe);
  std::string dir(buf, n);
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  const std::string lib = dir + "/lib/libnccl.so.2";
  return !dir.empty() && std::filesystem::exists(lib) ? lib : "";
}

TEST(DistributedCuda, NcclCollectivesAndDataParallelInAWorldOfOne) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_CUDA();
  const std::string nccl = find_nccl();
  if (nccl.empty())
    GTEST_SKIP() << "NCCL not found: set EMBER_NCCL_LIBRARY to libnccl.so.2 (or install torch's "
                    "nvidia-nccl wheel for python3)";
  const JobResult r = run_job("nccl", 1, "EMBER_NCCL_LIBRARY=" + nccl);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "nccl ok")) << r.output;
  std::printf("%s", r.output.c_str());
}

TEST(DistributedCuda, TwoProcessesOnOneGpuEqualOneProcessOnTheCombinedBatch) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_CUDA();
  // NCCL, when found, refuses two ranks on one device: the collectives fall back to MPI.
  const std::string nccl = find_nccl();
  const JobResult r = run_job("cuda_ddp", 2, nccl.empty() ? "" : "EMBER_NCCL_LIBRARY=" + nccl);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "cuda_ddp ok")) << r.output;
  std::printf("%s", r.output.c_str());
}

TEST(DistributedMpi, ARankThatThrowsEndsTheJobNamingTheRank) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ends("throw", "ember: rank 1 of 2: uncaught exception: deliberate failure");
}

TEST(DistributedMpi, ARankThatHangsEndsTheJobAfterTheTimeout) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ends("hang", "ember: rank 0 of 2: distributed::all_reduce has waited");
}

TEST(DistributedMpi, ARankThatDiesEndsTheJob) {
  SKIP_WITHOUT_MPIRUN();
  expect_job_ends("kill", "rank 1");
}

// ---- two processes without mpirun: the tcp backend ----

#if defined(EMBER_DISTRIBUTED_WORKER)
constexpr bool kHaveWorker = true;
constexpr const char* kWorker = EMBER_DISTRIBUTED_WORKER;
#else
constexpr bool kHaveWorker = false;
constexpr const char* kWorker = "";
#endif

#define SKIP_WITHOUT_WORKER()                                                            \
  do {                                                                                   \
    if (!kHaveWorker)                                                                    \
      GTEST_SKIP() << "ember_distributed_worker not built (tests/CMakeLists.txt builds " \
                      "it when CMake finds MPI)";                                        \
  } while (0)

// A rendezvous path of this test's own (ctest runs shards side by side).
std::string rendezvous_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          ("ember_tcp_" + std::to_string(getpid()) + "_" + name))
      .string();
}

struct TcpJob {
  JobResult job;
  int status[2] = {-1, -1};  // each rank's exit status (124: `timeout` ended it)
};

// The worker's `mode` on two ranks started as docs/distributed.md shows (no mpirun): rank 1,
// then (after `delay` seconds) rank 0, each bounded by a 30 s `timeout`; `env0` / `env1` go in
// front of one rank.
TcpJob run_tcp(const std::string& mode, const std::string& file, double delay = 0,
               const std::string& env0 = "", const std::string& env1 = "") {
  const std::string run = std::string(" timeout -k 2 30 ") + kWorker + " " + mode + " & ";
  const std::string cmd = "export EMBER_WORLD_SIZE=2 EMBER_RENDEZVOUS_FILE='" + file + "'; " +
                          "EMBER_RANK=1 " + env1 + run + "p1=$!; sleep " + std::to_string(delay) +
                          "; EMBER_RANK=0 " + env0 + run +
                          "p0=$!; wait $p0; s0=$?; wait $p1; s1=$?; "
                          "echo \"rank exit status: $s0 $s1\"";
  TcpJob r;
  r.job = run_shell("(" + cmd + ") 2>&1");
  const size_t at = r.job.output.rfind("rank exit status: ");
  if (at != std::string::npos)
    std::sscanf(r.job.output.c_str() + at, "rank exit status: %d %d", &r.status[0], &r.status[1]);
  std::filesystem::remove(file);
  return r;
}

void expect_tcp_ok(const std::string& mode, const std::string& name) {
  const TcpJob r = run_tcp(mode, rendezvous_path(name));
  EXPECT_EQ(r.status[0], 0) << r.job.output;
  EXPECT_EQ(r.status[1], 0) << r.job.output;
  EXPECT_TRUE(contains(r.job.output, mode.substr(0, mode.find(' ')) + " ok")) << r.job.output;
  EXPECT_LT(r.job.seconds, 20.0) << r.job.output;
}

TEST(DistributedTcp, CollectivesOnTwoProcessesWithoutMpirun) {
  SKIP_WITHOUT_WORKER();
  expect_tcp_ok("collectives", "collectives");
}

// Every collective, op and dtype on random data: the same bits as the MPI backend. Open MPI
// 4.1's AVX reduction saturates u8 sums (255 + 1 = 255, against MPI's and C's wrap-around) in
// vectorised stretches of a buffer, so the MPI side runs with that component off.
TEST(DistributedTcp, CollectivesGiveTheMpiBackendsBits) {
  SKIP_WITHOUT_WORKER();
  const TcpJob tcp = run_tcp("digest", rendezvous_path("digest"));
  ASSERT_EQ(tcp.status[0], 0) << tcp.job.output;
  const size_t at = tcp.job.output.find("digest ");
  ASSERT_NE(at, std::string::npos) << tcp.job.output;
  const std::string digest = tcp.job.output.substr(at, 7 + 16);
  SKIP_WITHOUT_MPIRUN();
  const JobResult mpi = run_job("digest", 2, "OMPI_MCA_op=^avx");
  EXPECT_EQ(mpi.status, 0) << mpi.output;
  EXPECT_TRUE(contains(mpi.output, digest)) << "tcp: " << digest << "\nmpi:\n" << mpi.output;
}

TEST(DistributedTcp, DataParallelEqualsOneProcessOnTheCombinedBatch) {
  SKIP_WITHOUT_WORKER();
  expect_tcp_ok("ddp", "ddp");
}

TEST(DistributedTcp, SamplerShardsAndAResumedRun) {
  SKIP_WITHOUT_WORKER();
  expect_tcp_ok("sampler", "sampler");
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("ember_tcp_resume_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  expect_tcp_ok("resume " + dir.string(), "resume");
  std::filesystem::remove_all(dir);
}

// The job must end, both ranks non-zero, within a bounded time, printing `messages`.
void expect_tcp_ends(const std::string& mode, const std::vector<std::string>& messages,
                     const int (&status)[2]) {
  const TcpJob r = run_tcp(mode, rendezvous_path(mode));
  EXPECT_EQ(r.status[0], status[0]) << r.job.output;
  EXPECT_EQ(r.status[1], status[1]) << r.job.output;
  EXPECT_LT(r.job.seconds, 15.0) << r.job.output;
  for (const std::string& m : messages) EXPECT_TRUE(contains(r.job.output, m)) << r.job.output;
}

TEST(DistributedTcp, AKilledRankEndsTheOtherNamingIt) {
  SKIP_WITHOUT_WORKER();
  // Rank 0 may notice in its all-reduce or, when rank 1 dies first, between collectives.
  expect_tcp_ends("kill", {"ember: rank 0 of 2: lost the connection to rank 1 "}, {4, 137});
}

TEST(DistributedTcp, ARankThatThrowsEndsTheOther) {
  SKIP_WITHOUT_WORKER();
  expect_tcp_ends("throw",
                  {"ember: rank 1 of 2: uncaught exception: deliberate failure",
                   "ember: rank 0 of 2: rank 1 ended the job (exit status 1)"},
                  {1, 1});
}

// Rank 0's watchdog ends it after 2 s; rank 1, asleep outside any collective, sees the
// connection close and ends too (nobody else would: there is no mpirun).
TEST(DistributedTcp, ARankThatHangsEndsTheJobAfterTheTimeout) {
  SKIP_WITHOUT_WORKER();
  expect_tcp_ends("hang",
                  {"ember: rank 0 of 2: distributed::all_reduce has waited",
                   "ember: rank 1 of 2: lost the connection to rank 0 between collectives"},
                  {3, 4});
}

// An earlier job's file, complete and pointing at ports nobody listens on: rank 1 starts
// first and reads it, is refused, and waits until rank 0 starts the file over.
TEST(DistributedTcp, AStaleRendezvousFileDoesNotMixJobs) {
  SKIP_WITHOUT_WORKER();
  const std::string file = rendezvous_path("stale");
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f,
                 "ember-rendezvous generation 00000000000000aa world_size 2\n"
                 "0 127.0.0.1 1 00000000000000aa\n1 127.0.0.1 2 00000000000000aa\n");
    std::fclose(f);
  }
  const TcpJob r = run_tcp("collectives", file, 0.5);
  EXPECT_EQ(r.status[0], 0) << r.job.output;
  EXPECT_EQ(r.status[1], 0) << r.job.output;
  EXPECT_TRUE(contains(r.job.output, "collectives ok")) << r.job.output;
}

TEST(DistributedTcp, RanksThatDisagreeOnTheWorldSizeFailFast) {
  SKIP_WITHOUT_WORKER();
  const TcpJob r = run_tcp("join", rendezvous_path("sizes"), 0, "", "EMBER_WORLD_SIZE=3");
  EXPECT_EQ(r.status[0], 5) << r.job.output;
  EXPECT_EQ(r.status[1], 5) << r.job.output;
  EXPECT_LT(r.job.seconds, 4.0) << r.job.output;
  EXPECT_TRUE(contains(r.job.output, "rank 1 joined the rendezvous")) << r.job.output;
  EXPECT_TRUE(contains(r.job.output, "with world_size 3 (expected 2")) << r.job.output;
  EXPECT_TRUE(contains(r.job.output, "rank 0 of the rendezvous")) << r.job.output;
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DistributedTcp, NamesWhatTheLaunchLacks) {
  const std::string file = rendezvous_path("lacks");
  ScopedEnv size("EMBER_WORLD_SIZE", "2"), rank("EMBER_RANK", "0"),
      path("EMBER_RENDEZVOUS_FILE", nullptr);
  EXPECT_EQ(error_of([] { dist::init(); }),
            "distributed::init: world_size 2 needs a rendezvous file: set "
            "InitOptions::rendezvous_file or EMBER_RENDEZVOUS_FILE (a path every rank can reach)");
  EXPECT_TRUE(contains(error_of([] { dist::init({.world_size = 3}); }),
                       "world_size 3 was asked for, but EMBER_WORLD_SIZE is 2"));
  EXPECT_TRUE(contains(error_of([] { dist::init({.rendezvous_file = "/nonexistent_dir/f"}); }),
                       "the folder of the rendezvous file /nonexistent_dir/f does not exist"));
  {
    ScopedEnv r2("EMBER_RANK", "2");
    EXPECT_TRUE(contains(error_of([] { dist::init(); }),
                         "rank 2 is out of range (expected 0 .. 1 for world_size 2)"));
  }
  {
    ScopedEnv no_rank("EMBER_RANK", nullptr);
    EXPECT_TRUE(contains(error_of([&] { dist::init({.rendezvous_file = file}); }),
                         "world_size 2 needs this process's rank: set InitOptions::rank or "
                         "EMBER_RANK (0 .. 1)"));
  }
  for (const char* bad : {"0", "two", "-1"}) {
    ScopedEnv s("EMBER_WORLD_SIZE", bad);
    const std::string e = error_of([] { dist::init(); });
    EXPECT_TRUE(contains(e, "EMBER_WORLD_SIZE")) << e;
  }
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedTcp, TheRendezvousTimesOutNamingWhatItWaitedFor) {
  const std::string file = rendezvous_path("timeout");
  std::filesystem::remove(file);
  const auto start = std::chrono::steady_clock::now();
  const std::string e1 = error_of([&] {
    dist::init({.rank = 1, .world_size = 2, .rendezvous_file = file, .timeout_seconds = 0.3});
  });
  EXPECT_TRUE(contains(e1, "distributed::init: rank 1 of 2 waited 0.3 s in the rendezvous " + file +
                               ": the file does not exist yet (rank 0 creates it)"))
      << e1;
  const std::string e0 = error_of([&] {
    dist::init({.rank = 0, .world_size = 2, .rendezvous_file = file, .timeout_seconds = 0.3});
  });
  EXPECT_TRUE(contains(e0, "rank(s) 1 never connected to this rank")) << e0;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.0);
  EXPECT_FALSE(dist::is_initialized());
  std::filesystem::remove(file);
}

// A world of one over tcp: the file is written, collectives are the identity, and the world
// can be left and joined again.
TEST(DistributedTcp, AWorldOfOneJoinsLeavesAndJoinsAgain) {
  const std::string file = rendezvous_path("one");
  for (int round = 0; round < 2; ++round) {
    dist::init({.world_size = 1,
                .backend = dist::BackendKind::tcp,
                .rendezvous_file = file,
                .abort_on_uncaught = false});
    EXPECT_EQ(dist::backend_name(), "tcp (rendezvous " + file + ")");
    Tensor t = tensor({1.0f, 2.0f}, {2});
    dist::all_reduce(t);
    dist::barrier();
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
    dist::finalize();
  }
  EXPECT_TRUE(std::filesystem::exists(file));
  std::filesystem::remove(file);
}

}  // namespace
