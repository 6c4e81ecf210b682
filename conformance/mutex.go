package conformance

import "testing"

func (s *suite) mutexTests(t *testing.T) {}
