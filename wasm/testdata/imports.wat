;; A command that imports a function acpflow does not provide.
(module
  (import "env" "now" (func $now (result i64)))
  (memory (export "memory") 1)
  (func (export "_start") (drop (call $now))))
