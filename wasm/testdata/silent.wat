;; A command that exits 0 without answering.
(module
  (memory (export "memory") 1)
  (func (export "_start")))
