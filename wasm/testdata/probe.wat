;; A command that reports what it can see, as JSON:
;;   {"argc":N,"args":[...],"environ":N,"fd3_errno":E,"open_errno":E,"stdin":<stdin>}
;; environ is the number of environment variables, fd3_errno the errno of
;; fd_prestat_get(3) (8, EBADF, when nothing is preopened), open_errno the
;; errno of path_open(3, "etc/passwd"), stdin the request exactly as read.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 4)
  (data (i32.const 64) "{\"argc\":")
  (data (i32.const 96) ",\"args\":[")
  (data (i32.const 128) "\"")
  (data (i32.const 160) ",")
  (data (i32.const 192) "],\"environ\":")
  (data (i32.const 224) ",\"fd3_errno\":")
  (data (i32.const 256) ",\"open_errno\":")
  (data (i32.const 288) ",\"stdin\":")
  (data (i32.const 320) "}")
  (data (i32.const 352) "etc/passwd")

  ;; out writes n bytes at p to stdout.
  (func $out (param $p i32) (param $n i32)
    (i32.store (i32.const 0) (local.get $p))
    (i32.store (i32.const 4) (local.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))

  ;; num writes v in decimal.
  (func $num (param $v i32)
    (local $p i32)
    (local.set $p (i32.const 48))
    (loop $digits
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $digits (local.get $v)))
    (call $out (local.get $p) (i32.sub (i32.const 48) (local.get $p))))

  (func $strlen (param $p i32) (result i32)
    (local $n i32)
    (block $end
      (loop $scan
        (br_if $end (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $scan)))
    (local.get $n))

  (func (export "_start")
    (local $argc i32) (local $i i32) (local $arg i32) (local $total i32) (local $errno i32)
    ;; argv
    (drop (call $args_sizes_get (i32.const 1024) (i32.const 1028)))
    (local.set $argc (i32.load (i32.const 1024)))
    (drop (call $args_get (i32.const 2048) (i32.const 3072)))
    (call $out (i32.const 64) (i32.const 8))
    (call $num (local.get $argc))
    (call $out (i32.const 96) (i32.const 9))
    (block $done
      (loop $args
        (br_if $done (i32.ge_u (local.get $i) (local.get $argc)))
        (if (local.get $i) (then (call $out (i32.const 160) (i32.const 1))))
        (local.set $arg (i32.load (i32.add (i32.const 2048) (i32.mul (local.get $i) (i32.const 4)))))
        (call $out (i32.const 128) (i32.const 1))
        (call $out (local.get $arg) (call $strlen (local.get $arg)))
        (call $out (i32.const 128) (i32.const 1))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $args)))
    ;; environment
    (drop (call $environ_sizes_get (i32.const 1032) (i32.const 1036)))
    (call $out (i32.const 192) (i32.const 12))
    (call $num (i32.load (i32.const 1032)))
    ;; files
    (call $out (i32.const 224) (i32.const 13))
    (call $num (call $fd_prestat_get (i32.const 3) (i32.const 1040)))
    (call $out (i32.const 256) (i32.const 14))
    (call $num (call $path_open (i32.const 3) (i32.const 0) (i32.const 352) (i32.const 10)
      (i32.const 0) (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 1048)))
    ;; stdin, verbatim
    (block $eof
      (loop $read
        (i32.store (i32.const 16) (i32.add (i32.const 8192) (local.get $total)))
        (i32.store (i32.const 20) (i32.sub (i32.const 253952) (local.get $total)))
        (br_if $eof (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
        (br_if $eof (i32.eqz (i32.load (i32.const 24))))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 24))))
        (br $read)))
    (call $out (i32.const 288) (i32.const 9))
    (call $out (i32.const 8192) (local.get $total))
    (call $out (i32.const 320) (i32.const 1))))
