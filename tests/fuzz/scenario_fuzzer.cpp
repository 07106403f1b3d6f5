// libFuzzer target: bytes as a scenario file, loaded the way `dtsim memory` loads it (extends
// chains, presets, validation, the cost estimate), then planned for its memory breakdown.
// Every bad input must come back as an InputError (exit 2 in the CLI); a crash, a sanitizer report
// or any other exception is a finding. Built by -DDTSIM_FUZZ=ON; run by scripts/fuzz.sh.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/result.hpp"

namespace fs = std::filesystem;

namespace {

// A scratch copy of scenarios/ (in a scratch DTSIM_HOME) in which the input is written as fuzz/input.json. fuzz/ also holds
// every scenario file by its name, so that seeds' relative `extends` ("base.json",
// "../base/dgx-a100.json", "gpt2-dp8-a100.json") resolve as they do in the tree.
struct Scratch {
  fs::path root, input;
  Scratch() {
    std::string tmpl = (fs::exists("/dev/shm") ? "/dev/shm" : "/tmp") + std::string("/dtsim-fuzz-XXXXXX");
    if (!mkdtemp(tmpl.data())) std::abort();
    root = tmpl;
    const fs::path tree = fs::path(DTSIM_SOURCE_DIR) / "scenarios";
    fs::copy(tree, root / "scenarios", fs::copy_options::recursive);
    fs::create_directories(root / "scenarios" / "fuzz");
    for (const auto& e : fs::recursive_directory_iterator(tree))
      if (e.is_regular_file())
        fs::copy_file(e.path(), root / "scenarios" / "fuzz" / e.path().filename(), fs::copy_options::overwrite_existing);
    input = root / "scenarios" / "fuzz" / "input.json";
    // The scratch is the project's data folder, so that "../base/..." stays inside its scenarios/
    // (an `extends` may not leave them without --allow-outside); presets come from the tree.
    for (const char* sub : {"models", "hardware_profiles"})
      fs::create_directory_symlink(fs::path(DTSIM_SOURCE_DIR) / sub, root / sub);
    setenv("DTSIM_HOME", root.c_str(), 1);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Scratch scratch;
  {
    std::ofstream out(scratch.input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto s = dtsim::config::load_scenario(scratch.input.string());
    dtsim::results::check_budget(s, false);
    // Large plans are allowed (up to 4M tasks) but take seconds: the fuzzer looks for wrong
    // behaviour, not for slow inputs the limits already bound.
    if (dtsim::results::estimate(s, s.backend, false).tasks > 2e4) return 0;
    const auto r = dtsim::results::memory_only(s);
    if (!(r.memory.peak() >= 0)) std::abort();  // a negative or NaN memory plan
  } catch (const dtsim::InputError&) {
    // refused with file and pointer: what bad input should get
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an input error: %s\n", e.what());
    std::abort();
  }
  return 0;
}
