; What a device job leaves in the hand-off directory becomes code in the host
; object, so the directory must be the user's own and closed to others: a
; directory others can write, or a link, is refused with a clear error.
; Records no host job took are swept an hour on.
; RUN: rm -rf %t && mkdir -p %t/open %t/real %t/ok
; RUN: chmod 777 %t/open
; RUN: not opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t/open \
; RUN:     -mneme-handoff-key=k %s -disable-output 2>&1 | FileCheck %s --check-prefix=OPEN
; RUN: ln -s %t/real %t/link
; RUN: not opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t/link \
; RUN:     -mneme-handoff-key=k %s -disable-output 2>&1 | FileCheck %s --check-prefix=LINK
; RUN: touch -d '2 hours ago' %t/ok/stale.sm_90.mnir
; RUN: touch %t/ok/fresh.sm_90.mnir
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t/ok \
; RUN:     -mneme-handoff-key=k %s -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t/ok \
; RUN:     -mneme-handoff-key=k %S/Inputs/host-module.ll -disable-output
; RUN: ls %t/ok | FileCheck %s --check-prefix=SWEPT

target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @_Z1kv() #0 {
  ret void
}

attributes #0 = { "target-cpu"="sm_90" }

; OPEN: error: mneme: cannot hand the device IR of {{.*}}: the hand-off directory {{.*}}open is writable by others; chmod 700 it
; LINK: the hand-off directory {{.*}}link is not a directory (a link?)
; SWEPT-NOT: stale
; SWEPT: fresh.sm_90.mnir
; SWEPT-NOT: k.sm_90.mnir
