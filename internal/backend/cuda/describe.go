package cuda

import (
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// Describe reports the backend's device, its peers, NCCL and the groups'
// paths, for `symmem doctor`.
func (b *Backend) Describe() string {
	var s strings.Builder
	d := b.info
	fmt.Fprintf(&s, "cuda: driver %d, device %d %s (%s), %d SMs, %d copy engines, cc %d.%d, VMM granularity %d\n",
		cudadrv.DriverVersion(), d.Ordinal, d.Name, d.PCI, d.SMs, d.AsyncEngines, d.CC[0], d.CC[1], b.gran)
	if m, err := cudadrv.P2PMatrix(); err == nil {
		for a := range m {
			for c := range m[a] {
				if a != c {
					l := m[a][c]
					fmt.Fprintf(&s, "cuda: p2p %d->%d access=%v nvlink-atomics=%v rank=%d\n", a, c, l.Access, l.NativeAtomics, l.PerfRank)
				}
			}
		}
	}
	fmt.Fprintf(&s, "cuda: nccl %s\n", b.NCCLStatus())
	if b.share {
		fmt.Fprintf(&s, "cuda: device sharing allowed (%s=1): ranks on one GPU run symmem's kernels and copy engines; NCCL is off for such groups\n", rendezvous.VarShareDevice)
	} else {
		fmt.Fprintf(&s, "cuda: device sharing refused (set %s=1 or `symmem launch --share-device` to run several ranks on one GPU)\n", rendezvous.VarShareDevice)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.groups {
		kern := "true"
		if !g.paths.kernel.loaded() {
			kern = "false (" + g.caps.kernWhy + ")"
		}
		nccl := fmt.Sprint(g.nccl.comm != nil)
		if g.nccl.comm == nil && g.nccl.err != nil {
			nccl = "false (" + g.nccl.err.Error() + ")"
		}
		pad := ""
		if p := g.peers.pad; p != nil { // the kernels' region, lc's words and ll's area
			pad = fmt.Sprintf("; signal pad %d MiB (ll rows up to %d KiB)", p.size>>20, llCap>>10)
		}
		across := ""
		if g.watch.calls != nil {
			across = "; calls compared across hosts after they are issued (call log)"
		}
		fmt.Fprintf(&s, "cuda: group %q rank %d/%d: copy engines %v (%s); kernels %s; nccl comm %s; windows %v %s; segments %d%s%s\n",
			g.GroupName, g.Me, len(g.Ranks), g.caps.ce, g.caps.ceWhy, kern, nccl, g.nccl.windows, g.nccl.winWhy, g.Registered(), pad, across)
	}
	return s.String()
}
