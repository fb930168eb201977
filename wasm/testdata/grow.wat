;; A command module that grows its memory to 120 pages (7.5 MiB), writes
;; every byte of it, then calls the host many times (an empty write to
;; stderr, as a Go guest's runtime calls the host) before it allows: each
;; host call lets the Go scheduler run other calls, so many calls at once
;; are all in flight, holding their memory, as the host's instance budget
;; is there to prevent.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"decision\":\"allow\"}")
  (func (export "_start")
    (local $i i32)
    (drop (memory.grow (i32.const 119)))
    (memory.fill (i32.const 1024) (i32.const 1)
      (i32.sub (i32.mul (memory.size) (i32.const 65536)) (i32.const 1024)))
    ;; iovec at 0: the answer (16, 20); at 8: nothing (16, 0)
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 20))
    (i32.store (i32.const 8) (i32.const 16))
    (i32.store (i32.const 12) (i32.const 0))
    (loop $yield
      (drop (call $fd_write (i32.const 2) (i32.const 8) (i32.const 1) (i32.const 1000)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $yield (i32.lt_u (local.get $i) (i32.const 20000))))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1000)))))
