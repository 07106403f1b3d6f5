// The block structures of the CNN families dtsim ships, written op by op into a CnnBuilder.
#include <fmt/format.h>

#include <array>
#include <utility>

#include "models/cnn.hpp"

namespace dtsim::models {

using I = std::int64_t;

namespace {

// Convolution without bias, batch norm, ReLU: torchvision's conv-bn-relu unit ("BasicConv2d").
int conv_bn_relu(CnnBuilder& b, int x, I filters, I r, I s, I stride, I pad_h, I pad_w, const std::string& name) {
  x = b.conv(x, filters, r, s, stride, stride, pad_h, pad_w, 1, false, name + ".conv");
  x = b.bn(x, name + ".bn");
  return b.relu(x, name + ".relu");
}
int conv_bn_relu(CnnBuilder& b, int x, I filters, I k, I stride, I pad, const std::string& name) {
  return conv_bn_relu(b, x, filters, k, k, stride, pad, pad, name);
}

// torchvision's Bottleneck (expansion 4, stride on the 3x3) and BasicBlock.
int resnet_block(CnnBuilder& b, int x, I planes, I stride, bool bottleneck, const std::string& name) {
  const I out_channels = bottleneck ? 4 * planes : planes;
  int y;
  if (bottleneck) {
    y = conv_bn_relu(b, x, planes, 1, 1, 0, name + ".1");
    y = conv_bn_relu(b, y, planes, 3, stride, 1, name + ".2");
    y = b.conv(y, out_channels, 1, 1, 0, name + ".3.conv");
  } else {
    y = conv_bn_relu(b, x, planes, 3, stride, 1, name + ".1");
    y = b.conv(y, out_channels, 3, 1, 1, name + ".2.conv");
  }
  y = b.bn(y, name + ".last.bn");
  int shortcut = x;
  if (stride != 1 || b.shape(x).c != out_channels) {
    shortcut = b.conv(x, out_channels, 1, stride, 0, name + ".downsample.conv");
    shortcut = b.bn(shortcut, name + ".downsample.bn");
  }
  return b.relu(b.add({y, shortcut}, name + ".add"), name + ".relu");
}

}  // namespace

CnnSpec resnet(const std::string& name, I image_size, I classes, const std::vector<I>& stages, bool bottleneck) {
  CnnBuilder b(name, image_size, 3, classes);
  b.layer("stem");
  int x = conv_bn_relu(b, CnnBuilder::kImage, 64, 7, 2, 3, "stem");
  x = b.max_pool(x, 3, 2, 1, "stem.max_pool");
  for (std::size_t s = 0; s < stages.size(); ++s)
    for (I i = 0; i < stages[s]; ++i) {
      const std::string block = fmt::format("layer{}.{}", s + 1, i);
      b.layer(block);
      x = resnet_block(b, x, I{64} << s, (i == 0 && s > 0) ? 2 : 1, bottleneck, block);
    }
  b.layer("classifier");
  x = b.global_avg_pool(x, "avgpool");
  return b.finish(b.fc(x, classes, true, "fc"));
}

namespace {

int inception_a(CnnBuilder& b, int x, I pool_features, const std::string& n) {
  const int b1 = conv_bn_relu(b, x, 64, 1, 1, 0, n + ".branch1x1");
  int b5 = conv_bn_relu(b, x, 48, 1, 1, 0, n + ".branch5x5_1");
  b5 = conv_bn_relu(b, b5, 64, 5, 1, 2, n + ".branch5x5_2");
  int b3 = conv_bn_relu(b, x, 64, 1, 1, 0, n + ".branch3x3dbl_1");
  b3 = conv_bn_relu(b, b3, 96, 3, 1, 1, n + ".branch3x3dbl_2");
  b3 = conv_bn_relu(b, b3, 96, 3, 1, 1, n + ".branch3x3dbl_3");
  int bp = b.avg_pool(x, 3, 1, 1, n + ".branch_pool.avg");
  bp = conv_bn_relu(b, bp, pool_features, 1, 1, 0, n + ".branch_pool");
  return b.concat({b1, b5, b3, bp}, n + ".concat");
}

int inception_b(CnnBuilder& b, int x, const std::string& n) {
  const int b3 = conv_bn_relu(b, x, 384, 3, 2, 0, n + ".branch3x3");
  int bd = conv_bn_relu(b, x, 64, 1, 1, 0, n + ".branch3x3dbl_1");
  bd = conv_bn_relu(b, bd, 96, 3, 1, 1, n + ".branch3x3dbl_2");
  bd = conv_bn_relu(b, bd, 96, 3, 2, 0, n + ".branch3x3dbl_3");
  const int bp = b.max_pool(x, 3, 2, 0, n + ".branch_pool");
  return b.concat({b3, bd, bp}, n + ".concat");
}

// 1x7 and 7x1 factorised convolutions.
int conv_1x7(CnnBuilder& b, int x, I f, const std::string& n) { return conv_bn_relu(b, x, f, 1, 7, 1, 0, 3, n); }
int conv_7x1(CnnBuilder& b, int x, I f, const std::string& n) { return conv_bn_relu(b, x, f, 7, 1, 1, 3, 0, n); }

int inception_c(CnnBuilder& b, int x, I c7, const std::string& n) {
  const int b1 = conv_bn_relu(b, x, 192, 1, 1, 0, n + ".branch1x1");
  int b7 = conv_bn_relu(b, x, c7, 1, 1, 0, n + ".branch7x7_1");
  b7 = conv_1x7(b, b7, c7, n + ".branch7x7_2");
  b7 = conv_7x1(b, b7, 192, n + ".branch7x7_3");
  int bd = conv_bn_relu(b, x, c7, 1, 1, 0, n + ".branch7x7dbl_1");
  bd = conv_7x1(b, bd, c7, n + ".branch7x7dbl_2");
  bd = conv_1x7(b, bd, c7, n + ".branch7x7dbl_3");
  bd = conv_7x1(b, bd, c7, n + ".branch7x7dbl_4");
  bd = conv_1x7(b, bd, 192, n + ".branch7x7dbl_5");
  int bp = b.avg_pool(x, 3, 1, 1, n + ".branch_pool.avg");
  bp = conv_bn_relu(b, bp, 192, 1, 1, 0, n + ".branch_pool");
  return b.concat({b1, b7, bd, bp}, n + ".concat");
}

int inception_d(CnnBuilder& b, int x, const std::string& n) {
  int b3 = conv_bn_relu(b, x, 192, 1, 1, 0, n + ".branch3x3_1");
  b3 = conv_bn_relu(b, b3, 320, 3, 2, 0, n + ".branch3x3_2");
  int b7 = conv_bn_relu(b, x, 192, 1, 1, 0, n + ".branch7x7x3_1");
  b7 = conv_1x7(b, b7, 192, n + ".branch7x7x3_2");
  b7 = conv_7x1(b, b7, 192, n + ".branch7x7x3_3");
  b7 = conv_bn_relu(b, b7, 192, 3, 2, 0, n + ".branch7x7x3_4");
  const int bp = b.max_pool(x, 3, 2, 0, n + ".branch_pool");
  return b.concat({b3, b7, bp}, n + ".concat");
}

// 1x3 and 3x1 side by side, concatenated.
int split_1x3_3x1(CnnBuilder& b, int x, const std::string& n) {
  const int a = conv_bn_relu(b, x, 384, 1, 3, 1, 0, 1, n + "a");
  const int c = conv_bn_relu(b, x, 384, 3, 1, 1, 1, 0, n + "b");
  return b.concat({a, c}, n + ".concat");
}

int inception_e(CnnBuilder& b, int x, const std::string& n) {
  const int b1 = conv_bn_relu(b, x, 320, 1, 1, 0, n + ".branch1x1");
  int b3 = conv_bn_relu(b, x, 384, 1, 1, 0, n + ".branch3x3_1");
  b3 = split_1x3_3x1(b, b3, n + ".branch3x3_2");
  int bd = conv_bn_relu(b, x, 448, 1, 1, 0, n + ".branch3x3dbl_1");
  bd = conv_bn_relu(b, bd, 384, 3, 1, 1, n + ".branch3x3dbl_2");
  bd = split_1x3_3x1(b, bd, n + ".branch3x3dbl_3");
  int bp = b.avg_pool(x, 3, 1, 1, n + ".branch_pool.avg");
  bp = conv_bn_relu(b, bp, 192, 1, 1, 0, n + ".branch_pool");
  return b.concat({b1, b3, bd, bp}, n + ".concat");
}

}  // namespace

CnnSpec inception_v3(const std::string& name, I image_size, I classes, bool aux_head) {
  CnnBuilder b(name, image_size, 3, classes);
  b.layer("stem");
  int x = conv_bn_relu(b, CnnBuilder::kImage, 32, 3, 2, 0, "Conv2d_1a_3x3");
  x = conv_bn_relu(b, x, 32, 3, 1, 0, "Conv2d_2a_3x3");
  x = conv_bn_relu(b, x, 64, 3, 1, 1, "Conv2d_2b_3x3");
  x = b.max_pool(x, 3, 2, 0, "maxpool1");
  x = conv_bn_relu(b, x, 80, 1, 1, 0, "Conv2d_3b_1x1");
  x = conv_bn_relu(b, x, 192, 3, 1, 0, "Conv2d_4a_3x3");
  x = b.max_pool(x, 3, 2, 0, "maxpool2");
  const std::array<std::pair<const char*, I>, 3> a{{{"Mixed_5b", 32}, {"Mixed_5c", 64}, {"Mixed_5d", 64}}};
  for (const auto& [n, pool] : a) {
    b.layer(n);
    x = inception_a(b, x, pool, n);
  }
  b.layer("Mixed_6a");
  x = inception_b(b, x, "Mixed_6a");
  const std::array<std::pair<const char*, I>, 4> c{{{"Mixed_6b", 128}, {"Mixed_6c", 160}, {"Mixed_6d", 160}, {"Mixed_6e", 192}}};
  for (const auto& [n, c7] : c) {
    b.layer(n);
    x = inception_c(b, x, c7, n);
  }
  if (aux_head) {  // the auxiliary classifier on Mixed_6e; its logits get their own loss in training
    int y = b.avg_pool(x, 5, 3, 0, "AuxLogits.avg");
    y = conv_bn_relu(b, y, 128, 1, 1, 0, "AuxLogits.conv0");
    y = conv_bn_relu(b, y, 768, 5, 1, 0, "AuxLogits.conv1");
    y = b.global_avg_pool(y, "AuxLogits.pool");
    b.fc(y, classes, true, "AuxLogits.fc");
  }
  b.layer("Mixed_7a");
  x = inception_d(b, x, "Mixed_7a");
  for (const char* n : {"Mixed_7b", "Mixed_7c"}) {
    b.layer(n);
    x = inception_e(b, x, n);
  }
  b.layer("classifier");
  x = b.global_avg_pool(x, "avgpool");
  x = b.dropout(x, 0.5, "dropout");
  return b.finish(b.fc(x, classes, true, "fc"));
}

namespace {

// AmoebaNet-D's operations on c channels (TensorFlow's reference, tensorflow/tpu
// models/official/amoeba_net; torchgpipe's benchmarks/models/amoebanet follows it).
enum class AmoebaOp { None, Conv1x1, Conv3x3, Conv1x7_7x1, MaxPool3x3, MaxPool2x2, AvgPool3x3 };

int relu_conv_bn(CnnBuilder& b, int x, I filters, I r, I s, I stride_h, I stride_w, I pad_h, I pad_w, const std::string& n) {
  x = b.relu(x, n + ".relu");
  x = b.conv(x, filters, r, s, stride_h, stride_w, pad_h, pad_w, 1, false, n + ".conv");
  return b.bn(x, n + ".bn");
}

// Halves the resolution with two 1x1 stride-2 convolutions (the second on the input shifted by
// one pixel), each giving half the filters.
int factorized_reduce(CnnBuilder& b, int x, I filters, const std::string& n) {
  x = b.relu(x, n + ".relu");
  const int a = b.conv(x, filters / 2, 1, 2, 0, n + ".conv1");
  const int c = b.conv(x, filters / 2, 1, 2, 0, n + ".conv2");
  return b.bn(b.concat({a, c}, n + ".concat"), n + ".bn");
}

int amoeba_op(CnnBuilder& b, int x, AmoebaOp op, I c, I stride, const std::string& n) {
  switch (op) {
    case AmoebaOp::None: return stride == 1 ? x : factorized_reduce(b, x, c, n);
    case AmoebaOp::Conv1x1: return relu_conv_bn(b, x, c, 1, 1, stride, stride, 0, 0, n);
    case AmoebaOp::Conv3x3:
      x = relu_conv_bn(b, x, c / 4, 1, 1, 1, 1, 0, 0, n + ".a");
      x = relu_conv_bn(b, x, c / 4, 3, 3, stride, stride, 1, 1, n + ".b");
      return relu_conv_bn(b, x, c, 1, 1, 1, 1, 0, 0, n + ".c");
    case AmoebaOp::Conv1x7_7x1:
      x = relu_conv_bn(b, x, c / 4, 1, 1, 1, 1, 0, 0, n + ".a");
      x = relu_conv_bn(b, x, c / 4, 1, 7, 1, stride, 0, 3, n + ".b");
      x = relu_conv_bn(b, x, c / 4, 7, 1, stride, 1, 3, 0, n + ".c");
      return relu_conv_bn(b, x, c, 1, 1, 1, 1, 0, 0, n + ".d");
    case AmoebaOp::MaxPool3x3: return b.max_pool(x, 3, stride, 1, n);
    case AmoebaOp::MaxPool2x2: return b.max_pool(x, 2, stride, 0, n);
    case AmoebaOp::AvgPool3x3: return b.avg_pool(x, 3, stride, 1, n);
  }
  return x;
}

struct Genotype {
  std::vector<std::pair<int, AmoebaOp>> ops;  // pairs: (input state, operation), summed two by two
  std::vector<int> concat;                    // states concatenated into the output
};

// AmoebaNet-D's cells. The normal cell concatenates states 0, 3, 4 and 6 as TensorFlow's
// reference implementation does (Real et al. 2019 print 4, 5, 6); torchgpipe notes that only the
// former reproduces GPipe's Table 1 parameter counts.
const Genotype& normal_cell() {
  using enum AmoebaOp;
  static const Genotype g{{{1, Conv1x1}, {1, MaxPool3x3}, {1, None}, {0, Conv1x7_7x1}, {0, Conv1x1},
                           {0, Conv1x7_7x1}, {2, MaxPool3x3}, {2, None}, {1, AvgPool3x3}, {5, Conv1x1}},
                          {0, 3, 4, 6}};
  return g;
}
const Genotype& reduction_cell() {
  using enum AmoebaOp;
  static const Genotype g{{{0, MaxPool2x2}, {0, MaxPool3x3}, {2, None}, {1, Conv3x3}, {2, Conv1x7_7x1},
                           {2, MaxPool3x3}, {3, None}, {1, MaxPool2x2}, {2, AvgPool3x3}, {3, Conv1x1}},
                          {4, 5, 6}};
  return g;
}

struct CellState {
  int x = 0, skip = 0;  // the last cell's output and the one before
  I channels_prev_prev = 0, channels_prev = 0;
  bool reduction_prev = false;
};

void cell(CnnBuilder& b, CellState& st, I channels, bool reduction, const std::string& n) {
  const int s1 = relu_conv_bn(b, st.x, channels, 1, 1, 1, 1, 0, 0, n + ".reduce1");
  int s2 = st.skip;
  if (st.reduction_prev) s2 = factorized_reduce(b, st.skip, channels, n + ".reduce2");
  else if (st.channels_prev_prev != channels) s2 = relu_conv_bn(b, st.skip, channels, 1, 1, 1, 1, 0, 0, n + ".reduce2");
  std::vector<int> states{s1, s2};
  const Genotype& g = reduction ? reduction_cell() : normal_cell();
  for (std::size_t i = 0; i < g.ops.size(); i += 2) {
    std::array<int, 2> h{};
    for (std::size_t j = 0; j < 2; ++j) {
      const auto [input, op] = g.ops[i + j];
      const I stride = reduction && input < 2 ? 2 : 1;
      h[j] = amoeba_op(b, states[static_cast<std::size_t>(input)], op, channels, stride, fmt::format("{}.op{}", n, i + j));
    }
    states.push_back(b.add({h[0], h[1]}, fmt::format("{}.add{}", n, i / 2)));
  }
  std::vector<int> out;
  for (int k : g.concat) out.push_back(states[static_cast<std::size_t>(k)]);
  st.skip = st.x;
  st.x = b.concat(out, n + ".concat");
  st.channels_prev_prev = st.channels_prev;
  st.channels_prev = channels * static_cast<I>(g.concat.size());
  st.reduction_prev = reduction;
}

}  // namespace

CnnSpec amoebanet_d(const std::string& name, I image_size, I classes, I normal_cells, I filters) {
  CnnBuilder b(name, image_size, 3, classes);
  I channels = filters / 4;
  b.layer("stem1");
  int x = b.relu(CnnBuilder::kImage, "stem1.relu");
  x = b.conv(x, channels, 3, 2, 1, "stem1.conv");
  x = b.bn(x, "stem1.bn");
  CellState st{x, x, channels, channels, false};
  auto reduce = [&](const std::string& n) {
    b.layer(n);
    channels *= 2;
    cell(b, st, channels, true, n);
  };
  auto normals = [&](int group) {
    for (I i = 0; i < normal_cells / 3; ++i) {
      const std::string n = fmt::format("cell{}_normal{}", group, i + 1);
      b.layer(n);
      cell(b, st, channels, false, n);
    }
  };
  reduce("stem2");
  reduce("stem3");
  normals(1);
  reduce("cell2_reduction");
  normals(3);
  reduce("cell4_reduction");
  normals(5);
  b.layer("classify");
  x = b.global_avg_pool(st.x, "classify.pool");
  return b.finish(b.fc(x, classes, true, "classify.fc"));
}

}  // namespace dtsim::models
