package ui

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/acpflow/acpflow/runs"
)

// hub looks at the store for changes every poll (SQLite's data_version on
// a connection of its own: one cheap read, whichever process wrote) and
// tells every open page, whose script then fetches what it shows again.
type hub struct {
	store *runs.Service
	poll  time.Duration

	mu      sync.Mutex
	subs    map[chan struct{}]bool
	version int64 // how many changes were seen
}

func newHub(s *runs.Service, poll time.Duration) *hub {
	return &hub{store: s, poll: poll, subs: map[chan struct{}]bool{}}
}

// start takes the store's data_version now, so that any commit after it
// is told, then polls until ctx is done. A store that cannot be read later
// is tried again at the next tick: the pages keep what they show.
func (h *hub) start(ctx context.Context) error {
	w, err := h.store.Watch(ctx)
	if err != nil {
		return err
	}
	go h.run(ctx, w)
	return nil
}

func (h *hub) run(ctx context.Context, w *runs.Watcher) {
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if w == nil {
			var err error
			if w, err = h.store.Watch(ctx); err != nil {
				continue
			}
			h.broadcast() // what changed meanwhile is not known: say something may have
		}
		changed, err := w.Changed(ctx)
		if err != nil {
			w.Close()
			w = nil
			continue
		}
		if changed {
			h.broadcast()
		}
	}
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default: // a change is already pending for it
		}
	}
}

func (h *hub) subscribe() (ch chan struct{}, cancel func()) {
	ch = make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = true
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) current() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// events is the server-sent event stream: a `change` event whenever the
// store changed, a comment every 15 s so that proxies keep it open.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, cancel := s.hub.subscribe()
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\nevent: hello\ndata: %d\n\n", s.hub.current())
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-ch:
			fmt.Fprintf(w, "event: change\ndata: %d\n\n", s.hub.current())
		}
		fl.Flush()
	}
}
