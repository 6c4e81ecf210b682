package session

import (
	"testing"
	"time"
)

// A release that made a look forgets it, but not one recorded since; a
// look never made is dropped past lookHorizon, at the next change.
func TestLooksKeepTheNewestAndDropTheStale(t *testing.T) {
	var s Session
	if at := s.Look("k"); at != 0 {
		t.Fatalf("Look with none recorded = %d, want 0", at)
	}
	now := time.Now().UnixNano()
	s.SetLook("k", now)
	s.SetLook("k", now+1) // woken again before the first look
	s.LookDone("k", now)
	if at := s.Look("k"); at != now+1 {
		t.Fatalf("Look after an older look was made = %d, want the newer %d", at, now+1)
	}
	s.LookDone("k", now+1)
	if at := s.Look("k"); at != 0 {
		t.Fatalf("Look after it was made = %d, want 0", at)
	}
	s.SetLook("old", time.Now().Add(-2*lookHorizon).UnixNano())
	s.SetLook("new", now)
	if at := s.Look("old"); at != 0 {
		t.Errorf("a look past the horizon is kept: %d", at)
	}
	if at := s.Look("new"); at != now {
		t.Errorf("Look(new) = %d, want %d", at, now)
	}
	s.LookDone("new", now)
	if s.looks.Load() != nil {
		t.Errorf("looks left after the last was made: %v", *s.looks.Load())
	}
}
