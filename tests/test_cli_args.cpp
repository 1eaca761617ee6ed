// tests/test_cli_args.cpp — the `ember` command (tools/ember.cpp), run as a child process:
// bad arguments give a short message naming the value and what is allowed, never a trace;
// `ember train` checks every argument before it loads data or writes anything; CSV files
// without a header keep their first row; `ember inspect` refuses a file whose data
// checksum does not match unless told --no-verify.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::CliRun;
using ember_test::expect_cli_error;
using ember_test::run_cli;
using ember_test::ScratchDir;
using ember_test::write_text;

// 12 rows of two features and a class label (0..2), no header: the first row is data.
std::string numeric_csv() {
  std::string s;
  for (int i = 0; i < 12; ++i)
    s += std::to_string(i % 3) + "." + std::to_string(i) + "," + std::to_string(i % 5) + "," +
         std::to_string(i % 3) + "\n";
  return s;
}

TEST(Cli, BadArgumentsGiveAShortUsageError) {
  SKIP_WITHOUT_CLI();
  expect_cli_error("", "subcommand");
  expect_cli_error("frobnicate", "subcommand");
  expect_cli_error("train --epochs -3", "--epochs");
  expect_cli_error("train --batch-size 0", "--batch-size");
  expect_cli_error("train --epochs many", "--epochs");
  expect_cli_error("train --no-such-flag", "--no-such-flag");
  expect_cli_error("eval", "model");
  expect_cli_error("predict model.safetensors", "--input");
}

TEST(Cli, RuntimeErrorsAreOneLineNotATrace) {
  SKIP_WITHOUT_CLI();
  expect_cli_error("train --dataset /nonexistent.csv --label 0", "error: ");
  expect_cli_error("eval /nonexistent/model.safetensors", "/nonexistent/model.safetensors");
  expect_cli_error("train --device tpu", "tpu");
  expect_cli_error("inspect /nonexistent.safetensors", "/nonexistent.safetensors");
}

TEST(Cli, InfoRuns) {
  SKIP_WITHOUT_CLI();
  const CliRun r = run_cli("info");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ember 0.1.0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu threads"), std::string::npos) << r.output;
}

// Issue 15 item 24: the message names the value and the valid range, in a few words (CLI11's
// own said "not in range 0 to" a 309-digit number, and "a subcommand is required" for a typo).
TEST(Cli, MessagesNameTheValueAndTheValidRange) {
  SKIP_WITHOUT_CLI();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --epochs abc", "--epochs: 'abc' is not a whole number >= 1"},
      {"train --epochs 0", "--epochs: '0' is not a whole number >= 1"},
      {"train --epochs 2.5", "--epochs: '2.5' is not a whole number >= 1"},
      {"train --epochs 99999999999999999999",
       "--epochs: '99999999999999999999' is too large (expected a whole number >= 1)"},
      {"train --batch-size 0", "--batch-size: '0' is not a whole number >= 1"},
      {"eval m.safetensors --batch-size x", "--batch-size: 'x' is not a whole number >= 1"},
      {"train --checkpoint-every -1", "--checkpoint-every: '-1' is not a whole number >= 0"},
      {"train --seed -1", "--seed: '-1' is not a whole number >= 0"},
      {"train --lr abc", "--lr: 'abc' is not a number > 0"},
      {"train --lr 0", "--lr: '0' is not a number > 0"},
      {"train --lr nan", "--lr: 'nan' is not a number > 0"},
      {"train --momentum -0.5", "--momentum: '-0.5' is not a number >= 0"},
      {"train --weight-decay inf", "--weight-decay: 'inf' is not a number >= 0"},
      {"train --optimizer rmsprop", "--optimizer: 'rmsprop' is not one of adam, adamw, sgd"},
      {"train --scheduler linear",
       "--scheduler: 'linear' is not one of none, step, cosine, exponential, plateau"},
      {"train --progress fancy", "--progress: 'fancy' is not one of auto, bar, lines, none"},
      {"frobnicate",
       "ember: unknown subcommand 'frobnicate' (expected train, eval, predict, inspect, generate "
       "or info)"},
      {"",
       "ember: a subcommand is required (expected train, eval, predict, inspect, generate or "
       "info)"},
      {"--epochs 3",
       "ember: the subcommand comes first (got '--epochs', expected train, eval, predict, inspect, "
       "generate or info)"},
      {"train --header --no-header", "--header excludes --no-header"},
  };
  // The longest run of digits in `text` (CLI11's range messages printed 300-digit numbers).
  auto longest_number = [](const std::string& text) {
    size_t best = 0, run = 0;
    for (char c : text) {
      run = (c >= '0' && c <= '9') ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  };
  for (const auto& [args, says] : cases) {
    const CliRun r = expect_cli_error(args, says);
    EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 2) << args << "\n" << r.output;
    EXPECT_LT(longest_number(r.output), 24u) << args << "\n" << r.output;
  }
  // The valid ones still parse, and help still works.
  EXPECT_EQ(run_cli("--help").status, 0);
  EXPECT_EQ(run_cli("train --help").status, 0);
}

// Issue 15 item 21: every argument is checked before data is loaded or anything is written.
TEST(Cli, TrainChecksEveryArgumentBeforeAnyWork) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  const std::string csv = dir.file("data.csv");
  write_text(csv, numeric_csv());
  write_text(dir.file("bad.json"), "{\"type\": ");
  const std::string model = dir.file("m.safetensors");
  ember::io::save_model(nn::Linear(2, 3), model);
  const std::string train = "train --dataset " + csv + " --label 2 --epochs 1 --progress lines ";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"-o " + dir.file("missing/m.safetensors"),
       {"--output " + dir.file("missing/m.safetensors") + ": the folder '" + dir.file("missing") +
        "' does not exist"}},
      {"-o " + dir.path, {"--output " + dir.path + " is a folder (expected a file path)"}},
      {"-o " + dir.file("out.safetensors") + " --checkpoint-every 1 --checkpoint " +
           dir.file("none/c.ckpt"),
       {"--checkpoint " + dir.file("none/c.ckpt") + ": the folder '" + dir.file("none") +
        "' does not exist"}},
      {"-o " + dir.file("out.safetensors") + " --checkpoint " + dir.file("c.ckpt"),
       {"--checkpoint " + dir.file("c.ckpt") + " is never written without --checkpoint-every N"}},
      {"-o " + dir.file("out.safetensors") + " --resume " + dir.file("nope.ckpt"),
       {"--resume " + dir.file("nope.ckpt") + ": no such file"}},
      {"-o " + dir.file("out.safetensors") + " --resume " + model,
       {"--resume " + model + " is not an ember checkpoint (got kind 'model'"}},
      {"-o " + dir.file("out.safetensors") + " --model " + dir.file("bad.json"),
       {dir.file("bad.json"), "not valid JSON"}},
      {"-o " + dir.file("out.safetensors") + " --model " + dir.file("none.json"),
       {"--model", "none.json"}},
      {"-o " + dir.file("out.safetensors") + " --model cnn",
       {"--model cnn takes Fashion-MNIST images"}},
      {"-o " + dir.file("out.safetensors") + " --device cuda:64",
       {"--device cuda:64: no such device"}},
      {"-o " + dir.file("out.safetensors") + " --test-csv " + dir.file("none.csv"),
       {"--test-csv " + dir.file("none.csv") + ": no such file"}},
  };
  for (const auto& [args, says] : cases) {
    const CliRun r = run_cli(train + args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    for (const std::string& s : says)
      EXPECT_NE(r.output.find(s), std::string::npos) << args << "\n" << r.output;
    // The model summary is printed once the data is loaded; an epoch line after training.
    EXPECT_EQ(r.output.find("Sequential"), std::string::npos) << args << ": work started\n"
                                                              << r.output;
    EXPECT_EQ(r.output.find("epoch 1/"), std::string::npos) << args << ": trained\n" << r.output;
    EXPECT_EQ(dir.list(), (std::vector<std::string>{"bad.json", "data.csv", "m.safetensors"}))
        << args;
  }
  // Choices are checked while parsing, before the missing dataset is even looked at.
  expect_cli_error("train --optimizer rmsprop --dataset " + dir.file("none.csv"),
                   "--optimizer: 'rmsprop'");
  expect_cli_error("train --dataset " + dir.file("none.csv") + " --label 0",
                   "--dataset " + dir.file("none.csv") + ": no such file");
  expect_cli_error("train --dataset " + csv, "a CSV dataset needs --label COLUMN");
  expect_cli_error("predict " + model + " --input " + csv + " --output " + dir.file("no/p.csv"),
                   "the folder");

  // And with good arguments it trains and saves.
  const CliRun ok = run_cli(train + "-o " + dir.file("out.safetensors"));
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("out.safetensors"))) << ok.output;
}

// Issue 15 item 23: a CSV without a header keeps its first row (detected, or --no-header);
// --header forces the first line to be names.
TEST(Cli, CsvWithoutAHeaderKeepsItsFirstRow) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  const std::string csv = dir.file("data.csv");
  write_text(csv, numeric_csv());
  const std::string train = "train --dataset " + csv + " --label 2 --epochs 1 --progress none -o " +
                            dir.file("m.safetensors");
  for (const auto& [flag, samples] : std::vector<std::pair<std::string, std::string>>{
           {"", "(12 samples)"}, {" --no-header", "(12 samples)"}, {" --header", "(11 samples)"}}) {
    const CliRun r = run_cli(train + flag);
    EXPECT_EQ(r.status, 0) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("test: loss"), std::string::npos) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find(samples), std::string::npos) << flag << "\n" << r.output;
  }
  // predict reads the same way: 12 rows in, 12 predictions out.
  write_text(dir.file("x.csv"),
             "1,2\n3,4\n5,6\n7,8\n9,10\n11,12\n13,14\n15,16\n17,18\n19,20\n21,22\n23,24\n");
  const CliRun p = run_cli("predict " + dir.file("m.safetensors") + " --input " +
                           dir.file("x.csv") + " --output " + dir.file("p.csv"));
  EXPECT_EQ(p.status, 0) << p.output;
  EXPECT_NE(p.output.find("wrote 12 predictions"), std::string::npos) << p.output;
  // A label named by name needs a header.
  expect_cli_error("train --dataset " + csv + " --label y --no-header",
                   "has_header is false (give an index)");
}

// Issue 15 item 22: inspect verifies the data checksum as eval does; --no-verify looks anyway.
TEST(Cli, InspectRefusesABadChecksumUnlessNoVerify) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  ember::io::save_model(nn::Linear(4, 3), path);
  const CliRun good = run_cli("inspect " + path);
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("data checksum: verified"), std::string::npos) << good.output;
  EXPECT_NE(run_cli("inspect --json " + path).output.find("\"checksum\": \"verified\""),
            std::string::npos);

  std::vector<uint8_t> bytes = ember_test::read_bytes(path);
  bytes.back() ^= 0x01;  // a data byte
  ember_test::write_bytes(path, bytes);
  const CliRun bad = expect_cli_error("inspect " + path, "checksum mismatch");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find(path), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("ember inspect --no-verify " + path + " shows it anyway"),
            std::string::npos)
      << bad.output;
  EXPECT_EQ(bad.output.find("weight"), std::string::npos) << "no table for a corrupt file\n"
                                                          << bad.output;
  write_text(dir.file("rows.csv"), "a,b,c,d,y\n1,2,3,4,0\n5,6,7,8,2\n");
  expect_cli_error("eval " + path + " --dataset " + dir.file("rows.csv") + " --label y",
                   "checksum mismatch");  // as eval

  const CliRun look = run_cli("inspect --no-verify " + path);
  EXPECT_EQ(look.status, 0) << look.output;
  EXPECT_NE(look.output.find("data checksum: not checked"), std::string::npos) << look.output;
  EXPECT_NE(look.output.find("weight"), std::string::npos) << look.output;
}

}  // namespace
