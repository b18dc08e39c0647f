# Sourced by scripts/test and scripts/demo: installs what mneme-cc needs on
# Debian 12 (clang/LLVM 22 from apt; the package into .venv) and puts the
# virtual environment first on PATH.  A CUDA toolkit must already be there.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${MNEME_VENV:-$ROOT/.venv}

missing=()
command -v clang-22 >/dev/null || missing+=(clang-22)
[ -f /usr/lib/llvm-22/lib/cmake/llvm/LLVMConfig.cmake ] || missing+=(llvm-22-dev)
[ -x /usr/lib/llvm-22/bin/FileCheck ] || missing+=(llvm-22-tools)
[ -f /usr/include/zstd.h ] || missing+=(libzstd-dev)
command -v cmake >/dev/null || missing+=(cmake)
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# The tuner's multi-process test runs a PostgreSQL server on loopback.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null \
  || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "$ROOT[test]"
export PATH="$VENV/bin:$PATH"
