#!/usr/bin/env bash
# System packages the test suite needs: an sshd for the launcher's ssh tests, Slurm, munge and
# Open MPI for the tests that run towerpack under other launchers (a throwaway single-machine Slurm,
# srun, sbatch, mpirun), iproute2 (ip, tc) for the multi-host tests on network namespaces, and
# libjpeg's headers for towerpack-dataflow's partial JPEG decoding (its C extension; reinstall the
# package after adding them). Idempotent and quick when everything is present; installs with apt-get when
# running as root, and otherwise names what is missing (an error only under CI=true, where every test
# must run).
set -euo pipefail

# Daemons live in sbin, which a non-root PATH often leaves out.
has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/local/sbin/$1" ]; }

need=()
has sshd || need+=(openssh-server)
has ssh || need+=(openssh-client)
has slurmctld || need+=(slurmctld)
has slurmd || need+=(slurmd)
{ has srun && has sbatch && has scancel && has sinfo; } || need+=(slurm-client)
{ has munged && has mungekey; } || need+=(munge)
has mpirun || need+=(openmpi-bin)
{ has ip && has tc; } || need+=(iproute2)
[ -f /usr/include/jpeglib.h ] || need+=(libjpeg62-turbo-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system_deps: please install ${need[*]} (needs root and apt-get); the tests that need them skip until then" >&2
    # CI must run every test, so there a missing package is an error.
    [ "${CI:-}" = true ] && exit 1
    exit 0
fi
echo "system_deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
