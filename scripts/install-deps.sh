#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, and the e2e tests' npm packages
# (from tests/e2e/package-lock.json). Skips whatever is already present; safe to run often.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PKGS=(build-essential pkg-config libmicrohttpd-dev libjansson-dev libpcre2-dev
          libutf8proc-dev libcmocka-dev libcurl4-openssl-dev clang llvm libclang-rt-14-dev
          clang-format nodejs npm curl ca-certificates python3 libpng-dev libjpeg62-turbo-dev libwebp-dev libsndfile1-dev libmpg123-dev nettle-dev)

missing=()
for p in "${DEB_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian (e.g. nodesource): accept working binaries.
if command -v node >/dev/null && command -v npm >/dev/null; then
    filtered=()
    for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "missing Debian packages: ${missing[*]}" >&2
        echo "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The aarch64 cross build and its emulated tests (make ARCH=aarch64, make test-aarch64): the
# cross compiler, qemu-user and, through multiarch, the arm64 -dev packages of the libraries
# above. On x86-64 hosts only; LLAMAPI_DEPS_AARCH64=0 skips them.
ARM64_DEV=(libmicrohttpd-dev libjansson-dev libpcre2-dev libutf8proc-dev libcmocka-dev
           libcurl4-openssl-dev libpng-dev libjpeg62-turbo-dev libwebp-dev libsndfile1-dev
           libmpg123-dev nettle-dev)
if [[ ${LLAMAPI_DEPS_AARCH64:-1} != 0 && $(dpkg --print-architecture) == amd64 ]]; then
    cross=()
    for p in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static "${ARM64_DEV[@]/%/:arm64}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || cross+=("$p")
    done
    if ((${#cross[@]})); then
        if [[ $(id -u) -ne 0 ]]; then
            echo "missing aarch64 cross packages: ${cross[*]}" >&2
            echo "run: sudo dpkg --add-architecture arm64 && sudo apt-get update &&" \
                "sudo apt-get install -y ${cross[*]} (or LLAMAPI_DEPS_AARCH64=0)" >&2
            exit 1
        fi
        echo "installing (aarch64 cross build): ${cross[*]}"
        export DEBIAN_FRONTEND=noninteractive
        dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${cross[@]}" >/dev/null
    fi
fi

# Tools only tests use: nginx (tests/e2e/scaling.test.mjs runs two servers behind it) and
# Debian's chromium (tests/e2e/webui.test.mjs drives the chat page in it). Each test skips
# without its tool, so as a non-root user a missing one is a notice, not a failure.
# LLAMAPI_DEPS_TESTS=0 skips them (make run: serving needs neither).
if [[ ${LLAMAPI_DEPS_TESTS:-1} != 0 ]]; then
    tools=()
    for p in nginx chromium; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || tools+=("$p")
    done
    if ((${#tools[@]})); then
        if [[ $(id -u) -ne 0 ]]; then
            echo "note: some tests need ${tools[*]} (sudo apt-get install -y ${tools[*]})" >&2
        else
            echo "installing (tests): ${tools[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -qq --no-install-recommends "${tools[@]}" >/dev/null ||
                { apt-get update -qq &&
                  apt-get install -y -qq --no-install-recommends "${tools[@]}" >/dev/null; }
        fi
    fi
fi

if [[ -f tests/e2e/package.json ]]; then
    if [[ ! -d tests/e2e/node_modules ]] || [[ tests/e2e/package-lock.json -nt tests/e2e/node_modules ]]; then
        (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
        touch tests/e2e/node_modules
    fi
fi
