;; A command that grows its memory until refused, then traps.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $grow
      (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1))
        (then unreachable))
      (br $grow))))
