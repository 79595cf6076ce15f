package dl

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/symmem/symmem/internal/errs"
)

func TestOpenMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libabsent.so.1")
	_, err := Open(p)
	if !errors.Is(err, errs.NotSupported) {
		t.Fatalf("Open(%s) = %v, want an error matching NotSupported", p, err)
	}
	if s := err.Error(); strings.Count(s, p) != 1 {
		t.Errorf("error %q should name %s once", s, p)
	}
}

// libc.so.6 is on every machine the tests run on: a versioned fallback
// resolves, a missing required symbol is named.
func TestBind(t *testing.T) {
	l, err := Open("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	var a, b, c unsafe.Pointer
	err = l.Bind([]Sym{
		{Slot: &a, Names: []string{"strlen_v9", "strlen"}, Required: true},
		{Slot: &b, Names: []string{"symmemNoSuchCall"}},
	})
	if err != nil || a == nil || b != nil {
		t.Fatalf("Bind = %v (strlen %v, optional %v)", err, a, b)
	}
	err = l.Bind([]Sym{{Slot: &c, Names: []string{"symmemNoSuchCall", "symmemNoSuchCall_v1"}, Required: true}})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, errs.NotSupported) || e.Error() != "libc.so.6: symbol symmemNoSuchCall missing" {
		t.Fatalf("Bind of a missing required symbol: %v", err)
	}
}
