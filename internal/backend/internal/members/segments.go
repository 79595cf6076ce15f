package members

import (
	"fmt"
	"sync"

	"github.com/symmem/symmem/pool"
)

// Segments is a group's table of registered segments: what its backend
// keeps per segment (the peers' mappings), safe for concurrent use. The
// zero value is ready.
type Segments[T any] struct {
	mu sync.RWMutex
	m  map[pool.SegmentID]T
}

// Fresh returns an error naming the group unless id is unregistered
// (registering twice is a bug in the caller).
func (s *Segments[T]) Fresh(group string, id pool.SegmentID) error {
	s.mu.RLock()
	_, dup := s.m[id]
	s.mu.RUnlock()
	if dup {
		return fmt.Errorf("group %q: segment %d is already registered", group, id)
	}
	return nil
}

// Add records v for id.
func (s *Segments[T]) Add(id pool.SegmentID, v T) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[pool.SegmentID]T{}
	}
	s.m[id] = v
	s.mu.Unlock()
}

// Get returns what was recorded for id.
func (s *Segments[T]) Get(id pool.SegmentID) (T, bool) {
	s.mu.RLock()
	v, ok := s.m[id]
	s.mu.RUnlock()
	return v, ok
}

// Remove forgets id and returns what was recorded for it.
func (s *Segments[T]) Remove(id pool.SegmentID) (T, bool) {
	s.mu.Lock()
	v, ok := s.m[id]
	delete(s.m, id)
	s.mu.Unlock()
	return v, ok
}

// Len is the number of registered segments.
func (s *Segments[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Drain forgets every segment and returns what was recorded (group close).
func (s *Segments[T]) Drain() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := make([]T, 0, len(s.m))
	for id, v := range s.m {
		vs = append(vs, v)
		delete(s.m, id)
	}
	return vs
}
