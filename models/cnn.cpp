#include "models/cnn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace dtsim::models {

using I = std::int64_t;

const char* to_string(CnnOpKind k) {
  switch (k) {
    case CnnOpKind::Conv: return "conv";
    case CnnOpKind::BatchNorm: return "batch_norm";
    case CnnOpKind::Relu: return "relu";
    case CnnOpKind::MaxPool: return "max_pool";
    case CnnOpKind::AvgPool: return "avg_pool";
    case CnnOpKind::GlobalAvgPool: return "global_avg_pool";
    case CnnOpKind::Fc: return "fc";
    case CnnOpKind::Dropout: return "dropout";
    case CnnOpKind::Add: return "add";
    case CnnOpKind::Concat: return "concat";
  }
  return "?";
}

CnnBuilder::CnnBuilder(std::string name, I image_size, I channels, I classes) {
  spec_.name = std::move(name);
  spec_.image_size = image_size;
  spec_.channels = channels;
  spec_.classes = classes;
  image_ = {channels, image_size, image_size};
}

void CnnBuilder::layer(const std::string& name) { spec_.layers.push_back(name); }

const CnnShape& CnnBuilder::shape(int t) const {
  if (t == kImage) return image_;
  if (t < 0 || t >= static_cast<int>(spec_.ops.size())) throw CnnError(where_, fmt::format("no tensor {}", t));
  return spec_.ops[static_cast<std::size_t>(t)].out;
}

int CnnBuilder::push(CnnOp op, const std::string& name) {
  if (spec_.layers.empty()) layer("layer0");
  op.layer = static_cast<int>(spec_.layers.size()) - 1;
  op.name = name.empty() ? fmt::format("{}.{}{}", spec_.layers.back(), to_string(op.kind), spec_.ops.size()) : name;
  if (!op.inputs.empty()) op.in = shape(op.inputs.front());
  spec_.ops.push_back(std::move(op));
  return static_cast<int>(spec_.ops.size()) - 1;
}

int CnnBuilder::conv(int x, I filters, I r, I s, I stride_h, I stride_w, I pad_h, I pad_w, I groups, bool bias, const std::string& name) {
  const CnnShape in = shape(x);
  if (filters < 1 || r < 1 || s < 1 || stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0 || groups < 1)
    fail("a convolution needs filters, kernel and stride of at least 1 and padding of at least 0");
  if (in.c % groups || filters % groups)
    fail(fmt::format("{} groups must divide the {} input channels and the {} filters", groups, in.c, filters));
  if (in.h + 2 * pad_h < r || in.w + 2 * pad_w < s)
    fail(fmt::format("a {}x{} kernel does not fit the {}x{} input (padding {}, {})", r, s, in.h, in.w, pad_h, pad_w));
  CnnOp op;
  op.kind = CnnOpKind::Conv;
  op.inputs = {x};
  op.filters = filters, op.r = r, op.s = s, op.stride_h = stride_h, op.stride_w = stride_w, op.pad_h = pad_h, op.pad_w = pad_w;
  op.groups = groups;
  op.bias = bias;
  op.out = {filters, (in.h + 2 * pad_h - r) / stride_h + 1, (in.w + 2 * pad_w - s) / stride_w + 1};
  return push(op, name);
}

int CnnBuilder::conv(int x, I filters, I k, I stride, I pad, const std::string& name) {
  return conv(x, filters, k, k, stride, stride, pad, pad, 1, false, name);
}

int CnnBuilder::bn(int x, const std::string& name) {
  CnnOp op;
  op.kind = CnnOpKind::BatchNorm;
  op.inputs = {x};
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::relu(int x, const std::string& name) {
  CnnOp op;
  op.kind = CnnOpKind::Relu;
  op.inputs = {x};
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::pool(CnnOpKind kind, int x, I k, I stride, I pad, const std::string& name) {
  const CnnShape in = shape(x);
  if (k < 1 || stride < 1 || pad < 0) fail("a pooling window and stride must be at least 1, padding at least 0");
  if (2 * pad > k) fail(fmt::format("padding {} is more than half the {}x{} window", pad, k, k));
  if (in.h + 2 * pad < k || in.w + 2 * pad < k)
    fail(fmt::format("a {}x{} window does not fit the {}x{} input", k, k, in.h, in.w));
  CnnOp op;
  op.kind = kind;
  op.inputs = {x};
  op.r = op.s = k;
  op.stride_h = op.stride_w = stride;
  op.pad_h = op.pad_w = pad;
  op.out = {in.c, (in.h + 2 * pad - k) / stride + 1, (in.w + 2 * pad - k) / stride + 1};
  return push(op, name);
}

int CnnBuilder::max_pool(int x, I k, I stride, I pad, const std::string& name) { return pool(CnnOpKind::MaxPool, x, k, stride, pad, name); }
int CnnBuilder::avg_pool(int x, I k, I stride, I pad, const std::string& name) { return pool(CnnOpKind::AvgPool, x, k, stride, pad, name); }

int CnnBuilder::global_avg_pool(int x, const std::string& name) {
  const CnnShape in = shape(x);
  CnnOp op;
  op.kind = CnnOpKind::GlobalAvgPool;
  op.inputs = {x};
  op.r = in.h, op.s = in.w;
  op.out = {in.c, 1, 1};
  return push(op, name);
}

int CnnBuilder::fc(int x, I units, bool bias, const std::string& name) {
  if (units < 1) fail("a fully connected layer needs at least 1 unit");
  CnnOp op;
  op.kind = CnnOpKind::Fc;
  op.inputs = {x};
  op.filters = units;
  op.bias = bias;
  op.out = {units, 1, 1};
  return push(op, name);
}

int CnnBuilder::dropout(int x, double rate, const std::string& name) {
  if (!(rate >= 0 && rate < 1)) fail("a dropout rate is at least 0 and below 1");
  CnnOp op;
  op.kind = CnnOpKind::Dropout;
  op.inputs = {x};
  op.rate = rate;
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::add(const std::vector<int>& xs, const std::string& name) {
  if (xs.size() < 2) fail("add needs at least two inputs");
  for (int x : xs)
    if (!(shape(x) == shape(xs.front())))
      fail(fmt::format("add needs inputs of one shape: {}x{}x{} and {}x{}x{}", shape(xs.front()).c, shape(xs.front()).h,
                       shape(xs.front()).w, shape(x).c, shape(x).h, shape(x).w));
  CnnOp op;
  op.kind = CnnOpKind::Add;
  op.inputs = xs;
  op.out = shape(xs.front());
  return push(op, name);
}

int CnnBuilder::concat(const std::vector<int>& xs, const std::string& name) {
  if (xs.size() < 2) fail("concat needs at least two inputs");
  CnnShape out = shape(xs.front());
  out.c = 0;
  for (int x : xs) {
    if (shape(x).h != out.h || shape(x).w != out.w)
      fail(fmt::format("concat needs inputs of one spatial size: {}x{} and {}x{}", out.h, out.w, shape(x).h, shape(x).w));
    out.c += shape(x).c;
  }
  CnnOp op;
  op.kind = CnnOpKind::Concat;
  op.inputs = xs;
  op.out = out;
  return push(op, name);
}

CnnSpec CnnBuilder::finish(int output) {
  if (output != static_cast<int>(spec_.ops.size()) - 1) fail("the model's output must be its last op");
  if (shape(output).elems() != spec_.classes)
    fail(fmt::format("the last op gives {} values per image, but the model has {} classes", shape(output).elems(), spec_.classes));
  return spec_;
}

namespace {

Kernel memory(const std::string& name, double bytes, double flops) { return Kernel{name, KernelKind::Memory, 1, 0, 0, 0, flops, bytes}; }

Kernel gemm(const std::string& name, I m, I n, I k, double e) {
  Kernel g{name, KernelKind::Gemm, 1, m, n, k, 0, 0};
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  g.flops = 2.0 * M * N * K;
  g.bytes = e * (M * K + K * N + M * N);
  return g;
}

// The graph's tensors as build_cnn sees them: -1 is the image, i >= 0 the output of op i. Under
// the channel split (BuildOptions::tensor = t > 1) every tensor a convolution or fully connected
// layer wrote is split: each rank holds 1/t of its channels, a contiguous block unless a concat
// interleaved the ranks' blocks. The image is whole on every rank.
struct Tensors {
  Tensors(const CnnSpec& s, const BuildOptions& o)
      : spec(s), t(o.tensor), n(static_cast<double>(o.micro_batch)), e(static_cast<double>(o.activation_bytes)) {}
  const CnnSpec& spec;
  I t = 1;
  double n = 1, e = 2;  // images per micro-batch, bytes per element
  std::vector<bool> grad, split, contiguous;
  std::vector<int> readers, last_layer_reading;
  int image_last_layer = -1;
  CnnShape image;

  const CnnShape& shape(int x) const { return x < 0 ? image : spec.ops[static_cast<std::size_t>(x)].out; }
  double whole(int x) const { return n * static_cast<double>(shape(x).elems()) * e; }  // all ranks together
  double share(int x) const { return x >= 0 && split[static_cast<std::size_t>(x)] ? 1.0 / static_cast<double>(t) : 1.0; }
  bool needs_grad(int x) const { return x >= 0 && grad[static_cast<std::size_t>(x)]; }
  // A convolution or fully connected layer that reads every channel of a split input gathers it
  // first; a grouped convolution (t divides its groups) reads only its own groups' channels,
  // which its rank holds when the split is contiguous.
  bool gathers(int x, bool grouped) const {
    return x >= 0 && split[static_cast<std::size_t>(x)] && !(grouped && contiguous[static_cast<std::size_t>(x)]);
  }
};

Tensors tensors_of(const CnnSpec& spec, const BuildOptions& o) {
  const std::size_t ops = spec.ops.size();
  Tensors ts(spec, o);
  ts.image = {spec.channels, spec.image_size, spec.image_size};
  // Which tensors need a gradient (not the image, nor what only the image feeds), and how many
  // ops read each tensor: a tensor read twice has its two gradients summed in backward.
  ts.grad.assign(ops, false), ts.split.assign(ops, false), ts.contiguous.assign(ops, true);
  ts.readers.assign(ops, 0), ts.last_layer_reading.assign(ops, -1);
  for (std::size_t i = 0; i < ops; ++i) {
    const auto& op = spec.ops[i];
    const bool weights = op.kind == CnnOpKind::Conv || op.kind == CnnOpKind::Fc;
    ts.grad[i] = weights || op.kind == CnnOpKind::BatchNorm;
    bool split = true, contiguous = true;
    for (int x : op.inputs) {
      split = split && ts.share(x) < 1.0;
      contiguous = contiguous && (x < 0 || ts.contiguous[static_cast<std::size_t>(x)]);
      if (x < 0) {
        ts.image_last_layer = std::max(ts.image_last_layer, op.layer);
        continue;
      }
      ts.grad[i] = ts.grad[i] || ts.grad[static_cast<std::size_t>(x)];
      ++ts.readers[static_cast<std::size_t>(x)];
      ts.last_layer_reading[static_cast<std::size_t>(x)] = std::max(ts.last_layer_reading[static_cast<std::size_t>(x)], op.layer);
    }
    ts.split[i] = o.tensor > 1 && (weights || split);
    ts.contiguous[i] = weights || (contiguous && op.kind != CnnOpKind::Concat);
  }
  return ts;
}

// Tensors kept for backward, each once: a rank's share, and apart from it the gathered whole
// that a convolution reading every channel keeps for its weight gradient.
struct Kept {
  const Tensors& ts;
  std::set<int> share, whole;
  double keep(int x) { return share.insert(x).second ? ts.whole(x) * ts.share(x) : 0.0; }
  double keep_whole(int x) { return whole.insert(x).second ? ts.whole(x) : 0.0; }
};

// The exchanges a layer's ops cost under the channel split: each split input gathered once per
// layer that reads it whole, and its gradient reduce-scattered.
void exchange(const Tensors& ts, int x, std::set<int>& gathered, TensorSplit& split) {
  if (!gathered.insert(x).second) return;
  split.channel_gathers.push_back(ts.whole(x));
  if (ts.needs_grad(x)) split.channel_sums.push_back(ts.whole(x));
}

// A convolution computing 1/t of its filters (a grouped one 1/t of its groups).
Op conv_op(const CnnOp& c, const Tensors& ts, Kept& kept, std::set<int>& gathered, TensorSplit& split) {
  const int x = c.inputs.front();
  const bool grouped = c.groups > 1, whole = ts.gathers(x, grouped);
  const I own_c = grouped ? c.in.c / ts.t : c.in.c, own_groups = grouped ? c.groups / ts.t : c.groups, own_k = c.filters / ts.t;
  const ConvShape s{static_cast<I>(ts.n), own_c, c.in.h, c.in.w, own_k, c.r, c.s, c.stride_h, c.stride_w, c.pad_h, c.pad_w, own_groups};
  Op op;
  op.name = c.name;
  op.forward = {conv_kernel(c.name, s, ConvPass::Forward, ts.e)};
  if (ts.needs_grad(x)) op.backward.push_back(conv_kernel(c.name + ".dgrad", s, ConvPass::Dgrad, ts.e));
  op.backward.push_back(conv_kernel(c.name + ".wgrad", s, ConvPass::Wgrad, ts.e));
  op.params = static_cast<double>(own_k) * static_cast<double>(c.in.c / c.groups * c.r * c.s) + (c.bias ? static_cast<double>(own_k) : 0.0);
  op.saved_bytes = whole ? kept.keep_whole(x) : kept.keep(x);
  op.matmul = true;
  if (whole) exchange(ts, x, gathered, split);
  return op;
}

// A fully connected layer computing 1/t of its outputs from all of its input's features.
Op fc_op(const CnnOp& c, const Tensors& ts, Kept& kept, std::set<int>& gathered, TensorSplit& split) {
  const int x = c.inputs.front();
  const bool whole = ts.gathers(x, false);
  const I features = c.in.elems(), units = c.filters / ts.t, n = static_cast<I>(ts.n);
  Op op;
  op.name = c.name;
  op.forward = {gemm(c.name, n, units, features, ts.e)};
  if (ts.needs_grad(x)) op.backward.push_back(gemm(c.name + ".dgrad", n, features, units, ts.e));
  op.backward.push_back(gemm(c.name + ".wgrad", features, units, n, ts.e));
  op.backward.back().role = KernelRole::WeightGrad;
  op.params = static_cast<double>(features) * static_cast<double>(units) + (c.bias ? static_cast<double>(units) : 0.0);
  op.saved_bytes = whole ? kept.keep_whole(x) : kept.keep(x);
  op.matmul = true;
  if (whole) exchange(ts, x, gathered, split);
  return op;
}

// An op that works channel by channel, on its rank's share of the channels.
Op channel_op(const CnnOp& c, int i, const Tensors& ts, Kept& kept) {
  const int x = c.inputs.front();
  const double in = ts.n * static_cast<double>(c.in.elems()) * ts.share(x), out = ts.n * static_cast<double>(c.out.elems()) * ts.share(i);
  const double e = ts.e;
  Op op;
  op.name = c.name;
  switch (c.kind) {
    case CnnOpKind::BatchNorm:
      // Training mode: one pass for the batch statistics and one to normalise; backward reduces
      // over the gradient and input, then writes the input gradient.
      op.forward = {memory(c.name, 3.0 * in * e, 8.0 * in)};
      op.backward = {memory(c.name + ".bwd", 5.0 * in * e, 12.0 * in)};
      for (auto* k : {&op.forward.front(), &op.backward.front()}) k->elems = in, k->elem_bytes = e;
      op.forward.front().role = KernelRole::BatchNormForward;
      op.backward.front().role = KernelRole::BatchNormBackward;
      op.params = 2.0 * static_cast<double>(c.in.c) * ts.share(x);
      op.saved_bytes = kept.keep(x) + 2.0 * static_cast<double>(c.in.c) * 4.0 * ts.share(x);
      break;
    case CnnOpKind::Relu:
      op.forward = {memory(c.name, 2.0 * in * e, in)};
      if (ts.needs_grad(x)) op.backward = {memory(c.name + ".bwd", 3.0 * in * e, in)};
      op.saved_bytes = kept.keep(i);
      break;
    case CnnOpKind::MaxPool:
    case CnnOpKind::AvgPool:
    case CnnOpKind::GlobalAvgPool: {
      const bool indices = c.kind == CnnOpKind::MaxPool;  // int64 argmax per output
      const double window = static_cast<double>(c.r * c.s);
      op.forward = {memory(c.name, in * e + out * (e + (indices ? 8.0 : 0.0)), window * out)};
      if (ts.needs_grad(x)) op.backward = {memory(c.name + ".bwd", in * e + out * (e + (indices ? 8.0 : 0.0)), window * out)};
      op.saved_bytes = kept.keep(x) + (indices ? 8.0 * out : 0.0);
      break;
    }
    case CnnOpKind::Dropout:
      op.forward = {memory(c.name, in * (2.0 * e + 1.0), 2.0 * in)};
      op.backward = {memory(c.name + ".bwd", in * (2.0 * e + 1.0), in)};
      op.saved_bytes = in;
      break;
    case CnnOpKind::Add: {
      const double k = static_cast<double>(c.inputs.size());
      op.forward = {memory(c.name, (k + 1.0) * out * e, (k - 1.0) * out)};
      break;
    }
    case CnnOpKind::Concat:
      // Backward hands each input its slice of the gradient, copied out of the channel-strided
      // whole.
      op.forward = {memory(c.name, 2.0 * out * e, 0)};
      op.backward = {memory(c.name + ".bwd", 2.0 * out * e, 0)};
      break;
    default: break;
  }
  return op;
}

// The tensors crossing the boundary after each layer: produced at or before it, read after it.
// A pipeline stage hands on the whole of them; full recomputation keeps each rank's share.
void crossings(const Tensors& ts, ModelGraph& g) {
  double before = ts.whole(-1);  // what enters layer l, the rank's share
  for (std::size_t l = 0; l < g.layers.size(); ++l) {
    double whole = 0, share = 0;
    if (ts.image_last_layer > static_cast<int>(l)) whole += ts.whole(-1), share += ts.whole(-1);
    for (std::size_t t = 0; t < ts.spec.ops.size(); ++t)
      if (ts.spec.ops[t].layer <= static_cast<int>(l) && ts.last_layer_reading[t] > static_cast<int>(l)) {
        whole += ts.whole(static_cast<int>(t));
        share += ts.whole(static_cast<int>(t)) * ts.share(static_cast<int>(t));
      }
    g.layers[l].output_bytes = whole;
    g.layers[l].input_bytes = before;
    before = share;
  }
}

}  // namespace

ModelGraph build_cnn(const CnnSpec& spec, const BuildOptions& o) {
  if (o.tensor < 1) throw std::invalid_argument("tensor parallelism needs at least 1 rank");
  const Tensors ts = tensors_of(spec, o);
  const double e = ts.e, n = ts.n;
  ModelGraph g{spec.name, o, {}, 0};
  for (const auto& name : spec.layers) {
    g.layers.emplace_back().name = name;
    g.layers.back().tensor_split.splittable = o.tensor > 1;
  }
  Kept kept{ts, {}, {}};
  std::vector<std::set<int>> gathered(g.layers.size());
  for (std::size_t i = 0; i < spec.ops.size(); ++i) {
    const auto& c = spec.ops[i];
    auto& layer = g.layers[static_cast<std::size_t>(c.layer)];
    auto& here = gathered[static_cast<std::size_t>(c.layer)];
    Op op = c.kind == CnnOpKind::Conv ? conv_op(c, ts, kept, here, layer.tensor_split)
            : c.kind == CnnOpKind::Fc ? fc_op(c, ts, kept, here, layer.tensor_split)
                                      : channel_op(c, static_cast<int>(i), ts, kept);
    // Gradients from several readers of this op's output are summed before its own backward.
    const double out = n * static_cast<double>(c.out.elems()) * ts.share(static_cast<int>(i));
    if (ts.readers[i] > 1 && ts.grad[i])
      op.backward.insert(op.backward.begin(),
                         memory(c.name + ".grad_sum", 3.0 * (ts.readers[i] - 1) * out * e, (ts.readers[i] - 1) * out));
    op.saved_bytes_selective = op.saved_bytes;
    layer.ops.push_back(std::move(op));
  }
  crossings(ts, g);

  // Softmax cross-entropy over the classes, in fp32: the probabilities are kept for backward.
  // Under the channel split each rank gathers the logits and computes the whole (small) loss.
  const int last = static_cast<int>(spec.ops.size()) - 1;
  const double logits = n * static_cast<double>(spec.classes);
  Layer head;
  head.name = "loss";
  head.kind = LayerKind::Head;
  head.input_bytes = ts.whole(last);
  head.tensor_split.splittable = o.tensor > 1;
  if (ts.share(last) < 1.0) head.tensor_split.channel_gathers = {ts.whole(last)};
  Op loss;
  loss.name = "cross_entropy";
  loss.forward = {memory("cross_entropy", logits * (e + 4.0), 5.0 * logits)};
  loss.backward = {memory("cross_entropy.bwd", logits * (4.0 + e), 2.0 * logits)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * logits;
  head.ops.push_back(loss);
  g.layers.push_back(std::move(head));
  return g;
}

double cnn_forward_macs(const CnnSpec& spec) {
  double macs = 0;
  for (const auto& c : spec.ops) {
    if (c.kind == CnnOpKind::Conv)
      macs += static_cast<double>(c.out.elems()) * static_cast<double>(c.in.c / c.groups * c.r * c.s);
    else if (c.kind == CnnOpKind::Fc)
      macs += static_cast<double>(c.in.elems()) * static_cast<double>(c.filters);
  }
  return macs;
}

}  // namespace dtsim::models
