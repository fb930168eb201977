;; A command that never ends: the host must stop it at its time limit.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $forever (br $forever))))
