; ModuleID = '/work/main/tests/lit/embed-warns-without-device-ir.ll'
source_filename = "lonely.cu"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define internal void @__cuda_register_globals(ptr %h) {
  ret void
}
