package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
)

// recorder appends events to the -record file. Each event is one line written by a single
// write on an O_APPEND descriptor, so that lines from the agent and its helpers never mix and
// every line written before a SIGKILL is in the file.
type recorder struct {
	mu sync.Mutex
	f  *os.File // nil: recording is off
}

func openRecorder(path string) (*recorder, error) {
	if path == "" {
		return &recorder{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("-record: %w", err)
	}
	return &recorder{f: f}, nil
}

// event records {"event": name, …fields}, the event name first for whoever reads the file.
func (r *recorder) event(name string, fields map[string]any) {
	if r.f == nil {
		return
	}
	head, _ := json.Marshal(name)
	line := append([]byte(`{"event":`), head...)
	if len(fields) > 0 {
		rest, err := json.Marshal(fields)
		if err != nil {
			rest, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
		}
		line = append(append(line, ','), rest[1:]...) // rest without its "{"
	} else {
		line = append(line, '}')
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.Write(append(line, '\n'))
}

// start records who the agent is and what it was given: what the code under test controls.
func (r *recorder) start() {
	cwd, _ := os.Getwd()
	env := make(map[string]string)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// The PID namespace says how to read pid, ppid and pgid: in a sandbox (a PID namespace of
	// its own) they are that namespace's numbers, not the host's.
	r.event("start", map[string]any{
		"pid":    os.Getpid(),
		"ppid":   os.Getppid(),
		"pgid":   syscall.Getpgrp(),
		"pid_ns": pidNS(),
		"cwd":    cwd,
		"env":    env,
		"args":   os.Args[1:],
	})
}
