#include "sim/sweep/part.hpp"

#include <fmt/format.h>
#include <link.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/config/merge.hpp"
#include "sim/core/files.hpp"

namespace dtsim::sweep::part {

namespace {

// A candidate's prices: every field a row prints or the ranking reads.
constexpr std::pair<const char*, double Candidate::*> kNumbers[] = {
    {"step", &Candidate::step},
    {"samples_per_s", &Candidate::samples_per_s},
    {"mfu", &Candidate::mfu},
    {"peak", &Candidate::peak},
    {"price", &Candidate::price},
    {"cost_per_million_tokens", &Candidate::cost_per_million_tokens},
    {"time_to_train", &Candidate::time_to_train},
    {"gpu_hours", &Candidate::gpu_hours},
    {"cost", &Candidate::cost},
    {"energy_kwh", &Candidate::energy_kwh},
    {"capacity", &Candidate::capacity},
    {"estimate", &Candidate::estimate},
};

// Exactly, as C99's hexadecimal floating point ("0x1.8p+1"); strtod reads it back bit for bit.
std::string exact(double x) { return std::isfinite(x) ? fmt::format("{:a}", x) : fmt::format("{}", x); }

// 64-bit FNV-1a: a fingerprint, not a defence against anyone.
std::uint64_t fnv1a(const std::string& text, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

// [valid, fits, replayed, the numbers in kNumbers' order, error or null]: one short line per row
// (a million candidates make parts of hundreds of megabytes).
Json prices(const Candidate& c) {
  Json j = Json::array({c.valid, c.fits, c.replayed});
  for (const auto& [name, field] : kNumbers) j.push_back(exact(c.*field));
  j.push_back(c.valid ? Json(nullptr) : Json(c.error));
  return j;
}

Json price_fields() {
  Json j = Json::array({"valid", "fits", "replayed"});
  for (const auto& [name, field] : kNumbers) j.push_back(name);
  j.push_back("error");
  return j;
}

// The prices a part holds, onto the candidate the merge enumerated.
void read_prices(const Json& j, Candidate& c) {
  if (!j.is_array() || j.size() != std::size(kNumbers) + 4) throw std::invalid_argument("prices of another layout");
  c.valid = j[0].get<bool>();
  c.fits = j[1].get<bool>();
  c.replayed = j[2].get<bool>();
  std::size_t k = 3;
  for (const auto& [name, field] : kNumbers) c.*field = std::strtod(j[k++].get_ref<const std::string&>().c_str(), nullptr);
  c.error = c.valid ? "" : j[k].get<std::string>();
}

std::string fingerprint(const std::string& path, const Outcome& out) {
  std::uint64_t h = fnv1a(config::load_with_extends(path).json.dump());
  for (const auto& [name, d] : out.devices) h = fnv1a(name + "\n" + (d.file.empty() ? "" : read_text_file(d.file)), h);
  return fmt::format("{:016x}", h);
}

namespace {

// The linker's GNU build-id note of the main program: a digest of the binary that costs nothing
// to read, where hashing the file itself took seconds for a sanitizer build (hundreds of MB).
int read_build_id(dl_phdr_info* info, std::size_t, void* out) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
    const char* end = at + segment.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
      const char* name = at + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static_cast<std::string*>(out)->assign(desc, note->n_descsz);
        break;
      }
      at = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // the first object listed is the main program: stop there
}

}  // namespace

std::string build() {
  static const std::string id = [] {
    std::string bytes;
    dl_iterate_phdr(read_build_id, &bytes);
    if (bytes.empty()) {  // linked without --build-id: the binary's own bytes
      std::ifstream exe("/proc/self/exe", std::ios::binary);
      std::ostringstream all;
      all << exe.rdbuf();
      bytes = std::move(all).str();
    }
    return fmt::format("{:016x}", fnv1a(bytes));
  }();
  return id;
}

Json options(const SearchOptions& o) {
  return Json{{"gpus", o.gpus},
              {"devices", o.devices},
              {"precisions", o.precisions},
              {"rank_by", o.rank_by},
              {"confirm", o.confirm},
              {"exact", o.exact},
              {"by_cluster", o.by_cluster},
              {"max_days", o.limits.max_days},
              {"max_cost", o.limits.max_cost},
              {"min_headroom_gib", o.limits.min_headroom_gib}};
}

SearchOptions options_from(const Json& j) {
  SearchOptions o;
  o.gpus = j.at("gpus");
  o.devices = j.at("devices");
  o.precisions = j.at("precisions");
  o.rank_by = j.at("rank_by");
  o.confirm = j.at("confirm");
  o.exact = j.at("exact");
  o.by_cluster = j.at("by_cluster");
  o.limits = {j.at("max_days"), j.at("max_cost"), j.at("min_headroom_gib")};
  return o;
}

}  // namespace dtsim::sweep::part
