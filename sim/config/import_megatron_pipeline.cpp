// Megatron-LM's pipeline split (megatron/core/transformer/transformer_block.py,
// pipeline_parallel_layer_layout.py) as dtsim's virtual_stages and stage_layers.
#include <algorithm>
#include <regex>

#include "sim/config/import_megatron_args.hpp"

namespace dtsim::config::megatron_args {

bool has_flag(const Args& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const auto& a) { return a.first == flag; });
}

long long flag_number(const Args& args, const std::string& flag) {
  for (const auto& [f, v] : args)
    if (f == flag) {
      try {
        std::size_t used = 0;
        const long long n = std::stoll(v, &used);
        return used == v.size() ? n : 0;
      } catch (const std::exception&) {
        return 0;
      }
    }
  return 0;
}

namespace {

// Blocks per model chunk as Megatron-LM builds them (transformer_block.py, get_num_layers_to_build):
// the first and last stages hold what --decoder-first/last-pipeline-num-layers give, the others
// share the rest evenly, and each stage's layers split evenly over its virtual stages; chunk j
// (virtual rank j / pipeline) runs on stage j % pipeline. Empty with a reason when they do not divide.
std::vector<long long> chunk_layers(long long layers, long long stages, long long virtual_stages, long long first,
                                    long long last, std::string& why) {
  const long long fixed = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
  const long long rest = layers - first - last, middle = stages - fixed;
  if (rest < 0 || (middle > 0 && rest % middle != 0) || (middle == 0 && rest != 0))
    return why = fmt::format("{} layers less the first and last stages' do not divide over {} stages", layers, middle), std::vector<long long>{};
  std::vector<long long> per_stage(static_cast<std::size_t>(stages), middle > 0 ? rest / middle : 0);
  if (first > 0) per_stage.front() = first;
  if (last > 0) per_stage.back() = last;
  std::vector<long long> out(static_cast<std::size_t>(stages * virtual_stages));
  for (long long st = 0; st < stages; ++st) {
    if (per_stage[static_cast<std::size_t>(st)] % virtual_stages != 0 || per_stage[static_cast<std::size_t>(st)] == 0)
      return why = fmt::format("stage {}'s {} layers do not split into {} virtual stages of at least one", st,
                               per_stage[static_cast<std::size_t>(st)], virtual_stages), std::vector<long long>{};
    for (long long v = 0; v < virtual_stages; ++v) out[static_cast<std::size_t>(v * stages + st)] = per_stage[static_cast<std::size_t>(st)] / virtual_stages;
  }
  return out;
}

// Blocks per model chunk with the embedding and the loss counted as layers of the split
// (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split;
// transformer_block.py, get_num_layers_to_build): layers + 1 (+ 1) divide evenly over the stages
// and their virtual stages, and the first chunk holds one block fewer for the embedding, the last
// one fewer for the loss. Empty with a reason when they do not divide.
std::vector<long long> accounted_layers(long long layers, long long stages, long long virtual_stages, bool embedding, bool loss,
                                        std::string& why) {
  const long long total = layers + (embedding ? 1 : 0) + (loss ? 1 : 0);
  if (total % stages != 0 || (total / stages) % virtual_stages != 0)
    return why = fmt::format("{} layers with the embedding and loss do not divide over {} x {} stages", total, stages, virtual_stages),
           std::vector<long long>{};
  std::vector<long long> out(static_cast<std::size_t>(stages * virtual_stages), total / stages / virtual_stages);
  if (embedding) --out.front();
  if (loss) --out.back();
  if (out.front() < 0 || out.back() < 0) return why = "not enough layers for the first or last chunk", std::vector<long long>{};
  return out;
}

// Each of Python's re.sub passes once over `s`: every match of `re` becomes its first group
// repeated by its second. False when the result would grow past `longest`.
bool unroll(std::string& s, const std::regex& re, std::size_t longest) {
  std::string out;
  auto at = s.cbegin();
  for (std::sregex_iterator it(s.begin(), s.end(), re), end; it != end; ++it) {
    const auto& m = *it;
    out.append(at, m[0].first);
    const std::string unit = m[1];
    if (m[2].length() > 7) return false;
    const long long n = std::stoll(m[2]);
    if (out.size() + unit.size() * static_cast<std::size_t>(n) > longest) return false;
    for (long long i = 0; i < n; ++i) out += unit;
    at = m[0].second;
  }
  out.append(at, s.cend());
  s = std::move(out);
  return s.size() <= longest;
}

// Megatron-Core's --pipeline-model-parallel-layout (transformer/pipeline_parallel_layer_layout.py,
// parse_str_to_list): commas dropped, "(...)*n" and then "x*n" unrolled, "|" between the
// pipeline x virtual stages, listed as layout[vpp_rank * pipeline + pp_rank] (chunk j on stage
// j % pipeline, stage_layers' order); "t" a transformer layer, "E" the embedding, "L" the loss,
// "m" a multi-token-prediction layer. Each chunk's "t" count, or empty with the reason.
std::vector<long long> layout_chunks(std::string s, long long stages, long long layers, std::string& why, long long& mtp) {
  // Longer than any model's layout (10,000 blocks at most): refused before std::regex, whose
  // matching recurses per character, walks it.
  constexpr std::size_t kLongest = 1 << 16, kWritten = 4096;
  if (s.size() > kWritten) return why = "too long", std::vector<long long>{};
  std::erase(s, ',');
  static const std::regex group(R"(\(([^)]+)\)\*(\d+))"), one(R"((.)\*(\d+))");
  if (!unroll(s, group, kLongest) || !unroll(s, one, kLongest)) return why = "too long once unrolled", std::vector<long long>{};
  std::vector<long long> out{0};
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '|') out.push_back(0);
    else if (c == 't') ++out.back();
    else if (c == 'm' && s.find('|', i) != std::string::npos)
      return why = "dtsim keeps the multi-token prediction layers on the last chunk", std::vector<long long>{};
    else if (c == 'm') ++mtp;
    else if ((c == 'E' && out.size() > 1) || (c == 'L' && s.find('|', i) != std::string::npos))
      return why = "dtsim keeps the embedding on the first chunk and the loss on the last", std::vector<long long>{};
    else if (c != 'E' && c != 'L' && c != 'm') return why = fmt::format("'{}' is not a layer dtsim knows (E, t, m, L)", c), std::vector<long long>{};
  }
  long long sum = 0;
  for (long long n : out) sum += n;
  if (stages < 1 || static_cast<long long>(out.size()) % stages != 0)
    return why = fmt::format("{} stages do not divide over {} pipeline ranks", out.size(), stages), std::vector<long long>{};
  if (sum != layers) return why = fmt::format("it places {} transformer layers, the model has {}", sum, layers), std::vector<long long>{};
  // The first chunk holds the embedding and the last the loss: either may hold no block.
  if (out.size() > 2 && std::find(out.begin() + 1, out.end() - 1, 0LL) != out.end() - 1)
    return why = "a middle stage without transformer layers is not modelled", std::vector<long long>{};
  return out;
}

// --pipeline-model-parallel-layout as stage_layers and virtual stages; true when the flag was given.
bool map_layout(const Args& args, Mapper& m) {
  const auto it = std::find_if(args.begin(), args.end(), [](const auto& a) { return a.first == "--pipeline-model-parallel-layout"; });
  if (it == args.end()) return false;
  auto& p = m.run.parallelism;
  const long long layers = m.run.model.value("num_layers", 0LL), stages = p.value("pipeline", 1LL);
  std::string why;
  long long mtp = 0;
  const auto chunks = layout_chunks(it->second, stages, layers, why, mtp);
  if (chunks.empty()) {
    std::erase(m.run.mapped, it->first);
    m.run.unmapped.push_back(fmt::format("{} {} ({})", it->first, it->second, why));
    return true;
  }
  const long long v = static_cast<long long>(chunks.size()) / stages;
  if (v > 1) p["virtual_stages"] = v, p["pipeline_schedule"] = "interleaved-1f1b";
  p["stage_layers"] = chunks;
  // The layout's "m"s are the model's multi-token prediction layers (Megatron checks that they are
  // --mtp-num-layers of them).
  if (mtp > 0) m.run.model["mtp_layers"] = mtp;
  return true;
}

}  // namespace

// Virtual stages (--num-virtual-stages-per-pipeline-rank, or layers per stage over
// --num-layers-per-virtual-pipeline-stage) and uneven first and last stages as stage_layers.
void map_pipeline_split(const Args& args, Mapper& m) {
  auto& p = m.run.parallelism;
  const long long layers = m.run.model.value("num_layers", 0LL), stages = p.value("pipeline", 1LL);
  const long long first = flag_number(args, "--decoder-first-pipeline-num-layers"), last = flag_number(args, "--decoder-last-pipeline-num-layers");
  auto unmap = [&](std::initializer_list<const char*> flags, const std::string& why) {
    for (const char* f : flags)
      if (std::erase(m.run.mapped, std::string(f)) > 0) m.run.unmapped.push_back(fmt::format("{} ({})", f, why));
  };
  if (map_layout(args, m))
    return unmap({"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
                 "Megatron refuses it with --pipeline-model-parallel-layout");
  long long v = flag_number(args, "--num-virtual-stages-per-pipeline-rank");
  if (const long long per = flag_number(args, "--num-layers-per-virtual-pipeline-stage"); per > 0) {
    if (layers > 0 && layers % (stages * per) == 0) v = layers / stages / per;  // arguments.py: (num_layers // pipeline) // this
    else unmap({"--num-layers-per-virtual-pipeline-stage"}, "does not divide the layers per stage: give parallelism.virtual_stages");
  }
  if (v > 1) p["virtual_stages"] = v, p["pipeline_schedule"] = "interleaved-1f1b";
  const bool embedding = has_flag(args, "--account-for-embedding-in-pipeline-split"),
             loss = has_flag(args, "--account-for-loss-in-pipeline-split");
  if ((embedding || loss) && layers > 0) {
    std::string why = first > 0 || last > 0 ? "Megatron refuses it with --decoder-first/last-pipeline-num-layers"
                      : stages < 2          ? "needs --pipeline-model-parallel-size above 1"
                                            : "";
    const auto split = why.empty() ? accounted_layers(layers, stages, std::max(1LL, v), embedding, loss, why) : std::vector<long long>{};
    if (split.empty()) unmap({"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}, why);
    else return void(p["stage_layers"] = split);
  }
  if ((first == 0 && last == 0) || layers == 0) return;
  std::string why = stages < 2 ? "needs --pipeline-model-parallel-size above 1" : "";
  const auto split = why.empty() ? chunk_layers(layers, stages, std::max(1LL, v), first, last, why) : std::vector<long long>{};
  if (split.empty()) return unmap({"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"}, why);
  p["stage_layers"] = split;
}

}  // namespace dtsim::config::megatron_args
