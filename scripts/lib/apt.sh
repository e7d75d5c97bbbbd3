# apt_get_install [--with-recommends] PACKAGE...: apt-get update, then install the packages
# (without their recommended packages unless asked), each step retried 3 times with backoff
# (transient mirror errors). Non-interactive, waiting up to 300 s for another apt's lock,
# keeping existing config files. Sourced by the install scripts (after lib/retry.sh); uses
# their `log`. Needs root.
apt_get_install() {
  local recommends=--no-install-recommends
  if [ "$1" = "--with-recommends" ]; then recommends=; shift; fi
  export DEBIAN_FRONTEND=noninteractive
  APT_GET_OPTS=(-q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef
                -o Dpkg::Options::=--force-confold)
  retry 3 apt-get "${APT_GET_OPTS[@]}" update </dev/null
  retry 3 _apt_install_once ${recommends:+"$recommends"} "$@"
}

_apt_install_once() { # _apt_install_once [--no-install-recommends] PACKAGE...
  # a previous attempt killed mid-install leaves dpkg half-configured: finish that first
  dpkg --configure -a || true
  apt-get "${APT_GET_OPTS[@]}" install -y "$@" </dev/null
}
