package steps

import (
	"fmt"
	"slices"
	"testing"
)

func TestAProxyRefusalIsListedOnceAndCountedEachTime(t *testing.T) {
	var r SandboxRecord
	for _, h := range []string{"a.example:443", "b.example:80", "a.example:443"} {
		r.ProxyRefused(h)
	}
	if !slices.Equal(r.Refused, []string{"a.example:443", "b.example:80"}) {
		t.Errorf("refused = %v", r.Refused)
	}
	want := []Denial{{By: "proxy", Op: "connect", Host: "a.example:443", Count: 2}, {By: "proxy", Op: "connect", Host: "b.example:80", Count: 1}}
	if !slices.Equal(r.Denied, want) {
		t.Errorf("denied = %+v, want %+v", r.Denied, want)
	}
}

func TestDeniedKeepsMaxDeniedKindsAndCountsTheRest(t *testing.T) {
	var r SandboxRecord
	for i := range MaxDenied + 3 {
		r.ProxyRefused(fmt.Sprintf("h%d:443", i))
	}
	r.CountDenial(Denial{By: DeniedByLandlock, Op: "read", Path: "/k", Count: 4})
	r.ProxyRefused("h0:443")
	if len(r.Denied) != MaxDenied || r.DeniedMore != 7 || r.Denied[0].Count != 2 || len(r.Refused) != maxRefused {
		t.Errorf("%d kinds, %d more, first %d times, %d refused; want %d, 7, 2, %d", len(r.Denied), r.DeniedMore, r.Denied[0].Count, len(r.Refused), MaxDenied, maxRefused)
	}
	c := r.Clone()
	c.CountDenial(Denial{By: DeniedByProxy, Op: "connect", Host: "h0:443"})
	if r.Denied[0].Count != 2 {
		t.Error("a clone's count changed the record it was cloned from")
	}
}
