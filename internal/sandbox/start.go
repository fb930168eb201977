package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// Start starts the agent l names in its sandbox, with env as its whole
// environment (procgroup's marker added) and onDescendant watching its
// group, and returns the launcher's group: its stdin, stdout and stderr
// are the agent's.
//
// # Notes
//
// Most of a sandboxed spawn's cost comes before the agent is known:
// cloning acpflow into new namespaces (a full copy of its page tables, as
// a clone with CLONE_NEWUSER cannot share memory with its parent the way
// a plain spawn's vfork does: ~2 ms for a small acpflow, ~13 ms for one
// holding 200 MB) and starting the launcher's Go runtime. So each Start
// also starts a launcher ahead for the next one with the same namespaces,
// which waits, in its fresh namespaces, confined by nothing yet and
// knowing nothing, for a request on its pipe; the next Start hands it
// one and pays only for the rules and the agent's own fork. The first
// Start of a process pays the whole cost. A launcher left waiting is
// dismissed after idleLimit, and by DismissWaiting.
func (l Launch) Start(env []string, onDescendant func(child int, p procgroup.Proc)) (*procgroup.Child, error) {
	if l.spec.network() == NetworkGateway {
		return nil, errors.New("sandbox: network gateway: start the agent with StartGateway, which returns the gateway's listener")
	}
	w, err := l.start(env, onDescendant)
	if err != nil {
		return nil, err
	}
	return w.child, nil
}

// StartGateway is Start for network "gateway": it also returns the
// listening socket (as a file: net.FileListener) on 127.0.0.1:GatewayPort
// in the agent's network namespace,
// which the launcher made before it started the agent. Serve the step's
// gateway on it (Accept works from outside the namespace) and close it
// once the agent's group is gone; until then the agent's connections
// to that port queue on it. A launcher that fails before it hands the
// listener over is torn down, and the error quotes what it said.
func (l Launch) StartGateway(env []string, onDescendant func(child int, p procgroup.Proc)) (*procgroup.Child, *os.File, error) {
	if l.spec.network() != NetworkGateway {
		return nil, nil, fmt.Errorf("sandbox: StartGateway on network %q, which has no gateway", l.spec.network())
	}
	w, err := l.start(env, onDescendant)
	if err != nil {
		return nil, nil, err
	}
	ln, err := receiveListener(w.back)
	if err != nil {
		w.child.Teardown(procgroup.Ladder{EOFGrace: time.Second, TermGrace: time.Second})
		return nil, nil, fmt.Errorf("sandbox: the launcher did not hand over the gateway's listener (%v): %s", err, strings.TrimSpace(w.child.Stderr().String()))
	}
	return w.child, ln, nil
}

// start hands l's request to the launcher waiting for its kind of launch,
// or to one started now, and has the next one started ahead.
func (l Launch) start(env []string, onDescendant func(child int, p procgroup.Proc)) (*waitingLauncher, error) {
	js, err := json.Marshal(request{Spec: l.spec, Path: l.agent, Args: l.agentArgs, Env: env})
	if err != nil {
		return nil, err
	}
	k := l.key()
	defer waiting.fillLater(k, l)
	if w := waiting.take(k); w != nil {
		if err := w.hand(js, onDescendant); err == nil {
			return w, nil
		}
		w.dismiss() // gone while it waited: start another
	}
	w, err := startLauncher(l)
	if err != nil {
		return nil, err
	}
	// A launcher that exits before it reads says why on stderr and in
	// its exit code, as one that fails after: the caller reads both.
	w.hand(js, onDescendant)
	return w, nil
}

// gatewayWait bounds how long StartGateway waits for the listener: the
// launcher sends it within milliseconds of its request, or exits.
const gatewayWait = 30 * time.Second

// DismissWaiting ends every launcher started ahead and not used, and
// waits for them to be gone; later Starts start their own again.
// acpflow calls it before it exits, so that it leaves no process behind.
func DismissWaiting() {
	waiting.mu.Lock()
	ws := waiting.idle
	waiting.idle = map[string]*waitingLauncher{}
	waiting.gen++ // a launcher being started now is dismissed once it is
	waiting.mu.Unlock()
	for _, w := range ws {
		w.timer.Stop()
		w.dismiss()
	}
	waiting.fills.Wait()
}

// fillDelay is how long after a Start the launcher for the next one is
// started: it would otherwise compete for the CPU, and the kernel's lock
// on mount namespaces, with the setup of the one just started, which it
// is not needed for. The next step's agent comes seconds later.
const fillDelay = 50 * time.Millisecond

// idleLimit is how long a launcher started ahead waits for its agent
// before it is dismissed.
const idleLimit = time.Minute

// waitingLauncher is a launcher started in its namespaces, reading its
// request pipe.
type waitingLauncher struct {
	child *procgroup.Child
	req   *os.File
	back  *os.File // network "gateway": where its listener comes back (gatewayFD's other end)
	timer *time.Timer
}

// startLauncher starts the launcher l describes, waiting for its
// request. Its environment holds procgroup's marker alone, which it
// passes on to the agent; its directory is /, until the agent's.
func startLauncher(l Launch) (*waitingLauncher, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	files := []*os.File{r}
	var back *os.File
	if l.spec.network() == NetworkGateway {
		ours, theirs, err := socketpair()
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("sandbox: the gateway channel: %w", err)
		}
		defer theirs.Close() // the launcher's own copy is what tells its exit
		back, files = ours, append(files, theirs)
	}
	child, err := procgroup.Start(procgroup.Spec{
		Path: l.Path, Args: l.Args, Dir: "/",
		Cloneflags: l.Cloneflags, UidMappings: l.UidMappings, GidMappings: l.GidMappings,
		AmbientCaps: l.AmbientCaps,
		ExtraFiles:  files,
	})
	if err != nil {
		w.Close()
		if back != nil {
			back.Close()
		}
		return nil, err
	}
	return &waitingLauncher{child: child, req: w, back: back}, nil
}

// hand gives the launcher its request. Its group is the agent's from
// here on, watched by onDescendant.
func (w *waitingLauncher) hand(js []byte, onDescendant func(int, procgroup.Proc)) error {
	w.child.Watch(onDescendant)
	_, err := w.req.Write(js)
	if cerr := w.req.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("handing the sandbox launcher its request: %w", err)
	}
	return nil
}

// dismiss ends a launcher that has no agent: on the end of its request
// pipe it exits at once, and the teardown reaps it.
func (w *waitingLauncher) dismiss() {
	w.req.Close()
	if w.back != nil {
		w.back.Close()
	}
	w.child.Teardown(procgroup.Ladder{EOFGrace: time.Second, TermGrace: time.Second})
}

// waiting holds at most one launcher started ahead per kind of launch.
var waiting = launchers{idle: map[string]*waitingLauncher{}, filling: map[string]bool{}}

type launchers struct {
	mu      sync.Mutex
	idle    map[string]*waitingLauncher
	filling map[string]bool
	gen     int            // DismissWaiting's calls so far
	fills   sync.WaitGroup // launchers being started ahead
}

// key tells launches apart that a launcher started ahead cannot serve
// both: another launcher, other namespaces, or a gateway channel (which
// only a network "gateway" launcher is started with).
func (l Launch) key() string {
	return fmt.Sprintf("%s\x00%s\x00%x\x00%t", l.Path, strings.Join(l.Args, "\x00"), l.Cloneflags, l.spec.network() == NetworkGateway)
}

// take returns the launcher waiting for k, if one is.
func (ls *launchers) take(k string) *waitingLauncher {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	w := ls.idle[k]
	if w == nil {
		return nil
	}
	delete(ls.idle, k)
	w.timer.Stop()
	select {
	case <-w.child.Exited():
		go w.dismiss() // killed while it waited
		return nil
	default:
		return w
	}
}

// fillLater starts a launcher for k in the background unless one waits
// or is being started.
func (ls *launchers) fillLater(k string, l Launch) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.idle[k] != nil || ls.filling[k] {
		return
	}
	ls.filling[k] = true
	gen := ls.gen
	ls.fills.Add(1)
	go func() {
		defer ls.fills.Done()
		time.Sleep(fillDelay)
		var w *waitingLauncher
		err := errors.New("dismissed before it was started")
		if ls.current(gen) {
			w, err = startLauncher(l)
		}
		if !ls.keep(k, gen, w, err) && w != nil {
			w.dismiss()
		}
	}()
}

// keep makes w, just started for k, the one waiting for k, unless it
// failed to start or DismissWaiting was called meanwhile.
func (ls *launchers) keep(k string, gen int, w *waitingLauncher, err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.filling, k)
	if err != nil || ls.gen != gen {
		return false
	}
	ls.idle[k] = w
	w.timer = time.AfterFunc(idleLimit, func() {
		if ls.remove(k, w) {
			w.dismiss()
		}
	})
	return true
}

// current says whether DismissWaiting was not called since gen.
func (ls *launchers) current(gen int) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.gen == gen
}

// remove takes w out of the pool if it is still k's.
func (ls *launchers) remove(k string, w *waitingLauncher) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.idle[k] != w {
		return false
	}
	delete(ls.idle, k)
	return true
}
