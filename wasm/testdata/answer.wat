;; A command that answers whatever the request carries under config.answer,
;; so one module can give any answer a test needs. It relies on the request
;; ending with "config":{"answer":X}} (config is the last member acpflow
;; marshals) and answers X; without "answer": it exits 3.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 4)
  (data (i32.const 64) "\"answer\":")
  (func (export "_start")
    (local $total i32) (local $i i32) (local $j i32) (local $start i32)
    (block $eof
      (loop $read
        (i32.store (i32.const 16) (i32.add (i32.const 1024) (local.get $total)))
        (i32.store (i32.const 20) (i32.sub (i32.const 261120) (local.get $total)))
        (br_if $eof (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
        (br_if $eof (i32.eqz (i32.load (i32.const 24))))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 24))))
        (br $read)))
    ;; find "answer":
    (block $found
      (loop $scan
        (if (i32.gt_u (i32.add (local.get $i) (i32.const 9)) (local.get $total))
          (then (call $proc_exit (i32.const 3))))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $cmp
            (br_if $mismatch (i32.ne
              (i32.load8_u (i32.add (i32.const 1024) (i32.add (local.get $i) (local.get $j))))
              (i32.load8_u (i32.add (i32.const 64) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $found (i32.eq (local.get $j) (i32.const 9)))
            (br $cmp)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (local.set $start (i32.add (local.get $i) (i32.const 9)))
    (i32.store (i32.const 0) (i32.add (i32.const 1024) (local.get $start)))
    (i32.store (i32.const 4) (i32.sub (i32.sub (local.get $total) (local.get $start)) (i32.const 2)))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
