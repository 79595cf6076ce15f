package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// latencyMax is the largest size on the latency panel: small messages are
// judged by time, large ones by bandwidth.
const latencyMax = 1 << 20

// series is one line of the plots: busbw (GB/s) and time (us) by size.
type series struct {
	name     string
	baseline bool // plain NCCL rows or the CPU memcpy: drawn dashed
	x, bw    []float64
	us       []float64 // 0 where unknown (memcpy)
}

// plotSeries extracts one line per op/algo/placement. The baseline is
// plain NCCL measured in the same run (algo nccl rows, on GPUs); on the
// CPU backend, where there is no NCCL, the memcpy bandwidth of the same
// bytes (averaged per size over the rows that measured it).
func plotSeries(r *Report) []series {
	var out []series
	idx := map[string]int{}
	add := func(name string, base bool, x, bw, us float64) {
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, series{name: name, baseline: base})
		}
		s := &out[i]
		s.x, s.bw, s.us = append(s.x, x), append(s.bw, bw), append(s.us, us)
	}
	mc := map[int64][]float64{}
	for _, res := range r.Results {
		for _, m := range res.measures() {
			if m.Refused != "" || m.BusBW <= 0 {
				continue
			}
			place := "out-of-place"
			if m == res.InPlace {
				place = "in-place"
			}
			add(fmt.Sprintf("%s %s %s", res.Op, res.Algo, place), res.Algo == "nccl", float64(res.Bytes), m.BusBW, m.TimeUs)
		}
		if res.MemcpyGBps > 0 {
			mc[res.Bytes] = append(mc[res.Bytes], res.MemcpyGBps)
		}
	}
	if r.Backend == "cpu" {
		sizes := make([]int64, 0, len(mc))
		for s := range mc {
			sizes = append(sizes, s)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		name := "memcpy baseline (same bytes)"
		if r.MemcpyThreads > 0 {
			name = fmt.Sprintf("memcpy baseline (%d thread(s) per rank)", r.MemcpyThreads)
		}
		for _, s := range sizes {
			var sum float64
			for _, v := range mc[s] {
				sum += v
			}
			add(name, true, float64(s), sum/float64(len(mc[s])), 0)
		}
	}
	return out
}

// palette has ten colours that stay apart on screen and in print (the
// "tab10" set); baselines are grey.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// sizeTicks labels a log size axis at powers of 4 with K/M/G suffixes.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := math.Pow(2, math.Floor(math.Log2(lo))); v <= hi*1.0001; v *= 2 {
		if v < lo/1.0001 {
			continue
		}
		t := plot.Tick{Value: v}
		if int(math.Round(math.Log2(v)))%2 == 0 {
			t.Label = FormatSize(int64(v))
		}
		ts = append(ts, t)
	}
	return ts
}

func (r *Report) plotTitle() string {
	return fmt.Sprintf("symmem bench: %s backend, %d ranks, %s, %s", r.Backend, r.Ranks, r.DType, r.Date)
}

// newPanel is a log-log plot with a size axis.
func newPanel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "size (bytes of the full tensor)"
	p.Y.Label.Text = ylabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	return p
}

// panels draws busbw against size (every size) and time against size (up
// to latencyMax), and one legend for both, drawn beside them so it never
// covers a line.
func panels(r *Report) ([]*plot.Plot, plot.Legend, error) {
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(9)
	bw := newPanel(r.plotTitle(), "bus bandwidth (GB/s, nccl-tests busbw)")
	lat := newPanel(fmt.Sprintf("latency, sizes up to %s", FormatSize(latencyMax)), "time per call (us)")
	for i, s := range plotSeries(r) {
		col := palette[i%len(palette)]
		if s.baseline {
			col = color.Gray{Y: 0x55}
		}
		style := func(l *plotter.Line, pts *plotter.Scatter) {
			l.Color, pts.Color = col, col
			l.Width = vg.Points(1.5)
			pts.Shape = plotutil.Shape(i)
			pts.Radius = vg.Points(2.5)
			if s.baseline {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
		}
		var bwXY, latXY plotter.XYs
		for j, x := range s.x {
			if s.bw[j] > 0 {
				bwXY = append(bwXY, plotter.XY{X: x, Y: s.bw[j]})
			}
			if x <= latencyMax && s.us[j] > 0 {
				latXY = append(latXY, plotter.XY{X: x, Y: s.us[j]})
			}
		}
		for _, d := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{bw, bwXY}, {lat, latXY}} {
			if len(d.xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(d.xys)
			if err != nil {
				return nil, legend, fmt.Errorf("bench: plot %s: %w", s.name, err)
			}
			style(l, pts)
			d.p.Add(l, pts)
			if d.p == bw {
				legend.Add(s.name, l, pts)
			}
		}
	}
	// A log axis needs a positive range: gonum widens a single value by
	// ±1 (below zero for busbw under 1 GB/s) and makes 0..0 of no data,
	// then panics. One size is widened by a factor of 2 either way; a
	// latency panel without points (every size above latencyMax) is left
	// out, and a busbw panel without points (every row refused) shows an
	// empty range.
	if math.IsInf(lat.X.Min, 0) {
		return []*plot.Plot{logRange(bw)}, legend, nil
	}
	return []*plot.Plot{logRange(bw), logRange(lat)}, legend, nil
}

// logRange makes p's axes ranges a log scale can draw (see panels).
func logRange(p *plot.Plot) *plot.Plot {
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		switch {
		case math.IsInf(a.Min, 0) || math.IsInf(a.Max, 0):
			a.Min, a.Max = 1, 10
		case a.Min == a.Max:
			a.Min, a.Max = a.Min/2, a.Max*2
		}
	}
	return p
}

// legendW is the width kept right of the panels for the legend.
const legendW = 7 * vg.Centimeter

// drawPlot draws both panels side by side on c, the legend to their right.
func drawPlot(c draw.Canvas, r *Report) error {
	ps, legend, err := panels(r)
	if err != nil {
		return err
	}
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	cs := plot.Align([][]*plot.Plot{ps}, tiles, draw.Crop(c, 0, -legendW, 0, 0))
	for i, p := range ps {
		p.Draw(cs[0][i])
	}
	legend.Draw(draw.Crop(c, c.Max.X-c.Min.X-legendW+vg.Millimeter*3, 0, vg.Millimeter*20, -vg.Millimeter*15))
	return nil
}

// Plot size: two panels and the legend beside them.
const plotW, plotH = 36 * vg.Centimeter, 13 * vg.Centimeter

// WriteSVG writes the plots as SVG.
func WriteSVG(w io.Writer, r *Report) error {
	c := vgsvg.New(plotW, plotH)
	if err := drawPlot(draw.New(c), r); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

// WritePNG writes the plots as PNG (150 dpi).
func WritePNG(w io.Writer, r *Report) error {
	c := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(150))
	if err := drawPlot(draw.New(c), r); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// WritePlot writes the plots to path, as SVG or PNG by its extension.
func WritePlot(path string, r *Report) error {
	var write func(io.Writer, *Report) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		write = WriteSVG
	case ".png":
		write = WritePNG
	default:
		return fmt.Errorf("bench: plot %s: want a file name ending in .svg or .png", path)
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	err = write(fh, r)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	return nil
}
