;; A command that writes its whole request to stderr and exits 1: an env
;; policy that tattles every ambient value it was sent, in its stderr and
;; so in the error that quotes stderr.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 4)
  (func (export "_start")
    (local $total i32)
    (block $eof
      (loop $read
        (i32.store (i32.const 16) (i32.add (i32.const 1024) (local.get $total)))
        (i32.store (i32.const 20) (i32.sub (i32.const 261120) (local.get $total)))
        (br_if $eof (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
        (br_if $eof (i32.eqz (i32.load (i32.const 24))))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 24))))
        (br $read)))
    (i32.store (i32.const 16) (i32.const 1024))
    (i32.store (i32.const 20) (local.get $total))
    (drop (call $fd_write (i32.const 2) (i32.const 16) (i32.const 1) (i32.const 24)))
    (call $proc_exit (i32.const 1))))
