package plan

import (
	"fmt"
	"strings"

	"github.com/symmem/symmem/coll"
)

// Buf names one of a rank's buffers.
type Buf uint8

const (
	In      Buf = iota // the call's input (symmetric)
	Out                // the call's output (symmetric); the only buffer of in-place plans
	Scratch            // private to the rank, Plan.ScratchBytes long
)

func (b Buf) String() string {
	switch b {
	case In:
		return "in"
	case Out:
		return "out"
	case Scratch:
		return "scratch"
	}
	return fmt.Sprintf("buf(%d)", uint8(b))
}

// Ref names byte Off of rank Rank's copy of Buf (Rank is a group rank).
type Ref struct {
	Buf  Buf
	Rank int
	Off  int64
}

func (r Ref) String() string { return fmt.Sprintf("%v[%d]+%d", r.Buf, r.Rank, r.Off) }

// Op is what a step does.
type Op uint8

const (
	Copy   Op = iota // Dst = Srcs[0], Bytes bytes
	Reduce           // Dst = op over Srcs (ascending ranks), Bytes bytes; Avg divides by len(Srcs)
	Signal           // tell Peer this rank reached Phase
	Wait             // block until Peer has signalled Phase
)

func (o Op) String() string {
	switch o {
	case Copy:
		return "copy"
	case Reduce:
		return "reduce"
	case Signal:
		return "signal"
	case Wait:
		return "wait"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Step is one instruction. Data steps (Copy, Reduce) use Srcs, Dst and
// Bytes; sync steps (Signal, Wait) use Peer and Phase.
type Step struct {
	Op    Op
	Srcs  []Ref
	Dst   Ref
	Bytes int64
	Peer  int
	Phase int
}

// IsSync reports whether s is a Signal or a Wait.
func (s Step) IsSync() bool { return s.Op == Signal || s.Op == Wait }

func (s Step) String() string {
	switch s.Op {
	case Copy, Reduce:
		src := make([]string, len(s.Srcs))
		for i, r := range s.Srcs {
			src[i] = r.String()
		}
		return fmt.Sprintf("%-6s %s -> %v %dB", s.Op, strings.Join(src, ","), s.Dst, s.Bytes)
	case Signal:
		return fmt.Sprintf("%-6s to=%d phase=%d", s.Op, s.Peer, s.Phase)
	case Wait:
		return fmt.Sprintf("%-6s from=%d phase=%d", s.Op, s.Peer, s.Phase)
	}
	return s.Op.String()
}

// Plan is one rank's schedule for one collective call.
type Plan struct {
	Kind    coll.Kind
	N, Rank int
	Root    int // Broadcast only
	DType   coll.DType
	Op      coll.ReduceOp // ReduceScatter and AllReduce
	Count   int64         // elements, as in Spec
	InPlace bool
	OneShot bool // AllReduce: every rank reduced the whole tensor
	Splits  bool // AllToAllV: block sizes (and InBytes, OutBytes) differ by rank

	InBytes, OutBytes, ScratchBytes int64 // per-rank buffer sizes the steps address
	Phases                          int   // barrier phases per call: the epoch base advances by this much
	Steps                           []Step
}

// Stages splits Steps at sync steps: it returns the index ranges [lo, hi)
// of the maximal runs of data steps, whose steps are independent (see the
// package doc).
func (p Plan) Stages() [][2]int {
	var out [][2]int
	lo := -1
	for i, s := range p.Steps {
		switch {
		case s.IsSync() && lo >= 0:
			out = append(out, [2]int{lo, i})
			lo = -1
		case !s.IsSync() && lo < 0:
			lo = i
		}
	}
	if lo >= 0 {
		out = append(out, [2]int{lo, len(p.Steps)})
	}
	return out
}

// String renders the plan one step per line; the golden tests compare it.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %v n=%d rank=%d", p.Kind, p.N, p.Rank)
	switch p.Kind {
	case coll.Broadcast:
		fmt.Fprintf(&b, " root=%d", p.Root)
	case coll.ReduceScatter, coll.AllReduce:
		fmt.Fprintf(&b, " op=%v", p.Op)
	}
	fmt.Fprintf(&b, " dtype=%v count=%d", p.DType, p.Count)
	if p.InPlace {
		b.WriteString(" in-place")
	}
	if p.OneShot {
		b.WriteString(" one-shot")
	}
	if p.Splits {
		b.WriteString(" splits")
	}
	fmt.Fprintf(&b, " in=%d out=%d scratch=%d phases=%d\n", p.InBytes, p.OutBytes, p.ScratchBytes, p.Phases)
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%3d %v\n", i, s)
	}
	return b.String()
}
