// replay_simgrid() without SimGrid in the binary: dtsim loads libdtsim_simgrid.so
// (simgrid_replay.cpp) the first time a replay runs on SimGrid, so the commands that never do
// (analytical runs, sweeps, serve, --version) start without SimGrid's libraries, ns-3's among
// them: the dynamic loader spent half of dtsim's start-up on them. Tests that link the replay's
// objects directly call them without loading anything.
#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/errors.hpp"
#include "sim/replay/replay.hpp"

// Defined by simgrid_replay.cpp; null unless its object is linked into this program.
extern "C" void dtsim_simgrid_replay(const dtsim::replay::ReplayInput* in, dtsim::replay::Timeline* out)
    __attribute__((weak));

namespace dtsim::replay {

namespace {

using Entry = void (*)(const ReplayInput*, Timeline*);

constexpr const char* kModule = "libdtsim_simgrid.so";

// Beside the binary (an installed dtsim, or build/dtsim), one folder up (the test binaries in
// build/tests), then the build folder this dtsim was configured in.
std::vector<std::filesystem::path> candidates() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / kModule);
    out.push_back(exe.parent_path().parent_path() / kModule);
  }
#ifdef DTSIM_PLUGIN_DIR
  out.push_back(std::filesystem::path(DTSIM_PLUGIN_DIR) / kModule);
#endif
  return out;
}

// The module's entry, or an InputError (exit 2) saying what is missing and what still works.
Entry load() {
  const std::string instead = ": the simgrid backend is not available (\"backend\": \"analytical\" needs no module)";
  std::error_code ec;
  for (const auto& c : candidates()) {
    if (!std::filesystem::exists(c, ec)) continue;
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw InputError("", "", std::string("cannot load ") + c.string() + " (" + dlerror() + ")" + instead);
    if (auto* e = reinterpret_cast<Entry>(dlsym(h, "dtsim_simgrid_replay"))) return e;
    throw InputError("", "", c.string() + " is not this dtsim's SimGrid replay" + instead);
  }
  throw InputError("", "",
                   std::string(kModule) + " is not beside the dtsim binary (build the dtsim_simgrid target)" + instead);
}

}  // namespace

Timeline replay_simgrid(const ReplayInput& in) {
  Entry entry = dtsim_simgrid_replay;
  if (!entry) {
    static const Entry loaded = load();  // an error is thrown again at the next call
    entry = loaded;
  }
  Timeline out;
  entry(&in, &out);
  return out;
}

}  // namespace dtsim::replay
