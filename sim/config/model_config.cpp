#include "sim/config/model_config.hpp"

#include <fmt/format.h>

#include "sim/core/errors.hpp"

namespace dtsim::config {

namespace {

// Mixture-of-experts keys (models::TransformerSpec): all or none of the first four.
void parse_experts(Reader& r, models::TransformerSpec& m) {
  if (!r.has("num_experts")) {
    for (const char* key : {"experts_per_token", "expert_ffn_hidden_size", "shared_experts", "first_dense_layers",
                            "capacity_factor", "expert_bias"})
      if (r.has(key)) r.fail(key, "only a mixture-of-experts model (model.num_experts) takes it");
    return;
  }
  m.num_experts = r.integer("num_experts", 1, 100000);
  m.experts_per_token = r.integer("experts_per_token", 1, m.num_experts);
  m.expert_ffn_hidden_size = r.integer("expert_ffn_hidden_size", 1, 10000000);
  m.shared_experts = r.integer("shared_experts", 0, 1000, 0);
  m.first_dense_layers = r.integer("first_dense_layers", 0, m.num_layers - 1, 0);
  m.capacity_factor = r.number("capacity_factor", Range{0.0, 1000.0}, 0.0);
  m.expert_bias = r.boolean("expert_bias", false);
  if (m.capacity_factor > 0 && m.capacity_factor < 1.0)
    r.fail("capacity_factor", "below 1 an expert could not take even its fair share of the tokens (0 is dropless)");
}

// Multi-head latent attention keys (models::TransformerSpec): kv_lora_rank turns it on.
void parse_latent_attention(Reader& r, models::TransformerSpec& m) {
  if (!r.has("kv_lora_rank")) {
    for (const char* key : {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (r.has(key)) r.fail(key, "only multi-head latent attention (model.kv_lora_rank) takes it");
    return;
  }
  m.kv_lora_rank = r.integer("kv_lora_rank", 1, 1000000);
  m.q_lora_rank = r.integer("q_lora_rank", 0, 1000000, 0);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1, 100000);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 0, 100000);
  m.v_head_dim = r.integer("v_head_dim", 1, 100000);
}

models::TransformerSpec parse_transformer(Reader& r, const std::string& name) {
  models::TransformerSpec m;
  m.name = name;
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1000000);
  m.num_heads = r.integer("num_heads", 1, 100000);
  m.num_kv_heads = r.integer("num_kv_heads", 1, 100000, m.num_heads);
  m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, 10000000, 4 * m.hidden_size);
  m.seq_len = r.integer("seq_len", 1, 10000000);
  m.vocab_size = r.integer("vocab_size", 1, 100000000);
  const std::string mlp = r.choice("mlp", {"gelu", "swiglu", "squared-relu"}, "gelu");
  m.mlp = mlp == "swiglu" ? models::Mlp::SwiGlu : mlp == "squared-relu" ? models::Mlp::SquaredRelu : models::Mlp::Gelu;
  m.tied_embeddings = r.boolean("tied_embeddings", true);
  m.norm = r.choice("norm", {"layernorm", "rmsnorm"}, "layernorm") == "rmsnorm" ? models::Norm::RmsNorm
                                                                                  : models::Norm::LayerNorm;
  m.linear_bias = r.boolean("linear_bias", true);
  m.position_embedding = r.choice("position_embedding", {"learned", "rotary"}, "learned") == "rotary"
                             ? models::PositionEmbedding::Rotary
                             : models::PositionEmbedding::Learned;
  m.dropout = r.boolean("dropout", true);
  m.head_dim = r.integer("head_dim", 1, 100000, 0);
  parse_experts(r, m);
  parse_latent_attention(r, m);
  r.finish();
  if (m.head_dim == 0 && !m.mla() && m.hidden_size % m.num_heads != 0)
    r.fail("num_heads", fmt::format("{} does not divide model.hidden_size ({})", m.num_heads, m.hidden_size));
  if (m.num_heads % m.num_kv_heads != 0)
    r.fail("num_kv_heads", fmt::format("{} does not divide model.num_heads ({})", m.num_kv_heads, m.num_heads));
  return m;
}

// A vision transformer: transformer blocks over image patches and a class token.
models::TransformerSpec parse_vit(Reader& r, const std::string& name) {
  models::TransformerSpec m;
  m.name = name;
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1000000);
  m.num_heads = r.integer("num_heads", 1, 100000);
  m.num_kv_heads = m.num_heads;
  m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, 10000000, 4 * m.hidden_size);
  m.image_size = r.integer("image_size", 1, 100000);
  m.patch_size = r.integer("patch_size", 1, 100000);
  m.channels = r.integer("channels", 1, 100000, 3);
  m.classes = r.integer("classes", 1, 10000000);
  m.dropout = r.boolean("dropout", false);
  m.tied_embeddings = false;
  m.vocab_size = 0;
  r.finish();
  if (m.image_size % m.patch_size != 0)
    r.fail("patch_size", fmt::format("{} does not divide model.image_size ({})", m.patch_size, m.image_size));
  if (m.hidden_size % m.num_heads != 0)
    r.fail("num_heads", fmt::format("{} does not divide model.hidden_size ({})", m.num_heads, m.hidden_size));
  const std::int64_t side = m.image_size / m.patch_size;
  m.seq_len = side * side + 1;  // the patches and the class token
  return m;
}

// Compiles a CNN's declarative layer list into the builder. Each entry is {"op": ...}; ops run in
// sequence, `add` and `concat` run their branches (lists starting from the same tensor; an empty
// branch of `add` is the identity) and join them, `block` groups its layers into one
// pipeline-splittable layer, `repeat` writes its layers `count` times. At the top level every
// entry that is not a block is a layer of its own.
class LayerList {
 public:
  LayerList(models::CnnBuilder& b, std::shared_ptr<const Origins> origins) : b_(b), origins_(std::move(origins)) {}

  int sequence(const Json& list, const std::string& pointer, int x, bool top, const std::string& suffix = "") {
    if (!list.is_array()) fail(pointer, "expected a list of layers");
    for (std::size_t i = 0; i < list.size(); ++i) x = entry(list[i], json_pointer_append(pointer, std::to_string(i)), x, top, suffix);
    return x;
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& why) const {
    throw InputError(origins_->file_for(pointer), pointer, why);
  }

  // A size written as one number or as [height, width].
  std::pair<std::int64_t, std::int64_t> pair(Reader& e, std::string_view key, std::int64_t min, std::int64_t fallback) {
    if (!e.has(key)) return {fallback, fallback};
    const Json& v = e.raw(key);
    auto ok = [&](const Json& n) { return n.is_number_integer() && n.get<std::int64_t>() >= min && n.get<std::int64_t>() <= 100000; };
    if (ok(v)) return {v.get<std::int64_t>(), v.get<std::int64_t>()};
    if (v.is_array() && v.size() == 2 && ok(v[0]) && ok(v[1])) return {v[0].get<std::int64_t>(), v[1].get<std::int64_t>()};
    e.fail(key, fmt::format("expected a whole number of at least {}, or [height, width]", min));
  }

  int entry(const Json& j, const std::string& pointer, int x, bool top, const std::string& suffix) {
    if (!j.is_object()) fail(pointer, "expected a layer object with an \"op\"");
    Reader e(j, pointer, origins_);
    const std::string op = e.choice("op", {"conv", "batch_norm", "relu", "max_pool", "avg_pool", "global_avg_pool", "fc",
                                           "dropout", "add", "concat", "block", "repeat"});
    std::string name = e.text("name", "");
    if (op == "repeat") {
      const std::int64_t count = e.integer("count", 1, 10000);
      const Json& layers = e.raw("layers");
      e.finish();
      for (std::int64_t i = 0; i < count; ++i)
        x = sequence(layers, e.pointer("layers"), x, top, top ? suffix + "." + std::to_string(i) : suffix);
      return x;
    }
    if (op == "block") {
      if (!top) e.fail("op", "a block is a pipeline-splittable layer: only at the top level of \"layers\"");
      if (name.empty()) e.fail("name", "a block needs a name");
      const Json& layers = e.raw("layers");
      e.finish();
      b_.layer(name + suffix);
      return sequence(layers, e.pointer("layers"), x, false);
    }
    if (top) b_.layer((name.empty() ? fmt::format("layer{}", layers_++) : name) + suffix);
    if (!name.empty()) name += suffix;
    b_.at(pointer);
    if (op == "conv") {
      const std::int64_t filters = e.integer("filters", 1, 1000000);
      const auto [r, s] = pair(e, "kernel", 1, 1);
      const auto [sh, sw] = pair(e, "stride", 1, 1);
      const auto [ph, pw] = pair(e, "padding", 0, 0);
      const std::int64_t groups = e.integer("groups", 1, 1000000, 1);
      const bool bias = e.boolean("bias", false);
      e.finish();
      return b_.conv(x, filters, r, s, sh, sw, ph, pw, groups, bias, name);
    }
    if (op == "max_pool" || op == "avg_pool") {
      const std::int64_t k = e.integer("kernel", 1, 100000);
      const std::int64_t stride = e.integer("stride", 1, 100000, k);
      const std::int64_t pad = e.integer("padding", 0, 100000, 0);
      e.finish();
      return op == "max_pool" ? b_.max_pool(x, k, stride, pad, name) : b_.avg_pool(x, k, stride, pad, name);
    }
    if (op == "fc") {
      // "units": "classes" ties the output layer to the model's class count.
      std::int64_t units = 0;
      if (e.has("units") && e.raw("units") == Json("classes")) units = classes_;
      else units = e.integer("units", 1, 100000000);
      const bool bias = e.boolean("bias", true);
      e.finish();
      return b_.fc(x, units, bias, name);
    }
    if (op == "dropout") {
      const double rate = e.number("rate", Range{0.0, 1.0}, 0.5);
      e.finish();
      if (rate >= 1.0) e.fail("rate", "must be below 1");
      return b_.dropout(x, rate, name);
    }
    if (op == "add" || op == "concat") {
      const Json& branches = e.raw("branches");
      e.finish();
      const std::string bp = e.pointer("branches");
      if (!branches.is_array() || branches.size() < 2) fail(bp, "expected a list of at least two branches (lists of layers)");
      std::vector<int> outs;
      for (std::size_t i = 0; i < branches.size(); ++i) {
        const std::string p = json_pointer_append(bp, std::to_string(i));
        if (op == "concat" && branches[i].is_array() && branches[i].empty()) fail(p, "a concat branch needs at least one layer");
        outs.push_back(sequence(branches[i], p, x, false));
      }
      b_.at(pointer);
      return op == "add" ? b_.add(outs, name) : b_.concat(outs, name);
    }
    e.finish();
    if (op == "batch_norm") return b_.bn(x, name);
    if (op == "relu") return b_.relu(x, name);
    return b_.global_avg_pool(x, name);
  }

 public:
  std::int64_t classes_ = 0;

 private:
  models::CnnBuilder& b_;
  std::shared_ptr<const Origins> origins_;
  int layers_ = 0;
};

models::CnnSpec parse_cnn(Reader& r, const std::string& name, const std::shared_ptr<const Origins>& origins) {
  const std::int64_t image = r.integer("image_size", 1, 100000);
  const std::int64_t channels = r.integer("channels", 1, 100000, 3);
  const std::int64_t classes = r.integer("classes", 1, 10000000);
  if (r.has("structure") == r.has("layers")) r.fail_here("give a CNN either \"layers\" or \"structure\", not both");
  try {
    if (r.has("layers")) {
      models::CnnBuilder b(name, image, channels, classes);
      LayerList list(b, origins);
      list.classes_ = classes;
      const int out = list.sequence(r.raw("layers"), r.pointer("layers"), models::CnnBuilder::kImage, true);
      b.at(r.pointer("layers"));
      models::CnnSpec spec = b.finish(out);
      spec.structure = "layers";
      r.finish();
      return spec;
    }
    Reader st = r.object("structure");
    const std::string family = st.choice("name", {"resnet", "inception-v3", "amoebanet-d"});
    r.finish();
    if (channels != 3) r.fail("channels", fmt::format("the {} structure takes 3-channel images", family));
    models::CnnSpec spec;
    if (family == "resnet") {
      const Json& stages = st.raw("stages");
      std::vector<std::int64_t> counts;
      if (!stages.is_array() || stages.empty() || stages.size() > 6) st.fail("stages", "expected a list of 1 to 6 block counts");
      for (const auto& n : stages) {
        if (!n.is_number_integer() || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > 1000)
          st.fail("stages", "each stage needs 1 to 1000 blocks");
        counts.push_back(n.get<std::int64_t>());
      }
      const bool bottleneck = st.choice("block", {"bottleneck", "basic"}, "bottleneck") == "bottleneck";
      st.finish();
      spec = models::resnet(name, image, classes, counts, bottleneck);
    } else if (family == "inception-v3") {
      const bool aux = st.boolean("aux_head", false);
      st.finish();
      spec = models::inception_v3(name, image, classes, aux);
    } else {
      const std::int64_t cells = st.integer("normal_cells", 3, 3000);
      const std::int64_t filters = st.integer("filters", 8, 100000);
      st.finish();
      if (cells % 3) st.fail("normal_cells", fmt::format("{} normal cells do not split into AmoebaNet's three groups", cells));
      if (filters % 8) st.fail("filters", fmt::format("{} filters: AmoebaNet-D needs a multiple of 8", filters));
      spec = models::amoebanet_d(name, image, classes, cells, filters);
    }
    spec.structure = family;
    return spec;
  } catch (const models::CnnError& e) {
    const std::string where = e.where.empty() ? r.pointer("image_size") : e.where;
    throw InputError(origins->file_for(where), where, e.what());
  }
}

}  // namespace

models::ModelSpec parse_model(Reader r, const std::string& preset, const std::shared_ptr<const Origins>& origins) {
  models::ModelSpec spec;
  spec.name = preset.empty() ? "inline" : preset;
  const std::string kind = r.choice("kind", {"transformer", "vit", "cnn"});
  if (kind == "cnn") spec.family = parse_cnn(r, spec.name, origins);
  else if (kind == "vit") spec.family = parse_vit(r, spec.name);
  else spec.family = parse_transformer(r, spec.name);
  return spec;
}

}  // namespace dtsim::config
