package runs

import (
	"os"
	"sync"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/runs/store"
)

// CurrentOwner is this process as the owner of the runs and batches it
// runs: its pid and start time, which no later process that reuses the
// pid shares.
func CurrentOwner() store.Owner { return currentOwner() }

// currentOwner reads /proc once a process: a batch asked it for every run.
var currentOwner = sync.OnceValue(func() store.Owner {
	pid := os.Getpid()
	ticks, _ := procgroup.StartTicks(pid)
	return store.Owner{PID: pid, StartTicks: ticks}
})

// ownerAlive says whether the acpflow process that owns a run or batch is
// still running (the same process: pid and start time).
func ownerAlive(o store.Owner) bool { return procgroup.Alive(o.PID, o.StartTicks) }
