// tests/options_designated_init.cpp — compiled (not run) with -Wall -Wextra -Werror and
// without -Wno-missing-field-initializers (tests/CMakeLists.txt): every public options
// struct of train/ and data/ must take designated initializers naming only some members,
// PyTorch-keyword style, with no warning. A member without a default breaks this build.
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/data/preprocess.hpp"
#include "ember/data/readers.hpp"
#include "ember/train/fit.hpp"

namespace ember_options_check {

using namespace ember;  // NOLINT: a compile check

int64_t use_every_options_struct() {
  const train::FitOptions fit{.epochs = 2, .progress = train::Progress::none};
  const train::FitOptions clipped{.clip_grad_norm = 1.0, .accumulate_grad_batches = 4};
  const train::EarlyStoppingOptions stop{.patience = 5};
  const train::Metrics metrics{.loss = 1.0};
  const train::BatchLog batch{.epoch = 1};
  const train::EpochLog epoch{.epoch = 1};
  const train::History history{.stopped_early = true};
  const train::ResumePoint resume{.epoch = 1};
  const data::DataLoaderOptions loader{.batch_size = 64, .shuffle = true};
  const data::DataLoaderState state{.epoch = 1};
  const data::CsvOptions csv{.label_column = int64_t{0}, .has_header = false};
  const data::CsvData csv_data{.label_name = "y"};
  const data::Example example{.target = Tensor()};
  const data::FashionMnist fashion{.labels = Tensor()};
  const data::Standardizer scaler{.mean = {0.0}};
  return fit.epochs + clipped.accumulate_grad_batches + stop.patience +
         static_cast<int64_t>(metrics.loss) + batch.epoch + epoch.epoch +
         (history.stopped_early ? 1 : 0) + resume.epoch + loader.batch_size + state.epoch +
         (csv.has_header.value_or(true) ? 1 : 0) +
         static_cast<int64_t>(csv_data.label_name.size()) + (example.target.defined() ? 1 : 0) +
         (fashion.labels.defined() ? 1 : 0) + static_cast<int64_t>(scaler.features());
}

}  // namespace ember_options_check
