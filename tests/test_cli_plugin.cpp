// tests/test_cli_plugin.cpp — the stock `ember` command with custom modules and CSV
// preprocessing: --plugin loads examples/plugin (module type GatedLinear) so train, eval,
// predict and inspect work on a model that uses it; plugin errors are one clear line; CSV
// text labels are stored with the model and predict prints class names; --standardize
// stores the training mean and std and predict applies them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::CliRun;
using ember_test::run_cli;
using ember_test::run_command;
using ember_test::ScratchDir;
using ember_test::write_text;

#ifndef EMBER_EXAMPLE_PLUGIN
#define EMBER_EXAMPLE_PLUGIN ""
#endif
#ifndef EMBER_LIBRARY_FILE
#define EMBER_LIBRARY_FILE ""
#endif
#ifndef EMBER_THROWING_PLUGIN
#define EMBER_THROWING_PLUGIN ""
#endif

#define SKIP_WITHOUT_PLUGIN()                                                           \
  if (std::string(EMBER_CLI_PATH).empty() || std::string(EMBER_EXAMPLE_PLUGIN).empty()) \
  GTEST_SKIP() << "built without tools (EMBER_BUILD_TOOLS=OFF): no ember command or plugin"

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Three well separated classes named by text, with features on very different scales (the
// second column is ~1000x the first), so training needs --standardize to go well.
std::string animals_csv(bool header = true) {
  std::ostringstream s;
  if (header) s << "size,weight,animal\n";
  const char* names[] = {"mouse", "cat", "dog"};
  for (int i = 0; i < 60; ++i) {
    const int c = i % 3;
    s << (c + 1) * 1.0 + 0.01 * (i % 7) << "," << (c + 1) * 1000.0 + 3.0 * (i % 5) << ","
      << names[c] << "\n";
  }
  return s.str();
}

const char* kGatedSpec = R"({"type": "Sequential", "children": [
  {"type": "GatedLinear", "options": {"in_features": 2, "out_features": 16}},
  {"type": "Linear", "options": {"in_features": 16, "out_features": 3}}]})";

}  // namespace

TEST(CliPlugin, TrainEvalPredictInspectThroughAPlugin) {
  SKIP_WITHOUT_PLUGIN();
  ScratchDir dir;
  const std::string csv = dir.file("animals.csv"), spec = dir.file("gated.json"),
                    model = dir.file("gated.safetensors"), plugin = EMBER_EXAMPLE_PLUGIN;
  write_text(csv, animals_csv());
  write_text(spec, kGatedSpec);
  const CliRun t = run_cli("train --plugin " + plugin + " --model " + spec + " --dataset " + csv +
                           " --label animal --standardize --epochs 30 --batch-size 8 --lr 0.02 "
                           "--progress none -o " +
                           model);
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("GatedLinear(in_features=2, out_features=16)"), std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find("accuracy 100%"), std::string::npos) << t.output;
  // The mapping and the scaling are in the model's metadata.
  const io::Inspection info = io::inspect(model);
  EXPECT_EQ(info.metadata.at("train.label_classes"), R"(["cat","dog","mouse"])");
  ASSERT_TRUE(info.metadata.count("train.input_mean"));
  ASSERT_TRUE(info.metadata.count("train.input_scale"));

  // eval maps the text labels with the stored classes and standardizes with the stored stats.
  const CliRun e =
      run_cli("eval " + model + " --plugin " + plugin + " --dataset " + csv + " --label animal");
  EXPECT_EQ(e.status, 0) << e.output;
  EXPECT_NE(e.output.find("accuracy 100% (60 samples)"), std::string::npos) << e.output;

  // predict: raw (unscaled) rows in, class names out.
  write_text(dir.file("rows.csv"), "size,weight\n1.02,1003\n3.01,3006\n2,2000\n");
  const CliRun p = run_cli("predict " + model + " --plugin " + plugin + " --input " +
                           dir.file("rows.csv") + " --output " + dir.file("p.csv"));
  ASSERT_EQ(p.status, 0) << p.output;
  const std::vector<std::string> lines = read_lines(dir.file("p.csv"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "prediction,p_cat,p_dog,p_mouse");
  EXPECT_EQ(lines[1].substr(0, lines[1].find(',')), "mouse");
  EXPECT_EQ(lines[2].substr(0, lines[2].find(',')), "dog");
  EXPECT_EQ(lines[3].substr(0, lines[3].find(',')), "cat");

  const CliRun i = run_cli("inspect --json " + model + " --plugin " + plugin);
  EXPECT_EQ(i.status, 0) << i.output;
  EXPECT_NE(i.output.find("\"GatedLinear\""), std::string::npos) << i.output;
  EXPECT_NE(i.output.find("\"train.label_classes\""), std::string::npos) << i.output;

  // Without the plugin the type is unknown, and the error says what to pass.
  const CliRun no = run_cli("predict " + model + " --input " + dir.file("rows.csv") + " --output " +
                            dir.file("q.csv"));
  EXPECT_EQ(no.status, 1) << no.output;
  EXPECT_NE(no.output.find("unknown module type 'GatedLinear'"), std::string::npos) << no.output;
  EXPECT_NE(no.output.find("pass the library that registers it with --plugin"), std::string::npos)
      << no.output;
}

TEST(CliPlugin, PluginErrorsAreClear) {
  SKIP_WITHOUT_PLUGIN();
  ScratchDir dir;
  auto error_of = [](const std::string& args) {
    const CliRun r = run_cli(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
    return r.output;
  };
  const std::string missing = dir.file("nope.so");
  EXPECT_NE(error_of("inspect x.safetensors --plugin " + missing)
                .find("error: ember: --plugin " + missing + ": no such file"),
            std::string::npos);
  write_text(dir.file("text.so"), "not a library\n");
  const std::string bad = error_of("inspect x.safetensors --plugin " + dir.file("text.so"));
  EXPECT_NE(bad.find("--plugin " + dir.file("text.so") + ": cannot load it ("), std::string::npos)
      << bad;
  EXPECT_NE(bad.find("text.so"), bad.rfind("text.so"))
      << "the dlerror text names the file: " << bad;
  // libember itself loads but registers nothing new.
  EXPECT_NE(error_of(std::string("inspect x.safetensors --plugin ") + EMBER_LIBRARY_FILE)
                .find("registered no new module type"),
            std::string::npos);
  // --plugin is repeatable and takes one value per flag (the model path stays positional).
  write_text(dir.file("d.csv"), animals_csv());
  const CliRun twice =
      run_cli(std::string("train --plugin ") + EMBER_EXAMPLE_PLUGIN + " --plugin " +
              EMBER_LIBRARY_FILE + " --dataset " + dir.file("d.csv") +
              " --label animal --epochs 1 --progress none -o " + dir.file("m.safetensors"));
  EXPECT_EQ(twice.status, 1) << twice.output;
  EXPECT_NE(twice.output.find(std::string(EMBER_LIBRARY_FILE) + " registered no new module type"),
            std::string::npos)
      << twice.output;
}

// A plugin whose static initialiser throws (tests/plugin_throws.cpp): C++ would call
// std::terminate; the command reports the library and the exception and exits 1 instead.
TEST(CliPlugin, PluginWhoseStaticInitialiserThrowsIsReported) {
  SKIP_WITHOUT_PLUGIN();
  const std::string plugin = EMBER_THROWING_PLUGIN;
  ASSERT_FALSE(plugin.empty()) << "tests/CMakeLists.txt builds tests/plugin_throws.cpp";
  const CliRun r = run_cli("inspect x.safetensors --plugin " + plugin);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("ember: --plugin " + plugin +
                          ": its static initialiser threw: plugin_throws: the registry it "
                          "needs is missing"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  // An exception that is not a std::exception is reported too.
  const CliRun i = run_command("EMBER_TEST_PLUGIN_THROW=int " + std::string(EMBER_CLI_PATH) +
                               " inspect x.safetensors --plugin " + plugin);
  EXPECT_EQ(i.status, 1) << i.output;
  EXPECT_NE(i.output.find("ember: --plugin " + plugin +
                          ": its static initialiser threw: an exception that is not a "
                          "std::exception"),
            std::string::npos)
      << i.output;
  // The plugins before a throwing one are loaded; the command still stops at the throwing one.
  const CliRun two = run_cli(std::string("inspect x.safetensors --plugin ") + EMBER_EXAMPLE_PLUGIN +
                             " --plugin " + plugin);
  EXPECT_EQ(two.status, 1) << two.output;
  EXPECT_NE(two.output.find("ember: --plugin " + plugin + ": its static initialiser threw"),
            std::string::npos)
      << two.output;
}

// Text labels without a plugin: train stores the classes, predict prints the names, and a
// test CSV with a label the training file never had is refused.
TEST(CliPlugin, CsvTextLabelsRoundTrip) {
  SKIP_WITHOUT_PLUGIN();
  ScratchDir dir;
  const std::string csv = dir.file("a.csv"), model = dir.file("m.safetensors");
  write_text(csv, animals_csv());
  const CliRun t = run_cli("train --dataset " + csv +
                           " --label animal --standardize --epochs 20 "
                           "--batch-size 8 --lr 0.01 --progress none -o " +
                           model);
  ASSERT_EQ(t.status, 0) << t.output;
  write_text(dir.file("rows.csv"), "1,1000\n3,3000\n");
  const CliRun p = run_cli("predict " + model + " --input " + dir.file("rows.csv") + " --output " +
                           dir.file("p.csv"));
  ASSERT_EQ(p.status, 0) << p.output;
  const std::vector<std::string> lines = read_lines(dir.file("p.csv"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].substr(0, lines[1].find(',')), "mouse");
  EXPECT_EQ(lines[2].substr(0, lines[2].find(',')), "dog");
  write_text(dir.file("t.csv"), "size,weight,animal\n1,1000,mouse\n2,2000,horse\n");
  const CliRun e = run_cli("eval " + model + " --dataset " + dir.file("t.csv") + " --label animal");
  EXPECT_EQ(e.status, 1) << e.output;
  EXPECT_NE(e.output.find("label 'horse' (column 'animal') is not a known class (expected one of "
                          "'cat', 'dog', 'mouse')"),
            std::string::npos)
      << e.output;
  // The wrong number of feature columns is named before the model runs.
  write_text(dir.file("wide.csv"), "1,2,3\n");
  const CliRun w = run_cli("predict " + model + " --input " + dir.file("wide.csv") + " --output " +
                           dir.file("w.csv"));
  EXPECT_EQ(w.status, 1) << w.output;
  EXPECT_NE(w.output.find("has 3 feature columns (expected 2"), std::string::npos) << w.output;
}
