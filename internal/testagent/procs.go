package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// handleSignals records SIGTERM and, unless -trap-term, exits 143 on it as a shell would.
// SIGPIPE is caught so that a write to a gone client fails with EPIPE, which wire.send turns
// into a recorded exit, instead of killing the agent silently.
func handleSignals(cfg *config, rec *recorder) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGPIPE)
	go func() {
		for sig := range ch {
			if sig != syscall.SIGTERM {
				continue
			}
			rec.event("sigterm", nil)
			if !cfg.trapTerm {
				os.Exit(143)
			}
		}
	}()
}

// exitAfter is the leak guard: a test that fails to tear the agent down does not leave it
// running for ever.
func exitAfter(d time.Duration, rec *recorder) {
	time.Sleep(d)
	rec.event("lifetime_expired", nil)
	os.Exit(124)
}

func writeStderrLines(n int) {
	w := bufio.NewWriter(os.Stderr)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "stderr line %d\n", i)
	}
	_ = w.Flush()
}

// onEOF is what the agent does once the client closed its stdin.
func onEOF(cfg *config, rec *recorder) {
	rec.event("eof", nil)
	if cfg.ignoreEOF {
		sleepUntil(cfg.lifetime)
	}
	time.Sleep(cfg.eofFlush)
	rec.event("flushed", nil)
	os.Exit(0)
}

// spawnDescendants starts the -grandchild, -setsid-grandchild and -daemon-grandchild sleepers,
// each recorded with its pid before the agent reads stdin.
func spawnDescendants(cfg *config, rec *recorder) {
	if cfg.grandchild {
		if pid, err := startSleeper(cfg, false); err == nil {
			rec.event("grandchild", map[string]any{"pid": pid, "how": "child", "pid_ns": pidNS()})
		} else {
			fmt.Fprintln(os.Stderr, "testagent: -grandchild:", err)
		}
	}
	if cfg.setsidGrandchild {
		if pid, err := startSleeper(cfg, true); err == nil {
			rec.event("grandchild", map[string]any{"pid": pid, "how": "setsid", "pid_ns": pidNS()})
		} else {
			fmt.Fprintln(os.Stderr, "testagent: -setsid-grandchild:", err)
		}
	}
	if cfg.daemonGrandchild {
		// The middle process records the sleeper and exits; waiting for it reaps it and
		// orders its record before anything the agent answers.
		cmd := selfCommand(cfg, "-spawn-setsid-and-exit", "-record", cfg.record)
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "testagent: -daemon-grandchild:", err)
		}
	}
}

// spawnSetsidAndExit is the middle of -daemon-grandchild: start a setsid sleeper, record it,
// exit, so that the sleeper is reparented away from the agent.
func spawnSetsidAndExit(cfg *config) {
	rec, err := openRecorder(cfg.record)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(2)
	}
	pid, err := startSleeper(cfg, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent: -spawn-setsid-and-exit:", err)
		os.Exit(1)
	}
	rec.event("grandchild", map[string]any{"pid": pid, "how": "daemon", "pid_ns": pidNS()})
	os.Exit(0)
}

// startSleeper starts a copy of the agent in -sleep mode, in the agent's process group or, with
// setsid, in a new session. It is not waited for here: it is meant to outlive what it can.
func startSleeper(cfg *config, setsid bool) (int, error) {
	cmd := selfCommand(cfg, "-sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go cmd.Wait() // reap it if it dies while the agent lives
	return cmd.Process.Pid, nil
}

// selfCommand runs this executable with args, passing on -trap-term and -lifetime, with the
// agent's stdout and stderr: like a careless real child, it keeps the pipes open.
func selfCommand(cfg *config, args ...string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	if cfg.trapTerm {
		args = append(args, "-trap-term")
	}
	args = append(args, "-lifetime", cfg.lifetime.String())
	cmd := exec.Command(self, args...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	return cmd
}

// sleeper is -sleep: a descendant that does nothing until killed. With -sleeper-how it
// records itself first, so that a sleeper whose parent died before recording it is known too.
func sleeper(cfg *config) {
	signal.Ignore(syscall.SIGHUP)
	if cfg.sleeperHow != "" {
		if rec, err := openRecorder(cfg.record); err == nil {
			rec.event("grandchild", map[string]any{"pid": os.Getpid(), "how": cfg.sleeperHow, "pid_ns": pidNS()})
		}
	}
	if cfg.trapTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	sleepUntil(cfg.lifetime)
	os.Exit(124)
}

// sleepUntil sleeps for d, then exits 124: the leak guard of a process that waits for a signal.
func sleepUntil(d time.Duration) {
	time.Sleep(d)
	os.Exit(124)
}

// pidNS is the agent's PID namespace, the link /proc/self/ns/pid ("pid:[INODE]"): the
// namespace its recorded pids are numbers of.
func pidNS() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// turnEndSpawnKinds are the values of -turn-end-spawn.
var turnEndSpawnKinds = []string{"setsid", "daemon", "storm", "refork", "sh"}

// stormSize is how many setsid sleepers -turn-end-spawn storm starts at once.
const stormSize = 8

// reforkGenerations is how many times a -turn-end-spawn refork daemon moves to a new pid.
const reforkGenerations = 200

// spawnAtTurnEnd starts the -turn-end-spawn descendants, right after a prompt's answer was
// written: the client's teardown (stdin closed, the agent exiting on EOF) races them. Nothing
// is waited for, and the agent may exit while a spawn is under way.
func spawnAtTurnEnd(cfg *config, rec *recorder) {
	for _, how := range cfg.turnEndSpawn {
		switch how {
		case "setsid":
			go startRecordedSleeper(cfg, rec, "turn-end-setsid")
		case "daemon":
			go startDetached(selfCommand(cfg, "-spawn-setsid-and-exit", "-record", cfg.record), nil)
		case "storm":
			for range stormSize {
				go startRecordedSleeper(cfg, rec, "turn-end-storm")
			}
		case "refork":
			go startDetached(selfCommand(cfg, "-refork", fmt.Sprint(reforkGenerations), "-record", cfg.record), &syscall.SysProcAttr{Setsid: true})
		case "sh":
			// The shell forks without exec: each "(sleep) &" is a fork of the shell itself.
			script := fmt.Sprintf(`i=0; while [ $i -lt 50 ]; do (sleep %d) & i=$((i+1)); done; wait`, int(cfg.lifetime.Seconds())+1)
			go startDetached(exec.Command("/bin/sh", "-c", script), &syscall.SysProcAttr{Setsid: true})
		}
	}
}

// startRecordedSleeper starts a setsid sleeper that records itself, and records it too once
// started (if the agent still lives by then).
func startRecordedSleeper(cfg *config, rec *recorder, how string) {
	cmd := selfCommand(cfg, "-sleep", "-sleeper-how", how, "-record", cfg.record)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return
	}
	rec.event("grandchild", map[string]any{"pid": cmd.Process.Pid, "how": how, "pid_ns": pidNS()})
	go cmd.Wait()
}

// startDetached starts cmd with attr and reaps it when it exits.
func startDetached(cmd *exec.Cmd, attr *syscall.SysProcAttr) {
	cmd.SysProcAttr = attr
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

// reforkDaemon is -refork N: a daemon that records itself, starts the next generation in a
// session of its own and exits, so that its pid keeps changing; the last generation sleeps.
func reforkDaemon(cfg *config) {
	signal.Ignore(syscall.SIGHUP)
	if rec, err := openRecorder(cfg.record); err == nil {
		rec.event("grandchild", map[string]any{"pid": os.Getpid(), "how": "refork", "pid_ns": pidNS()})
	}
	if cfg.refork == 0 {
		sleeper(cfg)
	}
	next := selfCommand(cfg, "-refork", fmt.Sprint(cfg.refork-1), "-record", cfg.record)
	next.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := next.Start(); err != nil {
		sleeper(cfg)
	}
	os.Exit(0)
}
