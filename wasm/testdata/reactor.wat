;; A reactor (fast path) for the host's tests. acpflow_alloc hands out
;; offset 1024, or 0 (malloc's NULL) for a request of 19 bytes, such as
;; {"version":1,"z":0}; acpflow_decide picks a behaviour from the third-last
;; byte of the request, so {"m":"t"} means 't':
;;   t  trap                 l  loop forever        g  grow memory until refused, then trap
;;   o  answer outside memory  x  answer of 2 MiB   e  echo the request
;;   anything else: {"inits":I,"calls":C}, the count of _initialize calls and
;;   of decisions this instance has made (the last digit), with no loop: the
;;   host's own cost of a reactor call.
(module
  (memory (export "memory") 2)
  (global $inits (mut i32) (i32.const 0))
  (global $calls (mut i32) (i32.const 0))
  (data (i32.const 0) "{\"inits\":0,\"calls\":0}")
  (func (export "_initialize")
    (global.set $inits (i32.add (global.get $inits) (i32.const 1))))
  (func (export "acpflow_alloc") (param $n i32) (result i32)
    (select (i32.const 0) (i32.const 1024) (i32.eq (local.get $n) (i32.const 19))))
  (func (export "acpflow_decide") (param $p i32) (param $n i32) (result i64)
    (local $mode i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (local.set $mode (i32.load8_u (i32.sub (i32.add (local.get $p) (local.get $n)) (i32.const 3))))
    (if (i32.eq (local.get $mode) (i32.const 116)) (then unreachable))          ;; t
    (if (i32.eq (local.get $mode) (i32.const 108)) (then (loop $l (br $l))))    ;; l
    (if (i32.eq (local.get $mode) (i32.const 103))                              ;; g
      (then (loop $grow
        (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then unreachable))
        (br $grow))))
    (if (i32.eq (local.get $mode) (i32.const 111))                              ;; o
      (then (return (i64.or (i64.shl (i64.const 0xfff00000) (i64.const 32)) (i64.const 10)))))
    (if (i32.eq (local.get $mode) (i32.const 120))                              ;; x
      (then (return (i64.const 0x200000))))
    (if (i32.eq (local.get $mode) (i32.const 101))                              ;; e
      (then (return (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
                            (i64.extend_i32_u (local.get $n))))))
    (i32.store8 (i32.const 9) (i32.add (i32.const 48) (global.get $inits)))
    (i32.store8 (i32.const 19) (i32.add (i32.const 48) (i32.rem_u (global.get $calls) (i32.const 10))))
    (i64.const 21)))
