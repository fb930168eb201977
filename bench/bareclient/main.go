// Command bareclient is the baseline of acpflow's benchmarks: the least a Go
// program must do for one ACP turn with acp-go-sdk — spawn the agent,
// initialize, session/new, one prompt, close stdin, wait. No policies, no
// events, no process-group teardown.
//
// Usage: bareclient [-n N] [-c C] -- AGENT [ARGS...]   (N turns, C at once, each a fresh agent)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

type client struct{ out strings.Builder }

func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.out.WriteString(m.Content.Text.Text)
	}
	return nil
}

func (c *client) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
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

func turn(ctx context.Context, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
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
	c := &client{}
	conn := acp.NewClientSideConnection(c, stdin, stdout)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		return err
	}
	wd, _ := os.Getwd()
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: wd, McpServers: []acp.McpServer{}})
	if err != nil {
		return err
	}
	if _, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hello")}}); err != nil {
		return err
	}
	stdin.Close()
	return cmd.Wait()
}

func main() {
	n := flag.Int("n", 1, "turns, each with a fresh agent")
	c := flag.Int("c", 1, "turns in flight at once (the batch baseline)")
	flag.Parse()
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
				if err := turn(context.Background(), flag.Args()); err != nil {
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
