//go:build !race

package symmem

const raceEnabled = false
