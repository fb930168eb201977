package sandbox

import (
	"fmt"
	"reflect"
	"testing"
)

// Records as kernel 6.18 wrote them (measured: a process that restricted
// itself with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, then a shell it ran).
const (
	recRead     = `audit(1796648342.865:33): domain=1c968abb4 blockers=fs.read_file path="/etc/hostname" dev="vda" ino=611`
	recAlloc    = `audit(1796648342.865:33): domain=1c968abb4 status=allocated mode=enforcing pid=6029 uid=0 exe="/tmp/auditprobe" comm="exe"`
	recCreate   = `audit(1796648343.385:39): domain=1c968abb4 blockers=fs.make_reg path="/tmp" dev="vda" ino=246947`
	recSignal   = `audit(1796648343.385:40): domain=1c968abb4 blockers=scope.signal opid=1 ocomm="process_api"`
	recConnect  = `audit(1796648343.385:41): domain=1c968abb4 blockers=net.connect_tcp daddr=127.0.0.1 dest=22`
	recDealloc  = `audit(1796648343.489:44): domain=1c968abb4 status=deallocated denials=11`
	recHexPath  = `audit(1.2:3): domain=1c968abb4 blockers=fs.write_file,fs.read_file path=2F746D702F6120622E747874 dev="vda" ino=9`
	recOtherAcc = `audit(1796648343.390:50): domain=aaaa blockers=fs.read_file path="/home/u/.ssh/id_rsa" dev="vda" ino=7`
	recOtherDom = `audit(1796648343.390:50): domain=aaaa status=allocated mode=enforcing pid=7000 uid=0 exe="/usr/bin/other" comm="other"`
)

func TestAuditRecordsBecomeDenialsOfTheLaunchersDomainOnly(t *testing.T) {
	var l denialLog
	for _, r := range []struct {
		typ  int
		text string
	}{
		{auditLandlockAccess, recRead}, {auditLandlockDomain, recAlloc}, // before Attach: kept
		{auditLandlockAccess, recOtherAcc}, {auditLandlockDomain, recOtherDom}, // another program's sandbox
		{1300, `audit(1.2:3): arch=c000003e syscall=257 success=no exit=-13 pid=6035`}, // not Landlock's
	} {
		l.add(r.typ, r.text)
	}
	l.pid = 6029
	for _, text := range []string{recRead, recCreate, recSignal, recConnect, recHexPath} {
		l.add(auditLandlockAccess, text)
	}
	l.add(auditLandlockDomain, recDealloc) // ours: what it counted stays
	got := l.snapshot()
	want := Denials{Kinds: []Denial{
		{Op: "read", Path: "/etc/hostname", Count: 2},
		{Op: "create", Path: "/tmp", Count: 1},
		{Op: "kill", Process: "process_api (pid 1)", Count: 1},
		{Op: "connect", Address: "127.0.0.1:22", Count: 1},
		{Op: "write,read", Path: "/tmp/a b.txt", Count: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("denials:\n got %+v\nwant %+v", got, want)
	}
}

func TestADeallocatedDomainThatIsNotTheLaunchersIsForgotten(t *testing.T) {
	l := denialLog{pid: 6029}
	l.add(auditLandlockAccess, recOtherAcc)
	l.add(auditLandlockDomain, recOtherDom)
	l.add(auditLandlockDomain, `audit(1.2:3): domain=aaaa status=deallocated denials=1`)
	if len(l.domains) != 0 {
		t.Errorf("the log still holds %d domains", len(l.domains))
	}
}

func TestTheCountsAreBounded(t *testing.T) {
	l := denialLog{pid: 6029}
	l.add(auditLandlockDomain, recAlloc)
	for i := range maxDenialKinds + 10 {
		l.add(auditLandlockAccess, fmt.Sprintf(`audit(1.2:3): domain=1c968abb4 blockers=fs.read_file path="/f%d"`, i))
	}
	l.add(auditLandlockAccess, `audit(1.2:3): domain=1c968abb4 blockers=fs.read_file path="/f0"`)
	got := l.snapshot()
	if len(got.Kinds) != maxDenialKinds || got.More != 10 || got.Kinds[0].Count != 2 {
		t.Errorf("%d kinds, %d more, first counted %d; want %d, 10, 2", len(got.Kinds), got.More, got.Kinds[0].Count, maxDenialKinds)
	}
	// Other programs' domains cannot crowd out the launcher's.
	for i := range maxDomains + 5 {
		l.add(auditLandlockAccess, fmt.Sprintf(`audit(1.2:3): domain=x%d blockers=fs.read_file path="/g"`, i))
	}
	if len(l.domains) > maxDomains {
		t.Errorf("the log holds %d domains, more than %d", len(l.domains), maxDomains)
	}
	if got := l.snapshot(); len(got.Kinds) != maxDenialKinds {
		t.Errorf("after a flood of other domains, %d kinds; want %d", len(got.Kinds), maxDenialKinds)
	}
}
