package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// series is one line of the plot: busbw (GB/s) against size (bytes).
type series struct {
	name string
	x, y []float64
}

// plotSeries extracts one line per op/algo/placement plus the memcpy
// baseline (averaged per size over the rows that measured it).
func plotSeries(r *Report) []series {
	var out []series
	idx := map[string]int{}
	add := func(name string, x, y float64) {
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, series{name: name})
		}
		out[i].x = append(out[i].x, x)
		out[i].y = append(out[i].y, y)
	}
	mc := map[int64][]float64{}
	for _, res := range r.Results {
		if m := res.OutOfPlace; m != nil && m.Refused == "" {
			add(res.Op+" "+res.Algo+" out-of-place", float64(res.Bytes), m.BusBW)
		}
		if m := res.InPlace; m != nil && m.Refused == "" {
			add(res.Op+" "+res.Algo+" in-place", float64(res.Bytes), m.BusBW)
		}
		mc[res.Bytes] = append(mc[res.Bytes], res.MemcpyGBps)
	}
	sizes := make([]int64, 0, len(mc))
	for s := range mc {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	for _, s := range sizes {
		var sum float64
		for _, v := range mc[s] {
			sum += v
		}
		add("memcpy (same bytes)", float64(s), sum/float64(len(mc[s])))
	}
	return out
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

// frame maps data to pixels: log2 x, linear y from 0.
type frame struct {
	w, h, left, right, top, bottom float64
	x0, x1, y1                     float64 // log2 range and y max
}

func newFrame(ss []series, w, h float64) frame {
	f := frame{w: w, h: h, left: 70, right: 300, top: 40, bottom: 50, x0: math.Inf(1), x1: math.Inf(-1)}
	for _, s := range ss {
		for i := range s.x {
			f.x0 = math.Min(f.x0, math.Floor(math.Log2(s.x[i])))
			f.x1 = math.Max(f.x1, math.Ceil(math.Log2(s.x[i])))
			f.y1 = math.Max(f.y1, s.y[i])
		}
	}
	if math.IsInf(f.x0, 0) {
		f.x0, f.x1 = 10, 11
	}
	if f.x1 <= f.x0 {
		f.x1 = f.x0 + 1
	}
	f.y1 = niceCeil(f.y1)
	return f
}

func (f frame) px(x float64) float64 {
	return f.left + (math.Log2(x)-f.x0)/(f.x1-f.x0)*(f.w-f.left-f.right)
}

func (f frame) py(y float64) float64 {
	return f.h - f.bottom - y/f.y1*(f.h-f.top-f.bottom)
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// xTicks are powers of two, at most about 12 of them.
func (f frame) xTicks() []float64 {
	step := math.Ceil((f.x1 - f.x0) / 12)
	var out []float64
	for e := f.x0; e <= f.x1; e += step {
		out = append(out, math.Exp2(e))
	}
	return out
}

func (f frame) yTicks() []float64 {
	var out []float64
	for i := 0; i <= 5; i++ {
		out = append(out, f.y1*float64(i)/5)
	}
	return out
}

func yLabel(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func (r *Report) plotTitle() string {
	return fmt.Sprintf("symmem bench: %s, %d ranks, %s - busbw vs size", r.Backend, r.Ranks, r.DType)
}

// WriteSVG draws the bandwidth-vs-size plot as SVG.
func WriteSVG(w io.Writer, r *Report) error {
	ss := plotSeries(r)
	f := newFrame(ss, 960, 540)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", f.w, f.h, f.w, f.h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">%s</text>`+"\n", f.left, xmlEscape(r.plotTitle()))
	for _, x := range f.xTicks() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", f.px(x), f.top, f.px(x), f.h-f.bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", f.px(x), f.h-f.bottom+16, FormatSize(int64(x)))
	}
	for _, y := range f.yTicks() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", f.left, f.py(y), f.w-f.right, f.py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", f.left-6, f.py(y)+4, yLabel(y))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", f.left, f.top, f.w-f.left-f.right, f.h-f.top-f.bottom)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">size (bytes, log2 scale)</text>`+"\n", (f.left+f.w-f.right)/2, f.h-12)
	fmt.Fprintf(&b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">busbw (GB/s)</text>`+"\n", (f.top+f.h-f.bottom)/2)
	for i, s := range ss {
		col := palette[i%len(palette)]
		dash := ""
		if strings.HasPrefix(s.name, "memcpy") {
			col, dash = "black", ` stroke-dasharray="6,4"`
		}
		pts := make([]string, len(s.x))
		for j := range s.x {
			pts[j] = fmt.Sprintf("%.1f,%.1f", f.px(s.x[j]), f.py(s.y[j]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		ly := f.top + 10 + 18*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", f.w-f.right+12, ly, f.w-f.right+36, ly, col, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", f.w-f.right+42, ly+4, xmlEscape(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// WritePlot writes the plot to path, as SVG or PNG by its extension.
func WritePlot(path string, r *Report) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("plot file %q: want a name ending in .svg or .png", path)
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing plot: %w", err)
	}
	if ext == ".svg" {
		err = WriteSVG(fh, r)
	} else {
		err = WritePNG(fh, r)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing plot %s: %w", path, err)
	}
	return nil
}
