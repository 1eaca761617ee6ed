// tests/test_io_process.cpp — checkpoints across processes (tests/io_helper.cpp is the child).
//
// Crash safety: a child saves models A and B alternately to one path; the parent SIGKILLs it
// at random moments, 200 times. After every kill the file loads and equals A or B exactly,
// and at most the killed writer's one temporary file is left; the next save removes it
// (Note [Stale temporary files] in src/io/safetensors.cpp).
// Bitwise resume: 2N steps in one process equal N steps, a checkpoint, and N more steps in a
// new process, bit for bit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "ember/io/checkpoint.hpp"
#include "io_test_util.hpp"

#ifndef EMBER_IO_HELPER
#error "EMBER_IO_HELPER (the path of the io_helper executable) must be defined by CMake"
#endif

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::ScratchDir;

// Runs the helper to completion; returns its exit status.
int run_helper(const std::vector<std::string>& args) {
  std::string cmd = EMBER_IO_HELPER;
  for (const std::string& a : args) cmd += " '" + a + "'";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Starts `io_helper MODE path` (save-loop, async-save-loop); returns its pid and the
// microseconds one save takes.
std::pair<pid_t, long> start_save_loop(const std::string& path, const char* mode = "save-loop") {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, 0};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl(EMBER_IO_HELPER, EMBER_IO_HELPER, mode, path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::FILE* in = ::fdopen(fds[0], "r");
  long us = -1;
  if (std::fscanf(in, "ready %ld", &us) != 1) us = -1;
  std::fclose(in);
  return {pid, us};
}

std::vector<std::string> temporaries(const ScratchDir& dir) {
  std::vector<std::string> out;
  for (const std::string& n : dir.list())
    if (n.find(".tmp.") != std::string::npos) out.push_back(n);
  return out;
}

// 200 kills of `io_helper MODE` at random moments; after each the file loads and equals
// model A or model B exactly (read with load_state, which takes model files and checkpoints
// alike), and at most the killed writer's temporary is left.
void kill_during_saves(const char* mode, uint32_t seed) {
  ScratchDir dir;
  ASSERT_EQ(run_helper({"write-models", dir.path}), 0);
  const nn::Module a = io::load_model(dir.file("a.safetensors"));
  const nn::Module b = io::load_model(dir.file("b.safetensors"));
  const auto bytes_a = ember_test::tensor_bytes(a->state_dict()[0].second);
  const auto bytes_b = ember_test::tensor_bytes(b->state_dict()[0].second);
  const std::string path = dir.file("m.safetensors");

  std::mt19937 rng(seed);
  int kills = 0, saw_a = 0, saw_b = 0, left_temp = 0;
  long save_us = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (; kills < 200; ++kills) {
    auto [pid, us] = start_save_loop(path, mode);
    ASSERT_GT(pid, 0);
    ASSERT_GE(us, 0) << "the helper did not start";
    save_us = us;
    // Anywhere in the next few saves: before, inside or after any write, fsync or rename.
    std::uniform_int_distribution<long> when(0, 3 * us + 200);
    ::usleep(static_cast<useconds_t>(when(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the helper exited by itself";

    // The file is A or B, whole.
    EXPECT_EQ(io::inspect(path, true).checksum, "verified") << "kill " << kills;
    nn::Module got = io::load_model(dir.file("a.safetensors"));  // the same architecture
    io::load_state(got, path);
    const auto w = ember_test::tensor_bytes(got->state_dict()[0].second);
    if (w == bytes_a) {
      ++saw_a;
      ember_test::expect_same_state(a, got);
    } else {
      ++saw_b;
      ASSERT_TRUE(w == bytes_b) << "kill " << kills << ": the file is neither A nor B";
      ember_test::expect_same_state(b, got);
    }
    // At most the killed writer's temporary: each start's first save removes the previous one.
    const auto temps = temporaries(dir);
    EXPECT_LE(temps.size(), 1u) << "kill " << kills << ": " << temps.size() << " temporary files";
    left_temp += temps.empty() ? 0 : 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ " << mode << ": " << kills << " kills in " << seconds << " s; one save "
            << save_us << " us; file was A " << saw_a << " times, B " << saw_b
            << " times; a temporary was left " << left_temp << " times ]\n";
  EXPECT_GT(saw_a, 0);
  EXPECT_GT(saw_b, 0);
  // The next save cleans up after the killed writer.
  io::save_model(a, path);
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(IoProcess, SigkillDuringSavesNeverTearsTheFile) { kill_during_saves("save-loop", 20240601); }

// Note [Asynchronous checkpoints]: the same while checkpoints of A and B are written in the
// background (each save returning after its snapshot, the next one waiting for it).
TEST(IoProcess, SigkillDuringAsynchronousCheckpointsNeverTearsTheFile) {
  kill_during_saves("async-save-loop", 20261201);
}

TEST(IoProcess, ResumeInANewProcessIsBitwiseExact) {
  ScratchDir dir;
  const int n = 7;  // 4 batches per epoch: the checkpoint is mid-epoch 1, the run ends in epoch 3
  ASSERT_EQ(run_helper({"train", std::to_string(n), dir.file("ckpt.safetensors"),
                        dir.file("straight.safetensors")}),
            0);
  ASSERT_EQ(run_helper({"resume", std::to_string(n), dir.file("ckpt.safetensors"),
                        dir.file("resumed.safetensors")}),
            0);
  const io::Inspection ckpt = io::inspect(dir.file("ckpt.safetensors"));
  EXPECT_EQ(ckpt.metadata.at("ember.step"), std::to_string(n));
  EXPECT_EQ(nn::json::parse(ckpt.metadata.at("ember.dataloader")), (nn::json{{"epoch", 1},
                                                                             {"position", 3},
                                                                             {"size", 22},
                                                                             {"batch_size", 6},
                                                                             {"shuffle", true},
                                                                             {"drop_last", false},
                                                                             {"seed", "5"}}));
  const nn::Module straight = io::load_model(dir.file("straight.safetensors"));
  const nn::Module resumed = io::load_model(dir.file("resumed.safetensors"));
  ember_test::expect_same_state(straight, resumed, std::nullopt, "resumed vs uninterrupted");
  // And training did move the weights away from the checkpoint.
  nn::Module at_n = io::load_model(dir.file("straight.safetensors"));
  io::load_state(at_n, dir.file("ckpt.safetensors"));
  EXPECT_FALSE(ember_test::tensor_bytes(at_n->state_dict()[0].second) ==
               ember_test::tensor_bytes(straight->state_dict()[0].second));
}

}  // namespace
