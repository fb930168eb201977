package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// The bench starts every measured process through a copy of itself in
// launcher mode (`bench -launch -- ARGV...`), a process that has done
// nothing but start.
//
// # Notes
//
// Linux hands a process that calls exec the peak RSS of the address space
// it leaves behind: the child's ru_maxrss starts at its parent's RSS when
// it was forked (Go forks with CLONE_VM, so the parent's own mm). Measured
// straight from the bench, whose RSS grows with what it has captured, a
// 3.5 MB client reads as 7 MB or more. The launcher's RSS is the floor
// instead, below every figure measured here. It also times the child from
// just before fork to just after wait, so its own start is not counted.
const launchArg = "-launch"

// launchReport is what the launcher writes on fd 3.
type launchReport struct {
	Begin  int64  `json:"begin_unix_ns"`
	Wall   int64  `json:"wall_ns"`
	CPU    int64  `json:"cpu_ns"` // user + system, the child and what it reaped
	MaxRSS int64  `json:"max_rss_kib"`
	Error  string `json:"error,omitempty"`
}

// launch is the launcher's main: run argv with the launcher's stdio, env and
// cwd, report on fd 3, exit 0 (the report carries the child's failure).
func launch(argv []string) {
	report := os.NewFile(3, "report")
	syscall.CloseOnExec(3) // the child must not hold the report pipe open
	var r launchReport
	if len(argv) == 0 {
		r.Error = "launcher: no command"
	} else {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		begin := time.Now()
		err := cmd.Run()
		r.Begin, r.Wall = begin.UnixNano(), int64(time.Since(begin))
		if cmd.ProcessState != nil {
			r.CPU, r.MaxRSS = int64(cpuOf(cmd.ProcessState)), rssOf(cmd.ProcessState)
		}
		if err != nil {
			r.Error = err.Error()
		}
	}
	json.NewEncoder(report).Encode(r)
	os.Exit(0)
}

// launched runs cmd under the launcher and returns the launcher's report.
func launched(cmd *exec.Cmd) (sample, error) {
	self, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer pr.Close()
	cmd.Args = append([]string{self, launchArg, "--"}, cmd.Args...)
	cmd.Path = self
	cmd.ExtraFiles = []*os.File{pw}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return sample{}, err
	}
	var r launchReport
	decodeErr := json.NewDecoder(pr).Decode(&r)
	if err := cmd.Wait(); err != nil {
		return sample{}, fmt.Errorf("launcher: %w", err)
	}
	if decodeErr != nil {
		return sample{}, fmt.Errorf("launcher report: %w", decodeErr)
	}
	s := sample{begin: time.Unix(0, r.Begin), wall: time.Duration(r.Wall), cpu: time.Duration(r.CPU), maxRSS: r.MaxRSS}
	if r.Error != "" {
		return s, errors.New(r.Error)
	}
	return s, nil
}
