// src/nn/registry_layers.cpp — registry factories for the convolution, pooling, resampling,
// normalisation, embedding and recurrent modules (called from register_all in registry.cpp).
// Each reads only the options of a config() JSON, by name; sizes may be one number or a list,
// optional values null.
#include "ember/nn/conv.hpp"
#include "ember/nn/distance.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool3d.hpp"
#include "ember/nn/rnn.hpp"
#include "nn/registry.hpp"

namespace ember::nn {

void register_layer_modules() {
  using namespace registry;
  register_with<Conv1dImpl, Conv1dOptions>("Conv1d");
  register_with<Conv2dImpl, Conv2dOptions>("Conv2d");
  register_with<Conv3dImpl, Conv3dOptions>("Conv3d");
  register_with<ConvTranspose1dImpl, ConvTranspose1dOptions>("ConvTranspose1d");
  register_with<ConvTranspose2dImpl, ConvTranspose2dOptions>("ConvTranspose2d");
  register_with<MaxPool1dImpl, MaxPool1dOptions>("MaxPool1d");
  register_with<MaxPool2dImpl, MaxPool2dOptions>("MaxPool2d");
  register_with<AvgPool1dImpl, AvgPool1dOptions>("AvgPool1d");
  register_with<AvgPool2dImpl, AvgPool2dOptions>("AvgPool2d");
  register_built<AdaptivePool1dOptions>("AdaptiveAvgPool1d", [](AdaptivePool1dOptions o) {
    return ModulePtr(std::make_shared<AdaptiveAvgPool1dImpl>(o.output_size));
  });
  register_built<AdaptivePool1dOptions>("AdaptiveMaxPool1d", [](AdaptivePool1dOptions o) {
    return ModulePtr(std::make_shared<AdaptiveMaxPool1dImpl>(o.output_size));
  });
  register_built<AdaptivePoolOptions>("AdaptiveAvgPool2d", [](AdaptivePoolOptions o) {
    return ModulePtr(std::make_shared<AdaptiveAvgPool2dImpl>(o.output_size));
  });
  register_built<AdaptivePoolOptions>("AdaptiveMaxPool2d", [](AdaptivePoolOptions o) {
    return ModulePtr(std::make_shared<AdaptiveMaxPool2dImpl>(o.output_size));
  });
  register_with<UpsampleImpl, InterpolateOptions>("Upsample");
  register_with<PixelShuffleImpl, PixelShuffleOptions>("PixelShuffle");
  register_with<PixelUnshuffleImpl, PixelUnshuffleOptions>("PixelUnshuffle");
  register_with<UnfoldImpl, FoldOptions>("Unfold");
  register_with<FoldImpl, FoldOptions>("Fold");
  // issue 32, group nn
  register_with<MaxPool3dImpl, MaxPool3dOptions>("MaxPool3d");
  register_with<AvgPool3dImpl, AvgPool3dOptions>("AvgPool3d");
  register_with<AdaptiveAvgPool3dImpl, AdaptivePool3dOptions>("AdaptiveAvgPool3d");
  register_with<AdaptiveMaxPool3dImpl, AdaptivePool3dOptions>("AdaptiveMaxPool3d");
  register_with<MaxUnpool1dImpl, MaxUnpool1dOptions>("MaxUnpool1d");
  register_with<MaxUnpool2dImpl, MaxUnpool2dOptions>("MaxUnpool2d");
  register_with<MaxUnpool3dImpl, MaxUnpool3dOptions>("MaxUnpool3d");
  register_with<LPPool1dImpl, LPPool1dOptions>("LPPool1d");
  register_with<LPPool2dImpl, LPPool2dOptions>("LPPool2d");
  register_with<LPPool3dImpl, LPPool3dOptions>("LPPool3d");
  register_with<ChannelShuffleImpl, ChannelShuffleOptions>("ChannelShuffle");
  register_with<LocalResponseNormImpl, LocalResponseNormOptions>("LocalResponseNorm");
  register_with<CosineSimilarityImpl, CosineSimilarityOptions>("CosineSimilarity");
  register_with<PairwiseDistanceImpl, PairwiseDistanceOptions>("PairwiseDistance");
  register_with<FractionalMaxPool2dImpl, FractionalMaxPool2dOptions>("FractionalMaxPool2d");
  register_with<FractionalMaxPool3dImpl, FractionalMaxPool3dOptions>("FractionalMaxPool3d");
  register_with<ConvTranspose3dImpl, ConvTranspose3dOptions>("ConvTranspose3d");
  register_with<BatchNorm1dImpl, BatchNormOptions>("BatchNorm1d");
  register_with<BatchNorm2dImpl, BatchNormOptions>("BatchNorm2d");
  register_with<LayerNormImpl, LayerNormOptions>("LayerNorm");
  register_with<RMSNormImpl, RMSNormOptions>("RMSNorm");
  register_with<GroupNormImpl, GroupNormOptions>("GroupNorm");
  register_with<InstanceNorm1dImpl, InstanceNormOptions>("InstanceNorm1d");
  register_with<InstanceNorm2dImpl, InstanceNormOptions>("InstanceNorm2d");
  register_with<EmbeddingImpl, EmbeddingOptions>("Embedding");
  register_with<EmbeddingBagImpl, EmbeddingBagOptions>("EmbeddingBag");
  register_with<RNNImpl, RNNOptions>("RNN");
  register_with<LSTMImpl, RNNOptions>("LSTM");
  register_with<GRUImpl, RNNOptions>("GRU");
  register_with<RNNCellImpl, RNNCellOptions>("RNNCell");
  register_with<LSTMCellImpl, RNNCellOptions>("LSTMCell");
  register_with<GRUCellImpl, RNNCellOptions>("GRUCell");
}

}  // namespace ember::nn
