// Command bareclient is the baseline of acpflow's benchmarks: the least a Go
// program must do for one ACP turn with acp-go-sdk — spawn the agent,
// initialize, session/new, one prompt, close stdin, wait. No policies, no
// events, no process-group teardown.
//
// For a real agent (bench's "Real agents, one turn") it can authenticate
// (-auth), answer permission requests with the agent's allow-once option
// (-allow), and end the turn the fastest way there is (-kill): SIGKILL to
// the agent's process group as soon as the prompt's answer arrives, no
// teardown at all. -phases prints when each part of the turn ended, one
// JSON line per turn (turnPhases).
//
// Usage: bareclient [-n N] [-c C] [-auth ID] [-allow] [-kill] [-phases] [-prompt TEXT] [-timeout D] -- AGENT [ARGS...]
// (N turns, C at once, each a fresh agent)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// options are the flags that shape one turn.
type options struct {
	prompt string
	auth   string        // authenticate method id, "" for none
	allow  bool          // select allow_once on permission requests (else cancel them)
	kill   bool          // SIGKILL the process group at the answer, instead of EOF and wait
	phases bool          // print turnPhases
	limit  time.Duration // a turn that takes longer fails (and its group is killed)
	// meta is session/new's _meta (a preset's Meta, as acpflow sends it:
	// claude-agent-acp reads its permission settings there), nil for none.
	meta map[string]any
}

// turnPhases is when each part of a turn ended, in Unix nanoseconds (0 for
// a part that did not happen).
type turnPhases struct {
	Spawned       int64  `json:"spawned"` // Start returned
	Initialized   int64  `json:"initialized"`
	Authenticated int64  `json:"authenticated,omitempty"`
	Session       int64  `json:"session"`
	Answered      int64  `json:"answered"` // the prompt's response arrived
	Reaped        int64  `json:"reaped"`   // the agent's exit was reaped
	StopReason    string `json:"stop_reason"`
	Permissions   int    `json:"permissions"` // requests answered
}

type client struct {
	out   strings.Builder
	allow bool

	mu          sync.Mutex
	permissions int
}

func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.out.WriteString(m.Content.Text.Text)
	}
	return nil
}

func (c *client) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permissions++
	c.mu.Unlock()
	if c.allow {
		for _, o := range p.Options {
			if o.Kind == acp.PermissionOptionKindAllowOnce {
				return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
					Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
			}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

func (c *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound("fs/read_text_file")
}
func (c *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound("fs/write_text_file")
}
func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound("terminal/create")
}
func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound("terminal/kill")
}
func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound("terminal/output")
}
func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound("terminal/release")
}
func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound("terminal/wait_for_exit")
}

func turn(ctx context.Context, argv []string, o options) error {
	if o.limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.limit)
		defer cancel()
	}
	var ph turnPhases
	now := func() int64 { return time.Now().UnixNano() }
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.kill}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ph.Spawned = now()
	killed := false
	killGroup := func() {
		if !killed {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			killed = true
		}
	}
	if o.kill {
		// Whatever happens below, the group goes.
		defer func() {
			killGroup()
			cmd.Wait()
		}()
	}
	c := &client{allow: o.allow}
	conn := acp.NewClientSideConnection(c, stdin, stdout)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	ph.Initialized = now()
	if o.auth != "" {
		if _, err := conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: o.auth}); err != nil {
			return fmt.Errorf("authenticate: %w", err)
		}
		ph.Authenticated = now()
	}
	wd, _ := os.Getwd()
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: wd, McpServers: []acp.McpServer{}, Meta: o.meta})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	ph.Session = now()
	resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(o.prompt)}})
	if err != nil {
		return fmt.Errorf("session/prompt: %w", err)
	}
	ph.Answered, ph.StopReason = now(), string(resp.StopReason)
	if o.kill {
		killGroup()
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
			err = nil
		}
	} else {
		stdin.Close()
		err = cmd.Wait()
	}
	ph.Reaped = now()
	if o.phases {
		c.mu.Lock()
		ph.Permissions = c.permissions
		c.mu.Unlock()
		b, _ := json.Marshal(ph)
		fmt.Println(string(b))
	}
	return err
}

func main() {
	n := flag.Int("n", 1, "turns, each with a fresh agent")
	c := flag.Int("c", 1, "turns in flight at once (the batch baseline)")
	var o options
	flag.StringVar(&o.prompt, "prompt", "hello", "the prompt's text")
	flag.StringVar(&o.auth, "auth", "", "call authenticate with this method id before session/new")
	flag.BoolVar(&o.allow, "allow", false, "answer permission requests with the allow_once option (else cancelled)")
	flag.BoolVar(&o.kill, "kill", false, "SIGKILL the agent's process group as soon as the prompt's answer arrives")
	flag.BoolVar(&o.phases, "phases", false, "print when each part of every turn ended, one JSON line per turn")
	flag.DurationVar(&o.limit, "timeout", 0, "fail a turn that takes longer (0: no limit)")
	meta := flag.String("meta", "", "session/new's _meta, a JSON object (a preset's Meta)")
	flag.Parse()
	if *meta != "" {
		if err := json.Unmarshal([]byte(*meta), &o.meta); err != nil {
			fmt.Fprintf(os.Stderr, "bareclient: -meta: %v\n", err)
			os.Exit(2)
		}
	}
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: bareclient [-n N] [-c C] -- AGENT [ARGS...]")
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the SDK logs every closed connection
	turns := make(chan struct{})
	errs := make(chan error, *c)
	var wg sync.WaitGroup
	for w := 0; w < *c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range turns {
				if err := turn(context.Background(), flag.Args(), o); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < *n; i++ {
		select {
		case turns <- struct{}{}:
		case err := <-errs:
			fmt.Fprintln(os.Stderr, "bareclient:", err)
			os.Exit(1)
		}
	}
	close(turns)
	wg.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "bareclient:", err)
		os.Exit(1)
	default:
	}
}
