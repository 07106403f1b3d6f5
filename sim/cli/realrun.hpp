#pragma once
#include <CLI/CLI.hpp>
#include <memory>

// `dtsim realrun` (a real data-parallel training run on this machine against dtsim's prediction)
// and the hidden `realrun-worker` its processes run.
namespace dtsim::cli {

class Realrun {
 public:
  explicit Realrun(CLI::App& app);  // adds both subcommands
  // The exit code when one of them was chosen, else -1.
  int dispatch();

 struct State;  // the options, filled by parsing

 private:
  std::shared_ptr<State> s_;
};

}  // namespace dtsim::cli
