;; The strict acpflow policy (../README.md) as a WAT reactor: the fast path
;; of ABI v1, exporting acpflow_alloc and acpflow_decide.
;;
;; Build: wat2wasm policy.wat -o policy.wasm
;;
;; WAT has no strings, so this walks the JSON bytes instead of decoding
;; them. It relies on what acpflow guarantees: the request is valid JSON (the
;; host checks it). It skips white space and nested values properly, but
;; compares member names and strings as written: escapes are not decoded,
;; except that \t, \n and \r count as white space in a command. See
;; ../README.md for what that means.
;;
;; Memory: constants below 2048; the request at 2048 (acpflow_alloc hands
;; out that one buffer, so one decision at a time, as the host calls it);
;; a built answer right after the request.
(module
  (memory (export "memory") 1)

  ;; answers
  (data (i32.const 0)   "{\"decision\":\"allow\",\"reason\":\"read-only tool\"}")             ;; 46
  (data (i32.const 128) "{\"decision\":\"allow\",\"reason\":\"edit inside the workspace\"}")  ;; 57
  (data (i32.const 256) "{\"decision\":\"reject\",\"reason\":\"destructive or networked command\"}") ;; 65
  (data (i32.const 384) "{\"decision\":\"reject\",\"reason\":\"not allowed by the strict policy\"}") ;; 65
  (data (i32.const 512) "{\"deny\":\"no HOME\"}")                                          ;; 18
  (data (i32.const 640) "{\"env\":{")                                                      ;; 8
  ;; words
  (data (i32.const 768) "tool")
  (data (i32.const 784) "kind")
  (data (i32.const 800) "command")
  (data (i32.const 816) "locations")
  (data (i32.const 832) "in_workspace")
  (data (i32.const 848) "proposed")
  (data (i32.const 864) "HOME")
  (data (i32.const 880) "AWS_")
  (data (i32.const 896) "read")
  (data (i32.const 912) "search")
  (data (i32.const 928) "think")
  (data (i32.const 944) "edit")
  (data (i32.const 960) "permission")
  (data (i32.const 976) "env")
  (data (i32.const 992) "rm")
  (data (i32.const 1008) "sudo")
  (data (i32.const 1024) "curl")

  (global $end (mut i32) (i32.const 0)) ;; one past the request's last byte
  (global $o (mut i32) (i32.const 0))   ;; where the built answer continues

  ;; acpflow_alloc returns the request buffer, growing memory to hold the
  ;; request and an answer as long again.
  (func (export "acpflow_alloc") (param $n i32) (result i32)
    (local $need i32)
    (local.set $need (i32.add (i32.const 4096) (i32.mul (local.get $n) (i32.const 2))))
    (if (i32.gt_u (local.get $need) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow
              (i32.sub (i32.add (i32.shr_u (local.get $need) (i32.const 16)) (i32.const 1)) (memory.size)))
              (i32.const -1))
          (then unreachable))))
    (i32.const 2048))

  (func $byte (param $p i32) (result i32)
    (if (i32.ge_u (local.get $p) (global.get $end)) (then (return (i32.const -1))))
    (i32.load8_u (local.get $p)))

  (func $is_ws (param $c i32) (result i32)
    (i32.or (i32.or (i32.eq (local.get $c) (i32.const 32)) (i32.eq (local.get $c) (i32.const 9)))
            (i32.or (i32.eq (local.get $c) (i32.const 10)) (i32.eq (local.get $c) (i32.const 13)))))

  ;; ws skips white space between tokens.
  (func $ws (param $p i32) (result i32)
    (loop $more
      (if (call $is_ws (call $byte (local.get $p)))
        (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $more))))
    (local.get $p))

  ;; skip_string returns the position after the string starting at $p ('"').
  (func $skip_string (param $p i32) (result i32)
    (local $c i32)
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (loop $more
      (local.set $c (call $byte (local.get $p)))
      (if (i32.lt_s (local.get $c) (i32.const 0)) (then unreachable))
      (if (i32.eq (local.get $c) (i32.const 34)) (then (return (i32.add (local.get $p) (i32.const 1)))))
      (local.set $p (i32.add (local.get $p)
        (select (i32.const 2) (i32.const 1) (i32.eq (local.get $c) (i32.const 92)))))
      (br $more))
    (unreachable))

  ;; skip_value returns the position after the value starting at $p.
  (func $skip_value (param $p i32) (result i32)
    (local $c i32) (local $depth i32)
    (local.set $c (call $byte (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 34)) (then (return (call $skip_string (local.get $p)))))
    (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
      (then
        (loop $more
          (local.set $c (call $byte (local.get $p)))
          (if (i32.lt_s (local.get $c) (i32.const 0)) (then unreachable))
          (if (i32.eq (local.get $c) (i32.const 34))
            (then (local.set $p (call $skip_string (local.get $p))) (br $more)))
          (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
            (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
          (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))
            (then
              (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))
              (if (i32.eqz (local.get $depth)) (then (return (i32.add (local.get $p) (i32.const 1)))))))
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          (br $more))))
    ;; a number or a literal: up to the next delimiter
    (loop $more
      (local.set $c (call $byte (local.get $p)))
      (if (i32.and
            (i32.ge_s (local.get $c) (i32.const 0))
            (i32.eqz (i32.or (call $is_ws (local.get $c))
              (i32.or (i32.eq (local.get $c) (i32.const 44))
                (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))))))
        (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $more))))
    (local.get $p))

  ;; eq reports whether the $n bytes at $p equal the $n bytes at $q.
  (func $eq (param $p i32) (param $q i32) (param $n i32) (result i32)
    (block $differ
      (loop $more
        (if (i32.eqz (local.get $n)) (then (return (i32.const 1))))
        (br_if $differ (i32.ne (i32.load8_u (local.get $p)) (i32.load8_u (local.get $q))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $q (i32.add (local.get $q) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $more)))
    (i32.const 0))

  ;; is_str reports whether the string value at $p is exactly the $n bytes at $w.
  (func $is_str (param $p i32) (param $w i32) (param $n i32) (result i32)
    (if (i32.eqz (local.get $p)) (then (return (i32.const 0))))
    (if (i32.ne (call $skip_string (local.get $p)) (i32.add (local.get $p) (i32.add (local.get $n) (i32.const 2))))
      (then (return (i32.const 0))))
    (call $eq (i32.add (local.get $p) (i32.const 1)) (local.get $w) (local.get $n)))

  ;; find returns where the value of member $w[0..$n) of the object at $obj
  ;; starts, or 0 when the member is missing or null.
  (func $find (param $obj i32) (param $w i32) (param $n i32) (result i32)
    (local $p i32) (local $key i32) (local $after i32)
    (local.set $p (call $ws (i32.add (local.get $obj) (i32.const 1))))
    (if (i32.eq (call $byte (local.get $p)) (i32.const 125)) (then (return (i32.const 0))))
    (loop $member
      (local.set $key (local.get $p))
      (local.set $after (call $skip_string (local.get $key)))
      (local.set $p (call $ws (i32.add (call $ws (local.get $after)) (i32.const 1)))) ;; past ':'
      (if (i32.and
            (i32.eq (local.get $after) (i32.add (local.get $key) (i32.add (local.get $n) (i32.const 2))))
            (call $eq (i32.add (local.get $key) (i32.const 1)) (local.get $w) (local.get $n)))
        (then
          (if (i32.eq (call $byte (local.get $p)) (i32.const 110)) (then (return (i32.const 0)))) ;; null
          (return (local.get $p))))
      (local.set $p (call $ws (call $skip_value (local.get $p))))
      (if (i32.eq (call $byte (local.get $p)) (i32.const 44))
        (then (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)))) (br $member))))
    (i32.const 0))

  ;; expect traps unless the value at $p is missing (0) or starts with $c.
  (func $expect (param $p i32) (param $c i32)
    (if (i32.and (i32.ne (local.get $p) (i32.const 0))
                 (i32.ne (call $byte (local.get $p)) (local.get $c)))
      (then unreachable)))

  ;; space_at returns the length of white space at $p inside a string (1
  ;; for a raw byte, 2 for the escapes \t \n \r), or 0.
  (func $space_at (param $p i32) (param $to i32) (result i32)
    (local $c i32)
    (if (i32.ge_u (local.get $p) (local.get $to)) (then (return (i32.const 0))))
    (local.set $c (i32.load8_u (local.get $p)))
    (if (call $is_ws (local.get $c)) (then (return (i32.const 1))))
    (if (i32.and (i32.eq (local.get $c) (i32.const 92))
                 (i32.lt_u (i32.add (local.get $p) (i32.const 1)) (local.get $to)))
      (then
        (local.set $c (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 116))
              (i32.or (i32.eq (local.get $c) (i32.const 110)) (i32.eq (local.get $c) (i32.const 114))))
          (then (return (i32.const 2))))))
    (i32.const 0))

  ;; dangerous reports whether the simple command in bytes [$p, $to) starts
  ;; with the word rm, sudo or curl.
  (func $dangerous (param $p i32) (param $to i32) (result i32)
    (local $n i32) (local $w i32)
    (loop $lead
      (local.set $n (call $space_at (local.get $p) (local.get $to)))
      (if (local.get $n) (then (local.set $p (i32.add (local.get $p) (local.get $n))) (br $lead))))
    (local.set $w (local.get $p))
    (block $done
      (loop $word
        (br_if $done (i32.ge_u (local.get $w) (local.get $to)))
        (br_if $done (call $space_at (local.get $w) (local.get $to)))
        (local.set $w (i32.add (local.get $w)
          (select (i32.const 2) (i32.const 1) (i32.eq (i32.load8_u (local.get $w)) (i32.const 92)))))
        (br $word)))
    (local.set $n (i32.sub (local.get $w) (local.get $p)))
    (i32.or
      (i32.and (i32.eq (local.get $n) (i32.const 2)) (call $eq (local.get $p) (i32.const 992) (i32.const 2)))
      (i32.and (i32.eq (local.get $n) (i32.const 4))
        (i32.or (call $eq (local.get $p) (i32.const 1008) (i32.const 4))
                (call $eq (local.get $p) (i32.const 1024) (i32.const 4))))))

  ;; any_dangerous cuts the command string at $s at &&, ||, ; and |.
  (func $any_dangerous (param $s i32) (result i32)
    (local $p i32) (local $to i32) (local $start i32) (local $c i32) (local $cut i32)
    (local.set $to (i32.sub (call $skip_string (local.get $s)) (i32.const 1)))
    (local.set $p (i32.add (local.get $s) (i32.const 1)))
    (local.set $start (local.get $p))
    (block $done
      (loop $scan
        (br_if $done (i32.ge_u (local.get $p) (local.get $to)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 92)) ;; an escape is never a cut
          (then (local.set $p (i32.add (local.get $p) (i32.const 2))) (br $scan)))
        (local.set $cut (i32.const 0))
        (if (i32.or (i32.eq (local.get $c) (i32.const 59)) (i32.eq (local.get $c) (i32.const 124)))
          (then (local.set $cut (i32.const 1))))
        (if (i32.and (i32.lt_u (i32.add (local.get $p) (i32.const 1)) (local.get $to))
              (i32.and (i32.or (i32.eq (local.get $c) (i32.const 38)) (i32.eq (local.get $c) (i32.const 124)))
                       (i32.eq (i32.load8_u (i32.add (local.get $p) (i32.const 1))) (local.get $c))))
          (then (local.set $cut (i32.const 2))))
        (if (local.get $cut)
          (then
            (if (call $dangerous (local.get $start) (local.get $p)) (then (return (i32.const 1))))
            (local.set $p (i32.add (local.get $p) (local.get $cut)))
            (local.set $start (local.get $p))
            (br $scan)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scan)))
    (call $dangerous (local.get $start) (local.get $to)))

  (func $answer (param $at i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $at)) (i64.const 32)) (i64.extend_i32_u (local.get $n))))

  (func $permission (param $req i32) (result i64)
    (local $tool i32) (local $kind i32) (local $command i32) (local $locations i32)
    (local $p i32) (local $w i32) (local $c i32) (local $inside i32)
    (local.set $tool (call $find (local.get $req) (i32.const 768) (i32.const 4)))
    (call $expect (local.get $tool) (i32.const 123))
    (if (local.get $tool)
      (then
        (local.set $kind (call $find (local.get $tool) (i32.const 784) (i32.const 4)))
        (local.set $command (call $find (local.get $tool) (i32.const 800) (i32.const 7)))
        (local.set $locations (call $find (local.get $tool) (i32.const 816) (i32.const 9)))))
    (call $expect (local.get $kind) (i32.const 34))
    (call $expect (local.get $command) (i32.const 34))
    (call $expect (local.get $locations) (i32.const 91))
    ;; locations: at least one, every one in_workspace true
    (if (local.get $locations)
      (then
        (local.set $p (call $ws (i32.add (local.get $locations) (i32.const 1))))
        (if (i32.ne (call $byte (local.get $p)) (i32.const 93))
          (then
            (local.set $inside (i32.const 1))
            (loop $location
              (local.set $c (call $byte (local.get $p)))
              (if (i32.eq (local.get $c) (i32.const 123))
                (then
                  (local.set $w (call $find (local.get $p) (i32.const 832) (i32.const 12)))
                  (if (i32.eqz (local.get $w))
                    (then (local.set $inside (i32.const 0)))
                    (else
                      (local.set $c (call $byte (local.get $w)))
                      (if (i32.eq (local.get $c) (i32.const 102)) (then (local.set $inside (i32.const 0))))
                      (if (i32.and (i32.ne (local.get $c) (i32.const 102)) (i32.ne (local.get $c) (i32.const 116)))
                        (then unreachable)))))
                (else
                  (if (i32.ne (local.get $c) (i32.const 110)) (then unreachable)) ;; null: not inside
                  (local.set $inside (i32.const 0))))
              (local.set $p (call $ws (call $skip_value (local.get $p))))
              (if (i32.eq (call $byte (local.get $p)) (i32.const 44))
                (then (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)))) (br $location))))))))
    (if (i32.or (call $is_str (local.get $kind) (i32.const 896) (i32.const 4))
          (i32.or (call $is_str (local.get $kind) (i32.const 912) (i32.const 6))
                  (call $is_str (local.get $kind) (i32.const 928) (i32.const 5))))
      (then (return (call $answer (i32.const 0) (i32.const 46)))))
    (if (i32.and (local.get $inside) (call $is_str (local.get $kind) (i32.const 944) (i32.const 4)))
      (then (return (call $answer (i32.const 128) (i32.const 57)))))
    (if (local.get $command)
      (then
        (if (call $any_dangerous (local.get $command))
          (then (return (call $answer (i32.const 256) (i32.const 65)))))))
    (call $answer (i32.const 384) (i32.const 65)))

  (func $emit (param $from i32) (param $to i32)
    (memory.copy (global.get $o) (local.get $from) (i32.sub (local.get $to) (local.get $from)))
    (global.set $o (i32.add (global.get $o) (i32.sub (local.get $to) (local.get $from)))))

  (func $env (param $req i32) (result i64)
    (local $proposed i32) (local $p i32) (local $key i32) (local $after i32) (local $value i32)
    (local $home i32) (local $pass i32) (local $first i32) (local $start i32)
    (local.set $proposed (call $find (local.get $req) (i32.const 848) (i32.const 8)))
    (call $expect (local.get $proposed) (i32.const 123))
    (if (i32.eqz (local.get $proposed)) (then (return (call $answer (i32.const 512) (i32.const 18)))))
    (local.set $start (global.get $o))
    (local.set $first (i32.const 1))
    ;; pass 0 checks values and looks for HOME; pass 1 copies the members kept
    (loop $passes
      (local.set $p (call $ws (i32.add (local.get $proposed) (i32.const 1))))
      (if (i32.ne (call $byte (local.get $p)) (i32.const 125))
        (then
          (loop $member
            (local.set $key (local.get $p))
            (local.set $after (call $skip_string (local.get $key)))
            (local.set $value (call $ws (i32.add (call $ws (local.get $after)) (i32.const 1))))
            (if (i32.ne (call $byte (local.get $value)) (i32.const 34)) (then unreachable))
            (local.set $p (call $skip_string (local.get $value)))
            (if (i32.eqz (local.get $pass))
              (then
                (if (i32.and
                      (i32.eq (local.get $after) (i32.add (local.get $key) (i32.const 6)))
                      (call $eq (i32.add (local.get $key) (i32.const 1)) (i32.const 864) (i32.const 4)))
                  (then (local.set $home (i32.const 1)))))
              (else
                (if (i32.eqz (i32.and
                      (i32.ge_u (local.get $after) (i32.add (local.get $key) (i32.const 6)))
                      (call $eq (i32.add (local.get $key) (i32.const 1)) (i32.const 880) (i32.const 4))))
                  (then
                    (if (i32.eqz (local.get $first))
                      (then (i32.store8 (global.get $o) (i32.const 44))
                            (global.set $o (i32.add (global.get $o) (i32.const 1)))))
                    (local.set $first (i32.const 0))
                    (call $emit (local.get $key) (local.get $after))
                    (i32.store8 (global.get $o) (i32.const 58))
                    (global.set $o (i32.add (global.get $o) (i32.const 1)))
                    (call $emit (local.get $value) (local.get $p))))))
            (local.set $p (call $ws (local.get $p)))
            (if (i32.eq (call $byte (local.get $p)) (i32.const 44))
              (then (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)))) (br $member))))))
      (if (i32.eqz (local.get $pass))
        (then
          (if (i32.eqz (local.get $home)) (then (return (call $answer (i32.const 512) (i32.const 18)))))
          (call $emit (i32.const 640) (i32.const 648))
          (local.set $pass (i32.const 1))
          (br $passes))))
    (i32.store16 (global.get $o) (i32.const 0x7d7d)) ;; "}}"
    (global.set $o (i32.add (global.get $o) (i32.const 2)))
    (call $answer (local.get $start) (i32.sub (global.get $o) (local.get $start))))

  ;; acpflow_decide answers the request at [$p, $p+$n); the kind is the
  ;; request's own "kind". A malformed request traps.
  (func (export "acpflow_decide") (param $p i32) (param $n i32) (result i64)
    (local $req i32) (local $kind i32)
    (global.set $end (i32.add (local.get $p) (local.get $n)))
    (global.set $o (global.get $end))
    (local.set $req (call $ws (local.get $p)))
    (if (i32.ne (call $byte (local.get $req)) (i32.const 123)) (then unreachable))
    (local.set $kind (call $find (local.get $req) (i32.const 784) (i32.const 4)))
    (call $expect (local.get $kind) (i32.const 34))
    (if (call $is_str (local.get $kind) (i32.const 960) (i32.const 10))
      (then (return (call $permission (local.get $req)))))
    (if (call $is_str (local.get $kind) (i32.const 976) (i32.const 3))
      (then (return (call $env (local.get $req)))))
    (unreachable)))
