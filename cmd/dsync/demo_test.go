package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemo(t *testing.T) {
	var buf bytes.Buffer
	out = &buf
	defer func() { out = nil }()
	if err := demo([]string{"-workers", "3", "-rounds", "4", "-hold", "1ms"}); err != nil {
		t.Fatalf("demo: %v\n%s", err, buf.String())
	}
	report := buf.String()
	for _, want := range []string{
		"12 acquisitions",
		"overlaps (two holders at once): 0",
		"fencing tokens strictly increasing in acquisition order: true",
		"hold count 3); after 3 unlocks locked=false",
		"the holder was told its hold ended",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("demo report lacks %q:\n%s", want, report)
		}
	}
}
