;; A module with neither _start nor acpflow_decide.
(module
  (memory (export "memory") 1)
  (func (export "decide") (result i32) (i32.const 0)))
