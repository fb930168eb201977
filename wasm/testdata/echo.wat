;; A command that answers with the request it read, as a JSON string: for a
;; permission request {"decision":"allow","reason":REQUEST}, for an env
;; request {"deny":REQUEST}. It tells them apart by the byte after
;; {"version":1,"kind":" (acpflow puts version and kind first).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 8)
  (data (i32.const 64) "{\"decision\":\"allow\",\"reason\":\"")  ;; 30
  (data (i32.const 128) "{\"deny\":\"")                        ;; 9
  (data (i32.const 160) "\"}")                                 ;; 2
  (func $out (param $p i32) (param $n i32)
    (i32.store (i32.const 0) (local.get $p))
    (i32.store (i32.const 4) (local.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func (export "_start")
    (local $total i32) (local $i i32) (local $o i32) (local $c i32)
    ;; the request at 1024, up to 64 KiB
    (block $eof
      (loop $read
        (i32.store (i32.const 16) (i32.add (i32.const 1024) (local.get $total)))
        (i32.store (i32.const 20) (i32.sub (i32.const 65536) (local.get $total)))
        (br_if $eof (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
        (br_if $eof (i32.eqz (i32.load (i32.const 24))))
        (local.set $total (i32.add (local.get $total) (i32.load (i32.const 24))))
        (br $read)))
    ;; escaped into 131072..
    (local.set $o (i32.const 131072))
    (block $done
      (loop $escape
        (br_if $done (i32.ge_u (local.get $i) (local.get $total)))
        (local.set $c (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 34)) (i32.eq (local.get $c) (i32.const 92)))
          (then
            (i32.store8 (local.get $o) (i32.const 92))
            (local.set $o (i32.add (local.get $o) (i32.const 1)))))
        (i32.store8 (local.get $o) (local.get $c))
        (local.set $o (i32.add (local.get $o) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $escape)))
    (if (i32.eq (i32.load8_u (i32.const 1045)) (i32.const 101)) ;; 'e'nv
      (then (call $out (i32.const 128) (i32.const 9)))
      (else (call $out (i32.const 64) (i32.const 30))))
    (call $out (i32.const 131072) (i32.sub (local.get $o) (i32.const 131072)))
    (call $out (i32.const 160) (i32.const 2))))
