package pool

// freeTree is the index of free blocks ordered by (size, segment id,
// offset): a treap, so inserting and removing a key cost O(log n) however
// fragmented the pool is. The order (not the tree's shape) decides best fit,
// so results stay deterministic. Removed nodes are kept on a spare list and
// reused: steady-state Alloc/Free allocate nothing.
type freeTree struct {
	root  *fnode
	n     int
	spare *fnode // linked through l
	ctr   uint64 // priority source
}

type fnode struct {
	k    freeKey
	pri  uint64
	l, r *fnode
}

// freeKey indexes one free block.
type freeKey struct {
	size int64
	id   SegmentID
	off  int64
	seg  *segment
}

func (a freeKey) less(b freeKey) bool {
	if a.size != b.size {
		return a.size < b.size
	}
	if a.id != b.id {
		return a.id < b.id
	}
	return a.off < b.off
}

func (t *freeTree) insert(k freeKey) {
	x := t.spare
	if x != nil {
		t.spare = x.l
	} else {
		x = new(fnode)
	}
	t.ctr++
	*x = fnode{k: k, pri: mix64(t.ctr)}
	t.root = treapInsert(t.root, x)
	t.n++
}

func treapInsert(h, x *fnode) *fnode {
	if h == nil {
		return x
	}
	if x.k.less(h.k) {
		h.l = treapInsert(h.l, x)
		if h.l.pri > h.pri {
			l := h.l
			h.l, l.r = l.r, h
			return l
		}
	} else {
		h.r = treapInsert(h.r, x)
		if h.r.pri > h.pri {
			r := h.r
			h.r, r.l = r.l, h
			return r
		}
	}
	return h
}

// remove deletes k and reports whether it was present.
func (t *freeTree) remove(k freeKey) bool {
	link := &t.root
	for h := *link; h != nil; h = *link {
		switch {
		case k.less(h.k):
			link = &h.l
		case h.k.less(k):
			link = &h.r
		default:
			*link = treapMerge(h.l, h.r)
			*h = fnode{l: t.spare}
			t.spare = h
			t.n--
			return true
		}
	}
	return false
}

func treapMerge(a, b *fnode) *fnode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.pri > b.pri:
		a.r = treapMerge(a.r, b)
		return a
	default:
		b.l = treapMerge(a, b.l)
		return b
	}
}

// ceil returns the smallest key >= k.
func (t *freeTree) ceil(k freeKey) (freeKey, bool) {
	var best *fnode
	for h := t.root; h != nil; {
		if h.k.less(k) {
			h = h.r
		} else {
			best, h = h, h.l
		}
	}
	if best == nil {
		return freeKey{}, false
	}
	return best.k, true
}

// next returns the smallest key > k.
func (t *freeTree) next(k freeKey) (freeKey, bool) {
	var best *fnode
	for h := t.root; h != nil; {
		if k.less(h.k) {
			best, h = h, h.l
		} else {
			h = h.r
		}
	}
	if best == nil {
		return freeKey{}, false
	}
	return best.k, true
}

func (t *freeTree) has(k freeKey) bool {
	for h := t.root; h != nil; {
		switch {
		case k.less(h.k):
			h = h.l
		case h.k.less(k):
			h = h.r
		default:
			return true
		}
	}
	return false
}

// reset drops everything, spare nodes included.
func (t *freeTree) reset() { *t = freeTree{} }
