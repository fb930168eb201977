package sandbox

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// receiveListener reads the listening socket the launcher sends on back
// (handGatewayListener), which it closes. The caller owns the socket's
// file (net.FileListener makes a listener of it). Raw system calls, not
// package net: this package is the launcher too, which must not link
// cgo (cmd/acpflow-sandbox's test).
func receiveListener(back *os.File) (*os.File, error) {
	defer back.Close()
	fd := int(back.Fd())
	for {
		ready, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(gatewayWait/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ready == 0 {
			return nil, fmt.Errorf("nothing within %s", gatewayWait)
		}
		break
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, errors.New("it exited first")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("the launcher closed the gateway channel without a listener")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("the launcher sent no listener")
	}
	return os.NewFile(uintptr(fds[0]), "gateway listener"), nil
}
