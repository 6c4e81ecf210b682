package codec

import (
	"slices"
	"testing"
)

func TestHeaderPutsEachFieldAtItsPosition(t *testing.T) {
	h := Header{Owner: "o", Op: "p", HoldID: "i", Plain: "v", Lease: "30000", Channel: "c", Hub: "h", Entry: "e",
		EntryTTL: "5000", Registered: true, FenceTTL: "60000"}
	got := h.Append([]any{"before"})
	want := map[int]any{Owner: "o", Op: "p", HoldID: "i", Plain: "v", Lease: "30000", Channel: "c", Hub: "h", Entry: "e",
		EntryTTL: "5000", Registered: "1", FenceTTL: "60000"}
	if len(got) != 1+HeaderLen || got[0] != "before" {
		t.Fatalf("Append([before]) = %v; want before, then %d arguments", got, HeaderLen)
	}
	for i, w := range want {
		if got[1+i] != w {
			t.Errorf("argument %d = %v, want %v", i, got[1+i], w)
		}
	}
}

func TestHeaderSendsEmptyFieldsAsTheirFormatsEmptyValue(t *testing.T) {
	// Ids, values, channel and entry empty; milliseconds and the flag 0.
	want := []any{"", "", "", "", "0", "", "", "", "0", "0", "0"}
	if got := (&Header{}).Append(nil); !slices.Equal(got, want) {
		t.Errorf("the zero Header's arguments = %q, want %q", got, want)
	}
	// A field that is set is sent as it is, an integer included.
	got := (&Header{Lease: int64(7), Op: int64(-1)}).Append(nil)
	if got[Lease] != int64(7) || got[Op] != int64(-1) {
		t.Errorf("Lease %v (%T), Op %v (%T); want the int64s 7 and -1", got[Lease], got[Lease], got[Op], got[Op])
	}
}
