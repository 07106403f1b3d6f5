# Sourced by setup.sh, sanitize.sh and fuzz.sh, so the package list and the install step live once.
# install_packages NAME...: installs those of the Debian packages NAME... that are missing, from
# Debian's archive only. dtsim_packages: what dtsim builds and tests with; dtsim_test_packages: what
# only the tests need (chromium, its driver and selenium for the explorer's browser tests,
# tests/browser/; a single-node Slurm for the sharded sweep's system test, scripts/slurm/).
dtsim_packages=(build-essential cmake pkg-config libsimgrid-dev libeigen3-dev libboost-dev
                nlohmann-json3-dev libfmt-dev libcli11-dev googletest libgtest-dev
                python3-jsonschema libtomlplusplus-dev)
dtsim_test_packages=(chromium chromium-driver python3-selenium slurm-wlm munge)

install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
