package bench

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// glyphs is a 3x5 bitmap font: each glyph is 15 bits, row by row, left bit
// first. Lower case prints as upper case; unknown runes print as blanks.
var glyphs = func() map[rune]uint16 {
	src := "0 111101101101111; 1 010110010010111; 2 111001111100111; 3 111001111001111; 4 101101111001001; " +
		"5 111100111001111; 6 111100111101111; 7 111001001001001; 8 111101111101111; 9 111101111001111; " +
		"A 010101111101101; B 110101110101110; C 011100100100011; D 110101101101110; E 111100110100111; " +
		"F 111100110100100; G 011100101101011; H 101101111101101; I 111010010010111; J 001001001101010; " +
		"K 101101110101101; L 100100100100111; M 101111111101101; N 110101101101101; O 010101101101010; " +
		"P 110101110100100; Q 010101101110011; R 110101110101101; S 011100010001110; T 111010010010010; " +
		"U 101101101101111; V 101101101101010; W 101101111111101; X 101101010101101; Y 101101010010010; " +
		"Z 111001010100111; _ 000000000000111; - 000000111000000; / 001001010100100; ( 010100100100010; " +
		") 010001001001010; . 000000000000010; % 101001010100101; + 000010111010000; , 000000000010100; " +
		": 000010000010000; | 010010010010010; = 000111000111000"
	m := map[rune]uint16{}
	for _, g := range strings.Split(src, "; ") {
		v, _ := strconv.ParseUint(g[2:], 2, 16)
		m[rune(g[0])] = uint16(v)
	}
	return m
}()

type canvas struct{ img *image.RGBA }

func (c canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Rect) {
		c.img.SetRGBA(x, y, col)
	}
}

// line draws a line of the given width (Bresenham, thickened); dash > 0
// draws dashes of that many pixels.
func (c canvas) line(x0, y0, x1, y1 float64, width, dash int, col color.RGBA) {
	ax, ay, bx, by := int(math.Round(x0)), int(math.Round(y0)), int(math.Round(x1)), int(math.Round(y1))
	dx, dy := abs(bx-ax), -abs(by-ay)
	sx, sy := sign(bx-ax), sign(by-ay)
	e := dx + dy
	for step := 0; ; step++ {
		if dash == 0 || (step/dash)%2 == 0 {
			for i := 0; i < width; i++ {
				for j := 0; j < width; j++ {
					c.set(ax+i-width/2, ay+j-width/2, col)
				}
			}
		}
		if ax == bx && ay == by {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			ax += sx
		} else {
			e += dx
			ay += sy
		}
	}
}

// text draws s with its left edge at x and its top at y, scale pixels per
// font dot; align 0 = left, 1 = centre, 2 = right.
func (c canvas) text(s string, x, y float64, scale, align int, col color.RGBA) {
	w := float64(len(s) * 4 * scale)
	x -= float64(align) * w / 2
	for i, r := range strings.ToUpper(s) {
		g := glyphs[unicode.ToUpper(r)]
		for row := 0; row < 5; row++ {
			for colb := 0; colb < 3; colb++ {
				if g&(1<<(14-row*3-colb)) == 0 {
					continue
				}
				for a := 0; a < scale; a++ {
					for b := 0; b < scale; b++ {
						c.set(int(x)+(i*4+colb)*scale+a, int(y)+row*scale+b, col)
					}
				}
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

func hexColor(s string) color.RGBA {
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

// WritePNG draws the bandwidth-vs-size plot as PNG.
func WritePNG(w io.Writer, r *Report) error {
	ss := plotSeries(r)
	f := newFrame(ss, 960, 540)
	img := image.NewRGBA(image.Rect(0, 0, int(f.w), int(f.h)))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	c := canvas{img}
	black, grey := color.RGBA{0, 0, 0, 255}, color.RGBA{221, 221, 221, 255}
	c.text(r.plotTitle(), f.left, 12, 2, 0, black)
	for _, x := range f.xTicks() {
		c.line(f.px(x), f.top, f.px(x), f.h-f.bottom, 1, 0, grey)
		c.text(FormatSize(int64(x)), f.px(x), f.h-f.bottom+8, 2, 1, black)
	}
	for _, y := range f.yTicks() {
		c.line(f.left, f.py(y), f.w-f.right, f.py(y), 1, 0, grey)
		c.text(yLabel(y), f.left-8, f.py(y)-5, 2, 2, black)
	}
	l, rt, t, b := f.left, f.w-f.right, f.top, f.h-f.bottom
	c.line(l, t, rt, t, 1, 0, black)
	c.line(l, b, rt, b, 1, 0, black)
	c.line(l, t, l, b, 1, 0, black)
	c.line(rt, t, rt, b, 1, 0, black)
	c.text("size (bytes, log2)", (l+rt)/2, f.h-20, 2, 1, black)
	c.text("GB/s", 8, t-14, 2, 0, black)
	for i, s := range ss {
		col, dash := hexColor(palette[i%len(palette)]), 0
		if strings.HasPrefix(s.name, "memcpy") {
			col, dash = black, 6
		}
		for j := 1; j < len(s.x); j++ {
			c.line(f.px(s.x[j-1]), f.py(s.y[j-1]), f.px(s.x[j]), f.py(s.y[j]), 2, dash, col)
		}
		if len(s.x) == 1 {
			c.line(f.px(s.x[0])-2, f.py(s.y[0]), f.px(s.x[0])+2, f.py(s.y[0]), 3, 0, col)
		}
		ly := t + 10 + 18*float64(i)
		c.line(rt+8, ly, rt+30, ly, 2, dash, col)
		c.text(s.name, rt+36, ly-5, 2, 0, black)
	}
	return png.Encode(w, img)
}
