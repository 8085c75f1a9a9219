#!/usr/bin/env bash
# Installs what ft's build, tests and demo need from Debian's packages. Idempotent and quiet
# when everything is already there. The CUDA toolkit (nvcc, CUDA 13 headers) and the NCCL
# headers are not Debian packages: they must already be installed (default /usr/local/cuda).
set -euo pipefail

packages=(
  g++ make cmake ninja-build pkg-config binutils procps python3
  ccache         # the builds compile through it (FT_CCACHE): a rebuild of the same tree is seconds
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libhiredis-dev libboost-dev libibverbs-dev nlohmann-json3-dev libsimdjson-dev
  libxxhash-dev libssl-dev
  redis-server
  elfutils       # eu-stack: the stacks of an incident's suspects (FT_STACK_TOOL)
  prometheus     # metrics.e2e_prometheus scrapes ftworker and ftmaster with it
  chromium       # master.e2e_page screenshots ftmaster's live page (headless)
  python3-torch  # PyTorch (CPU) for Debian's /usr/bin/python3: the PyTorch tests (python/README.md)
  python3-yaml   # deploy.kubernetes_manifests parses deploy/kubernetes
  systemd        # systemd-analyze: deploy.systemd_units verifies deploy/systemd
  slurmctld slurmd slurm-client munge  # deploy.e2e_slurm: a one-node Slurm runs deploy/slurm's prolog and epilog
)

# `install-deps.sh fuzz` (make fuzz): also clang 16, whose libFuzzer builds tests/fuzz (Debian's
# default clang 14 lacks std::source_location, which common/status.h uses).
for extra in "$@"; do
  case "$extra" in
    fuzz) packages+=(clang-16) ;;
    *) echo "install-deps: unknown extra '$extra' (known: fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda_home/bin/nvcc" ] || [ ! -f "$cuda_home/include/cuda_runtime_api.h" ]; then
  echo "install-deps: no CUDA toolkit at $cuda_home (need nvcc and the CUDA 13 headers; set CUDA_HOME)" >&2
  exit 1
fi
if [ ! -f "${NCCL_ROOT:-$cuda_home}/include/nccl.h" ]; then
  echo "install-deps: no nccl.h under ${NCCL_ROOT:-$cuda_home}/include (set NCCL_ROOT)" >&2
  exit 1
fi
