package acpsubagent

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// poolIdleTimeout is how long a pooled agent waits for its next step
// before it is torn down.
const poolIdleTimeout = 30 * time.Second

// pool keeps the live processes of `reuse: true` agents between the steps
// and runs of a batch (or of one run), by what they were started with:
// a step takes an idle process started with the same command, args, env
// and auth, or starts one; after its turn the process comes back, or is
// torn down when it failed, the pool is full, or it sat idle too long.
// It lives in the batch's scope, which tears every idle process down when
// the batch ends.
type pool struct {
	scope *steps.Scope
	max   int // idle processes kept at most: the batch's concurrency

	mu     sync.Mutex
	idle   map[string][]*pooled
	count  int
	closed bool
	// evicting counts idle-timeout teardowns in flight, which end waits for.
	evicting sync.WaitGroup
}

// pooled is an idle process and the timer that evicts it.
type pooled struct {
	p     *proc
	timer *time.Timer
}

type poolKey struct{}

// batchPool is the pool of inv's batch, made on first use; nil when the
// step runs without a batch scope (nothing is pooled).
func batchPool(inv *steps.Invocation) *pool {
	if inv.Batch == nil {
		return nil
	}
	return inv.Batch.Value(poolKey{}, func() any {
		pl := &pool{scope: inv.Batch, max: max(inv.Batch.Concurrency, 1), idle: map[string][]*pooled{}}
		inv.Batch.OnEnd(pl.end)
		return pl
	}).(*pool)
}

// reuseKey identifies what a process was started with: the executable,
// its args, its environment (but PWD, which names the first step's cwd)
// and the auth method. It is a hash, so the pool holds no env value.
func reuseKey(path string, args []string, env map[string]string, auth string) string {
	h := sha256.New()
	write := func(s string) {
		var n [8]byte
		for i, l := 0, len(s); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write(path)
	write(auth)
	for _, a := range args {
		write("arg")
		write(a)
	}
	names := make([]string, 0, len(env))
	for k := range env {
		if k != "PWD" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		write("env")
		write(k)
		write(env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// take returns an idle live process started the same way, with a
// reference for inv, or nil.
func (pl *pool) take(key string, inv *steps.Invocation) *proc {
	for {
		pl.mu.Lock()
		list := pl.idle[key]
		if len(list) == 0 {
			pl.mu.Unlock()
			return nil
		}
		it := list[len(list)-1]
		pl.idle[key] = list[:len(list)-1]
		pl.count--
		pl.mu.Unlock()
		// Whoever removes an item from idle owns it: a timer that fires
		// now finds nothing to evict.
		it.timer.Stop()
		if it.p.hold(inv) {
			return it.p
		}
		// Died while idle (a crash): replaced by a fresh one.
		pl.scope.Go(it.p.retire())
	}
}

// put takes a process back for later steps; false when the pool will not
// keep it (closed or full), and the caller tears it down.
func (pl *pool) put(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || pl.count >= pl.max {
		return false
	}
	it := &pooled{p: p}
	it.timer = time.AfterFunc(poolIdleTimeout, func() { pl.evict(p.poolKey, it) })
	pl.idle[p.poolKey] = append(pl.idle[p.poolKey], it)
	pl.count++
	return true
}

// evict tears down a process that sat idle past the timeout.
func (pl *pool) evict(key string, it *pooled) {
	pl.mu.Lock()
	found := false
	list := pl.idle[key]
	for i, x := range list {
		if x == it {
			pl.idle[key] = append(list[:i:i], list[i+1:]...)
			pl.count--
			found = true
			break
		}
	}
	if found {
		pl.evicting.Add(1)
	}
	pl.mu.Unlock()
	if !found {
		return // taken by a step, or by end
	}
	defer pl.evicting.Done()
	it.p.retire()()
}

// end tears down every idle process; the scope waits for them.
func (pl *pool) end() {
	pl.mu.Lock()
	pl.closed = true
	var all []*pooled
	for _, list := range pl.idle {
		all = append(all, list...)
	}
	pl.idle = map[string][]*pooled{}
	pl.count = 0
	pl.mu.Unlock()
	for _, it := range all {
		it.timer.Stop()
		pl.scope.Go(it.p.retire())
	}
	pl.evicting.Wait()
}
