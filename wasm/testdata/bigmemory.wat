;; A command whose memory starts at 64 MiB, over the default limit.
(module
  (memory (export "memory") 1024)
  (func (export "_start")))
