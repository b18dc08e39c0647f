"""mneme-nvcc's table of nvcc options: each one mapped to clang's, ignored
(with the reason) or refused, and the state of one translation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mneme_cc.errors import UsageError

TOOL = "mneme-nvcc"


class NvccError(UsageError):
    """An nvcc command line mneme-nvcc cannot translate (exit status 2)."""


# nvcc's options: long name, short name, whether a value follows, and the
# action. Actions: `pass:ARGS` (clang arguments, space-separated),
# `sep:FLAG` (FLAG VALUE), `list:FLAG` (each comma-separated value becomes FLAG VALUE),
# `joined:FLAG` (FLAG+VALUE), `host:FLAG` (host side only), `set:FIELD[=WORD]`
# (a Translation field: the word, or True), `ignore`, `error` (with
# _ADVICE), `werror` (read by translate()), or a handler named in _HANDLERS.
_OPTIONS = """
cuda                                    cuda                 0  error
cubin                                   cubin                0  output_kind
fatbin                                  fatbin               0  error
ptx                                     ptx                  0  output_kind
optix-ir                                optix-ir             0  error
ltoir                                   ltoir                0  error
preprocess                              E                    0  pass:-E
generate-dependencies                   M                    0  pass:-M
generate-nonsystem-dependencies         MM                   0  pass:-MM
generate-dependencies-with-compile      MD                   0  pass:-MD
generate-nonsystem-dependencies-with-compile MMD             0  pass:-MMD
dependency-output                       MF                   1  sep:-MF
generate-dependency-targets             MP                   0  pass:-MP
dependency-target-name                  MT                   1  sep:-MT
compile                                 c                    0  pass:-c
device-c                                dc                   0  device_c
device-w                                dw                   0  error
device-link                             dlink                0  set:device_link
link                                    link                 0  ignore
lib                                     lib                  0  lib
run                                     run                  0  error
output-file                             o                    1  output
pre-include                             include              1  list:-include
objdir-as-tempdir                       objtemp              0  ignore
library                                 l                    1  library
define-macro                            D                    1  list:-D
undefine-macro                          U                    1  list:-U
include-path                            I                    1  list:-I
system-include                          isystem              1  list:-isystem
library-path                            L                    1  list:-L
output-directory                        odir                 1  error
compiler-bindir                         ccbin                1  ignore
allow-unsupported-compiler              allow-unsupported-compiler 0 ignore
archiver-binary                         arbin                1  ignore
cudart                                  cudart               1  cudart
cudadevrt                               cudadevrt            1  ignore
libdevice-directory                     ldir                 1  error
target-directory                        target-dir           1  error
use-local-env                           use-local-env        0  ignore
force-cl-env-setup                      force-cl-env-setup   0  ignore
profile                                 pg                   0  host:-pg
debug                                   g                    0  host:-g
device-debug                            G                    0  set:device_debug
generate-line-info                      lineinfo             0  set:lineinfo
optimization-info                       opt-info             1  ignore
optimize                                O                    1  optimize
Ofast-compile                           Ofc                  1  ignore
dopt                                    dopt                 1  dopt
dlink-time-opt                          dlto                 0  error
lto                                     lto                  0  error
gen-opt-lto                             gen-opt-lto          0  error
ftemplate-backtrace-limit               ftemplate-backtrace-limit 1 joined:-ftemplate-backtrace-limit=
ftemplate-depth                         ftemplate-depth      1  joined:-ftemplate-depth=
no-exceptions                           noeh                 0  pass:-fno-exceptions
shared                                  shared               0  pass:-shared
x                                       x                    1  language
std                                     std                  1  std
no-host-device-initializer-list         nohdinitlist         0  ignore
no-host-device-move-forward             nohdmoveforward      0  ignore
expt-relaxed-constexpr                  expt-relaxed-constexpr 0 ignore
extended-lambda                         extended-lambda      0  ignore
expt-extended-lambda                    expt-extended-lambda 0  ignore
machine                                 m                    1  machine
m64                                     m64                  0  ignore
compiler-options                        Xcompiler            1  compiler_options
linker-options                          Xlinker              1  linker_options
archive-options                         Xarchive             1  error
ptxas-options                           Xptxas               1  list:-Xcuda-ptxas
nvlink-options                          Xnvlink              1  error
-                                       Xcudafe              1  ignore
static-global-template-stub             static-global-template-stub 1 ignore
device-entity-has-hidden-visibility     device-entity-has-hidden-visibility 1 ignore
forward-unknown-to-host-compiler        forward-unknown-to-host-compiler 0 set:forward=compiler
forward-unknown-to-host-linker          forward-unknown-to-host-linker 0 set:forward=linker
forward-unknown-opts                    forward-unknown-opts 0 set:forward=compiler
dont-use-profile                        noprof               0  ignore
dryrun                                  dryrun               0  pass:-###
verbose                                 v                    0  set:verbose
threads                                 t                    1  ignore
split-compile                           split-compile        1  ignore
split-compile-extended                  split-compile-extended 1 ignore
fdevice-syntax-only                     fdevice-syntax-only  0  pass:--cuda-device-only -fsyntax-only
fdevice-time-trace                      fdevice-time-trace   1  error
keep                                    keep                 0  ignore
keep-dir                                keep-dir             1  ignore
save-temps                              save-temps           0  pass:-save-temps
clean-targets                           clean                0  error
time                                    time                 1  ignore
run-args                                run-args             1  error
input-drive-prefix                      idp                  1  ignore
dependency-drive-prefix                 ddp                  1  ignore
drive-prefix                            dp                   1  ignore
no-align-double                         -                    0  ignore
no-device-link                          nodlink              0  ignore
gpu-architecture                        arch                 1  arch
gpu-code                                code                 1  code
generate-code                           gencode              1  gencode
relocatable-device-code                 rdc                  1  rdc
entries                                 e                    1  error
maxrregcount                            maxrregcount         1  maxrregcount
use_fast_math                           use_fast_math        0  set:fast_math
ftz                                     ftz                  1  fp_switch
prec-div                                prec-div             1  fp_switch
prec-sqrt                               prec-sqrt            1  fp_switch
fmad                                    fmad                 1  fp_switch
extra-device-vectorization              extra-device-vectorization 0 ignore
default-stream                          default-stream       1  default_stream
disable-warnings                        w                    0  pass:-w
keep-device-functions                   keep-device-functions 0 ignore
source-in-ptx                           src-in-ptx           0  ignore
restrict                                restrict             0  ignore
Wreorder                                Wreorder             0  pass:-Wreorder
Wdefault-stream-launch                  Wdefault-stream-launch 0 ignore
Wmissing-launch-bounds                  Wmissing-launch-bounds 0 ignore
Wext-lambda-captures-this               Wext-lambda-captures-this 0 ignore
Wno-deprecated-declarations             Wno-deprecated-declarations 0 pass:-Wno-deprecated-declarations
Wno-deprecated-gpu-targets              Wno-deprecated-gpu-targets 0 ignore
Werror                                  Werror               1  werror
resource-usage                          res-usage            0  pass:-Xcuda-ptxas -v
extensible-whole-program                ewp                  0  error
no-compress                             no-compress          0  ignore
qpp-config                              qpp-config           1  error
compile-as-tools-patch                  astoolspatch         0  error
list-gpu-code                           code-ls              0  error
list-gpu-arch                           arch-ls              0  error
display-error-number                    err-no               0  ignore
no-display-error-number                 no-err-no            0  ignore
diag-error                              diag-error           1  ignore
diag-suppress                           diag-suppress        1  ignore
diag-warn                               diag-warn            1  ignore
host-linker-script                      hls                  1  error
augment-host-linker-script              aug-hls              0  error
relocatable-link                        r                    0  pass:-r
brief-diagnostics                       brief-diag           1  ignore
jump-table-density                      jtd                  1  ignore
relocatable-ptx                         reloc-ptx            0  error
device-stack-protector                  device-stack-protector 1 ignore
compress-mode                           compress-mode        1  ignore
frandom-seed                            frandom-seed         1  joined:-frandom-seed=
sanitize                                sanitize             1  error
jobserver                               jobserver            0  ignore
help                                    h                    0  set:action=help
version                                 V                    0  set:action=version
"""

#: What to do instead, for each nvcc option clang cannot do.
_ADVICE = {
    "cuda": "compile to an object (-c) instead of nvcc's host-side .ii",
    "fatbin": "compile to an object (-c) or, for one arch, to a cubin (-cubin)",
    "optix-ir": "build this file with nvcc",
    "ltoir": "build this file with nvcc",
    "device-w": "compile with -dc instead",
    "run": "link with mneme-nvcc, then run the program",
    "output-directory": "name each object with -o",
    "libdevice-directory": "clang takes libdevice from the toolkit: set CUDA_HOME",
    "target-directory": "cross compilation is not supported: build on the target",
    "dlink-time-opt": "clang does not link-time optimise CUDA device code: drop it",
    "lto": "clang does not link-time optimise CUDA device code: drop it",
    "gen-opt-lto": "clang does not link-time optimise CUDA device code: drop it",
    "archive-options": "drop it (clang writes the archive itself)",
    "nvlink-options": "clang links device code with its own linker wrapper: drop it",
    "fdevice-time-trace": "use -Xcompiler -ftime-trace",
    "clean-targets": "remove the files yourself (make clean)",
    "run-args": "link with mneme-nvcc, then run the program with its arguments",
    "entries": "drop it",
    "extensible-whole-program": "compile with -dc instead",
    "qpp-config": "QNX builds are not supported",
    "compile-as-tools-patch": "drop it",
    "list-gpu-code": "clang's NVPTX target lists its archs: "
                     "clang --target=nvptx64-nvidia-cuda --print-supported-cpus",
    "list-gpu-arch": "clang's NVPTX target lists its archs: "
                     "clang --target=nvptx64-nvidia-cuda --print-supported-cpus",
    "host-linker-script": "give the linker script with -Xlinker -T,FILE",
    "augment-host-linker-script": "give the linker script with -Xlinker -T,FILE",
    "relocatable-ptx": "drop it",
    "sanitize": "drop it and run compute-sanitizer on the program",
}

#: clang spellings that builds configured for a clang CUDA compiler send.
_CLANG_PREFIXES = ("--cuda-gpu-arch=", "--offload-arch=", "--no-offload-arch=", "--cuda-path=",
                   "-Wl,", "-fvisibility=", "--target=", "--sysroot=", "-fdiagnostics-color",
                   "--cuda-feature=")
_CLANG_FLAGS = frozenset("""
    -fPIC -fpic -fPIE -fpie -fno-pic -fno-pie -pie -no-pie -fgpu-rdc -fno-gpu-rdc
    --cuda-device-only --cuda-host-only -S -fvisibility-inlines-hidden -fcolor-diagnostics
    -fno-color-diagnostics -pthread -rdynamic
""".split())

#: nvcc accepts these short options joined to their value (`-Iinc`, `-O3`).
_JOINED = ("I", "D", "U", "L", "l", "O")

#: Added to every compile: nvcc accepts what these make clang accept (C++17
#: `register`, narrowing of a non-constant in braces as a warning, a
#: constexpr function that is never constant).
LENIENCY = ["-Wno-register", "-Wno-error=c++11-narrowing", "-Wno-invalid-constexpr"]

#: Every option was checked here, so clang's warning about one that a job
#: did not use (--cuda-noopt-device-debug on a compile-and-link) is noise
#: nvcc never makes.
QUIET = ["-Qunused-arguments"]

_WERROR_KINDS = {"all-warnings": "-Werror", "reorder": "-Werror=reorder",
                 "deprecated-declarations": "-Werror=deprecated-declarations",
                 "cross-execution-space-call": None, "default-stream-launch": None,
                 "missing-launch-bounds": None, "ext-lambda-captures-this": None}

_ARCH = re.compile(r"(sm|compute|lto)_(\d+[af]?)")
_SOURCE_SUFFIXES = (".cu", ".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".i", ".ii")
_DEVICE_INPUTS = (".ptx", ".cubin", ".fatbin", ".gpu", ".cup")
_LANGUAGES = {"cu": "cuda", "cuda": "cuda", "c++": "c++", "c": "c"}


@dataclass(frozen=True)
class _Option:
    name: str          # the canonical (long) name, or the short one where nvcc has no long one
    takes_value: bool
    action: str


def _option_tables() -> tuple[dict[str, _Option], dict[str, _Option]]:
    longs: dict[str, _Option] = {}
    shorts: dict[str, _Option] = {}
    for line in _OPTIONS.strip().splitlines():
        long, short, value, action = line.split(None, 3)
        option = _Option(long if long != "-" else short, value == "1", action.strip())
        if long != "-":
            longs[long] = option
        if short != "-":
            shorts[short] = option
    return longs, shorts


_LONG, _SHORT = _option_tables()


@dataclass
class Translation:
    """An nvcc command line as clang arguments, before mneme-cxx adds its own."""

    front: list[str] = field(default_factory=list)   # options, in the order given
    tail: list[tuple[str, list[str]]] = field(default_factory=list)  # ("input"|"link", args)
    host: list[list[str]] = field(default_factory=list)  # host-only options
    archs: list[str] = field(default_factory=list)
    virtual_arch: str | None = None
    codes: list[str] = field(default_factory=list)
    language: str | None = None
    output: str | None = None
    output_kind: str | None = None   # "ptx" or "cubin"
    fp: dict[str, bool] = field(default_factory=dict)  # explicit --ftz/--prec-div/...
    fast_math: bool = False
    device_debug: bool = False
    device_opt: bool = False         # -dopt on
    lineinfo: bool = False
    rdc: bool = False
    static_lib: bool = False
    device_link: bool = False        # -dlink: the registration object of the inputs' device code
    verbose: bool = False            # -v: nvcc's `#$` lines
    cudart: str = "shared"
    forward: str | None = None       # unknown options go to the "compiler" or the "linker"
    warnings: list[str] = field(default_factory=list)
    action: str | None = None        # "help" or "version": no compile
    args: list[str] = field(default_factory=list)  # the clang arguments, once finished


