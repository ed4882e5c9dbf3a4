# How a Debian root made with mmdebstrap reaches the package registries as this machine does.
# Sourced by scripts/build-wheel, scripts/wheel-check and scripts/fresh-machine-check (bash, set -u).
#
#   root_apt_settings
#       sets `settings`: apt's proxy and date-check settings here (apt-config dump lines), and
#       `aptopts`: one mmdebstrap --aptopt for each, so that the root's apt fetches as ours does
#   root_network ROOT PATH_INSIDE
#       copies resolv.conf into ROOT, and the authorities pip trusts here ($PIP_CERT, else the
#       system's bundle) to ROOT/PATH_INSIDE; sets `pipca` to PATH_INSIDE, or "" when there is none
#   root_env_vars
#       appends to the array `vars` (a chroot's environment) the proxies and pip's index settings
#       set here, and PIP_CERT=$pipca when root_network found a bundle

root_apt_settings() {
  mapfile -t settings < <(apt-config dump |
    grep -E '^Acquire::((https?|ftp)::Proxy|Check-Valid-Until|Check-Date)[ :]' || true)
  aptopts=()
  local s
  for s in "${settings[@]}"; do aptopts+=("--aptopt=$s"); done
}

root_network() {
  local root=$1 inside=$2 f
  if [[ -e /etc/resolv.conf ]]; then cp -L /etc/resolv.conf "$root/etc/resolv.conf"; fi
  pipca=""
  for f in "${PIP_CERT:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [[ -n $f && -f $f ]]; then
      mkdir -p "$(dirname "$root$inside")"
      cp -L "$f" "$root$inside"
      pipca=$inside
      break
    fi
  done
}

root_env_vars() {
  local v
  for v in http_proxy https_proxy no_proxy PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST \
    PIP_DEFAULT_TIMEOUT; do
    if [[ -n ${!v:-} ]]; then vars+=("$v=${!v}"); fi
  done
  if [[ -n ${pipca:-} ]]; then vars+=("PIP_CERT=$pipca"); fi
}
