;; A command that writes 100 MiB to stdout, 64 KiB at a time (1600 writes),
;; ignoring write errors, then exits 0.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    (local $i i32)
    ;; fill page 0 with 'x'
    (loop $fill
      (i32.store8 (local.get $i) (i32.const 120))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 65536))))
    ;; iovec at 65536: {buf: 0, len: 65536}
    (i32.store (i32.const 65536) (i32.const 0))
    (i32.store (i32.const 65540) (i32.const 65536))
    (local.set $i (i32.const 0))
    (loop $write
      (drop (call $fd_write (i32.const 1) (i32.const 65536) (i32.const 1) (i32.const 65544)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $write (i32.lt_u (local.get $i) (i32.const 1600))))))
