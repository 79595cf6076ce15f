package symmem

import "github.com/symmem/symmem/coll"

// IsSymmetric reports whether s lies inside one live pool block whose
// segment is registered with the group, so a collective on it takes the
// direct path instead of staging. False on a non-member or a closed group.
func (g *Group) IsSymmetric(s coll.Span) bool {
	if !g.IsMember() || g.closed.Load() {
		return false
	}
	return g.sym(s).OK
}
