package main

import "fmt"

func init() { register("ptx/reducescatter.ptx", reduceScatterLC) }

// reduceScatterLC is ptx/reducescatter.ptx: the reduction half of the
// low-contention reduce-scatter (internal/backend/cuda/lowcontention.go
// drives it).
func reduceScatterLC() string {
	var p ptx
	p.header(fmt.Sprintf(`reducescatter.ptx: the reduction half of symmem's low-contention
reduce-scatter (PTX from internal/backend/cuda/internal/ptxgen, JIT-compiled by
the driver). Copy engines pull every peer's chunk for this rank into local
staging, sub-chunk by sub-chunk, on side streams; this kernel, launched
with a few CTAs beside them, sums each sub-chunk as it arrives, so the
data moves without SMs and the sums take few.

Staging has two slots of n-1 sub-chunks (peer j = the j-th other rank in
rank order); sub-chunk c lands in slot c%%2. Words in the local block W
(P.region): consumed at 0, arrived[j] at 4+4j, finished[2] at %[14]d. Side
stream j writes arrived[j] = c+1 after its copy of sub-chunk c; the kernel's
thread 0 waits until every arrived[j] >= c+1, the CTA sums sub-chunk c (rank
order, float32, as sum.go; the own rank's part read in place) into the
output (P.unit 16: vectors, then the last bytes%%16 element by element;
else, when the own chunk or the output is not 16-byte aligned, every
element alone: slower, same bits), then thread 0 adds 1 to
finished[c%%2]; the CTA that completes the
count (every CTA done with sub-chunk c) sets it back to 0 and publishes
consumed = c+1 (release). Side streams wait for consumed >= c-1 before they
overwrite slot c%%2 with sub-chunk c. A CTA cannot reach sub-chunk c+2
before every CTA finished c (its copy waited for that), so finished[c%%2]
never mixes two sub-chunks. The stream resets W after the kernel (no
host-chosen values: graph replay is correct); waits trap after P.timeout.

Parameter block P (%[1]d bytes; kernel_layout.go):
  %[2]d out u64 | %[3]d bytes u64 (this rank's output, whole elements, maybe 0) | %[4]d W u64 (local)
  %[5]d me u32 | %[6]d n u32 | %[7]d dtype u32 | %[8]d flags u32 (%[9]d avg)
  %[10]d own u64 (this rank's chunk of its input) | %[11]d staging u64
  %[12]d sub-chunk bytes u64 (a multiple of 16; the last one may be shorter) | %[13]d timeout u64
  %[15]d unit u32 (16: vector mode; 2 or 4: element mode)`,
		pSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, flagAvg, pOwn, pStaging, pChunk, pTimeout, wFinished, pUnit))
	p.w("")
	p.f(".shared .align 8 .b64 ssrc[%d];\n", maxRanks)
	p.entryTuned("symmem_reducescatter_lc", fmt.Sprintf(".maxntid %d, 1, 1", threads), fmt.Sprintf(`	.reg .pred  %%p<13>;
	.reg .pred  %%q<8>;
	.reg .pred  %%u<%[1]d>;
	.reg .b16   %%h<20>;
	.reg .b32   %%r<72>;
	.reg .b32   %%l<%[2]d>;
	.reg .f32   %%f<20>;
	.reg .f32   %%a<%[3]d>;
	.reg .b64   %%rd<48>;
	.reg .b64   %%ro<%[1]d>;
`, lcUnroll, 4*lcUnroll, 8*lcUnroll))
	p.loadParams()
	p.f("\tld.param.u32    %%r16, [P+%d];                // flags", pFlags)
	p.f("\tld.param.u64    %%rd4, [P+%d];                // own", pOwn)
	p.f("\tld.param.u64    %%rd5, [P+%d];                // staging", pStaging)
	p.f("\tld.param.u64    %%rd6, [P+%d];                // C", pChunk)
	p.w(`	add.u64         %rd7, %rd2, %rd6;
	sub.u64         %rd7, %rd7, 1;
	div.u64         %rd7, %rd7, %rd6;             // sub-chunks
	mul.wide.u32    %rd30, %r2, %r3;
	cvt.u64.u32     %rd25, %r1;
	add.u64         %rd30, %rd30, %rd25;          // first i of this thread
	mul.wide.u32    %rd26, %r4, %r3;              // S
	mov.u64         %rd31, ssrc;
	sub.u32         %r20, %r6, 1;                 // n-1
	setp.ne.u32     %p1, %r1, 0;                  // %p1: not thread 0`)
	p.sumSetup()
	p.w(`	mov.u32         %r17, 0;                      // c
	mov.u64         %rd8, 0;                      // c x C
L_chunk:
	cvt.u64.u32     %rd9, %r17;
	setp.ge.u64     %p5, %rd9, %rd7;
	@%p5 bra        L_end;
	@%p1 bra        L_ready;
	// Thread 0: wait until every peer's sub-chunk c has arrived.
	add.u32         %r8, %r17, 1;                 // target c+1
	mov.u32         %r18, 0;                      // j
L_arrived:
	setp.ge.u32     %p7, %r18, %r20;
	@%p7 bra        L_table;
	mul.wide.u32    %rd11, %r18, 4;
	add.u64         %rd12, %rd3, %rd11;
	add.u64         %rd12, %rd12, 4;              // &arrived[j]`)
	p.wait("L_spin_arrived", "%rd12", "L_arrived_next")
	p.w(`L_arrived_next:
	add.u32         %r18, %r18, 1;
	bra             L_arrived;
L_table:
	// ssrc[k]: rank k's sub-chunk c (own input for me, else its staging slot).
	and.b32         %r19, %r17, 1;
	mul.lo.u32      %r19, %r19, %r20;             // (c%2)(n-1)
	mov.u32         %r18, 0;                      // k
L_table_k:
	setp.ge.u32     %p7, %r18, %r6;
	@%p7 bra        L_ready;
	setp.gt.u32     %p9, %r18, %r5;
	selp.u32        %r12, 1, 0, %p9;
	sub.u32         %r12, %r18, %r12;             // j of rank k
	add.u32         %r12, %r12, %r19;
	cvt.u64.u32     %rd13, %r12;
	mul.lo.u64      %rd13, %rd13, %rd6;
	add.u64         %rd13, %rd5, %rd13;           // staging slot
	add.u64         %rd14, %rd4, %rd8;            // own sub-chunk
	setp.eq.u32     %p9, %r18, %r5;
	selp.b64        %rd13, %rd14, %rd13, %p9;
	mul.wide.u32    %rd15, %r18, 8;
	add.u64         %rd15, %rd31, %rd15;
	st.shared.u64   [%rd15], %rd13;
	add.u32         %r18, %r18, 1;
	bra             L_table_k;
L_ready:
	bar.sync        0;
	// This sub-chunk: min(C, bytes - c x C) bytes, V vectors (element
	// mode: none), then its elements from V x 16 / size one by one.
	sub.u64         %rd9, %rd2, %rd8;
	min.u64         %rd9, %rd9, %rd6;
	shr.u64         %rd29, %rd9, 4;               // V`)
	p.f("\tld.param.u32    %%r55, [P+%d];                // unit: 16, else element mode", pUnit)
	p.w(`	setp.ne.u32     %p7, %r55, 16;
	@%p7 mov.u64    %rd29, 0;
	add.u64         %rd10, %rd1, %rd8;            // output of sub-chunk c
	mov.u64         %rd24, %rd30;
L_sum:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_sum_vectors_done;`)
	p.sumStrided()
	p.w(`	bra             L_sum;
L_sum_vectors_done:
	setp.eq.u32     %p12, %r7, 0;                 // %p12: float32 (4-byte elements)
	selp.u32        %r54, 2, 1, %p12;             // log2 of the element size
	sub.u64         %rd18, %rd2, %rd8;
	min.u64         %rd18, %rd18, %rd6;           // the sub-chunk's bytes again
	shr.u64         %rd18, %rd18, %r54;           // its elements
	shl.b64         %rd20, %rd29, 4;
	shr.u64         %rd20, %rd20, %r54;
	add.u64         %rd20, %rd20, %rd30;          // e
L_el:
	setp.ge.u64     %p5, %rd20, %rd18;
	@%p5 bra        L_sum_done;
	shl.b64         %rd27, %rd20, %r54;`)
	p.sumElement()
	p.w(`	add.u64         %rd36, %rd10, %rd27;
	@%p12 st.global.u32 [%rd36], %r21;
	@!%p12 st.global.u16 [%rd36], %h1;
	add.u64         %rd20, %rd20, %rd26;
	bra             L_el;
L_sum_done:
	// Every thread's loads of sub-chunk c are done: the slot may be refilled.
	bar.sync        0;
	@%p1 bra        L_next;`)
	p.f("\tadd.u64         %%rd16, %%rd3, %d;", wFinished)
	p.w(`	and.b32         %r19, %r17, 1;
	mul.wide.u32    %rd17, %r19, 4;
	add.u64         %rd16, %rd16, %rd17;          // &finished[c%2]
	atom.acq_rel.sys.global.add.u32 %r19, [%rd16], 1;
	sub.u32         %r18, %r4, 1;
	setp.ne.u32     %p9, %r19, %r18;
	@%p9 bra        L_next;                       // not the last CTA done with sub-chunk c
	st.relaxed.sys.global.u32 [%rd16], 0;
	add.u32         %r19, %r17, 1;
	st.release.sys.global.u32 [%rd3], %r19;       // consumed = c+1
L_next:
	add.u32         %r17, %r17, 1;
	add.u64         %rd8, %rd8, %rd6;
	bra             L_chunk;
L_end:
	ret;
}`)
	return p.b.String()
}

// lcUnroll is how many vectors a thread of the lc kernel sums per trip:
// with only a few CTAs, bytes in flight per SM bound the speed, so each
// thread loads lcUnroll vectors of a rank at once (strided by the grid, so
// the CTA's loads stay coalesced) and accumulates rank by rank.
const lcUnroll = 8

// sumStrided: vectors i + u*S (u < lcUnroll, those below V) of sub-chunk c:
// accumulators start at -0.0 (so -0.0 + v0 is v0 exactly and the sum is
// v0 + v1 + ... in rank order, as sum.go's), each rank's vectors are loaded
// together and added; then rounded as sum.go rounds (avg included) and
// stored at %rd10 + offset; %rd24 advances by lcUnroll*S. Registers: %u<u>
// (vector u exists), %ro<u> (its byte offset), %l (loads), %a
// (accumulators), %r40 rank.
func (p *ptx) sumStrided() {
	p.w("\tmov.u64         %rd37, %rd24;")
	for u := 0; u < lcUnroll; u++ {
		if u > 0 {
			p.w("\tadd.u64         %rd37, %rd37, %rd26;")
		}
		p.f("\tsetp.lt.u64     %%u%d, %%rd37, %%rd29;", u)
		p.f("\tshl.b64         %%ro%d, %%rd37, 4;", u)
	}
	for a := 0; a < 8*lcUnroll; a++ {
		p.f("\tmov.f32         %%a%d, 0f80000000;", a)
	}
	p.w(`	mov.u32         %r40, 0;
L_rk:
	setp.ge.u32     %p7, %r40, %r6;
	@%p7 bra        L_rk_done;
	mul.wide.u32    %rd35, %r40, 8;
	add.u64         %rd35, %rd31, %rd35;
	ld.shared.u64   %rd35, [%rd35];               // rank k's sub-chunk`)
	for u := 0; u < lcUnroll; u++ {
		p.f("\t@%%u%d add.u64   %%rd36, %%rd35, %%ro%d;", u, u)
		p.f("\t@%%u%d ld.global.cg.v4.u32 {%%l%d, %%l%d, %%l%d, %%l%d}, [%%rd36];", u, 4*u, 4*u+1, 4*u+2, 4*u+3)
	}
	p.w(`	setp.eq.u32     %p7, %r7, 1;
	@%p7 bra        L_rk_bf16;
	setp.eq.u32     %p7, %r7, 2;
	@%p7 bra        L_rk_f16;`)
	for v := 0; v < 4*lcUnroll; v++ {
		p.f("\tmov.b32         %%f1, %%l%d;", v)
		p.f("\tadd.rn.f32      %%a%d, %%a%d, %%f1;", v, v)
	}
	p.w("\tbra             L_rk_next;\nL_rk_bf16:")
	for v := 0; v < 4*lcUnroll; v++ {
		p.f("\tshl.b32         %%r56, %%l%d, 16;", v)
		p.w("\tmov.b32         %f1, %r56;")
		p.f("\tadd.rn.f32      %%a%d, %%a%d, %%f1;", 2*v, 2*v)
		p.f("\tand.b32         %%r56, %%l%d, -65536;", v)
		p.w("\tmov.b32         %f1, %r56;")
		p.f("\tadd.rn.f32      %%a%d, %%a%d, %%f1;", 2*v+1, 2*v+1)
	}
	p.w("\tbra             L_rk_next;\nL_rk_f16:")
	for v := 0; v < 4*lcUnroll; v++ {
		p.f("\tmov.b32         {%%h1, %%h2}, %%l%d;", v)
		p.w("\tcvt.f32.f16     %f1, %h1;")
		p.f("\tadd.rn.f32      %%a%d, %%a%d, %%f1;", 2*v, 2*v)
		p.w("\tcvt.f32.f16     %f1, %h2;")
		p.f("\tadd.rn.f32      %%a%d, %%a%d, %%f1;", 2*v+1, 2*v+1)
	}
	p.w(`L_rk_next:
	add.u32         %r40, %r40, 1;
	bra             L_rk;
L_rk_done:
	setp.eq.u32     %p7, %r7, 1;
	@%p7 bra        L_pk_bf16;
	setp.eq.u32     %p7, %r7, 2;
	@%p7 bra        L_pk_f16;`)
	for u := 0; u < lcUnroll; u++ {
		for j := 0; j < 4; j++ {
			p.f("\t@%%p8 div.rn.f32 %%a%d, %%a%d, %%f18;", 4*u+j, 4*u+j)
		}
		p.f("\t@%%u%d add.u64   %%rd36, %%rd10, %%ro%d;", u, u)
		p.f("\t@%%u%d st.global.v4.f32 [%%rd36], {%%a%d, %%a%d, %%a%d, %%a%d};", u, 4*u, 4*u+1, 4*u+2, 4*u+3)
	}
	p.w("\tbra             L_pk_done;")
	for _, t := range []struct {
		label  string
		pack   func()
		unpack func(k, f0 int)
	}{{"L_pk_bf16", p.bf16Pack, p.bf16Unpack}, {"L_pk_f16", p.f16Pack, p.f16Unpack}} {
		p.w(t.label + ":")
		for u := 0; u < lcUnroll; u++ {
			for j := 0; j < 8; j++ {
				p.f("\tmov.f32         %%f%d, %%a%d;", 1+j, 8*u+j)
			}
			t.pack()
			skip := fmt.Sprintf("%s_%d_store", t.label, u)
			p.f("\t@!%%p8 bra       %s;", skip)
			t.unpack(0, 1)
			p.divHalves()
			t.pack()
			p.w(skip + ":")
			p.f("\t@%%u%d add.u64   %%rd36, %%rd10, %%ro%d;", u, u)
			p.f("\t@%%u%d st.global.v4.u32 [%%rd36], {%%r21, %%r22, %%r23, %%r24};", u)
		}
		p.w("\tbra             L_pk_done;")
	}
	p.f(`L_pk_done:
	mul.lo.u64      %%rd37, %%rd26, %d;
	add.u64         %%rd24, %%rd24, %%rd37;`, lcUnroll)
}
